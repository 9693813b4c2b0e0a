"""The run as it happens: one JSON line per phase, per log interval and per finished run
(--jsonl, as NVIDIA's dllogger streams), and TensorBoard scalars written while training
(--tensorboard). A run killed by SIGKILL or the OOM killer leaves everything up to its last
interval. Rank 0 alone writes; nothing here waits for the GPU: the progress display hands over
host numbers whose copies have already arrived.

TensorBoard: DIR/<model>-b<batch>-<start time>/<run> per run (mode, and seed or repeat when
there are several), every scalar against the optimizer step: train/loss and train/lr for
every step, train/loss_scale at each interval, eval/test_accuracy at each evaluation, then
after the run time/step_ms and time/images_per_sec for each timed step (CUDA events, known
only after the loop) and the run's hparams in its own folder.
"""
import datetime
import json
import os

from utils.clock import now_utc
from utils.errors import UserError, WriteFailed
from utils.fileio import ensure_folder_writable
from utils.results import strict


def check_tensorboard(directory):
    """Before training: the tensorboard package is there and DIR can be a folder."""
    try:
        from torch.utils.tensorboard import SummaryWriter  # noqa: F401  (it imports the tensorboard package)
    except ImportError:
        raise UserError("--tensorboard needs the tensorboard package, which is not installed: "
                        "pip install tensorboard") from None
    ensure_folder_writable(directory, "--tensorboard")


class LiveLog:
    @classmethod
    def of(cls, config):
        """The live log of --jsonl and --tensorboard, or None without them."""
        if not (config.jsonl or config.tensorboard):
            return None
        started = datetime.datetime.now(datetime.timezone.utc).strftime("%Y%m%dT%H%M%S")
        return cls(config.jsonl, config.tensorboard, f"{config.model}-b{config.batch_size}-{started}")

    def __init__(self, jsonl_path, tensorboard_dir, folder_name):
        self.jsonl_path, self.jsonl = jsonl_path, None  # opened at the first line: by then it is proven writable
        self.tensorboard = unused(os.path.join(tensorboard_dir, folder_name)) if tensorboard_dir else None
        self.writer = self.run = self.first_run = None
        self.failed = None  # the first write that failed: the run goes on, the exit status says so

    def emit(self, event, **fields):
        if self.jsonl_path is None or self.failed:
            return
        stamped = {"event": event, "time": now_utc("milliseconds"), **fields}
        line = json.dumps(strict.finite_copy(stamped), allow_nan=False)
        try:
            if self.jsonl is None:
                os.makedirs(os.path.dirname(os.path.realpath(self.jsonl_path)), exist_ok=True)
                self.jsonl = open(self.jsonl_path, "a", encoding="utf-8")
            self.jsonl.write(line + "\n")  # one write per line: a reader never sees half of one
            self.jsonl.flush()
        except OSError as error:
            self.failed = f"could not append to --jsonl {self.jsonl_path} ({error.strerror or error})"

    def phase(self, text):
        self.emit("phase", text=text)

    def begin_run(self, run):
        """The run whose scalars follow: its name is its TensorBoard folder."""
        self.run = run
        self.first_run = self.first_run or run
        if self.tensorboard:
            from torch.utils.tensorboard import SummaryWriter
            self.writer = SummaryWriter(os.path.join(self.tensorboard, run))

    def train(self, first_step, losses, lrs, scale, host_step_ms, images_per_sec):
        """Steps first_step.. with their losses and learning rates, the loss scale after the last."""
        last = first_step + len(losses) - 1
        self.emit("train", run=self.run, step=last, loss=losses[-1], lr=lrs[-1], loss_scale=scale,
                  host_step_ms_median=host_step_ms, images_per_sec=images_per_sec)
        if self.writer is not None:
            for step, (loss, lr) in enumerate(zip(losses, lrs), first_step):
                self.writer.add_scalar("train/loss", loss, step)
                self.writer.add_scalar("train/lr", lr, step)
            if scale is not None:
                self.writer.add_scalar("train/loss_scale", scale, last)
            self.writer.flush()

    def evaluation(self, step, accuracy):
        self.emit("eval", run=self.run, step=step, accuracy=accuracy)
        if self.writer is not None:
            self.writer.add_scalar("eval/test_accuracy", accuracy, step)
            self.writer.flush()

    def end_run(self, run, setup):
        """After the run (a RunRecord's dict): its exact step times (timed steps, against their
        optimizer step), its headline figures as hparams, and a line that closes it."""
        self.emit("run", run=self.run, mode=run["mode"], completed_steps=run["completed_steps"],
                  incomplete=run["incomplete"], median_step_ms=(run["step_time_ms"] or {}).get("median"),
                  images_per_sec=run["images_per_sec"], peak_memory_bytes=run["peak_memory_bytes"],
                  test_accuracy=run["test_accuracy"])
        if self.writer is None:
            return
        first = run["completed_steps"] - len(run["step_times_ms"]) + 1  # the timed steps end the run
        for step, ms in enumerate(run["step_times_ms"], first):
            self.writer.add_scalar("time/step_ms", ms, step)
            self.writer.add_scalar("time/images_per_sec", run["global_batch_size"] * 1000.0 / ms, step)
        metrics = {"hparam/median_step_ms": (run["step_time_ms"] or {}).get("median"),
                   "hparam/images_per_sec": run["images_per_sec"],
                   "hparam/peak_memory_gib": run["peak_memory_bytes"] / 2 ** 30,
                   "hparam/test_accuracy": run["test_accuracy"]}
        hparams = {key: value if isinstance(value, (int, float, str, bool)) else str(value)
                   for key, value in {**setup, "mode": run["mode"]}.items()}
        self.writer.add_hparams(hparams, {key: value for key, value in metrics.items() if value is not None},
                                run_name=".")  # in the run's own folder: no extra run in TensorBoard's list
        self.close_writer()

    def comparison(self, text):
        """The printed table, as text in the first run's folder."""
        if self.tensorboard and self.first_run:
            from torch.utils.tensorboard import SummaryWriter
            with SummaryWriter(os.path.join(self.tensorboard, self.first_run)) as writer:
                writer.add_text("comparison", "\n".join("    " + line for line in text.splitlines()))

    def close_writer(self):
        if self.writer is not None:
            self.writer.close()
            self.writer = None

    def close(self):
        """Close the streams; raise WriteFailed if a write failed on the way."""
        self.close_writer()
        if self.jsonl is not None:
            self.jsonl.close()
        if self.failed:
            raise WriteFailed(f"{self.failed}; the lines before it are whole.")


def unused(path):
    """`path`, or `path`-2, -3, ... when a run of the same second is already there."""
    candidate, number = path, 1
    while os.path.exists(candidate):
        number += 1
        candidate = f"{path}-{number}"
    return candidate
