"""The processes ampbench starts (the adviser's phases, the GPU suite's steps, the scaling study's
launches), one way: each in a session of its own, tied to its parent so that it dies with it even
when the parent is killed with SIGKILL (Linux's parent-death signal; main.py ties each rank a
launcher starts the same way, so that a chain ends whole), asked to stop with SIGTERM, and, once
it has ended or its grace ran out, ended with every process it started (torchrun's ranks run in
sessions of their own), so that none writes a file after its command returned. No torch.
"""
from __future__ import annotations

import ctypes
import os
import signal
import subprocess
import sys
import time
from typing import IO, Any, Callable, Dict, List, Optional, Sequence, Tuple

PR_SET_PDEATHSIG = 1  # <linux/prctl.h>
PR_SET_CHILD_SUBREAPER = 36
TIED = "AMPBENCH_TIED_TO_PARENT"  # in a child's environment: the pid of the process it dies with
POLL_S = 0.2


def libc_prctl() -> Optional[Callable[..., int]]:
    """Linux's prctl, looked up before any fork (a child between fork and exec may not load a library)."""
    if not sys.platform.startswith("linux"):
        return None
    try:
        return ctypes.CDLL(None, use_errno=True).prctl
    except (OSError, AttributeError):
        return None


PRCTL = libc_prctl()


def tie_to_parent(parent: int) -> None:
    """Have the parent's death kill this process (SIGKILL), and end it now if `parent` is gone
    already; nothing where the platform has no parent-death signal."""
    if PRCTL is None:
        return
    PRCTL(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    if os.getppid() != parent:  # the parent died before the tie was made
        os._exit(128 + signal.SIGKILL)


def tie_this_process() -> None:
    """main.py's: where ampbench started this process or the launcher that started it (a rank
    under the torchrun a phase or step runs), die with its parent too, so that killing the top
    ends the chain; and end now if that ampbench process is gone already (it died before the tie)."""
    started_by = os.environ.get(TIED, "")
    if PRCTL is None or not started_by.isdigit():
        return
    PRCTL(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    if not alive(int(started_by)):
        os._exit(128 + signal.SIGKILL)


class Child:
    """A command started in a session of its own, tied to this process (and its ranks to it, by
    the environment), its output to `output`; this process adopts what it leaves behind."""

    def __init__(self, argv: Sequence[str], output: Optional[IO[Any]] = None, cwd: Optional[str] = None,
                 env: Optional[Dict[str, str]] = None) -> None:
        adopt_orphans()  # what its processes start comes back below this one when they die first
        me = os.getpid()
        self.process = subprocess.Popen(list(argv), cwd=cwd, stdout=output,
                                        stderr=subprocess.STDOUT if output else None,
                                        env={**(env if env is not None else os.environ), TIED: str(me)},
                                        start_new_session=True, preexec_fn=lambda: tie_to_parent(me))
        self.pid = self.process.pid

    def exited(self) -> bool:
        """Whether it has ended, without reaping it: while its zombie stays, its pid, and so its
        group's id, cannot come to name another process, so the group can still be signalled."""
        return os.waitid(os.P_PID, self.pid, os.WEXITED | os.WNOHANG | os.WNOWAIT) is not None

    def terminate(self) -> None:
        """SIGTERM to its group: main.py ends after its current step and writes what it measured."""
        signal_group(self.pid, signal.SIGTERM)

    def end(self, grace_s: float, cut_short: Callable[[], bool] = lambda: False) -> None:
        """SIGTERM, then wait until it has ended, `grace_s` ran out or `cut_short()` (a second stop
        signal); the caller's finish() kills what is left."""
        self.terminate()
        deadline = time.monotonic() + grace_s
        while not self.exited() and time.monotonic() < deadline and not cut_short():
            time.sleep(POLL_S)

    def finish(self) -> int:
        """Kill what is left of it (its group and every process they started), reap it and any
        orphan below this process, and return its exit status."""
        end_tree(self.pid)
        self.process.wait()
        end_descendants()
        return int(self.process.returncode)


def run(argv: Sequence[str], output: IO[Any], deadline: float, stopped: Callable[[], bool], grace_s: float,
        clock: Callable[[], float] = time.monotonic) -> Tuple[int, float]:
    """Run `argv` to its end or to `deadline` (by `clock`) or until `stopped()`, then SIGTERM it and
    SIGKILL its tree after `grace_s`; (its exit status, its seconds)."""
    begun = clock()
    child = Child(argv, output)
    try:
        while not child.exited():
            if clock() >= deadline or stopped():
                child.end(grace_s)
                break
            time.sleep(POLL_S)
    finally:
        returncode = child.finish()
    return returncode, clock() - begun


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


def adopt_orphans() -> None:
    """Have the processes this one starts, and theirs, reparented to it rather than to init when
    their parent dies (Linux's child subreaper), so that a rank whose torchrun was killed is still
    below this process, where end_descendants() finds it. Elsewhere nothing changes."""
    if PRCTL is not None:
        PRCTL(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)


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
