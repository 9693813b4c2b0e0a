"""--tensorboard DIR: every run's curves as TensorBoard scalars, and the comparison as text and
hparams, written after training (never from the timed loop). The tensorboard package is
optional, like matplotlib: only this flag needs it, and it is checked before training.

Each invocation writes one folder, DIR/<model>-b<batch>-<time>, with a subfolder per run
(mode, and repeat when there are several), so that reruns never mix their curves; it is
written under a temporary name and renamed into place, all or nothing.
"""
import os
import re
import shutil
import tempfile

from utils.errors import UserError, WriteFailed
from utils.fileio import ensure_folder_writable
from utils.results.record import setup_of


def check_available(directory):
    """Before training: the tensorboard package is there and DIR can be a folder."""
    try:
        from torch.utils.tensorboard import SummaryWriter  # noqa: F401  (it imports the tensorboard package)
    except ImportError:
        raise UserError("--tensorboard needs the tensorboard package, which is not installed: "
                        "pip install tensorboard") from None
    ensure_folder_writable(directory, "--tensorboard")


def folder_name(document):
    setup = setup_of(document)
    stamp = re.sub(r"[^0-9T]", "", document["env"]["timestamp_utc"])[:15]  # 20261123T003000
    return f"{setup['model']}-b{setup['batch_size']}-{stamp}"


def unused(path):
    """`path`, or `path`-2, -3, ... when a run of the same second is already there."""
    candidate, number = path, 1
    while os.path.exists(candidate):
        number += 1
        candidate = f"{path}-{number}"
    return candidate


def write(directory, document):
    """Write `document` under `directory`; returns the folder written."""
    from torch.utils.tensorboard import SummaryWriter

    final = os.path.join(directory, folder_name(document))
    try:
        os.makedirs(directory, exist_ok=True)
        staging = tempfile.mkdtemp(prefix=".tensorboard-", dir=directory)
    except OSError as error:
        raise WriteFailed(f"could not write --tensorboard {directory} ({error.strerror or error}).") from None
    try:
        repeats = len({run["repeat"] for run in document["runs"]}) > 1
        seeds = len({run.get("seed") for run in document["runs"]}) > 1
        for run in document["runs"]:
            name = run["mode"] + (f"-seed{run['seed']}" if seeds else "") + (f"-repeat{run['repeat']}" if repeats else "")
            with SummaryWriter(os.path.join(staging, name)) as writer:
                write_run(writer, run)
        with SummaryWriter(staging) as writer:
            write_comparison(writer, document)
        final = unused(final)
        os.rename(staging, final)
    except OSError as error:
        shutil.rmtree(staging, ignore_errors=True)
        raise WriteFailed(f"could not write --tensorboard {directory} ({error.strerror or error}); nothing of "
                          "this run was left there.") from None
    return final


def write_run(writer, run):
    """Per step: loss, lr, loss scale; per timed step: step ms and img/s; the test accuracy."""
    for name, curve in (("train/loss", run["loss_curve"]), ("train/lr", run.get("lr_curve") or []),
                        ("train/loss_scale", run.get("loss_scale_curve") or [])):
        for step, value in enumerate(curve, 1):
            writer.add_scalar(name, value, step)
    for index, ms in enumerate(run["step_times_ms"], 1):  # x: the timed step (warm-up steps excluded)
        writer.add_scalar("time/step_ms", ms, index)
        writer.add_scalar("time/images_per_sec", run["global_batch_size"] * 1000.0 / ms, index)
    for point in run.get("accuracy_curve") or []:  # --eval-every's points and the last
        writer.add_scalar("eval/test_accuracy", point["accuracy"], point["step"])
    if run["test_accuracy"] is not None and not run.get("accuracy_curve"):
        writer.add_scalar("eval/test_accuracy", run["test_accuracy"], run["completed_steps"])


def write_comparison(writer, document):
    """The printed table as text, and per mode its setup and headline figures as hparams."""
    from utils.results.report import summary

    writer.add_text("comparison", "\n".join("    " + line for line in summary(document, wide=True).splitlines()))
    setup = {key: value if isinstance(value, (int, float, str, bool)) else str(value)
             for key, value in setup_of(document).items()}
    for mode, row in document["comparison"].items():
        metrics = {"hparam/median_step_ms": row["median_step_ms"], "hparam/images_per_sec": row["images_per_sec"],
                   "hparam/peak_memory_gib": row["peak_memory_bytes"] / 2 ** 30}
        for key in ("speedup_vs_fp32", "memory_ratio_vs_fp32", "test_accuracy"):
            if row[key] is not None:
                metrics[f"hparam/{key}"] = row[key]
        writer.add_hparams({**setup, "mode": mode}, metrics, run_name=f"hparams-{mode}")
