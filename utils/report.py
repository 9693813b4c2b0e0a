"""Results: the summary table printed at the end, and the JSON document written with --json."""
import json

from utils.fileio import atomic_write

SCHEMA = "ampbench.result/1"


def human_bytes(count):
    for unit in ("B", "KiB", "MiB", "GiB"):
        if count < 1024 or unit == "GiB":
            return f"{count:.0f} {unit}" if unit == "B" else f"{count:.1f} {unit}"
        count /= 1024


def format_table(header, rows):
    widths = [max(len(str(cell)) for cell in column) for column in zip(header, *rows)]
    lines = ["  ".join(str(cell).rjust(width) for cell, width in zip(row, widths)) for row in [header] + rows]
    lines.insert(1, "  ".join("-" * width for width in widths))
    return "\n".join(lines)


def describe_setup(document):
    env, config = document["env"], document["config"]
    run = document["runs"][0]
    return (f"{config['model']} (stem {config['stem']}), batch {config['batch_size']}, "
            f"{config['steps']} steps ({config['warmup']} warm-up), data {run['data']} | "
            f"{env['device']} | torch {env['torch']}")


def summary_table(document):
    """A compact table, one row per run."""
    header = ["mode", "TF32", "median ms", "p10-p90 ms", "img/s", "data ms", "peak mem", "final loss",
              "test acc", "skipped", "loss scale"]
    rows = []
    for run in document["runs"]:
        step = run["step_time_ms"]
        accuracy = run["test_accuracy"]
        scale = run["final_loss_scale"]
        rows.append([run["mode"], "on" if run["tf32"]["cudnn_conv"] else "off", f"{step['median']:.2f}", f"{step['p10']:.2f}-{step['p90']:.2f}",
                     f"{run['images_per_sec']:.0f}", f"{run['data_time_ms']['median']:.2f}",
                     human_bytes(run["peak_memory_bytes"]), f"{run['final_loss']:.4f}",
                     "-" if accuracy is None else f"{100 * accuracy:.2f}%", run["skipped_steps"],
                     "-" if scale is None else f"{scale:g}"])
    return describe_setup(document) + "\n" + format_table(header, rows)


def write_json(path, document):
    atomic_write(path, lambda f: f.write(json.dumps(document, indent=2).encode() + b"\n"))
