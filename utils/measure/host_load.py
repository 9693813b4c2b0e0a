"""Whether the host was busy while a mode was timed: the load average and this process's CPU
time, read at the start of the timed steps (the warm-up's end) and after the loop, never inside
a step. Another process that competes for the cores oversubscribes torch's threads and can make
every step ten times slower; on a GPU, a host that cannot prepare batches fast enough leaves the
GPU waiting. Either is named under the table instead of passing for a precision mode's speed.
No torch here: the decision is tested with made-up readings."""
from __future__ import annotations

import os
import time
from typing import Any, Dict, NamedTuple, Optional

# Others' demand, in cores (the run queue beyond this process), at which a run is contended: half a
# core taken from a run that wants every core already slows each step.
COMPETING_CORES = 0.5
# A CPU run whose process got less than this share of the cores its threads could use was starved.
STARVED_SHARE = 0.6
# On a GPU, the share of the median step spent waiting for its batch at which the host is the limit.
DATA_WAIT_SHARE = 0.25


class Reading(NamedTuple):
    wall_s: float
    cpu_s: float  # this process's user and system time, every thread of it
    load_1m: Optional[float]  # None where the platform has no load average


def read() -> Reading:
    """The host now: a few system calls, no device sync."""
    cpu_times = os.times()
    try:
        load = os.getloadavg()[0]
    except (AttributeError, OSError):
        load = None
    return Reading(time.perf_counter(), cpu_times.user + cpu_times.system, load)


def cores() -> int:
    """The cores this process may run on (its affinity, as a batch job's cgroup sets it)."""
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def over(start: Reading, end: Reading, cores: int, threads: int) -> Dict[str, Any]:
    """runs[].host: the load and this process's CPU use between two readings."""
    wall = max(end.wall_s - start.wall_s, 1e-9)
    busy = max(end.cpu_s - start.cpu_s, 0.0) / wall  # cores' worth of CPU this process used
    return {"cores": cores, "torch_threads": threads, "wall_s": wall, "process_cpu_cores": busy,
            "process_cpu_share": busy / cores, "load_avg_1m_start": start.load_1m, "load_avg_1m_end": end.load_1m}


def warning(host: Optional[Dict[str, Any]], device_type: str, data_share: Optional[float]) -> Optional[str]:
    """The sentence that says the host distorted this run's timing, or None: another process
    competing for the cores (the load beyond this process's own use, or a CPU run's threads
    starved of CPU time), or, on a GPU, steps that mostly wait for their batch."""
    if not host:
        return None
    loads = [load for load in (host["load_avg_1m_start"], host["load_avg_1m_end"]) if load is not None]
    others = max(loads) - host["process_cpu_cores"] if loads else 0.0
    wanted = min(host["torch_threads"], host["cores"]) if device_type == "cpu" else 0
    starved = wanted and host["process_cpu_cores"] < STARVED_SHARE * wanted
    if others >= COMPETING_CORES and (max(loads) > host["cores"] or starved):
        return (f"the host was busy: load average {max(loads):.1f} on {host['cores']} cores while this process "
                f"used {host['process_cpu_cores']:.1f} of them (another process competes for the cores); its step "
                "times are slower than a quiet machine's, rerun alone")
    if device_type == "cuda" and data_share is not None and data_share >= DATA_WAIT_SHARE:
        return (f"the host cannot keep the GPU fed: {100 * data_share:.0f}% of the median step waits for its batch "
                "(--loader device, more --workers or a less busy host)")
    return None
