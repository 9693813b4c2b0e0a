"""The comparison row: one precision mode's figures against the baseline mode, the one definition
of what a results document's "comparison" holds per mode (docs/results-schema.md lists the
same fields). compare.compare_modes builds each row once, from figures computed first; the
table, notes and plot read its attributes, and only the JSON and CSV writers turn it into a dict."""
from __future__ import annotations

from dataclasses import asdict, dataclass, field, fields
from typing import Any, Dict, List, Optional

# The time-to-target figures: written only with --target-accuracy, as result files always have been.
WITH_TARGET = {"only_with_target": True}


@dataclass(frozen=True)
class ComparisonRow:
    """A mode's figures, never changed once built; the field order is the order of the JSON's keys."""
    # the mode's own runs: step time pooled over repeats (medians of medians), memory, learning,
    # loss scaling, compute rate; profile_ms is --explain's time per category and profiled_gpu_busy_share
    # its share of a profiled step in which the GPU ran kernels, max_batch --max-batch's, joules_per_image
    # and gpu_busy_share the medians of its runs' runs[].energy and runs[].gpu_busy (null when none has one)
    runs: int  # the runs its figures rest on: its whole ones, or, where a stop cut every one short, those
    cut_short_runs: int  # its runs a stop signal cut short and left out of its figures (they stay in runs[])
    cut_short: bool  # whether its figures rest on runs cut short (it has no whole run)
    median_step_ms: float
    p90_step_ms: float
    repeat_medians_ms: List[float]
    spread_pct: Optional[float]
    images_per_sec: float
    data_time_ms: float
    peak_memory_bytes: int
    warmup_peak_memory_bytes: Optional[int]
    final_loss: Optional[float]
    test_accuracy: Optional[float]
    learned: Optional[bool]
    skipped_steps: int
    scale_drops: Optional[int]
    final_loss_scale: Optional[float]
    tflops: Optional[float]
    mfu_pct: Optional[float]
    profile_ms: Optional[Dict[str, float]]
    profiled_vs_timed: Optional[float]
    profiled_gpu_busy_share: Optional[float]
    max_batch: Optional[int]
    joules_per_image: Optional[float]
    energy_window_too_short: Optional[bool]  # J/img from windows under nvml_meter.MIN_ENERGY_WINDOW_S alone: no ratio
    gpu_busy_share: Optional[float]
    # streamed data: whether the loader keeps up with the step, from its runs' runs[].feed (compare.feed_of)
    feed: Optional[Dict[str, Any]]
    # does accuracy hold? Over seeds, and paired by seed with the baseline (accuracy.accuracy_figures)
    seeds: int
    accuracy_mean: Optional[float]
    accuracy_ci95: Optional[List[float]]
    accuracy_mean_delta: Optional[float]
    accuracy_delta_ci95: Optional[List[float]]
    accuracy_verdict: Optional[str]
    accuracy_verdict_why: Optional[str]
    seeds_needed: Optional[int]
    # time to --target-accuracy over the seeds that reached it (accuracy.target_figures)
    target_accuracy: Optional[float]
    target_reached_share: Optional[float] = field(metadata=WITH_TARGET)
    time_to_target_s: Optional[float] = field(metadata=WITH_TARGET)
    time_to_target_range_s: Optional[List[float]] = field(metadata=WITH_TARGET)
    epochs_to_target: Optional[float] = field(metadata=WITH_TARGET)
    seconds_per_epoch: Optional[float] = field(metadata=WITH_TARGET)
    time_to_target_speedup_vs_baseline: Optional[float] = field(metadata=WITH_TARGET)
    # against the baseline mode: ratios, their 95% intervals and what those rest on
    speedup_vs_baseline: Optional[float]  # the baseline's median step over this mode's
    speedup_ci95: Optional[List[float]]  # [low, high], or null (speedup_interval says why)
    repeat_speedups: Optional[List[float]]  # each paired repeat's ratio (seed and repeat), or null where none pair
    speedup_significant: Optional[bool]  # whether that interval leaves out 1.0
    memory_ratio_ci95: Optional[List[float]]  # null unless both modes ran compare.MIN_RUNS times or more
    speedup_interval: Optional[str]  # what the interval rests on, or why there is none
    memory_ratio_vs_baseline: Optional[float]
    accuracy_delta_vs_baseline: Optional[float]
    max_batch_ratio_vs_baseline: Optional[float]
    energy_ratio_vs_baseline: Optional[float]  # joules_per_image / the baseline's; null if either's window is too short
    energy_ratio_ci95: Optional[List[float]]  # null unless both modes have compare.MIN_RUNS runs whose windows resolve
    # --explain against fp32 whatever the baseline: per category, Amdahl's line and the findings
    profile_speedup: Optional[Dict[str, float]]
    amdahl: Optional[Dict[str, float]]
    diagnosis: Optional[List[Dict[str, Any]]]

    def to_dict(self) -> Dict[str, Any]:
        """The row as the results file holds it (for the JSON and CSV writers)."""
        found = asdict(self)
        if self.target_accuracy is None:
            for name in TARGET_FIELDS:
                del found[name]
        return found


TARGET_FIELDS = tuple(row_field.name for row_field in fields(ComparisonRow)
                      if row_field.metadata.get("only_with_target"))
