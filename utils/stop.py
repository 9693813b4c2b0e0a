"""Stop signals, caught from the moment the arguments are parsed.

SIGTERM (a scheduler's wall-time limit or `scancel`), SIGINT (Ctrl-C), SIGHUP (a closed
terminal or ssh session) and SIGUSR1 (what Slurm's `--signal` sends before the time limit)
all end a run the same way, whenever they arrive: the current step finishes, the checkpoint
and the partial results are written, the exit status is 128 + the signal number. A second
signal exits at once. No torch here: main.py installs it before torch is imported.
"""
from __future__ import annotations

import signal
import sys
from types import FrameType
from typing import Any, Dict, Optional

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
        return self

    def __exit__(self, *exc: object) -> None:
        for number, handler in self.previous.items():
            signal.signal(number, handler)
