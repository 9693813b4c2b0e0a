"""Reading device values on the host without making the host wait for the GPU."""
from __future__ import annotations

from typing import List, Union

import torch


class HostCopy:
    """Starts a non-blocking copy of a small device tensor into pinned host memory; `done()`
    says, without blocking, whether it has arrived; `value()` waits for it (briefly, if it was
    started long enough ago) and returns it as a number or a list. CPU tensors are simply copied."""

    def __init__(self, tensor: torch.Tensor):
        self.ready = None
        if tensor.device.type != "cuda":
            self.host = tensor.detach().clone()
            return
        self.host = torch.empty(tensor.shape, dtype=tensor.dtype, pin_memory=True)
        self.host.copy_(tensor, non_blocking=True)
        self.ready = torch.cuda.Event()
        self.ready.record()

    def done(self) -> bool:
        return self.ready is None or self.ready.query()

    def value(self) -> Union[float, List[float]]:
        host = self.arrived()
        return host.tolist() if host.dim() else host.item()

    def number(self) -> float:
        """value() of a one-element tensor, whatever its shape: GradScaler's scale has shape (1,)
        in older torch releases (1.11) and () in newer ones."""
        return self.arrived().item()

    def arrived(self) -> torch.Tensor:
        """The host copy, once the copy has landed."""
        if self.ready is not None:
            self.ready.synchronize()
        return self.host
