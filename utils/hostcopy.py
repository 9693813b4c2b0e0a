"""Reading a CUDA scalar on the host without making the host wait for the GPU."""
import torch


class HostCopy:
    """Starts a non-blocking copy of a device scalar into pinned host memory; `done()` says,
    without blocking, whether it has arrived, and `value()` reads it then."""

    def __init__(self, tensor):
        self.host = torch.empty((), dtype=tensor.dtype, pin_memory=True)
        self.host.copy_(tensor, non_blocking=True)
        self.ready = torch.cuda.Event()
        self.ready.record()

    def done(self):
        return self.ready.query()

    def value(self):
        return self.host.item()
