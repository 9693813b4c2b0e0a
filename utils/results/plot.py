"""A picture of a comparison, four panels: every timed step per mode and repeat; the speedup
over FP32 with its 95% interval; peak memory; test accuracy against chance. matplotlib is
optional (only --plot needs it); the releases NGC containers ship, 3.5 and up, draw it."""
from __future__ import annotations

import math
import os
import textwrap
from typing import TYPE_CHECKING, Any, Callable, Dict, List, Tuple

from models.families import DEFAULT_NUM_CLASSES
from utils.compat import release
from utils.errors import UserError, WriteFailed
from utils.explain.categories import ADDED
from utils.explain.categories import NAMES as CATEGORIES
from utils.fileio import atomic_write
from utils.modes import BASELINES, MODES
from utils.numerics.fp16 import FP16_MAX, FP16_MIN_NORMAL, FP16_MIN_SUBNORMAL
from utils.results.compare import scaler_skips
from utils.results.comparison_row import ComparisonRow
from utils.results.record import setup_of
from utils.results.summary import describe, first_of

if TYPE_CHECKING:  # matplotlib is optional: imported only where a figure is drawn
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

FORMATS = ("png", "pdf", "svg")
OLDEST_MATPLOTLIB = (3, 5)
REPEAT_MARKERS = ["o", "s", "^", "D", "v", "P"]
RATIO_LIMIT = 16  # the category-speed panel's axis ends at 1/16x and 16x; beyond, the value is written
# a later category (categories.ADDED) gets a colour of its own, so that the others keep theirs
CATEGORY_COLOURS = dict(zip([name for name in CATEGORIES if name not in ADDED],
                            ["#d62728", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#bcbd22", "#17becf", "#2ca02c",
                             "#1f77b4", "#7f7f7f", "#c7c7c7", "#dbdb8d"]), float8="#393b79")
SHOWN_SHARE = 0.02  # the speedup panel leaves out categories below 2% of every mode's step
SHARES_ABOVE = 8  # when the slowest mode's step is this many times the fastest's, stack shares, not ms


UNKNOWN_MODE_COLOUR = "#9467bd"  # a mode a newer ampbench wrote


def colour_of(mode: str) -> str:
    """The colour of the mode named `mode` (Mode.colour)."""
    return MODES[mode].colour if mode in MODES else UNKNOWN_MODE_COLOUR


def check_available(path: str) -> None:
    """Before training: a matplotlib that can draw the figure, and a file suffix naming a format
    it writes."""
    try:
        import matplotlib
    except ImportError:
        raise UserError("--plot needs matplotlib, which is not installed: pip install matplotlib") from None
    if release(matplotlib.__version__) < OLDEST_MATPLOTLIB:
        raise UserError(f"--plot needs matplotlib 3.5 or newer, and this is {matplotlib.__version__}: "
                        "pip install 'matplotlib>=3.5', or drop --plot.")
    if file_format(path) not in FORMATS:
        raise UserError(f"--plot {path}: the file name must end in .png, .pdf or .svg, the format written.")


def file_format(path: str) -> str:
    return os.path.splitext(str(path))[1].lower().lstrip(".")


def draw(path: str, document: Dict[str, Any]) -> None:
    """Write the figure of `document` to `path`, all or nothing, titled with its setup."""
    save_figure(path, lambda: figure_of(document))


def save_figure(path: str, make_figure: Callable[[], Figure]) -> None:
    """Draw `make_figure()` into `path`, all or nothing; matplotlib's failure is a WriteFailed."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure = None
    try:
        figure = make_figure()
        atomic_write(path, lambda stream: figure.savefig(stream, format=file_format(path), dpi=120))
    except WriteFailed:
        raise
    except Exception as error:  # the caller says which other outputs were written
        raise WriteFailed(f"could not draw {path} with matplotlib {matplotlib.__version__} "
                          f"({type(error).__name__}: {error}).") from None
    finally:
        if figure is not None:
            plt.close(figure)


def figure_of(document: Dict[str, Any]) -> Figure:
    """The figure: four panels, then two to a row those the flags asked for."""
    import matplotlib.pyplot as plt

    comparison = document["comparison"]
    modes = list(comparison)
    # (draw, arguments) of the panels after the first four, two to a row
    extra: List[Tuple[Callable[..., None], Tuple[Any, ...]]] = []
    explained = [mode for mode, row in comparison.items() if row.profile_ms]
    if explained:
        extra += [(draw_time_by_category, (comparison, explained)), (draw_category_speedups, (comparison, explained))]
    if any(run.get("loss_scale_curve") for run in document["runs"]):
        extra.append((draw_loss_scales, (document["runs"],)))
    if any(len(run.get("accuracy_curve") or []) > 1 for run in document["runs"]):
        extra += [(draw_accuracy_curves, (document["runs"], "train_s", "training time (s, evaluations excluded)")),
                  (draw_accuracy_curves, (document["runs"], "epoch", "epochs"))]
    censused, footprints = first_of(document, "numerics"), first_of(document, "memory")
    if censused:
        extra.append((draw_gradient_histogram, (censused,)))
    if footprints:
        extra.append((draw_footprint, (footprints,)))
    rows = 2 + (len(extra) + 1) // 2
    figure, axes = plt.subplots(rows, 2, figsize=(12, 4.0 * rows + 0.5))
    title = describe(setup_of(document), document["env"])
    figure.suptitle("\n".join(textwrap.wrap(title, 110)), fontsize=11)
    try:
        draw_step_times(axes[0][0], document, modes)
        draw_speedups(axes[0][1], comparison, modes, document["config"]["baseline"])
        draw_memory(axes[1][0], comparison, modes, document["config"]["baseline"])
        draw_accuracy(axes[1][1], comparison, modes, document["config"].get("num_classes") or DEFAULT_NUM_CLASSES)
        for index, (draw_panel, arguments) in enumerate(extra):
            draw_panel(axes[2 + index // 2][index % 2], *arguments)
        if len(extra) % 2:
            axes[-1][1].set_visible(False)
        for axis in axes.flat:
            axis.tick_params(axis="x", labelrotation=20)
        figure.tight_layout(rect=(0, 0, 1, 1 - 0.5 / figure.get_figheight()))  # room for the suptitle
    except BaseException:
        plt.close(figure)
        raise
    return figure


def draw_step_times(axis: Axes, document: Dict[str, Any], modes: List[str]) -> None:
    """Every timed step as a point in its mode's colour, a marker per repeat, its median as a bar."""
    repeats = sorted({run["repeat"] for run in document["runs"]})
    for position, mode in enumerate(modes):
        for run in document["runs"]:
            if run["mode"] != mode or not run["step_times_ms"]:
                continue
            marker = REPEAT_MARKERS[repeats.index(run["repeat"]) % len(REPEAT_MARKERS)]
            times = run["step_times_ms"]
            offset = (repeats.index(run["repeat"]) + 0.5) / len(repeats) * 0.6 - 0.3
            spread = [offset + 0.12 * ((i * 0.618) % 1 - 0.5) for i in range(len(times))]
            axis.scatter([position + jitter for jitter in spread], times, s=8, alpha=0.5, color=colour_of(mode),
                         marker=marker, linewidths=0)
            axis.hlines(run["step_time_ms"]["median"], position + offset - 0.09, position + offset + 0.09,
                        color="black")
    axis.set_xticks(range(len(modes)))
    axis.set_xticklabels(modes)
    axis.set_ylabel("step time (ms)")
    note = f"{len(repeats)} repeats, a marker each; " if len(repeats) > 1 else ""
    axis.set_title(f"every timed step ({note}black: median)", fontsize=10)
    medians = [row.median_step_ms for row in (document["comparison"][mode] for mode in modes)]
    if max(medians) > 10 * min(medians):  # keep every mode readable
        axis.set_yscale("log")
        axis.set_ylabel("step time (ms, log scale)")
    else:
        axis.set_ylim(bottom=0)
    axis.grid(axis="y", alpha=0.3)


def draw_speedups(axis: Axes, comparison: Dict[str, ComparisonRow], modes: List[str], baseline: str) -> None:
    speedups = [value for value in (comparison[mode].speedup_vs_baseline for mode in modes) if value is not None]
    if len(speedups) < len(modes):
        values = [comparison[mode].images_per_sec for mode in modes]
        bars = axis.bar(modes, values, color=[colour_of(mode) for mode in modes])
        axis.bar_label(bars, labels=[f"{value:.0f}" for value in values], fontsize=8)
        axis.set_title(f"images/s (no {baseline} run to compare with)", fontsize=10)
        axis.set_ylim(0, max(values) * 1.15)
        return
    intervals = [comparison[mode].speedup_ci95 or [value, value] for mode, value in zip(modes, speedups)]
    errors = [[value - low for value, (low, _) in zip(speedups, intervals)],
              [high - value for value, (_, high) in zip(speedups, intervals)]]
    bars = axis.bar(modes, speedups, yerr=errors, capsize=6, color=[colour_of(mode) for mode in modes])
    labels = [f"{value:.2f}x" + ("\nn.s." if comparison[mode].speedup_significant is False else "")
              for mode, value in zip(modes, speedups)]
    axis.bar_label(bars, labels=labels, padding=8, fontsize=8)
    axis.axhline(1.0, color="grey", linewidth=0.8)
    axis.set_title(f"speedup vs {baseline} (error bars: 95% CI, if any; n.s.: holds 1.0)", fontsize=10)
    axis.set_ylim(0, max(high for _, high in intervals) * 1.2)


def draw_memory(axis: Axes, comparison: Dict[str, ComparisonRow], modes: List[str], baseline: str) -> None:
    values = [comparison[mode].peak_memory_bytes / 2 ** 20 for mode in modes]
    ratios = [comparison[mode].memory_ratio_vs_baseline for mode in modes]
    bars = axis.bar(modes, values, color=[colour_of(mode) for mode in modes])
    axis.bar_label(bars, labels=[f"{value:.0f} MiB" + (f"\n{ratio:.2f}x" if ratio is not None else "")
                                 for value, ratio in zip(values, ratios)], fontsize=8)
    axis.set_ylabel("MiB")
    axis.set_title(f"peak memory (label: ratio to {baseline})", fontsize=10)
    axis.set_ylim(0, max(values) * 1.25)


def draw_accuracy(axis: Axes, comparison: Dict[str, ComparisonRow], modes: List[str], classes: int) -> None:
    """The modes' test accuracies, against chance: one in `classes`."""
    accuracies = [comparison[mode].test_accuracy for mode in modes]
    if all(value is None for value in accuracies):
        axis.text(0.5, 0.5, "no test accuracy\n(synthetic data, --no-eval or a cut run)", ha="center",
                  va="center", transform=axis.transAxes)
        axis.set_xticks([])
        axis.set_yticks([])
        axis.set_title("test accuracy", fontsize=10)
        return
    values = [100.0 * (value or 0.0) for value in accuracies]
    stuck = [comparison[mode].learned is False for mode in modes]
    bars = axis.bar(modes, values, color=[colour_of(mode) for mode in modes], edgecolor="#d62728",
                    linewidth=[2 if flag else 0 for flag in stuck])
    for bar, flag in zip(bars, stuck):
        bar.set_hatch("//" if flag else None)
    # two short lines per bar: side by side, "9.7% (did not learn)" labels ran into each other
    axis.bar_label(bars, labels=["-" if value is None else f"{100 * value:.1f}%" + ("\ndid not learn" if flag else "")
                                 for value, flag in zip(accuracies, stuck)], fontsize=8)
    axis.axhline(100 / classes, color="grey", linestyle="--", linewidth=0.8)
    axis.set_ylabel("test accuracy (%)")
    axis.set_title(f"test accuracy (dashed: chance, {100 / classes:.3g}%; hatched: did not learn)", fontsize=10)
    axis.set_ylim(0, max(max(values) * 1.2, 15))


def draw_accuracy_curves(axis: Axes, runs: List[Dict[str, Any]], x_key: str, label: str) -> None:
    """Test accuracy against training time or epochs: per mode the median over its runs (seeds)
    at each evaluation, a band from their lowest to their highest, and the target."""
    import numpy as np

    by_mode: Dict[str, List[List[Dict[str, Any]]]] = {}
    for run in runs:
        if len(run.get("accuracy_curve") or []) > 1:
            by_mode.setdefault(run["mode"], []).append(run["accuracy_curve"])
    for mode, curves in by_mode.items():
        length = min(len(curve) for curve in curves)
        clock = np.median([[point[x_key] for point in curve[:length]] for curve in curves], axis=0)
        percent = 100.0 * np.array([[point["accuracy"] for point in curve[:length]] for curve in curves])
        colour = colour_of(mode)
        axis.plot(clock, np.median(percent, axis=0), color=colour,
                  label=f"{mode} ({len(curves)} run{'s' * (len(curves) > 1)})")
        if len(curves) > 1:
            axis.fill_between(clock, percent.min(axis=0), percent.max(axis=0), color=colour, alpha=0.2)
    target = next((run["target_accuracy"] for run in runs if run.get("target_accuracy")), None)
    if target is not None:
        axis.axhline(100 * target, color="grey", linestyle=":", linewidth=1, label=f"target {100 * target:g}%")
    axis.set_xlabel(label)
    axis.set_ylabel("test accuracy (%)")
    axis.set_title(f"test accuracy against {label.split(' (')[0]} (band: lowest to highest run)", fontsize=10)
    axis.legend(fontsize=8)


def profile_of(row: ComparisonRow) -> Dict[str, float]:
    """The row's --explain time per category: figure_of() draws these panels only for the modes profiled."""
    assert row.profile_ms is not None
    return row.profile_ms


def draw_time_by_category(axis: Axes, comparison: Dict[str, ComparisonRow], modes: List[str]) -> None:
    """--explain: each mode's profiled step stacked by category, in ms (or in shares of the step
    when one mode is many times slower, which would flatten the others)."""
    profiles = [profile_of(comparison[mode]) for mode in modes]
    totals = [sum(profile.values()) for profile in profiles]
    as_shares = max(totals) > SHARES_ABOVE * min(totals)
    bottoms = [0.0] * len(modes)
    for name in CATEGORIES:
        values = [profile.get(name, 0.0) for profile in profiles]
        if not any(values):
            continue
        if as_shares:
            values = [100.0 * value / total for value, total in zip(values, totals)]
        axis.bar(modes, values, bottom=bottoms, color=CATEGORY_COLOURS[name], label=name, width=0.6)
        bottoms = [bottom + value for bottom, value in zip(bottoms, values)]
    for position, total in enumerate(totals):
        axis.text(position, bottoms[position], f"{total:.0f} ms" if total >= 10 else f"{total:.2f} ms", ha="center",
                  va="bottom")
    axis.set_ylabel("share of the step (%)" if as_shares else "ms per step")
    axis.set_title("where the time goes (--explain)" + (": shares; labels: ms per step" if as_shares else ""),
                   fontsize=10)
    axis.set_ylim(0, max(bottoms) * 1.12)
    axis.legend(fontsize=8, loc="center left", bbox_to_anchor=(1.0, 0.5))


def draw_category_speedups(axis: Axes, comparison: Dict[str, ComparisonRow], modes: List[str]) -> None:
    """--explain: each category's speedup against fp32, per mode (log scale; 1 = as fast)."""
    speedups = {mode: comparison[mode].profile_speedup for mode in modes if mode != BASELINES["reference"]}
    others = {mode: speedup for mode, speedup in speedups.items() if speedup}
    if not others:
        axis.text(0.5, 0.5, "no fp32 profile to compare with", ha="center", va="center", transform=axis.transAxes)
        axis.set_xticks([])
        axis.set_yticks([])
        return
    profiles = [profile_of(comparison[mode]) for mode in modes]
    names = [name for name in CATEGORIES if all(name in speedup for speedup in others.values())
             and max(profile.get(name, 0.0) / sum(profile.values()) for profile in profiles) >= SHOWN_SHARE] + ["total"]
    height = 0.8 / len(others)
    for index, mode in enumerate(others):  # a stem from 1.0 (as fast) to each category's speedup
        values = [others[mode][name] for name in names]
        clipped_values = [min(max(value, 1 / RATIO_LIMIT), RATIO_LIMIT) for value in values]  # one extreme ratio
        rows = [y + index * height for y in range(len(names))]  # (cast 0.0031x) flattened the rest
        axis.hlines(rows, 1.0, clipped_values, color=colour_of(mode), linewidth=3)
        axis.scatter(clipped_values, rows, color=colour_of(mode), label=mode, zorder=3)
        for value, clipped, row in zip(values, clipped_values, rows):
            if value != clipped:
                axis.text(clipped, row - height / 2, f"{value:.2g}x", fontsize=7, va="bottom",
                          ha="right" if value > 1 else "left", color=colour_of(mode))
    axis.set_yticks([y + 0.4 - height / 2 for y in range(len(names))])
    axis.set_yticklabels(names)
    axis.invert_yaxis()
    axis.set_xscale("log")
    axis.set_xlim(1 / RATIO_LIMIT / 1.3, RATIO_LIMIT * 1.3)
    axis.axvline(1.0, color="grey", linewidth=0.8)
    axis.set_xlabel(f"times as fast as in fp32 (log; ends at {RATIO_LIMIT}x, beyond: value written)", fontsize=9)
    axis.set_title("speed of each category against fp32 (--explain)", fontsize=10)
    axis.legend(fontsize=8)


def draw_loss_scales(axis: Axes, runs: List[Dict[str, Any]]) -> None:
    """The loss scale after every step of each scaled run (log 2 scale), a cross at each drop:
    a dynamic scaler halves the scale at each step it skips."""
    scaled_runs = [run for run in runs if run.get("loss_scale_curve")]
    for run in scaled_runs:
        curve = run["loss_scale_curve"]
        label = run["mode"] + (f" (repeat {run['repeat']})" if any(other["repeat"] for other in scaled_runs) else "")
        colour, steps, fell = colour_of(run["mode"]), range(1, len(curve) + 1), scaler_skips(run)
        axis.step(steps, curve, where="post", color=colour, linestyle="-" if not run["repeat"] else "--",
                  label=f"{label}: {len(fell)} drop{'' if len(fell) == 1 else 's'}, {run['skipped_steps']} skipped")
        axis.scatter(fell, [curve[step - 1] for step in fell], marker="x", color=colour, zorder=3)
    axis.set_yscale("log", base=2)
    axis.set_xlabel("step")
    axis.set_ylabel("loss scale")
    axis.set_title("loss scale after each step (x: a drop, the scaler skipped that step)", fontsize=10)
    axis.legend(fontsize=8)


def draw_gradient_histogram(axis: Axes, censused: Dict[str, Dict[str, Any]]) -> None:
    """--numerics: the FP32 activation gradients' log2 histogram (Micikevicius et al. 2018,
    Figure 3), and the same values times each float16 mode's loss scale, against float16's
    range: left of its smallest subnormal a value flushes to zero, right of 65504 it overflows."""
    histogram = next(iter(censused.values()))["histogram"]  # the first mode's FP32 reference
    low, counts = histogram["log2_low"], histogram["counts"]
    total = sum(counts) + histogram["zeros"]
    exponents = [low + index for index in range(len(counts))]
    shares = [100.0 * count / total for count in counts]
    axis.bar(exponents, shares, width=1.0, align="edge", color="#7f7f7f", alpha=0.6, label="FP32 gradients")
    scaled = {mode: numerics["passes"]["scaled"]["scale"] for mode, numerics in censused.items()
              if "scaled" in numerics["passes"]}
    for mode, scale in scaled.items():
        shift = math.log2(scale)
        axis.step([exponent + shift for exponent in exponents] + [exponents[-1] + shift + 1], shares + [shares[-1]],
                  where="post", color=colour_of(mode), label=f"{mode}: x loss scale {scale:g}")
    # float16's range as lines named in the legend (rotated labels beside them were too small to read)
    for value, text, style in ((FP16_MIN_SUBNORMAL, "fp16 smallest subnormal, 2^-24", ":"),
                               (FP16_MIN_NORMAL, "fp16 smallest normal, 2^-14", "--"),
                               (FP16_MAX, "fp16 largest, 65504", "-.")):
        axis.axvline(math.log2(value), color="#d62728", linestyle=style, linewidth=1.2, label=text)
    scales = sorted(scaled.values())
    occupied = [exponent for exponent, count in zip(exponents, counts) if count]
    if occupied:
        axis.set_xlim(min(occupied[0], -26) - 2, max(occupied[-1] + (math.log2(scales[-1]) if scales else 0), 17) + 3)
    axis.set_xlabel("log2 |activation gradient|")
    axis.set_ylabel("% of values")
    axis.set_title(f"FP32 activation gradients, float16's range (--numerics; {100.0 * histogram['zeros'] / total:.0f}% "
                   "are 0)", fontsize=10)
    axis.legend(fontsize=7, loc="best")


def draw_footprint(axis: Axes, footprints: Dict[str, Dict[str, Any]]) -> None:
    """--numerics: one step's memory per mode, stacked: parameters, gradients, optimizer
    state, saved activations, autocast's weight copies."""
    parts = [("parameters", "parameters_bytes", "#1f77b4"), ("gradients", "gradients_bytes", "#ff7f0e"),
             ("optimizer", "optimizer_bytes", "#2ca02c"), ("activations", "activations_bytes", "#d62728"),
             ("weight copies", "weight_copies_bytes", "#9467bd")]
    modes = list(footprints)
    bottoms = [0.0] * len(modes)
    for label, key, colour in parts:
        values = [footprints[mode][key] / 2 ** 20 for mode in modes]
        axis.bar(modes, values, bottom=bottoms, color=colour, label=label, width=0.6)
        bottoms = [bottom + value for bottom, value in zip(bottoms, values)]
    for position, total in enumerate(bottoms):
        axis.text(position, total, f"{total:.0f} MiB", ha="center", va="bottom")
    axis.set_ylabel("MiB")
    axis.set_ylim(0, max(bottoms) * 1.15)
    axis.set_title("where one step's memory goes (--numerics)", fontsize=10)
    axis.legend(fontsize=8, loc="center left", bbox_to_anchor=(1.0, 0.5))
