"""Side-by-side figures per precision mode, relative to the fp32 baseline.

Runs of one mode repeated with --repeats are pooled: step time is the median of the
repeats' medians, and the spread between repeats shows clock drift or noise."""
import statistics

BASELINE = "fp32"


def group_by_mode(runs):
    """Runs with timed steps, by mode in order of appearance (an interrupted run may have none)."""
    groups = {}
    for run in runs:
        if run["step_time_ms"] is not None:
            groups.setdefault(run["mode"], []).append(run)
    return groups


def median_of(group, key):
    values = [run[key] for run in group if run[key] is not None]
    return statistics.median(values) if values else None


def mode_figures(group):
    medians = [run["step_time_ms"]["median"] for run in group]
    median = statistics.median(medians)
    batch = group[0]["global_batch_size"]
    tflops = [run["tflops"] for run in group if run.get("tflops") is not None]
    mfu = [run["mfu_pct"] for run in group if run.get("mfu_pct") is not None]
    return {
        "runs": len(group),
        "median_step_ms": median,
        "p90_step_ms": statistics.median(run["step_time_ms"]["p90"] for run in group),
        "repeat_medians_ms": medians,
        "spread_pct": 100.0 * (max(medians) - min(medians)) / median,
        "images_per_sec": batch * 1000.0 / median,
        "data_time_ms": statistics.median(run["data_time_ms"]["median"] for run in group),
        "peak_memory_bytes": max(run["peak_memory_bytes"] for run in group),
        "final_loss": median_of(group, "final_loss"),
        "test_accuracy": median_of(group, "test_accuracy"),
        "skipped_steps": max(run["skipped_steps"] for run in group),
        "final_loss_scale": group[-1]["final_loss_scale"],
        "tflops": statistics.median(tflops) if tflops else None,
        "mfu_pct": statistics.median(mfu) if mfu else None,
    }


def compare_modes(runs):
    """{mode: figures} with speedup, memory ratio and accuracy difference against fp32
    (null when fp32 was not run)."""
    figures = {mode: mode_figures(group) for mode, group in group_by_mode(runs).items()}
    base = figures.get(BASELINE)
    for row in figures.values():
        row["speedup_vs_fp32"] = base["median_step_ms"] / row["median_step_ms"] if base else None
        row["memory_ratio_vs_fp32"] = row["peak_memory_bytes"] / base["peak_memory_bytes"] if base else None
        both = base and row["test_accuracy"] is not None and base["test_accuracy"] is not None
        row["accuracy_delta_vs_fp32"] = row["test_accuracy"] - base["test_accuracy"] if both else None
    return figures
