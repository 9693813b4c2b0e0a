"""Whether the host was busy while a mode was timed: the load average and this process's CPU
time, read at the start of the timed steps (the warm-up's end) and after the loop, never inside
a step; a run resumed from a checkpoint has one reading per process that timed steps, and its
record combines them. Another process that competes for the cores oversubscribes torch's threads and can make
every step ten times slower; on a GPU, a host that cannot prepare batches fast enough leaves the
GPU waiting. Either is named under the table instead of passing for a precision mode's speed.
No torch here: the decision is tested with made-up readings."""
from __future__ import annotations

import math
import numbers
import os
import time
from typing import Any, Dict, NamedTuple, Optional, Sequence

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


# What one process's reading holds (over()), in runs[].host's order.
READING_KEYS = ("cores", "torch_threads", "wall_s", "process_cpu_cores", "process_cpu_share", "load_avg_1m_start",
                "load_avg_1m_end")


def over(start: Reading, end: Reading, cores: int, threads: int) -> Dict[str, Any]:
    """One process's reading: the load and its CPU use between two readings."""
    wall = max(end.wall_s - start.wall_s, 1e-9)
    used = max(end.cpu_s - start.cpu_s, 0.0) / wall  # cores' worth of CPU this process used
    return dict(zip(READING_KEYS, (cores, threads, wall, used, used / cores, start.load_1m, end.load_1m)))


def malformed(reading: object) -> bool:
    """Whether `reading` (from a checkpoint) is not one that over() writes: a record built from it
    divides by its wall time and prints its numbers."""
    def number(value: object, low: float) -> bool:
        # `not <`: numbers.Real declares < and <= only (a finite value here, so the same as >=)
        return isinstance(value, numbers.Real) and not isinstance(value, bool) and math.isfinite(value) \
            and not value < low
    if not isinstance(reading, dict) or set(reading) != set(READING_KEYS):
        return True
    whole = all(isinstance(reading[key], int) and not isinstance(reading[key], bool) and reading[key] >= 1
                for key in ("cores", "torch_threads"))
    loads = all(reading[key] is None or number(reading[key], 0) for key in ("load_avg_1m_start", "load_avg_1m_end"))
    return not (whole and loads and number(reading["wall_s"], 1e-9) and number(reading["process_cpu_cores"], 0)
                and number(reading["process_cpu_share"], 0))


def combined(readings: Sequence[Dict[str, Any]]) -> Dict[str, Any]:
    """runs[].host over a run's checkpoint segments, one over() reading each, in order: their wall
    time added; this process's CPU use weighted by each segment's wall time (the CPU seconds over
    the wall seconds); the highest load read at any segment's start and at any end, so that a
    busy segment is not averaged away by quiet ones; the last segment's cores and threads; and
    `segments`, how many it covers (fewer than runs[].segments after a checkpoint of a release
    that carried no reading, or a process that timed no step)."""
    wall = sum(reading["wall_s"] for reading in readings)
    last = readings[-1]

    def weighted(key: str) -> float:
        return sum(reading[key] * reading["wall_s"] for reading in readings) / wall

    def highest(key: str) -> Optional[float]:
        return max((reading[key] for reading in readings if reading[key] is not None), default=None)

    return {"cores": last["cores"], "torch_threads": last["torch_threads"], "wall_s": wall,
            "process_cpu_cores": weighted("process_cpu_cores"), "process_cpu_share": weighted("process_cpu_share"),
            "load_avg_1m_start": highest("load_avg_1m_start"), "load_avg_1m_end": highest("load_avg_1m_end"),
            "segments": len(readings)}


def highest_load(reading: Dict[str, Any]) -> Optional[float]:
    """The higher of a reading's two load averages; None without a load average."""
    return max((load for load in (reading["load_avg_1m_start"], reading["load_avg_1m_end"]) if load is not None),
               default=None)


def busy(reading: Dict[str, Any], device_type: str) -> bool:
    """Whether another process competed for the cores during one reading: the load beyond this
    process's own use reaches COMPETING_CORES, and the load exceeds the cores or a CPU run's
    threads were starved of CPU time."""
    load = highest_load(reading)
    if load is None or load - reading["process_cpu_cores"] < COMPETING_CORES:
        return False
    wanted = min(reading["torch_threads"], reading["cores"]) if device_type == "cpu" else 0
    starved = wanted and reading["process_cpu_cores"] < STARVED_SHARE * wanted
    return bool(load > reading["cores"] or starved)


BUSY = "the host was busy"  # how warning() begins when another process competed for the cores


def warning(readings: Sequence[Dict[str, Any]], device_type: str, data_share: Optional[float]) -> Optional[str]:
    """The sentence that says the host distorted this run's timing, or None: another process
    competing for the cores in any of its segments' `readings` (the one with the most load
    beyond this process named), or, on a GPU, steps that mostly wait for their batch
    (`data_share`, over every segment's steps)."""
    if not readings:
        return None
    crowded = [reading for reading in readings if busy(reading, device_type)]
    if crowded:
        worst = max(crowded, key=lambda reading: highest_load(reading) - reading["process_cpu_cores"])
        where = f" in {len(crowded)} of this run's {len(readings)} checkpoint segments" if len(readings) > 1 else ""
        return (f"{BUSY}{where}: load average {highest_load(worst):.1f} on {worst['cores']} cores while "
                f"this process used {worst['process_cpu_cores']:.1f} of them (another process competes for the "
                "cores); its step times are slower than a quiet machine's, rerun alone")
    if device_type == "cuda" and data_share is not None and data_share >= DATA_WAIT_SHARE:
        return (f"the host cannot keep the GPU fed: {100 * data_share:.0f}% of the median step waits for its batch "
                "(--loader device, more --workers or a less busy host)")
    return None
