"""A picture of a comparison: step-time distributions per mode and the speedup over FP32.
matplotlib is optional: only --plot needs it."""
import os

from utils.compat import release
from utils.errors import UserError
from utils.fileio import atomic_write
from utils.results.record import setup_of

FORMATS = ("png", "pdf", "svg")


def check_available(path):
    """Before training: matplotlib is installed and the file's suffix names a format it writes."""
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        raise UserError("--plot needs matplotlib, which is not installed: pip install matplotlib") from None
    if file_format(path) not in FORMATS:
        raise UserError(f"--plot {path}: the file name must end in .png, .pdf or .svg, the format written.")


def file_format(path):
    return os.path.splitext(str(path))[1].lower().lstrip(".")


def draw(path, document):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    comparison = document["comparison"]
    modes = list(comparison)
    step_times = [[ms for run in document["runs"] if run["mode"] == mode for ms in run["step_times_ms"]]
                  for mode in modes]
    setup = setup_of(document)
    figure, (left, right) = plt.subplots(1, 2, figsize=(12, 4.8), gridspec_kw={"width_ratios": [3, 2]})
    figure.suptitle(f"{setup['model']}, batch {setup['batch_size']}, {setup['device']} "
                    f"({setup['data']} data, {setup['steps']} steps)", fontsize=12)

    labels = "tick_labels" if release(matplotlib.__version__) >= (3, 9) else "labels"  # renamed in 3.9
    left.boxplot(step_times, showfliers=True, whis=(10, 90), **{labels: modes})
    left.set_ylabel("step time (ms)")
    left.set_title("step time per mode (box: quartiles, whiskers: p10-p90)", fontsize=10)
    medians = [comparison[mode]["median_step_ms"] for mode in modes]
    if max(medians) > 10 * min(medians):  # keep every mode's box readable
        left.set_yscale("log")
        left.set_ylabel("step time (ms, log scale)")
    else:
        left.set_ylim(bottom=0)
    left.grid(axis="y", alpha=0.3)

    speedups = [comparison[mode]["speedup_vs_fp32"] for mode in modes]
    if all(value is not None for value in speedups):
        values, label, text = speedups, "speedup vs fp32 (ratio of median step times)", "{:.2f}x"
        right.axhline(1.0, color="grey", linewidth=0.8)
    else:
        values, label, text = [comparison[m]["images_per_sec"] for m in modes], "images/s (no fp32 run)", "{:.0f}"
    bars = right.bar(modes, values, color=["#888888" if m == "fp32" else "#1f77b4" for m in modes])
    right.bar_label(bars, labels=[text.format(v) for v in values])
    right.set_title(label, fontsize=10)
    right.set_ylim(0, max(values) * 1.15)
    for axis in (left, right):
        axis.tick_params(axis="x", labelrotation=20)
    figure.tight_layout()
    atomic_write(path, lambda f: figure.savefig(f, format=file_format(path), dpi=120))
    plt.close(figure)
