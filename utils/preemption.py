"""SIGTERM (a batch scheduler's wall-time limit) and SIGINT (Ctrl-C) end a run cleanly: the
current step finishes, the checkpoint and partial results are written, the exit status is
128 + the signal number (143 / 130). A second signal exits at once."""
import signal
import sys

SIGNALS = (signal.SIGTERM, signal.SIGINT)


class StopRequest:
    def __init__(self):
        self.signal_name = None
        self.signal_number = None
        self.previous = {}

    def handler(self, number, frame):
        if self.signal_number is not None:
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
