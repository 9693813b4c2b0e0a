"""A picture of a comparison, four panels: every timed step per mode and repeat; the speedup
over FP32 with its 95% interval; peak memory; test accuracy against chance. matplotlib is
optional (only --plot needs it); the releases NGC containers ship, 3.5 and up, draw it."""
import os
import textwrap

from utils.compat import release
from utils.errors import UserError, WriteFailed
from utils.explain.categories import NAMES as CATEGORIES
from utils.fileio import atomic_write
from utils.results.compare import BASELINE, CHANCE_ACCURACY
from utils.results.record import setup_of
from utils.results.report import describe

FORMATS = ("png", "pdf", "svg")
OLDEST_MATPLOTLIB = (3, 5)
REPEAT_COLOURS = ["#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b"]
CATEGORY_COLOURS = dict(zip(CATEGORIES, ["#d62728", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#bcbd22",
                                         "#17becf", "#2ca02c", "#1f77b4", "#7f7f7f", "#c7c7c7", "#dbdb8d"]))
SHOWN_SHARE = 0.02  # the speedup panel leaves out categories below 2% of every mode's step
SHARES_ABOVE = 8  # when the slowest mode's step is this many times the fastest's, stack shares, not ms


def check_available(path):
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


def file_format(path):
    return os.path.splitext(str(path))[1].lower().lstrip(".")


def draw(path, document):
    """Write the figure of `document` to `path`, all or nothing, titled with its setup."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    explained = [mode for mode, row in document["comparison"].items() if row.get("profile_ms")]
    figure, axes = plt.subplots(3 if explained else 2, 2, figsize=(12, 12.5 if explained else 8.5))
    title = describe(setup_of(document), document["env"])
    figure.suptitle("\n".join(textwrap.wrap(title, 110)), fontsize=11)
    try:
        comparison = document["comparison"]
        modes = list(comparison)
        draw_step_times(axes[0][0], document, modes)
        draw_speedups(axes[0][1], comparison, modes)
        draw_memory(axes[1][0], comparison, modes)
        draw_accuracy(axes[1][1], comparison, modes)
        if explained:
            draw_time_by_category(axes[2][0], comparison, explained)
            draw_category_speedups(axes[2][1], comparison, explained)
        for axis in axes.flat:
            axis.tick_params(axis="x", labelrotation=20)
        figure.tight_layout()
        atomic_write(path, lambda f: figure.savefig(f, format=file_format(path), dpi=120))
    except WriteFailed:
        raise
    except Exception as error:  # a matplotlib failure after training: the other outputs are already written
        raise WriteFailed(f"could not draw {path} with matplotlib {matplotlib.__version__} "
                          f"({type(error).__name__}: {error}); the JSON and CSV outputs are written.") from None
    finally:
        plt.close(figure)


def draw_step_times(axis, document, modes):
    """Every timed step as a point, one colour per repeat, its median as a bar across it."""
    repeats = sorted({run["repeat"] for run in document["runs"]})
    for x, mode in enumerate(modes):
        for run in document["runs"]:
            if run["mode"] != mode or not run["step_times_ms"]:
                continue
            colour = REPEAT_COLOURS[repeats.index(run["repeat"]) % len(REPEAT_COLOURS)]
            times = run["step_times_ms"]
            offset = (repeats.index(run["repeat"]) + 0.5) / len(repeats) * 0.6 - 0.3
            spread = [offset + 0.12 * ((i * 0.618) % 1 - 0.5) for i in range(len(times))]
            axis.scatter([x + s for s in spread], times, s=6, alpha=0.5, color=colour, linewidths=0)
            axis.hlines(run["step_time_ms"]["median"], x + offset - 0.09, x + offset + 0.09, color="black")
    axis.set_xticks(range(len(modes)))
    axis.set_xticklabels(modes)
    axis.set_ylabel("step time (ms)")
    note = f"{len(repeats)} repeats, one colour each; " if len(repeats) > 1 else ""
    axis.set_title(f"every timed step ({note}black: median)", fontsize=10)
    medians = [row["median_step_ms"] for row in (document["comparison"][mode] for mode in modes)]
    if max(medians) > 10 * min(medians):  # keep every mode readable
        axis.set_yscale("log")
        axis.set_ylabel("step time (ms, log scale)")
    else:
        axis.set_ylim(bottom=0)
    axis.grid(axis="y", alpha=0.3)


def draw_speedups(axis, comparison, modes):
    speedups = [comparison[mode]["speedup_vs_fp32"] for mode in modes]
    if None in speedups:
        values = [comparison[mode]["images_per_sec"] for mode in modes]
        bars = axis.bar(modes, values, color="#1f77b4")
        axis.bar_label(bars, labels=[f"{value:.0f}" for value in values])
        axis.set_title("images/s (no fp32 run to compare with)", fontsize=10)
        axis.set_ylim(0, max(values) * 1.15)
        return
    intervals = [comparison[mode].get("speedup_ci95") or [value, value] for mode, value in zip(modes, speedups)]
    errors = [[value - low for value, (low, _) in zip(speedups, intervals)],
              [high - value for value, (_, high) in zip(speedups, intervals)]]
    bars = axis.bar(modes, speedups, yerr=errors, capsize=6,
                    color=["#888888" if mode == BASELINE else "#1f77b4" for mode in modes])
    labels = [f"{value:.2f}x" + (" n.s." if comparison[mode].get("speedup_significant") is False else "")
              for mode, value in zip(modes, speedups)]
    axis.bar_label(bars, labels=labels, padding=8)
    axis.axhline(1.0, color="grey", linewidth=0.8)
    axis.set_title("speedup vs fp32 (error bars: 95% CI; n.s.: holds 1.0)", fontsize=10)
    axis.set_ylim(0, max(high for _, high in intervals) * 1.2)


def draw_memory(axis, comparison, modes):
    values = [comparison[mode]["peak_memory_bytes"] / 2 ** 20 for mode in modes]
    ratios = [comparison[mode]["memory_ratio_vs_fp32"] for mode in modes]
    bars = axis.bar(modes, values, color=["#888888" if mode == BASELINE else "#2ca02c" for mode in modes])
    axis.bar_label(bars, labels=[f"{value:.0f} MiB" + (f"\n{ratio:.2f}x" if ratio is not None else "")
                                 for value, ratio in zip(values, ratios)])
    axis.set_ylabel("MiB")
    axis.set_title("peak memory (label: ratio to fp32)", fontsize=10)
    axis.set_ylim(0, max(values) * 1.25)


def draw_accuracy(axis, comparison, modes):
    accuracies = [comparison[mode]["test_accuracy"] for mode in modes]
    if all(value is None for value in accuracies):
        axis.text(0.5, 0.5, "no test accuracy\n(synthetic data, --no-eval or a cut run)", ha="center",
                  va="center", transform=axis.transAxes)
        axis.set_xticks([])
        axis.set_yticks([])
        axis.set_title("test accuracy", fontsize=10)
        return
    values = [100.0 * (value or 0.0) for value in accuracies]
    colours = ["#d62728" if comparison[mode].get("learned") is False else "#9467bd" for mode in modes]
    bars = axis.bar(modes, values, color=colours)
    axis.bar_label(bars, labels=["-" if value is None else f"{100 * value:.1f}%" +
                                 (" (did not learn)" if comparison[mode].get("learned") is False else "")
                                 for mode, value in zip(modes, accuracies)])
    axis.axhline(100 * CHANCE_ACCURACY, color="grey", linestyle="--", linewidth=0.8)
    axis.set_ylabel("test accuracy (%)")
    axis.set_title("test accuracy (dashed: chance, 10%)", fontsize=10)
    axis.set_ylim(0, max(max(values) * 1.2, 15))


def draw_time_by_category(axis, comparison, modes):
    """--explain: each mode's profiled step stacked by category, in ms (or in shares of the step
    when one mode is many times slower, which would flatten the others)."""
    totals = [sum(comparison[mode]["profile_ms"].values()) for mode in modes]
    as_shares = max(totals) > SHARES_ABOVE * min(totals)
    bottoms = [0.0] * len(modes)
    for name in CATEGORIES:
        values = [comparison[mode]["profile_ms"][name] for mode in modes]
        if not any(values):
            continue
        if as_shares:
            values = [100.0 * value / total for value, total in zip(values, totals)]
        axis.bar(modes, values, bottom=bottoms, color=CATEGORY_COLOURS[name], label=name, width=0.6)
        bottoms = [bottom + value for bottom, value in zip(bottoms, values)]
    for x, total in enumerate(totals):
        axis.text(x, bottoms[x], f"{total:.0f} ms" if total >= 10 else f"{total:.2f} ms", ha="center", va="bottom")
    axis.set_ylabel("share of the step (%)" if as_shares else "ms per step")
    axis.set_title("where the time goes (--explain)" + (": shares; labels: ms per step" if as_shares else ""),
                   fontsize=10)
    axis.set_ylim(0, max(bottoms) * 1.12)
    axis.legend(fontsize=8, loc="center left", bbox_to_anchor=(1.0, 0.5))


def draw_category_speedups(axis, comparison, modes):
    """--explain: each category's speedup against fp32, per mode (log scale; 1 = as fast)."""
    others = [mode for mode in modes if mode != BASELINE and comparison[mode].get("profile_speedup")]
    if not others:
        axis.text(0.5, 0.5, "no fp32 profile to compare with", ha="center", va="center", transform=axis.transAxes)
        axis.set_xticks([])
        axis.set_yticks([])
        return
    names = [name for name in CATEGORIES if all(name in comparison[mode]["profile_speedup"] for mode in others)
             and max(comparison[mode]["profile_ms"][name] / sum(comparison[mode]["profile_ms"].values())
                     for mode in modes) >= SHOWN_SHARE] + ["total"]
    height = 0.8 / len(others)
    for index, mode in enumerate(others):  # a stem from 1.0 (as fast) to each category's speedup
        values = [comparison[mode]["profile_speedup"][name] for name in names]
        rows = [y + index * height for y in range(len(names))]
        colour = REPEAT_COLOURS[index % len(REPEAT_COLOURS)]
        axis.hlines(rows, 1.0, values, color=colour, linewidth=3)
        axis.scatter(values, rows, color=colour, label=mode, zorder=3)
    axis.set_yticks([y + 0.4 - height / 2 for y in range(len(names))])
    axis.set_yticklabels(names)
    axis.invert_yaxis()
    axis.set_xscale("log")
    axis.axvline(1.0, color="grey", linewidth=0.8)
    axis.set_xlabel("times as fast as in fp32 (log scale)")
    axis.set_title("speed of each category against fp32 (--explain)", fontsize=10)
    axis.legend(fontsize=8)
