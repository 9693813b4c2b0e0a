"""Side-by-side figures per precision mode, relative to a baseline mode (--baseline, fp32 unless
told), with 95% intervals.

Runs of one mode repeated with --repeats are pooled: step time is the median of the repeats'
medians, and the spread between repeats shows clock drift or noise. A run that a stop signal cut
short (fewer timed steps than planned) stays in the file but out of every median and interval
while its mode has whole runs: one timed step never weighs like forty.

A speedup says what it rests on (Speedup.rests_on). Runs of two modes made in the same repeat of
the same seed (--repeats runs the modes back to back, in alternating order) are compared as
pairs, each repeat's ratio on its own, so that drift both modes share cancels: with MIN_RUNS
pairs or more, the geometric mean of those ratios with Student's t interval over their logs (the
paired interval of the accuracy verdict); with two, no interval, and the two ratios instead; with
one, a circular block bootstrap over the two runs' timed steps (neighbouring steps are correlated:
resampling them one by one would make the interval too narrow). Runs that do not pair (several
processes, the scaling study) are compared as independent samples: a percentile bootstrap over
the runs' medians with MIN_RUNS runs a mode, a block bootstrap with one. Never fewer runs called
an interval. A speedup whose interval holds 1.0 is not significant.
"""
from __future__ import annotations

import math
import statistics
from typing import Any, Callable, Dict, Iterable, List, NamedTuple, Optional, Sequence, Tuple

import numpy as np

from utils import modes
from utils.config import DEFAULT_MARGIN_POINTS
from utils.explain import diagnose
from utils.explain.categories import NAMES as CATEGORIES
from utils.measure import feed, host_load
from utils.modes import BASELINES, MODES
from utils.results.accuracy import accuracy_figures, paired_interval, target_figures
from utils.results.comparison_row import ComparisonRow

RESAMPLES = 2000
CONFIDENCE = 95.0
MIN_RUNS = 3  # an interval over runs rests on at least this many per mode
SPREAD_WARNING_PCT = 20.0  # runs or steps that spread wider than this make every figure unsteady
CHANCE_ACCURACY = 0.1  # ten classes
CHANCE_LOSS = math.log(10)  # cross-entropy of a uniform guess over ten classes
LOSS_TOLERANCE = 0.02  # a final loss within 2% of ln(10) ...
ACCURACY_TOLERANCE = 0.02  # ... or an accuracy within 2 points of chance: the run did not learn
FINAL_LOSSES = 10  # the "final loss" judged is the mean of the last ten steps' losses, not one batch's


def learned(data: str, loss_curve: Sequence[float], accuracy: Optional[float]) -> Optional[bool]:
    """Whether a run on `data` learned: False when its test accuracy is within 2 points of
    chance, or, without one, when its final loss is within 2% of ln(10) (or not finite); None
    when nothing tells (synthetic data, no loss). The accuracy decides when there is one: it is measured
    on the whole test set, while ten batches' losses of a short run can sit near ln 10 by chance."""
    if data != "cifar10" or not loss_curve:
        return None
    tail = loss_curve[-FINAL_LOSSES:]
    final = sum(tail) / len(tail)
    if not math.isfinite(final):
        return False
    if accuracy is not None:
        return abs(accuracy - CHANCE_ACCURACY) > ACCURACY_TOLERANCE
    return abs(final - CHANCE_LOSS) > LOSS_TOLERANCE * CHANCE_LOSS


def run_learned(run: Dict[str, Any]) -> Optional[bool]:
    """learned() of a run read from a results file."""
    return learned(run["data"], run["loss_curve"], run["test_accuracy"])


def bootstrap_ratio(numerators: Sequence[float], denominators: Sequence[float],
                    statistic: Callable[..., np.ndarray] = np.median, seed: int = 0, block: int = 1) -> List[float]:
    """The 95% percentile-bootstrap interval of statistic(numerators) / statistic(denominators),
    resampling each sample independently, in circular blocks of `block` neighbours (a fixed
    seed: the same files give the same interval)."""
    rng = np.random.default_rng(seed)
    tops, bottoms = np.asarray(numerators, np.float64), np.asarray(denominators, np.float64)
    ratios = []
    for _ in range(0, RESAMPLES, 250):  # in chunks: 250 x 10,000 steps is 20 MB, not 160
        top = statistic(tops[block_indices(rng, len(tops), block)], axis=1)
        bottom = statistic(bottoms[block_indices(rng, len(bottoms), block)], axis=1)
        ratios.append(top / bottom)
    low, high = np.percentile(np.concatenate(ratios), [(100 - CONFIDENCE) / 2, (100 + CONFIDENCE) / 2])
    return [float(low), float(high)]


def block_indices(rng: np.random.Generator, count: int, block: int, resamples: int = 250) -> np.ndarray:
    """`resamples` rows of `count` indices made of blocks of `block` neighbours, wrapping round."""
    starts = rng.integers(0, count, (resamples, -(-count // block)))
    return ((starts[:, :, None] + np.arange(block)) % count).reshape(resamples, -1)[:, :count]


def block_length(count: int) -> int:
    """The block bootstrap's usual length for a median, about the cube root of the sample."""
    return max(1, round(count ** (1 / 3)))


class Speedup(NamedTuple):
    """A mode's speedup over another: the figure, its 95% interval (None: too few runs), what
    the interval rests on or why there is none, and each paired repeat's own ratio (None where
    the runs do not pair)."""
    value: float
    interval: Optional[List[float]]
    rests_on: str
    per_repeat: Optional[List[float]]


def repeat_key(run: Dict[str, Any]) -> Tuple[int, int]:
    return run.get("seed") or 0, run.get("repeat") or 0


Pair = Tuple[Dict[str, Any], Dict[str, Any]]


def paired(base_group: List[Dict[str, Any]], group: List[Dict[str, Any]]) -> List[Pair]:
    """The runs of two modes made in the same repeat of the same seed, (base run, run) in repeat
    order; where a repeat came more than once (a re-measure's process after the comparison's),
    its runs pair in the order met."""
    def by_repeat(runs: List[Dict[str, Any]]) -> Dict[Tuple[int, int], List[Dict[str, Any]]]:
        keyed: Dict[Tuple[int, int], List[Dict[str, Any]]] = {}
        for run in runs:
            keyed.setdefault(repeat_key(run), []).append(run)
        return keyed

    bases, others = by_repeat(base_group), by_repeat(group)
    return [pair for key in sorted(set(bases) & set(others)) for pair in zip(bases[key], others[key])]


def run_ratio(base: Dict[str, Any], run: Dict[str, Any]) -> float:
    return base["step_time_ms"]["median"] / run["step_time_ms"]["median"]


def ratios_text(ratios: Sequence[float]) -> str:
    """"1.22x, 0.95x": each repeat's ratio."""
    return ", ".join(f"{ratio:.2f}x" for ratio in ratios)


def speedup(base_group: List[Dict[str, Any]], group: List[Dict[str, Any]], pair: bool = True) -> Speedup:
    """`group`'s speedup over `base_group` (module docstring): by paired repeats where `pair`
    and some runs pair, else as independent samples."""
    pairs = paired(base_group, group) if pair else []
    if len(pairs) >= MIN_RUNS:
        ratios = [run_ratio(*both) for both in pairs]
        mean, interval = paired_interval([math.log(ratio) for ratio in ratios])
        assert interval is not None  # MIN_RUNS > 1
        return Speedup(math.exp(mean), [math.exp(bound) for bound in interval],
                       f"Student's t over the {len(pairs)} paired repeats' log ratios (each repeat's two runs made "
                       "back to back: drift both modes share cancels)", ratios)
    if len(pairs) == 2:
        ratios = [run_ratio(*both) for both in pairs]
        return Speedup(math.exp(statistics.mean(math.log(ratio) for ratio in ratios)), None,
                       f"none from 2 paired repeats: an interval needs {MIN_RUNS} (--repeats {MIN_RUNS}); each "
                       "repeat's ratio is shown instead", ratios)
    if len(pairs) == 1 or len(base_group) == len(group) == 1:
        base, run = pairs[0] if pairs else (base_group[0], group[0])
        block = block_length(min(len(base["step_times_ms"]), len(run["step_times_ms"])))
        which = "one run per mode" if len(base_group) == len(group) == 1 else "the one repeat both modes ran whole"
        return Speedup(run_ratio(base, run), bootstrap_ratio(base["step_times_ms"], run["step_times_ms"], block=block),
                       f"block bootstrap over the timed steps of {which} (blocks of {block}); --repeats {MIN_RUNS} "
                       "adds the run-to-run variation", [run_ratio(base, run)] if pairs else None)
    value = median_step_ms(base_group) / median_step_ms(group)
    runs = min(len(base_group), len(group))
    if runs >= MIN_RUNS:
        base_medians, medians = ([run["step_time_ms"]["median"] for run in runs_of] for runs_of in (base_group, group))
        return Speedup(value, bootstrap_ratio(base_medians, medians),
                       "bootstrap over the runs' medians (repeats and seeds)", None)
    return Speedup(value, None, f"none with {runs} runs per mode: an interval over runs needs {MIN_RUNS} "
                                f"(--repeats {MIN_RUNS})", None)


def ratios_spread_pct(ratios: Sequence[float]) -> float:
    """How widely paired repeats' ratios spread, in % of their median."""
    return 100.0 * (max(ratios) - min(ratios)) / statistics.median(ratios)


def unsteady_speedups(comparison: Dict[str, ComparisonRow], baseline: str) -> Dict[str, float]:
    """{mode: spread %} of each mode whose speedup over `baseline` rests on timings that spread
    over SPREAD_WARNING_PCT: its paired repeats' ratios, where it has two or more (drift both modes
    of a repeat share cancels in them), else its own timings (spread_pct); the baseline's own only
    where no mode has such ratios, as theirs hold its drift."""
    paired_ratios = any(len(row.repeat_speedups or []) > 1 for row in comparison.values())
    found = {}
    for mode, row in comparison.items():
        if mode == baseline and paired_ratios:
            continue
        ratios = row.repeat_speedups or []
        spread = ratios_spread_pct(ratios) if len(ratios) > 1 else row.spread_pct
        if spread is not None and spread > SPREAD_WARNING_PCT:
            found[mode] = spread
    return found


def spread_pct(group: List[Dict[str, Any]]) -> Optional[float]:
    """How widely a mode's timings spread, in % of its median: between the runs' medians, or
    with one run, between its steps' p10 and p90."""
    if len(group) > 1:
        medians = [run["step_time_ms"]["median"] for run in group]
        return 100.0 * (max(medians) - min(medians)) / statistics.median(medians)
    times = group[0]["step_time_ms"]
    return 100.0 * (times["p90"] - times["p10"]) / times["median"] if times.get("p10") is not None else None


def scaler_skips(run: Dict[str, Any]) -> List[int]:
    """The steps (from 1) at which the run's loss scale fell: the steps its GradScaler skipped."""
    mode = MODES.get(run["mode"])
    return modes.scale_drop_steps(run.get("loss_scale_curve") or [], mode is not None and mode.loss_scaling)


def scale_drops(run: Dict[str, Any]) -> Optional[int]:
    """How many times the run's loss scale fell; None without a scaler."""
    return len(scaler_skips(run)) if run.get("loss_scale_curve") else None


def cut_short(run: Dict[str, Any]) -> bool:
    """Whether a stop signal ended `run` before its last step, so that it timed fewer steps than planned."""
    return run.get("stopped_by") is not None and run["completed_steps"] < run["steps"]


def timed_by_mode(runs: Iterable[Dict[str, Any]]) -> Dict[str, List[Dict[str, Any]]]:
    """Runs with timed steps, by mode in order of appearance (an interrupted run may have none)."""
    groups: Dict[str, List[Dict[str, Any]]] = {}
    for run in runs:
        if run["step_time_ms"] is not None:
            groups.setdefault(run["mode"], []).append(run)
    return groups


def group_by_mode(runs: Iterable[Dict[str, Any]]) -> Dict[str, List[Dict[str, Any]]]:
    """The runs each mode's figures rest on, by mode in order of appearance: its whole runs with
    timed steps, or, where a stop cut every one of them short, those."""
    return {mode: [run for run in group if not cut_short(run)] or group for mode, group in timed_by_mode(runs).items()}


def left_out(runs: Iterable[Dict[str, Any]]) -> Dict[str, int]:
    """{mode: how many of its timed runs were cut short and left out of its figures}."""
    timed = timed_by_mode(runs)
    kept = group_by_mode(run for group in timed.values() for run in group)
    return {mode: len(group) - len(kept[mode]) for mode, group in timed.items()}


def median_of(group: List[Dict[str, Any]], key: str) -> Optional[float]:
    values = [run[key] for run in group if run[key] is not None]
    return statistics.median(values) if values else None


def profile_ms(group: List[Dict[str, Any]]) -> Optional[Dict[str, float]]:
    """--explain: the median over the mode's profiled runs of each category's ms per step,
    scaled so that the categories add up to the run's timed median: the profiler's own cost
    (and a busy machine) stretch a profiled step, and ratios of unscaled categories would not
    add up to the measured speedup."""
    scaled = []
    for run in group:
        profile = run.get("profile")
        total = sum(profile["categories"][name]["ms"] for name in CATEGORIES) if profile else 0
        if profile and total > 0:
            scale = run["step_time_ms"]["median"] / total if run["step_time_ms"] else 1.0
            scaled.append({name: profile["categories"][name]["ms"] * scale for name in CATEGORIES})
    return {name: statistics.median(ms[name] for ms in scaled) for name in CATEGORIES} if scaled else None


def profiled_vs_timed(group: List[Dict[str, Any]]) -> Optional[float]:
    """The median over profiled runs of their profiled step / their timed median (1.0: they agree)."""
    ratios = [sum(run["profile"]["categories"][name]["ms"] for name in CATEGORIES) / run["step_time_ms"]["median"]
              for run in group if run.get("profile") and run["step_time_ms"]]
    return statistics.median(ratios) if ratios else None


def gpu_busy_share(group: List[Dict[str, Any]]) -> Optional[float]:
    """The median of the mode's runs' busy shares (runs[].gpu_busy), None when none has one."""
    shares = [run["gpu_busy"]["share"] for run in group if run.get("gpu_busy")]
    return statistics.median(shares) if shares else None


def profiled_gpu_busy_share(group: List[Dict[str, Any]]) -> Optional[float]:
    """--explain on CUDA: the median over the mode's profiled runs of the profiler's busy share,
    1 - the GPU's idle time over a profiled step's wall time; None without such a profile."""
    shares = [1 - run["profile"]["idle_ms"] / run["profile"]["wall_ms"] for run in group
              if (run.get("profile") or {}).get("idle_ms") is not None and run["profile"].get("wall_ms")]
    return statistics.median(shares) if shares else None


def feed_of(group: List[Dict[str, Any]]) -> Optional[Dict[str, Any]]:
    """A mode's feed (streamed data): the medians over its runs of the loader's, the step's and
    training's rates (per process), the verdict they give, how many runs measured them, and the
    first run's loader, workers, decoding, cores and levers; None where no run measured them."""
    measured = [run["feed"] for run in group if run.get("feed")]
    if not measured:
        return None
    rates = {key: statistics.median(each[key] for each in measured)
             for key in ("loader_images_per_sec", "step_images_per_sec", "train_images_per_sec")}
    loader, step, train = rates["loader_images_per_sec"], rates["step_images_per_sec"], rates["train_images_per_sec"]
    return {**measured[0], **rates, "runs": len(measured), "bound": feed.bound(loader, step),
            "contended": feed.contended(loader, step, train)}


def median_step_ms(group: List[Dict[str, Any]]) -> float:
    """A mode's step time: the median of its runs' median step times, the statistic that
    speedup_interval resamples (with one run, its median step, the median of the steps it
    resamples), so that every speedup, throughput and efficiency lies on its interval's terms."""
    return statistics.median(run["step_time_ms"]["median"] for run in group)


def profiled_communication(run: Dict[str, Any]) -> bool:
    """Whether --explain's profile of `run` measured its exposed all-reduce over a profiled step."""
    profile = run.get("profile") or {}
    return profile.get("comm_exposed_ms") is not None and bool(profile.get("wall_ms"))


def communication_share(profiled: List[Dict[str, Any]]) -> Tuple[float, float, float]:
    """(exposed all-reduce ms, profiled step ms, the first's share of the second) of runs that
    profiled_communication: the median of each over the runs, and the share their ratio, so that
    it is what the two figures printed beside it give (a median of per-run shares is not, with
    an even number of runs or profiled steps that differ), in the study and the summary alike."""
    exposed = statistics.median(run["profile"]["comm_exposed_ms"] for run in profiled)
    wall = statistics.median(run["profile"]["wall_ms"] for run in profiled)
    return exposed, wall, exposed / wall


def mode_figures(group: List[Dict[str, Any]]) -> Dict[str, Any]:
    """The figures of a mode's own runs `group`, pooled over its repeats and seeds."""
    medians = [run["step_time_ms"]["median"] for run in group]
    median = median_step_ms(group)
    batch = group[0]["global_batch_size"]
    tflops = [run["tflops"] for run in group if run.get("tflops") is not None]
    mfu = [run["mfu_pct"] for run in group if run.get("mfu_pct") is not None]
    verdicts = [run_learned(run) for run in group]
    energy_runs, too_short = resolving_energy(group)
    energy = joules_per_image(energy_runs)
    return {
        "runs": len(group),
        "median_step_ms": median,
        "p90_step_ms": statistics.median(run["step_time_ms"]["p90"] for run in group),
        "repeat_medians_ms": medians,
        "spread_pct": spread_pct(group),
        "images_per_sec": batch * 1000.0 / median,
        "data_time_ms": statistics.median(run["data_time_ms"]["median"] for run in group),
        "peak_memory_bytes": max(run["peak_memory_bytes"] for run in group),
        "warmup_peak_memory_bytes": max((run.get("warmup_peak_memory_bytes") or 0 for run in group), default=0)
        or None,
        "final_loss": median_of(group, "final_loss"),
        "test_accuracy": median_of(group, "test_accuracy"),
        "learned": None if None in verdicts else all(verdicts),
        "skipped_steps": max(run["skipped_steps"] for run in group),
        "scale_drops": max((scale_drops(run) for run in group), key=lambda drops: drops or 0),
        "final_loss_scale": group[-1]["final_loss_scale"],
        "tflops": statistics.median(tflops) if tflops else None,
        "mfu_pct": statistics.median(mfu) if mfu else None,
        "profile_ms": profile_ms(group),
        "profiled_vs_timed": profiled_vs_timed(group),
        "profiled_gpu_busy_share": profiled_gpu_busy_share(group),
        "max_batch": max((run["max_batch"] for run in group if run.get("max_batch") is not None), default=None),
        "joules_per_image": statistics.median(energy) if energy else None,
        "energy_window_too_short": too_short if energy else None,
        "gpu_busy_share": gpu_busy_share(group),
        "feed": feed_of(group),
    }


def compare_modes(runs: List[Dict[str, Any]], margin_points: float = DEFAULT_MARGIN_POINTS,
                  baseline: str = BASELINES["default"]) -> Dict[str, ComparisonRow]:
    """{mode: ComparisonRow} with speedup (and its 95% interval), memory and energy ratios (with
    their intervals over runs, when each mode has at least MIN_RUNS) and accuracy difference against
    `baseline`: null when the baseline was not run, and no accuracy difference against a run
    that did not learn. Over seeds, the accuracy verdict against the baseline within
    +-`margin_points` and the time to a target accuracy. Each row is built once, from its parts."""
    groups, dropped = group_by_mode(runs), left_out(runs)
    measured = {mode: dict(mode_figures(group), cut_short_runs=dropped[mode], cut_short=all(map(cut_short, group)))
                for mode, group in groups.items()}
    learning = {mode: [run for run in group if run_learned(run) is not False] for mode, group in groups.items()}
    return {mode: ComparisonRow(
        **measured[mode], **accuracy_figures(learning[mode], learning.get(baseline), margin_points / 100.0),
        **target_figures(group, groups.get(baseline)),
        **ratio_figures(measured[mode], measured.get(baseline), group, groups.get(baseline), mode == baseline),
        **energy_figures(measured[mode], measured.get(baseline), group, groups.get(baseline), mode == baseline),
        **explain_figures(mode, measured, groups)) for mode, group in groups.items()}


def ratio_figures(row: Dict[str, Any], base: Optional[Dict[str, Any]], group: List[Dict[str, Any]],
                  base_group: Optional[List[Dict[str, Any]]], is_baseline: bool) -> Dict[str, Any]:
    """A mode's speedup, memory ratio, accuracy difference and max-batch ratio against `base`
    (the baseline's measured figures, or None when it did not run), from its measured `row`."""
    found, memory_interval = None, None
    if base and not is_baseline:
        assert base_group is not None  # the baseline's figures are measured from its runs
        found = speedup(base_group, group)
        if min(len(group), len(base_group)) >= MIN_RUNS:
            memory_interval = bootstrap_ratio([run["peak_memory_bytes"] for run in group],
                                              [run["peak_memory_bytes"] for run in base_group], np.max)
    accuracy_delta = None
    if base and row["test_accuracy"] is not None and base["test_accuracy"] is not None \
            and row["learned"] is not False and base["learned"] is not False:
        accuracy_delta = row["test_accuracy"] - base["test_accuracy"]
    interval = found.interval if found else None
    return {"speedup_vs_baseline": found.value if found else 1.0 if base else None,
            "speedup_ci95": interval, "repeat_speedups": found.per_repeat if found else None,
            "speedup_significant": None if interval is None else not interval[0] <= 1.0 <= interval[1],
            "memory_ratio_ci95": memory_interval, "speedup_interval": found.rests_on if found else None,
            "memory_ratio_vs_baseline": row["peak_memory_bytes"] / base["peak_memory_bytes"]
            if base and base["peak_memory_bytes"] else None,
            "accuracy_delta_vs_baseline": accuracy_delta,
            "max_batch_ratio_vs_baseline": row["max_batch"] / base["max_batch"]
            if base and row["max_batch"] and base["max_batch"] else None}


def resolving_energy(group: List[Dict[str, Any]]) -> Tuple[List[Dict[str, Any]], bool]:
    """(the runs of `group` that a mode's J/img rests on, whether their windows are too short):
    the runs whose energy window resolves their joules (nvml_meter.MIN_ENERGY_WINDOW_S), each on
    its own, as a short window's error does not shrink when several are added up; when none
    does, every run with energy, flagged."""
    measured = [run for run in group if run.get("energy")]
    resolved = [run for run in measured if not run["energy"]["window_too_short"]]
    return (resolved, False) if resolved else (measured, bool(measured))


def joules_per_image(runs: List[Dict[str, Any]]) -> List[float]:
    """The energy per image of each of `runs` (runs[].energy)."""
    return [run["energy"]["joules_per_image"] for run in runs]


def energy_figures(row: Dict[str, Any], base: Optional[Dict[str, Any]], group: List[Dict[str, Any]],
                   base_group: Optional[List[Dict[str, Any]]], is_baseline: bool) -> Dict[str, Any]:
    """A mode's energy per image against the baseline's: None unless both have one from windows
    that resolve it; with a bootstrap interval over those runs' figures when each mode has
    MIN_RUNS of them, as the memory ratio's: one run's energy is one measurement."""
    if not (base and row["joules_per_image"] and base["joules_per_image"]) \
            or row["energy_window_too_short"] or base["energy_window_too_short"]:
        return {"energy_ratio_vs_baseline": None, "energy_ratio_ci95": None}
    assert base_group is not None  # the baseline's figures are measured from its runs
    figures, base_figures = (joules_per_image(resolving_energy(runs)[0]) for runs in (group, base_group))
    interval = bootstrap_ratio(figures, base_figures) \
        if not is_baseline and min(len(figures), len(base_figures)) >= MIN_RUNS else None
    return {"energy_ratio_vs_baseline": row["joules_per_image"] / base["joules_per_image"],
            "energy_ratio_ci95": interval}


def explain_figures(mode: str, measured: Dict[str, Dict[str, Any]],
                    groups: Dict[str, List[Dict[str, Any]]]) -> Dict[str, Any]:
    """--explain: a mode's figures per category against fp32, whose profile its rules read,
    whatever the baseline, and its findings (an fp8 mode's against amp-bf16 among them), from
    every mode's `measured` figures; all None without the profiles they need."""
    row, base = measured[mode], measured.get(BASELINES["reference"])
    profile_speedup = amdahl = diagnosis = None
    if row["profile_ms"] is not None and base and base["profile_ms"] is not None:
        profile_speedup = diagnose.profile_speedup(base["profile_ms"], row["profile_ms"])
        if mode != BASELINES["reference"]:
            reference = groups[BASELINES["reference"]]
            against = speedup(reference, groups[mode]).value
            amdahl = diagnose.amdahl(base["profile_ms"], row["profile_ms"], against)
            tf32 = groups.get("tf32")
            diagnosis = comparison_findings(mode, row, base, groups[mode], against,
                                            speedup(reference, tf32).value if tf32 else None)
    slower = fp8_finding(mode, row, groups[mode], measured.get(BASELINES["fp8"]))
    if slower:
        diagnosis = diagnose.ranked((diagnosis or []) + [slower])
    compared = [run for name in (mode, BASELINES["reference"], BASELINES["fp8"]) for run in groups.get(name, [])]
    if diagnosis and any(busy_host(run) for run in compared):
        diagnosis = [dict(found, evidence=found["evidence"] + UNSTEADY) for found in diagnosis]
    return {"profile_speedup": profile_speedup, "amdahl": amdahl, "diagnosis": diagnosis}


# A finding read off runs the host slowed (runs[].host's warning) rests on times that another
# process changed: it says so, beside the evidence it gives.
UNSTEADY = ("; measured while the host was busy (the run warned so: runs[].host), so this evidence is unsteady: "
            "rerun alone before acting on it")


def busy_host(run: Dict[str, Any]) -> bool:
    """Whether another process competed for the cores while `run` was timed (host_load.warning)."""
    return ((run.get("host") or {}).get("warning") or "").startswith(host_load.BUSY)


def comparison_findings(mode: str, row: Dict[str, Any], base: Dict[str, Any], group: List[Dict[str, Any]],
                        speedup: float, tf32_speedup: Optional[float]) -> List[Dict[str, Any]]:
    """The findings against fp32 of `mode` (its figures `row`, its runs `group`, `speedup` against
    fp32); when neither they nor its runs' own findings say why a mode no faster than fp32 is so,
    the fallback does."""
    profiled = next(run for run in group if run.get("profile"))
    found = diagnose.diagnose_comparison(
        mode, base["profile_ms"], row["profile_ms"], "cuda" if profiled["device"].startswith("cuda") else "cpu",
        profiled["profile"].get("cpu_fast_half_flags"), speedup, tf32_speedup)
    if found or any((run.get("profile") or {}).get("diagnosis") for run in group):
        return found
    why = diagnose.fallback(mode, base["profile_ms"], row["profile_ms"], speedup)
    return [why] if why else []


def fp8_finding(mode: str, row: Dict[str, Any], group: List[Dict[str, Any]],
                bf16: Optional[Dict[str, Any]]) -> Optional[Dict[str, Any]]:
    """--explain: the rule that says why an fp8 `mode` (its measured `row`, its runs `group`) ran
    slower than amp-bf16 (`bf16`, its measured figures, or None when it did not run); else None."""
    fp8_run = next((run for run in group if run.get("fp8")), None)
    if bf16 is None or fp8_run is None or row["profile_ms"] is None:
        return None
    return diagnose.fp8_slower(mode, fp8_run, row["median_step_ms"], bf16["median_step_ms"])
