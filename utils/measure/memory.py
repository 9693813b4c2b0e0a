"""Peak memory of one run: CUDA max allocated on the GPU, peak resident set size on the CPU."""
import resource

import torch


def reset_peak(device):
    """Start a fresh peak. On Linux, writing 5 to clear_refs resets the process's peak RSS."""
    if device.type == "cuda":
        torch.cuda.reset_peak_memory_stats(device)
        return
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
    except OSError:
        pass  # peak_bytes then reports the process-lifetime peak, and says so


def peak_bytes(device):
    """(bytes, what was measured)."""
    if device.type == "cuda":
        return torch.cuda.max_memory_allocated(device), "cuda_max_allocated"
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) * 1024, "peak_rss"
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024, "peak_rss_process_lifetime"
