"""How every rank agrees on ending a run early: a stop signal (utils.stop) or a non-finite
loss without a loss scaler; RankAgreement makes every rank stop at the same step.
"""
from __future__ import annotations

from typing import List, Optional, Tuple, cast

import torch

from utils.launch import World
from utils.measure.hostcopy import HostCopy
from utils.training import distributed


class RankAgreement:
    """Lets every rank decide at the same step whether any rank saw a non-finite loss or a
    stop signal, without a host-device sync per step: every `every` steps the losses since the
    last check are tested at once and the flags max-reduced across ranks on the device, then
    copied to the host without blocking; the copy is read at the next check, `every` steps
    later, long after it has landed. So a problem is acted on one to two checks late,
    identically on every rank (a hang otherwise). `losses` is the loop's list of device losses,
    which it appends to; only a stopping policy has the losses tested."""
    CHECK_EVERY = 20

    def __init__(self, device: torch.device, world: World, losses: List[torch.Tensor],
                 watch_losses: bool):
        self.device = device
        self.every = self.CHECK_EVERY if device.type == "cuda" or world.distributed else 1
        self.losses, self.watch_losses, self.checked = losses, watch_losses, 0
        self.nonfinite = torch.zeros((), dtype=torch.uint8, device=device)
        self.pending: Optional[HostCopy] = None

    def check(self, step: int, stop_requested: bool) -> Tuple[bool, bool]:
        """(diverged, stop) as agreed by all ranks; (False, False) between checks."""
        if step % self.every:
            return False, False
        agreed = (False, False)
        if self.pending is not None:
            diverged, stop = cast("List[int]", self.pending.value())  # the two uint8 flags
            agreed = (bool(diverged), bool(stop))
        if self.watch_losses and len(self.losses) > self.checked:  # a few kernels per check, none per step
            finite = torch.isfinite(torch.stack(self.losses[self.checked:])).all()
            self.nonfinite |= (~finite).to(torch.uint8)
            self.checked = len(self.losses)
        stop_flag = torch.tensor(int(stop_requested), dtype=torch.uint8).to(self.device, non_blocking=True)
        self.pending = HostCopy(distributed.all_reduce(torch.stack([self.nonfinite, stop_flag]), "max"))
        return agreed
