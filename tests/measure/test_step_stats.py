import numpy as np
import pytest

from utils.measure.step_stats import outliers, summarize
from utils.results.report import outlier_notes


def test_summarize_matches_numpy():
    values = [5.0, 1.0, 3.0, 2.0, 4.0, 100.0]
    stats = summarize(values)
    assert stats["median"] == 3.5 and stats["min"] == 1.0 and stats["max"] == 100.0
    assert stats["p10"] == pytest.approx(np.percentile(values, 10)) and stats["mean"] == pytest.approx(115 / 6)


def test_a_paused_step_is_an_outlier_and_the_table_says_the_median_ignores_it():
    """A SIGSTOP of 6 s in a run of 62 ms steps (the mean became 187 ms, unflagged)."""
    times = [62.0] * 40 + [6057.0] + [61.0, 63.0, 620.0]  # 620 ms: exactly 10x, not an outlier
    assert outliers(times) == [{"timed_step": 41, "ms": 6057.0}]
    assert outliers([]) == [] and outliers([5.0, 5.0]) == []
    document = {"runs": [{"mode": "fp32", "outlier_steps": outliers(times)}, {"mode": "amp-bf16", "outlier_steps": []},
                         {"mode": "fp32", "outlier_steps": [{"timed_step": 3, "ms": 900.0}]}]}
    assert outlier_notes(document) == [
        "outliers: 2 timed steps of fp32 took over 10x the median (longest 6,057 ms: a pause, e.g. SIGSTOP, swapping "
        "or a busy node); the medians above are robust to them, means are not (runs[].outlier_steps)."]
