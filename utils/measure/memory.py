"""Peak memory of one run: CUDA max allocated on the GPU, peak resident set size on the CPU."""
from __future__ import annotations

import contextlib
import resource
from typing import Iterator, Tuple

import torch

from utils.errors import UserError


def reset_peak(device: torch.device) -> None:
    """Start a fresh peak. On Linux, writing 5 to clear_refs resets the process's peak RSS."""
    if device.type == "cuda":
        torch.cuda.reset_peak_memory_stats(device)
        return
    try:
        with open("/proc/self/clear_refs", "w") as clear_refs:
            clear_refs.write("5")
    except OSError:
        pass  # peak_bytes then reports the process-lifetime peak, and says so


def peak_bytes(device: torch.device) -> Tuple[int, str]:
    """(bytes, what was measured)."""
    if device.type == "cuda":
        return torch.cuda.max_memory_allocated(device), "cuda_max_allocated"
    try:
        with open("/proc/self/status") as status:
            for line in status:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) * 1024, "peak_rss"
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024, "peak_rss_process_lifetime"


def peak_reserved_bytes(device: torch.device) -> int:
    """CUDA: the most memory the caching allocator held from the GPU since the last reset (what
    other processes could not use); 0 on the CPU."""
    return torch.cuda.max_memory_reserved(device) if device.type == "cuda" else 0


def is_out_of_memory(error: BaseException) -> bool:
    """CUDA's OutOfMemoryError (a RuntimeError subclass; a plain RuntimeError before torch
    1.13), the CPU allocator's failure, or Python's MemoryError."""
    text = str(error)
    return isinstance(error, MemoryError) or (
        isinstance(error, RuntimeError) and ("out of memory" in text or "can't allocate memory" in text))


def out_of_memory_advice(device: torch.device, batch_size: int) -> str:
    """The sentence for an out-of-memory failure in a step: where, at which batch, the peak reached."""
    return (f"out of memory on {device.type.upper()} with a batch of {batch_size} images ({peak_when_failed(device)}); "
            "lower --batch-size/-b (with --accum-steps K to keep the effective batch), or use a smaller --model.")


@contextlib.contextmanager
def out_of_memory_in(device: torch.device, what: str, fix: str) -> Iterator[None]:
    """Out of memory inside the block, refused in one sentence that names `what` took the memory
    and `fix`: where the model or the data did not fit, the batch is not what to lower."""
    try:
        yield
    except (RuntimeError, MemoryError) as error:
        if not is_out_of_memory(error):
            raise
        if isinstance(error, MemoryError) or "can't allocate memory" in str(error):  # the host's, whatever `device`
            device = torch.device("cpu")
        raise UserError(f"out of memory on {device.type.upper()} {what} ({peak_when_failed(device)}); {fix}") from None


def peak_when_failed(device: torch.device) -> str:
    peak, _ = peak_bytes(device)
    total = torch.cuda.get_device_properties(device).total_memory if device.type == "cuda" else None
    return f"peak {peak / 2 ** 30:.1f} GiB{f' of {total / 2 ** 30:.1f} GiB' if total else ''} when it failed"
