"""Stop signals, caught from the moment the arguments are parsed.

SIGTERM (a scheduler's wall-time limit or `scancel`), SIGINT (Ctrl-C), SIGHUP (a closed
terminal or ssh session) and SIGUSR1 (what Slurm's `--signal` sends before the time limit)
all end a run the same way, whenever they arrive: the current step finishes, the checkpoint
and the partial results are written, the exit status is 128 + the signal number. A second
signal exits at once. No torch here: main.py installs it before torch is imported. Where a
run is in code that may never return before its first step (a user's factory, the decoding of an
image folder), a first signal exits at once too (at_once).
"""
from __future__ import annotations

import contextlib
import ctypes
import os
import signal
import sys
import threading
import time
from types import FrameType
from typing import Any, Callable, Dict, Iterator, List, Optional, Tuple

SIGNALS = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP, signal.SIGUSR1)


class StopRequest:
    """Records the first stop signal; the training loop and the evaluation poll it."""

    def __init__(self) -> None:
        self.signal_name: Optional[str] = None
        self.signal_number: Optional[int] = None
        self.previous: Dict[int, Any] = {}  # what signal.signal returned: a handler, SIG_DFL or SIG_IGN

    @property
    def requested(self) -> bool:
        return self.signal_number is not None

    def handler(self, number: int, frame: Optional[FrameType]) -> None:
        if self.requested:
            print(f"main.py: a second signal ({signal.Signals(number).name}) arrived: stopping now, without "
                  "saving; files already written are kept whole (each write is all or nothing).", file=sys.stderr,
                  flush=True)
            sys.exit(128 + number)
        self.signal_number, self.signal_name = number, signal.Signals(number).name
        print(f"main.py: {self.signal_name} received: finishing the current step, then saving.",
              file=sys.stderr, flush=True)

    def __enter__(self) -> StopRequest:
        for number in SIGNALS:
            self.previous[number] = signal.signal(number, self.handler)
        ACTIVE.append(self)
        return self

    def __exit__(self, *exc: object) -> None:
        for number, handler in self.previous.items():
            signal.signal(number, handler)
        ACTIVE.remove(self)


ACTIVE: List[StopRequest] = []  # the requests installed, innermost last: at_once asks whether a stop came before it


class StoppedAtOnce(SystemExit):
    """A stop signal in at_once's block: the process ends with 128 + the signal's number."""


@contextlib.contextmanager
def at_once(doing: str) -> Iterator[None]:
    """While the block runs code that may never return and has nothing to save (the user's
    factory, the decoding of an image folder: no step trained yet), a stop signal ends the
    process at once, saying it was `doing` that, instead of waiting for a step that may never
    come. The handlers in place before it are put back after it; off the main thread it does
    nothing."""
    def handler(number: int, frame: Optional[FrameType], when: str = "while") -> None:
        if os.getpid() != installer:  # a worker forked in the block (DataLoader's): the process it serves ends it
            return
        print(f"main.py: {signal.Signals(number).name} received {when} {doing}: stopping now, before any step was "
              "trained.", file=sys.stderr, flush=True)
        raise StoppedAtOnce(128 + number)

    if threading.current_thread() is not threading.main_thread():
        yield
        return
    installer = os.getpid()
    earlier = next((request.signal_number for request in reversed(ACTIVE) if request.requested), None)
    if earlier is not None:  # arrived before the block (as torch was imported): it would wait for the block's end
        handler(earlier, None, "before")
    previous = {number: signal.signal(number, handler) for number in SIGNALS}
    try:
        yield
    finally:
        for number, handler_before in previous.items():
            signal.signal(number, handler_before)


def end_tree(leader: int, wait_s: float = 5.0) -> None:
    """Kill (SIGKILL) the process group `leader` leads and every process its members started, in
    whatever session each runs, then wait up to `wait_s` until they have ended, so that none
    writes a file after this returns. torchrun starts each rank in a session of its own, so a
    signal to torchrun's group misses its ranks. Where /proc is missing (macOS) the walk finds
    nothing beyond the group."""
    signal_group(leader, signal.SIGSTOP)
    kill_below(lambda pid, parent, group: group == leader, wait_s)
    signal_group(leader, signal.SIGKILL)


def end_descendants(wait_s: float = 5.0) -> None:
    """Kill every process still running below this one, and reap those that were its children:
    what a command it ran left behind (a rank whose torchrun died, which adopt_orphans() brought
    back under this process)."""
    me = os.getpid()
    for pid in kill_below(lambda pid, parent, group: parent == me, wait_s):
        try:
            os.waitpid(pid, os.WNOHANG)
        except ChildProcessError:  # not this process's child, or reaped already
            pass


def kill_below(top: Callable[[int, int, int], bool], wait_s: float) -> List[int]:
    """SIGKILL the processes that `top(pid, parent, group)` picks and all they started, and wait
    up to `wait_s` until they have ended; their pids. Each is stopped first, so that none starts
    another, or outlives its parent and so drops out of the walk, before the walk ends."""
    frozen: List[int] = []
    while True:
        found = [pid for pid, parent, group in processes() if (top(pid, parent, group) or parent in frozen)
                 and pid not in frozen and pid != os.getpid()]
        if not found:
            break
        for pid in found:
            signal_pid(pid, signal.SIGSTOP)
        frozen += found
    for pid in frozen:
        signal_pid(pid, signal.SIGKILL)
    deadline = time.monotonic() + wait_s
    while any(alive(pid) for pid in frozen) and time.monotonic() < deadline:
        time.sleep(0.02)
    return frozen


PR_SET_CHILD_SUBREAPER = 36  # <linux/prctl.h>


def adopt_orphans() -> None:
    """Have the processes this one starts, and theirs, reparented to it rather than to init when
    their parent dies (Linux's child subreaper), so that a rank whose torchrun was killed is still
    below this process, where end_descendants() finds it. Elsewhere nothing changes."""
    if sys.platform.startswith("linux"):
        try:
            ctypes.CDLL(None).prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
        except (OSError, AttributeError):
            pass


def processes() -> List[Tuple[int, int, int]]:
    """(pid, parent's pid, process group) of every process /proc shows ([] without /proc); one
    that ends while read is left out."""
    found = []
    for name in os.listdir("/proc") if os.path.isdir("/proc") else []:
        fields = stat_fields(name) if name.isdigit() else None
        if fields:
            found.append((int(name), int(fields[1]), int(fields[2])))
    return found


def stat_fields(pid: object) -> Optional[List[str]]:
    """The fields of /proc/PID/stat after the command's name (state, ppid, pgrp, ...), or None."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None


def alive(pid: int) -> bool:
    """Whether `pid` runs still: /proc shows it, and not as a zombie (False without /proc)."""
    fields = stat_fields(pid)
    return fields is not None and fields[0] != "Z"


def signal_group(leader: int, number: int) -> None:
    try:
        os.killpg(leader, number)
    except (ProcessLookupError, PermissionError):
        pass


def signal_pid(pid: int, number: int) -> None:
    try:
        os.kill(pid, number)
    except (ProcessLookupError, PermissionError):
        pass
