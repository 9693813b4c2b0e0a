"""Stop signals, caught from the moment the arguments are parsed.

SIGTERM (a scheduler's wall-time limit or `scancel`), SIGINT (Ctrl-C), SIGHUP (a closed
terminal or ssh session) and SIGUSR1 (what Slurm's `--signal` sends before the time limit)
all end a run the same way, whenever they arrive: the current step finishes, the checkpoint
and the partial results are written, the exit status is 128 + the signal number. A second
signal exits at once. No torch here: main.py installs it before torch is imported.
"""
import signal
import sys

SIGNALS = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP, signal.SIGUSR1)


class StopRequest:
    """Records the first stop signal; the training loop and the evaluation poll it."""

    def __init__(self):
        self.signal_name = None
        self.signal_number = None
        self.previous = {}

    @property
    def requested(self):
        return self.signal_number is not None

    def handler(self, number, frame):
        if self.requested:
            print(f"main.py: a second signal ({signal.Signals(number).name}) arrived: stopping now, without "
                  "saving; files already written are kept whole (each write is all or nothing).", file=sys.stderr,
                  flush=True)
            sys.exit(128 + number)
        self.signal_number, self.signal_name = number, signal.Signals(number).name
        print(f"main.py: {self.signal_name} received: finishing the current step, then saving.",
              file=sys.stderr, flush=True)

    def __enter__(self):
        for number in SIGNALS:
            self.previous[number] = signal.signal(number, self.handler)
        return self

    def __exit__(self, *exc):
        for number, handler in self.previous.items():
            signal.signal(number, handler)
