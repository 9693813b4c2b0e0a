"""Statistics of step times: numpy alone, so that utils.report runs where torch is missing."""
from __future__ import annotations

from typing import Dict, List, Sequence, Union

import numpy as np

OUTLIER_FACTOR = 10  # a step this many times the median was paused (SIGSTOP, swapping, a preempted node)


def outliers(values_ms: Sequence[float]) -> List[Dict[str, Union[int, float]]]:
    """[{timed_step (1-based), ms}] of the steps over OUTLIER_FACTOR x the median: a pause, not
    the work. The median ignores them; the mean and the throughput's mean do not."""
    if not values_ms:
        return []
    limit = OUTLIER_FACTOR * float(np.median(values_ms))
    return [{"timed_step": index, "ms": ms} for index, ms in enumerate(values_ms, 1) if ms > limit]


def summarize(values_ms: Sequence[float]) -> Dict[str, float]:
    """Median, mean, p10, p90, min and max of a list of milliseconds."""
    values = np.asarray(values_ms, dtype=np.float64)
    return {"median": float(np.median(values)), "mean": float(values.mean()),
            "p10": float(np.percentile(values, 10)), "p90": float(np.percentile(values, 90)),
            "min": float(values.min()), "max": float(values.max())}
