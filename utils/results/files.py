"""The files a results document is kept in: the JSON document and the CSV rows, one per mode,
appended to a file that several jobs may share."""
from __future__ import annotations

import csv
import fcntl
import hashlib
import io
import json
import os
from typing import Any, Dict, Iterator, List, Sequence, Set, Union

from utils import fileio
from utils.config import ACCURACY_KEYS, SETUP_KEYS
from utils.errors import UserError, WriteFailed
from utils.fileio import atomic_write
from utils.results import strict
from utils.results.record import setup_of

# The columns a reader filters on first (the setup), then the figures; run_id tells rows apart,
# so that appending the same runs again (a merge repeated) adds nothing. Columns added later go
# at the end, so that a reader of the earlier ones finds each at its old position: these are the
# published ones, in their order, and a setting that changes the numbers (config.SETUP_KEYS,
# ACCURACY_KEYS) and is not among them is a column after them.
PUBLISHED_COLUMNS = [
    "run_id", "schema", "timestamp_utc", "hostname", "device", "torch", "world_size", "data", "model", "stem",
    "image_size", "batch_size", "accum_steps", "steps", "warmup", "loader", "channels_last", "compile", "optimizer",
    "optimizer_impl", "lr", "lr_schedule", "warmup_lr_steps", "momentum", "weight_decay", "label_smoothing",
    "clip_grad", "grad_comm", "bucket_mb", "workers", "compile_mode", "accuracy_margin", "eval_every", "tf32", "mode",
    "runs", "median_step_ms", "p90_step_ms", "spread_pct", "images_per_sec", "baseline", "speedup_vs_baseline",
    "speedup_ci95_low", "speedup_ci95_high", "speedup_significant", "peak_memory_bytes", "memory_ratio_vs_baseline",
    "memory_ratio_ci95_low", "memory_ratio_ci95_high", "final_loss", "test_accuracy", "accuracy_delta_vs_baseline",
    "learned", "seeds", "accuracy_mean", "accuracy_delta_ci95_low", "accuracy_delta_ci95_high", "accuracy_verdict",
    "target_accuracy", "target_reached_share", "time_to_target_s", "epochs_to_target",
    "time_to_target_speedup_vs_baseline", "skipped_steps", "final_loss_scale", "tflops", "mfu_pct", "git_commit",
    "joules_per_image", "energy_ratio_vs_baseline", "energy_ratio_ci95_low", "energy_ratio_ci95_high"]
CSV_COLUMNS = PUBLISHED_COLUMNS + [key for key in (*SETUP_KEYS, *ACCURACY_KEYS) if key not in PUBLISHED_COLUMNS]


def json_document(document: Dict[str, Any]) -> Dict[str, Any]:
    """A results document as its file holds it: each comparison row turned into its dict."""
    return {**document, "comparison": {mode: row.to_dict() for mode, row in document["comparison"].items()}}


def json_text(content: Union[Dict[str, Any], List[Dict[str, Any]]]) -> bytes:
    """`content` as ampbench writes a JSON file: strict (no NaN: strict.finite_copy), indented."""
    return json.dumps(strict.finite_copy(content), indent=2, allow_nan=False).encode() + b"\n"


def write_json(path: str, content: Union[Dict[str, Any], List[Dict[str, Any]]]) -> None:
    atomic_write(path, lambda f: f.write(json_text(content)))


def run_key(run: Dict[str, Any]) -> str:
    """What tells one run from every other: its mode, repeat, end time and measured steps."""
    return json.dumps([run["mode"], run.get("repeat", 0), run["finished_utc"], run["initial_weights_sha256"],
                       run["step_times_ms"]])


def run_id(runs: Sequence[Dict[str, Any]], baseline: str) -> str:
    """A row's stable id: the same runs compared with the same baseline give the same id, in
    whichever file they are merged."""
    keys = sorted(run_key(run) for run in runs) + [json.dumps({"baseline": baseline})]
    return hashlib.sha256("\n".join(keys).encode()).hexdigest()[:16]


def csv_rows(document: Dict[str, Any]) -> Iterator[List[Any]]:
    setup, env, baseline = setup_of(document), document["env"], document["config"]["baseline"]
    for mode, row in document["comparison"].items():
        runs = [run for run in document["runs"] if run["mode"] == mode and run["step_time_ms"] is not None]
        speedup_ci, memory_ci = row.speedup_ci95 or [None, None], row.memory_ratio_ci95 or [None, None]
        accuracy_ci, energy_ci = row.accuracy_delta_ci95 or [None, None], row.energy_ratio_ci95 or [None, None]
        values = {**setup, **row.to_dict(), "mode": mode, "run_id": run_id(runs, baseline), "baseline": baseline,
                  "timestamp_utc": max(run["finished_utc"] for run in runs),
                  "hostname": env["hostname"], "git_commit": env["git_commit"],
                  "tf32": any(any(run["tf32"].values()) for run in runs),
                  "speedup_ci95_low": speedup_ci[0], "speedup_ci95_high": speedup_ci[1],
                  "memory_ratio_ci95_low": memory_ci[0], "memory_ratio_ci95_high": memory_ci[1],
                  "accuracy_delta_ci95_low": accuracy_ci[0], "accuracy_delta_ci95_high": accuracy_ci[1],
                  "energy_ratio_ci95_low": energy_ci[0], "energy_ratio_ci95_high": energy_ci[1]}
        yield [safe_cell(values.get(column)) for column in CSV_COLUMNS]


FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")


def safe_cell(value: Any) -> Any:
    """A CSV cell that a spreadsheet never runs as a formula: text that starts with = + - @, a
    tab or a carriage return gets a leading apostrophe (numbers, negative ones too, stay numbers)."""
    return "'" + value if isinstance(value, str) and value.startswith(FORMULA_STARTS) else value


def append_csv(path: str, document: Dict[str, Any]) -> int:
    """Append one row per mode, all or nothing, and return how many rows were new: a row whose
    run_id the file already holds is not appended again. Under an exclusive lock (concurrent
    batch jobs may share the file) the old rows plus the new ones are written to a temporary
    file that replaces it, so a full disk or a crash leaves the old file whole. The header is
    written when the file is new or empty, decided under the lock."""
    given, path = path, os.path.realpath(path)
    try:
        os.makedirs(os.path.dirname(path), exist_ok=True)
        lock = open(fileio.lock_path(path), "a")
    except OSError as error:
        raise WriteFailed(f"could not lock {given} for appending ({error.strerror or error}); "
                          "the file is kept as it was.") from None
    with lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            with open(path, "rb") as f:
                old = f.read()
        except FileNotFoundError:
            old = b""
        except OSError as error:
            raise WriteFailed(f"could not read {given} to append to it ({error.strerror or error}); "
                              "the file is kept as it was.") from None
        present = csv_run_ids(old, given) if old else set()
        rows = [row for row in csv_rows(document) if row[0] not in present]
        buffer = io.StringIO()
        writer = csv.writer(buffer)
        if not old:
            writer.writerow(CSV_COLUMNS)
        writer.writerows(rows)
        if rows:
            atomic_write(path, lambda f: f.write(old + buffer.getvalue().encode("utf-8")))
        return len(rows)


def check_csv_header(path: str) -> None:
    """Refuse, before training or reading anything, to append to a file that is not a CSV of
    ours: unreadable, not UTF-8 text, other columns, or a row of another length."""
    if not (os.path.isfile(path) and os.path.getsize(path) > 0):
        return
    try:
        with open(path, "rb") as f:
            csv_run_ids(f.read(), path)
    except OSError as error:
        raise UserError(f"--csv {path} cannot be appended to ({error.strerror or error}); "
                        "give a new file name.") from None


def csv_run_ids(content: bytes, path: str) -> Set[str]:
    """The run_id of every row of our CSV file's `content` (bytes); UserError if it is not one."""
    try:
        rows = [row for row in csv.reader(io.StringIO(content.decode("utf-8"), newline="")) if row]
    except (UnicodeDecodeError, csv.Error):
        raise UserError(f"--csv {path} cannot be appended to (it is not UTF-8 CSV text); give a new file name.") \
            from None
    if not rows or rows[0] != CSV_COLUMNS:
        raise UserError(f"--csv {path} has other columns than ampbench writes; give a new file name.")
    short = next((number for number, row in enumerate(rows, 1) if len(row) != len(CSV_COLUMNS)), None)
    if short:
        raise UserError(f"--csv {path}: row {short} has {len(rows[short - 1])} cells, not the header's "
                        f"{len(CSV_COLUMNS)}; give a new file name.")
    return {row[0] for row in rows[1:]}
