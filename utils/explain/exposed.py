"""Exposed communication: the time in which gradients travel and nothing else runs, from the
profiler's intervals. Overlapped all-reduce costs nothing; exposed all-reduce is what a step
waits for. No torch here: intervals are (start, end) pairs in any one unit.

On CUDA: the all-reduce kernels' time when no other kernel runs. On the CPU: the all-reduce
ops' time (gloo's worker threads and the training thread's own calls) when the training thread
runs no other op; a wait the profiler does not label (DDP's reducer waiting at the end of the
backward pass) is a gap on the training thread, so it counts as exposed, and so does Python
between ops while an all-reduce runs (a slight overestimate).
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Iterable, List, Sequence, Tuple

if TYPE_CHECKING:
    Interval = Tuple[float, float]  # (start, end)


def union(intervals: Iterable[Interval]) -> List[Interval]:
    """The sorted, disjoint union of (start, end) intervals; empty ones dropped."""
    merged: List[Interval] = []
    for start, end in sorted(pair for pair in intervals if pair[1] > pair[0]):
        if merged and start <= merged[-1][1]:
            merged[-1] = (merged[-1][0], max(merged[-1][1], end))
        else:
            merged.append((start, end))
    return merged


def subtract(keep: Sequence[Interval], remove: Sequence[Interval]) -> List[Interval]:
    """What of the disjoint sorted `keep` lies outside the disjoint sorted `remove`."""
    left, index = [], 0
    for start, end in keep:
        while index < len(remove) and remove[index][1] <= start:
            index += 1
        cursor, probe = start, index
        while probe < len(remove) and remove[probe][0] < end:
            if remove[probe][0] > cursor:
                left.append((cursor, remove[probe][0]))
            cursor = max(cursor, remove[probe][1])
            probe += 1
        if cursor < end:
            left.append((cursor, end))
    return left


def length(intervals: Iterable[Interval]) -> float:
    return sum(end - start for start, end in intervals)


def exposed(comm: Iterable[Interval], busy: Iterable[Interval], comm_on_busy_thread: Iterable[Interval] = ()) -> float:
    """The length of `comm` outside `busy`. On the CPU `busy` is the training thread's ops, which
    enclose its own all-reduce calls (DDP launches them from a gradient hook): those calls,
    `comm_on_busy_thread`, are communication, not busy."""
    busy = subtract(union(busy), union(comm_on_busy_thread))
    return length(subtract(union(comm), busy))
