"""What may end a run early, and how every rank agrees on it.

SIGTERM (a batch scheduler's wall-time limit) and SIGINT (Ctrl-C) end a run cleanly: the
current step finishes, the checkpoint and partial results are written, the exit status is
128 + the signal number (143 / 130). A second signal exits at once. A non-finite loss without
a loss scaler ends it too; RankAgreement makes every rank stop at the same step.
"""
import signal
import sys

import torch

from utils.measure.hostcopy import HostCopy
from utils.training import distributed

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


class RankAgreement:
    """Lets every rank decide at the same step whether any rank saw a non-finite loss or a
    stop signal, without a host-device sync per step: every `every` steps the flags are
    max-reduced across ranks on the device and copied to the host without blocking; the copy
    is read at the next check, `every` steps later, long after it has landed. So a problem is
    acted on one to two checks late, identically on every rank (a hang otherwise)."""
    CHECK_EVERY = 20

    def __init__(self, device, world):
        self.device = device
        self.every = self.CHECK_EVERY if device.type == "cuda" or world.distributed else 1
        self.nonfinite = torch.zeros((), dtype=torch.uint8, device=device)
        self.pending = None

    def note_loss(self, loss):
        self.nonfinite |= (~torch.isfinite(loss)).to(torch.uint8)

    def check(self, step, stop_requested):
        """(diverged, stop) as agreed by all ranks; (False, False) between checks."""
        if step % self.every:
            return False, False
        agreed = (False, False)
        if self.pending is not None:
            diverged, stop = self.pending.value()
            agreed = (bool(diverged), bool(stop))
        stop_flag = torch.tensor(int(stop_requested), dtype=torch.uint8).to(self.device, non_blocking=True)
        self.pending = HostCopy(distributed.all_reduce(torch.stack([self.nonfinite, stop_flag]), "max"))
        return agreed
