"""Results people read and keep: the comparison table, the JSON document, CSV rows, and the
merging of result files from several jobs (the command for that is utils/report.py)."""
import csv
import fcntl
import io
import json
import os

from utils.errors import UserError, WriteFailed
from utils.fileio import atomic_write
from utils.results.compare import compare_modes
from utils.results.record import REQUIRED_RUN_FIELDS, SCHEMA, setup_of
CSV_COLUMNS = ["timestamp_utc", "hostname", "device", "model", "stem", "batch_size", "world_size", "steps", "data",
               "mode",
               "runs", "median_step_ms", "p90_step_ms", "spread_pct", "images_per_sec", "speedup_vs_fp32",
               "peak_memory_bytes", "memory_ratio_vs_fp32", "final_loss", "test_accuracy",
               "accuracy_delta_vs_fp32", "skipped_steps", "final_loss_scale", "tflops", "mfu_pct", "git_commit"]


def human_bytes(count):
    for unit in ("B", "KiB", "MiB", "GiB"):
        if count < 1024 or unit == "GiB":
            return f"{count:.0f} {unit}" if unit == "B" else f"{count:.1f} {unit}"
        count /= 1024


def fmt(value, spec, scale=1.0, suffix=""):
    return "-" if value is None else f"{value * scale:{spec}}{suffix}"


def format_table(header, rows):
    widths = [max(len(str(cell)) for cell in column) for column in zip(header, *rows)]
    lines = ["  ".join(str(cell).rjust(width) for cell, width in zip(row, widths)) for row in [header] + rows]
    lines.insert(1, "  ".join("-" * width for width in widths))
    return "\n".join(lines)


def describe(setup, env):
    ranks = setup["world_size"]
    batch = f"batch {setup['batch_size']}" + (f" per process x {ranks} processes" if ranks > 1 else "")
    levers = [f"accum {setup['accum_steps']}" if (setup.get("accum_steps") or 1) > 1 else None,
              "channels_last" if setup.get("channels_last") else None,
              f"compile ({setup.get('compile_mode') or 'default'})" if setup.get("compile") else None,
              f"loader torchvision ({setup.get('workers')} workers)" if setup.get("loader") == "torchvision" else None]
    levers = "".join(f", {lever}" for lever in levers if lever)
    return (f"{setup['model']} (stem {setup['stem']}), {batch}{levers}, {setup['steps']} steps "
            f"({setup['warmup']} warm-up), data {setup['data']} | {setup['device']} | torch {env['torch']}"
            f" | TF32 off except in mode tf32")


def comparison_table(comparison):
    header = ["mode", "median ms", "p90 ms", "spread", "img/s", "speedup", "data ms", "peak mem", "mem ratio",
              "final loss", "test acc", "acc diff", "skipped", "loss scale", "TFLOP/s", "MFU"]
    rows = [[mode, fmt(row["median_step_ms"], ".2f"), fmt(row["p90_step_ms"], ".2f"),
             fmt(row["spread_pct"], ".1f", suffix="%") if row["runs"] > 1 else "-",
             fmt(row["images_per_sec"], ".0f"), fmt(row["speedup_vs_fp32"], ".2f", suffix="x"),
             fmt(row["data_time_ms"], ".2f"), human_bytes(row["peak_memory_bytes"]),
             fmt(row["memory_ratio_vs_fp32"], ".2f"), fmt(row["final_loss"], ".4f"),
             fmt(row["test_accuracy"], ".2f", 100, "%"), fmt(row["accuracy_delta_vs_fp32"], "+.2f", 100, " pt"),
             row["skipped_steps"], fmt(row["final_loss_scale"], "g"), fmt(row["tflops"], ".3g"),
             fmt(row["mfu_pct"], ".1f", suffix="%")] for mode, row in comparison.items()]
    return format_table(header, rows)


def summary(document):
    """The text printed at the end of a run: setup line, then one row per mode."""
    lines = [describe(setup_of(document), document["env"]), comparison_table(document["comparison"])]
    notes = {run["mfu_note"] for run in document["runs"] if run.get("mfu_note")}
    if notes:
        lines.append("MFU not shown: " + "; ".join(sorted(notes)) + ".")
    if len(document["comparison"]) > 1 and "fp32" not in document["comparison"]:
        lines.append("No fp32 run: speedup, memory ratio and accuracy difference need one (--modes fp32,...).")
    return "\n".join(lines)


def write_json(path, content):
    atomic_write(path, lambda f: f.write(json.dumps(content, indent=2).encode() + b"\n"))


def csv_rows(document):
    setup, env = setup_of(document), document["env"]
    for mode, row in document["comparison"].items():
        values = {**setup, **row, "mode": mode, "timestamp_utc": env["timestamp_utc"],
                  "hostname": env["hostname"], "git_commit": env["git_commit"]}
        yield [values.get(column) for column in CSV_COLUMNS]


def append_csv(path, document):
    """Append one row per mode, all or nothing: under an exclusive lock (concurrent batch jobs
    may share the file) the old rows plus the new ones are written to a temporary file that
    replaces it, so a full disk or a crash leaves the old file whole. The header is written
    when the file is new or empty, decided under the lock."""
    shown, path = path, os.path.realpath(path)
    lock_path = os.path.join(os.path.dirname(path), f".{os.path.basename(path)}.lock")
    try:
        lock = open(lock_path, "a")
    except OSError as error:
        raise WriteFailed(f"could not lock {shown} for appending ({error.strerror or error}); "
                          "the file is kept as it was.") from None
    with lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            with open(path, "rb") as f:
                old = f.read()
        except FileNotFoundError:
            old = b""
        except OSError as error:
            raise WriteFailed(f"could not read {shown} to append to it ({error.strerror or error}); "
                              "the file is kept as it was.") from None
        buffer = io.StringIO()
        writer = csv.writer(buffer)
        if not old:
            writer.writerow(CSV_COLUMNS)
        writer.writerows(csv_rows(document))
        atomic_write(path, lambda f: f.write(old + buffer.getvalue().encode("utf-8")))


def check_csv_header(path):
    """Refuse, before training, to append to a file that is not a CSV of ours (other columns,
    not UTF-8 text, unreadable)."""
    if not (os.path.isfile(path) and os.path.getsize(path) > 0):
        return
    try:
        with open(path, "rb") as f:
            first_line = f.readline(1 << 16).decode("utf-8")
        header = next(csv.reader([first_line]), [])
    except (OSError, UnicodeDecodeError, csv.Error) as error:
        reason = error.strerror if isinstance(error, OSError) else "it is not UTF-8 CSV text"
        raise UserError(f"--csv {path} cannot be appended to ({reason}); give a new file name.") from None
    if header != CSV_COLUMNS:
        raise UserError(f"--csv {path} has other columns than ampbench writes; give a new file name.")


def load_result(path):
    try:
        with open(path) as f:
            document = json.load(f)
    except (OSError, ValueError) as error:
        raise UserError(f"cannot read result file {path} ({error}).") from None
    runs = document.get("runs") if isinstance(document, dict) else None
    if not isinstance(runs, list) or not runs or document.get("schema") != SCHEMA or \
            not all(isinstance(run, dict) and set(REQUIRED_RUN_FIELDS) <= set(run) for run in runs):
        raise UserError(f"{path} is not an ampbench result file (schema {SCHEMA}).")
    return document


def setup_differences(documents):
    """For each of several merged documents, the setup fields that are not the same in all of
    them, as "name value" text: what tells their tables apart."""
    setups = [setup_of(document) for document in documents]
    varying = [key for key in setups[0] if len({json.dumps(setup.get(key)) for setup in setups}) > 1]
    return [", ".join(f"{key} {setup.get(key)}" for key in varying) for setup in setups]


def merge(documents):
    """Pool the runs of several result files into one document per setup (record.setup_of:
    everything but the precision mode), with a comparison across all of them: e.g. the FP32 and
    the AMP job of a batch submission become one table with speedups, while a channels_last
    run and a plain one stay two tables."""
    groups = {}
    for document in documents:
        key = json.dumps(setup_of(document), sort_keys=True)
        if key not in groups:
            groups[key] = {**document, "runs": [], "sources": []}
        groups[key]["runs"] += document["runs"]
        groups[key]["sources"].append(document["env"]["hostname"] + " " + document["env"]["timestamp_utc"])
    merged = list(groups.values())
    for document in merged:
        document["comparison"] = compare_modes(document["runs"])
    return merged
