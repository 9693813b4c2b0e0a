"""Does accuracy hold? Paired differences of final accuracy against the baseline mode (--baseline,
fp32 unless told) over seeds, their 95% interval and a verdict, and the time each mode takes to reach a target accuracy.

For one seed every mode starts from the same weights and sees the same batches, so the
difference between two modes of that seed is a paired sample: its spread over seeds is the
run-to-run noise the verdict weighs. The interval is Student's t over the seeds' differences.
"""
from __future__ import annotations

import math
import statistics
from typing import Any, Dict, List, Optional, Sequence, Tuple

from utils.results.comparison_row import TARGET_FIELDS

CONFIDENCE = 0.95  # the intervals' two-sided level
SERIES_FROM = 1000  # degrees of freedom from which the Cornish-Fisher series alone is exact to double precision
NEWTON_TOLERANCE = 1e-12  # relative: a Newton step this small leaves an error far below double precision
MOST_SEEDS = 1000  # beyond this, "how many seeds would settle it" says "more than"


def critical_t(degrees: int) -> float:
    """Student's t quantile of a two-sided CONFIDENCE interval with `degrees` degrees of freedom
    (12.7062 for 1, 1.95996 in the limit): the Cornish-Fisher series, refined below SERIES_FROM
    by Newton's method on the exact distribution function. There the series lies below the
    quantile and the function is concave, so each step climbs towards it without passing it."""
    t = cornish_fisher(degrees)
    if degrees >= SERIES_FROM:
        return t
    while True:
        step = (CONFIDENCE - probability_within(t, degrees)) / (2 * density(t, degrees))
        t += step
        if abs(step) < NEWTON_TOLERANCE * t:
            return t


def cornish_fisher(degrees: int) -> float:
    """The t quantile as the normal one, z, plus its first four corrections in 1/degrees
    (Abramowitz and Stegun 26.7.5)."""
    z = statistics.NormalDist().inv_cdf((1 + CONFIDENCE) / 2)
    z2 = z * z
    corrections = [z, (z2 + 1) * z / 4, ((5 * z2 + 16) * z2 + 3) * z / 96,
                   (((3 * z2 + 19) * z2 + 17) * z2 - 15) * z / 384,
                   ((((79 * z2 + 776) * z2 + 1482) * z2 - 1920) * z2 - 945) * z / 92160]
    return sum(term / degrees ** power for power, term in enumerate(corrections))


def probability_within(t: float, degrees: int) -> float:
    """P(-t <= T <= t): Abramowitz and Stegun 26.7.3 (even degrees) and 26.7.4 (odd), finite
    sums of powers of cos(theta) for theta = atan(t / sqrt(degrees))."""
    theta = math.atan(t / math.sqrt(degrees))
    cos_squared = math.cos(theta) ** 2
    odd = degrees % 2
    term, total = math.cos(theta) ** odd, 0.0
    for power in range(odd, degrees - 1, 2):  # cos(theta) ** power: 1, 3, ... or 0, 2, ... up to degrees - 2
        total += term
        term *= cos_squared * (power + 1) / (power + 2)
    if odd:
        return 2 / math.pi * (theta + math.sin(theta) * total)
    return math.sin(theta) * total


def density(t: float, degrees: int) -> float:
    """Student's t probability density at `t`."""
    log_norm = math.lgamma((degrees + 1) / 2) - math.lgamma(degrees / 2) - math.log(degrees * math.pi) / 2
    return math.exp(log_norm - (degrees + 1) / 2 * math.log1p(t * t / degrees))


def paired_interval(differences: Sequence[float]) -> Tuple[float, Optional[List[float]]]:
    """(mean, [low, high]) of the differences' mean with its 95% t-interval; no interval for one."""
    mean = statistics.mean(differences)
    if len(differences) < 2:
        return mean, None
    half = critical_t(len(differences) - 1) * statistics.stdev(differences) / math.sqrt(len(differences))
    return mean, [mean - half, mean + half]


def verdict(differences: Sequence[float], margin: float) -> Dict[str, Any]:
    """`holds` when the interval lies within +-margin, `differs` when it excludes 0 and leaves
    the margin, else `inconclusive`, with how many seeds the same spread would need to settle it."""
    mean, interval = paired_interval(differences)
    if interval is None:
        return {"verdict": "inconclusive", "mean": mean, "ci95": None, "seeds": len(differences),
                "seeds_needed": None, "why": "one seed gives no interval: run --seeds 3 or more"}
    low, high = interval
    if -margin <= low and high <= margin:
        word = "holds"
    elif (low > 0 or high < 0) and (low < -margin or high > margin):
        word = "differs"
    else:
        word = "inconclusive"
    needed = seeds_needed(differences, margin) if word == "inconclusive" else None
    why = None
    if word == "inconclusive":
        why = (f"about {needed} seeds with this spread would settle it" if needed
               else f"more than {MOST_SEEDS} seeds with this spread")
    return {"verdict": word, "mean": mean, "ci95": interval, "seeds": len(differences), "seeds_needed": needed,
            "why": why}


def seeds_needed(differences: Sequence[float], margin: float) -> Optional[int]:
    """The fewest seeds whose interval, with this mean and spread, would lie within the margin
    (if the mean does) or exclude 0 (if it does not); None beyond MOST_SEEDS."""
    mean, spread = abs(statistics.mean(differences)), statistics.stdev(differences)
    room = margin - mean if mean < margin else mean
    for count in range(len(differences) + 1, MOST_SEEDS + 1):
        if critical_t(count - 1) * spread / math.sqrt(count) < room:
            return count
    return None


def by_seed(runs: Sequence[Dict[str, Any]], key: str) -> Dict[Optional[int], float]:
    """{seed: the mean of `key` over that seed's runs} (repeats of a seed are averaged)."""
    values: Dict[Optional[int], List[float]] = {}
    for run in runs:
        if run.get(key) is not None:
            values.setdefault(run.get("seed"), []).append(run[key])
    return {seed: statistics.mean(found) for seed, found in values.items()}


def accuracy_figures(runs: List[Dict[str, Any]], base_runs: Optional[List[Dict[str, Any]]],
                     margin: float) -> Dict[str, Any]:
    """A mode's accuracy over seeds and, against the baseline's runs of the same seeds, the paired
    difference, its interval and the verdict. `runs` are the runs that learned."""
    accuracies = by_seed(runs, "test_accuracy")
    mean, interval = paired_interval(list(accuracies.values())) if accuracies else (None, None)
    figures = {"seeds": len(accuracies), "accuracy_mean": mean, "accuracy_ci95": interval,
               "accuracy_mean_delta": None, "accuracy_delta_ci95": None, "accuracy_verdict": None,
               "accuracy_verdict_why": None,
               "seeds_needed": None}
    base = by_seed(base_runs, "test_accuracy") if base_runs is not None else {}
    paired = [accuracies[seed] - base[seed] for seed in accuracies if seed in base]
    if paired and base_runs is not runs:
        found = verdict(paired, margin)
        figures.update(accuracy_mean_delta=found["mean"], accuracy_delta_ci95=found["ci95"],
                       accuracy_verdict=found["verdict"],
                       accuracy_verdict_why=found["why"], seeds_needed=found["seeds_needed"])
    return figures


def target_figures(runs: List[Dict[str, Any]], base_runs: Optional[List[Dict[str, Any]]]) -> Dict[str, Any]:
    """Time to the target accuracy over seeds: the median training time, epochs and seconds
    per epoch of the seeds that reached it, the share that did, and the speedup against the baseline's
    median (statistical efficiency: epochs; hardware efficiency: seconds per epoch); every
    figure None without a target."""
    aimed = [run for run in runs if run.get("target_accuracy") is not None]
    if not aimed:
        return dict.fromkeys(("target_accuracy",) + TARGET_FIELDS)
    times, epochs = by_seed(aimed, "time_to_target_s"), by_seed(aimed, "epochs_to_target")
    tried = {run.get("seed") for run in aimed}
    median_time = statistics.median(times.values()) if times else None
    base_times = by_seed(base_runs or [], "time_to_target_s")
    return {"target_accuracy": aimed[0]["target_accuracy"], "target_reached_share": len(times) / len(tried),
            "time_to_target_s": median_time,
            "time_to_target_range_s": [min(times.values()), max(times.values())] if len(times) > 1 else None,
            "epochs_to_target": statistics.median(epochs.values()) if epochs else None,
            "seconds_per_epoch": statistics.median(times[seed] / epochs[seed] for seed in times) if times else None,
            "time_to_target_speedup_vs_baseline": statistics.median(base_times.values()) / median_time
            if base_times and median_time else None}
