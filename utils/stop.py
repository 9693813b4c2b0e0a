"""Stop signals, caught from the moment the arguments are parsed.

SIGTERM (a scheduler's wall-time limit or `scancel`), SIGINT (Ctrl-C), SIGHUP (a closed
terminal or ssh session) and SIGUSR1 (what Slurm's `--signal` sends before the time limit)
all end a run the same way, whenever they arrive: the current step finishes, the checkpoint
and the partial results are written, the exit status is 128 + the signal number. A second
signal exits at once. No torch here: main.py installs it before torch is imported. Where a
run is in code that may never return before its first step (a user's factory, the decoding of an
image folder), a first signal exits at once too (at_once). The processes ampbench starts, and
their ends, are utils/children.py's.
"""
from __future__ import annotations

import contextlib
import os
import signal
import sys
import threading
from types import FrameType
from typing import Any, Dict, Iterator, List, Optional

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
