"""The run as it happens: one JSON line per phase, per log interval and per finished run
(--jsonl, as NVIDIA's dllogger streams), and TensorBoard scalars written while training
(--tensorboard). A run killed by SIGKILL or the OOM killer leaves everything up to its last
interval. Rank 0 alone writes; nothing here waits for the GPU: the progress display hands over
host numbers whose copies have already arrived.

TensorBoard: DIR/<model>-b<batch>-<start time>/<run> per run (mode, and seed or repeat when
there are several), every scalar against the optimizer step: train/loss and train/lr for
every step, train/loss_scale at each interval, eval/test_accuracy at each evaluation, then
after the run time/step_ms and time/images_per_sec for each timed step (CUDA events, known
only after the loop) and the run's hparams in its own folder. Logs found deleted during the
run are written anew, as the --jsonl file is.
"""
from __future__ import annotations

import datetime
import errno
import json
import os
import threading
from typing import TYPE_CHECKING, Any, Callable, Dict, List, Optional, Sequence, Tuple

from utils.clock import now_utc
from utils.errors import UserError, WriteFailed
from utils.fileio import ensure_folder_writable
from utils.results import strict

if TYPE_CHECKING:  # annotations only: the config is above this layer; tensorboard is optional
    from torch.utils.tensorboard import SummaryWriter

    from utils.config import Measurement, Training


def check_tensorboard(directory: str) -> None:
    """Before training: the tensorboard package is there and DIR can be a folder."""
    try:
        from torch.utils.tensorboard import SummaryWriter  # noqa: F401  (it imports the tensorboard package)
    except ImportError:
        raise UserError("--tensorboard needs the tensorboard package, which is not installed: "
                        "pip install tensorboard") from None
    ensure_folder_writable(directory, "--tensorboard")


class LiveLog:
    @classmethod
    def of(cls, measurement: Measurement, training: Training,
           warn: Optional[Callable[[str], None]] = None) -> Optional[LiveLog]:
        """The live log of --jsonl and --tensorboard, or None without them, its folder named after
        the model and batch `training` holds; `warn(sentence)` says once, when it happens, that a
        stream stopped."""
        if not (measurement.jsonl or measurement.tensorboard):
            return None
        started = datetime.datetime.now(datetime.timezone.utc).strftime("%Y%m%dT%H%M%S")
        return cls(measurement.jsonl, measurement.tensorboard, f"{training.model}-b{training.batch_size}-{started}",
                   warn)

    def __init__(self, jsonl_path: Optional[str], tensorboard_dir: Optional[str], folder_name: str,
                 warn: Optional[Callable[[str], None]] = None):
        self.jsonl_path = jsonl_path
        self.jsonl: Optional[int] = None  # opened at the first line: by then it is proven writable
        # this invocation's folder: its name until the first run makes it (after the outputs
        # were checked), then the folder made, with a suffix when a run of the same second took the name
        self.tensorboard = os.path.join(tensorboard_dir, folder_name) if tensorboard_dir else None
        self.board_made = False
        self.writer: Optional[SummaryWriter] = None
        self.run: Optional[str] = None
        self.first_run: Optional[str] = None
        self.run_folders: List[str] = []  # every run's TensorBoard folder so far
        self.warn = warn or (lambda sentence: None)
        self.failed: Optional[str] = None  # the first jsonl write that failed: the run goes on, the exit status says so
        self.board_failed: Optional[str] = None  # the same for TensorBoard, whose logs end there
        self.recreated: Optional[str] = None  # when --jsonl was found deleted and written anew
        # (when, what) TensorBoard logs were first found deleted and written anew
        self.board_recreated: Optional[Tuple[str, str]] = None
        if self.tensorboard:
            quiet_writer_threads()

    def emit(self, event: str, **fields: Any) -> None:
        if self.jsonl_path is None or self.failed:
            return
        stamped = {"event": event, "time": now_utc("milliseconds"), **fields}
        line = json.dumps(strict.finite_copy(stamped), allow_nan=False)
        try:
            self.append((line + "\n").encode("utf-8"))
        except OSError as error:
            self.failed = f"could not append to --jsonl {self.jsonl_path} ({error.strerror or error})"
            self.warn(f"{self.failed}; its later lines are lost. Training goes on; the results are still written.")

    def append(self, data: bytes) -> None:
        """One write per line, so that a reader never sees half of one: a line the disk cut short
        is taken back. A file found deleted (or replaced) is opened anew at its path, and a file
        that does not end its last line gets the newline first."""
        path = self.jsonl_path
        assert path is not None  # emit() appends only with --jsonl
        if self.jsonl is not None and not same_file(path, self.jsonl):
            os.close(self.jsonl)
            self.jsonl, self.recreated = None, self.recreated or now_utc("seconds")
        if self.jsonl is None:
            os.makedirs(os.path.dirname(os.path.realpath(path)), exist_ok=True)
            self.jsonl = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o666)
            data = (b"" if ends_its_lines(path) else b"\n") + data
        size = os.fstat(self.jsonl).st_size
        try:
            if os.write(self.jsonl, data) != len(data):
                raise OSError(errno.ENOSPC, "the disk took only part of a line")
        except OSError:
            try:
                os.ftruncate(self.jsonl, size)
            except OSError:
                pass  # the file keeps the part: the failure is still reported
            raise

    def phase(self, text: str) -> None:
        self.emit("phase", text=text)

    def board(self, write: Callable[[], object]) -> None:
        """Call write() on the TensorBoard logs until one fails (a full disk, a folder that cannot
        be made): then the logs end, with a warning now and a closing sentence at the end. Logs
        found deleted (the folder, a run's folder, the open event file) are written anew, and a
        write that failed because they went while it wrote is made once more in the new file."""
        if self.board_failed:
            return
        try:
            self.reopen_if_deleted()
            try:
                write()
            except Exception:
                if not self.reopen_if_deleted():
                    raise
                write()
        except Exception as error:  # whatever the writer (or its thread, re-raised here) met
            reason = getattr(error, "strerror", None) or (str(error).splitlines() or [type(error).__name__])[0]
            self.board_failed = f"could not write --tensorboard {self.tensorboard} ({reason})"
            self.warn(f"{self.board_failed}; its logs end here. Training goes on; the results are still written.")
            self.writer = None

    def reopen_if_deleted(self) -> bool:
        """Note the first of the logs found deleted, and give the open writer a new event file
        (its folders made again) when its own went: True when it did."""
        assert self.tensorboard is not None  # board() writes only with --tensorboard
        written = [self.tensorboard] + self.run_folders if self.board_made else []
        if self.writer is not None:
            written.append(event_file(self.writer))
        gone = next((path for path in written if not os.path.exists(path)), None)
        if gone is None:
            return False
        self.board_recreated = self.board_recreated or (now_utc("seconds"), gone)
        if self.writer is None or os.path.exists(event_file(self.writer)):
            return False  # the next writer opened makes its folders
        assert self.run is not None  # a writer is open only inside a run
        try:
            self.writer.close()
        except Exception:
            pass  # its thread failed on the deleted file: nothing it holds can be saved
        self.writer = summary_writer(os.path.join(self.tensorboard, self.run))
        return True

    def begin_run(self, run: str) -> None:
        """The run whose scalars follow: its name is its TensorBoard folder."""
        self.run = run
        self.first_run = self.first_run or run
        if self.tensorboard:
            def open_writer():
                if not self.board_made:
                    self.tensorboard, self.board_made = made_anew(self.tensorboard), True
                self.run_folders.append(os.path.join(self.tensorboard, run))
                self.writer = summary_writer(self.run_folders[-1])
            self.board(open_writer)

    def train(self, first_step: int, losses: Sequence[float], lrs: Sequence[float], scale: Optional[float],
              host_step_ms: float, images_per_sec: Optional[float]) -> None:
        """Steps first_step.. with their losses and learning rates, the loss scale after the last."""
        last = first_step + len(losses) - 1
        self.emit("train", run=self.run, step=last, loss=losses[-1], lr=lrs[-1], loss_scale=scale,
                  host_step_ms_median=host_step_ms, images_per_sec=images_per_sec)
        if self.writer is None:
            return

        def scalars():
            for step, (loss, lr) in enumerate(zip(losses, lrs), first_step):
                self.writer.add_scalar("train/loss", loss, step)
                self.writer.add_scalar("train/lr", lr, step)
            if scale is not None:
                self.writer.add_scalar("train/loss_scale", scale, last)
            self.writer.flush()
        self.board(scalars)

    def evaluation(self, step: int, accuracy: float) -> None:
        self.emit("eval", run=self.run, step=step, accuracy=accuracy)
        if self.writer is not None:
            def scalar() -> None:
                writer = self.writer_now()
                writer.add_scalar("eval/test_accuracy", accuracy, step)
                writer.flush()
            self.board(scalar)

    def end_run(self, run: Dict[str, Any], setup: Dict[str, Any]) -> None:
        """After the run (a RunRecord's dict): its exact step times (timed steps, against their
        optimizer step), its headline figures as hparams, and a line that closes it."""
        self.emit("run", run=self.run, mode=run["mode"], completed_steps=run["completed_steps"],
                  incomplete=run["incomplete"], median_step_ms=(run["step_time_ms"] or {}).get("median"),
                  images_per_sec=run["images_per_sec"], peak_memory_bytes=run["peak_memory_bytes"],
                  test_accuracy=run["test_accuracy"])
        if self.writer is not None:
            self.board(lambda: self.run_summary(run, setup))
        self.close_writer()

    def run_summary(self, run: Dict[str, Any], setup: Dict[str, Any]) -> None:
        writer = self.writer_now()
        first = run["completed_steps"] - len(run["step_times_ms"]) + 1  # the timed steps end the run
        for step, ms in enumerate(run["step_times_ms"], first):
            writer.add_scalar("time/step_ms", ms, step)
            writer.add_scalar("time/images_per_sec", run["global_batch_size"] * 1000.0 / ms, step)
        metrics = {"hparam/median_step_ms": (run["step_time_ms"] or {}).get("median"),
                   "hparam/images_per_sec": run["images_per_sec"],
                   "hparam/peak_memory_gib": run["peak_memory_bytes"] / 2 ** 30,
                   "hparam/test_accuracy": run["test_accuracy"]}
        hparams = {key: value if isinstance(value, (int, float, str, bool)) else str(value)
                   for key, value in {**setup, "mode": run["mode"]}.items()}
        writer.add_hparams(hparams, {key: value for key, value in metrics.items() if value is not None},
                           run_name=".")  # in the run's own folder: no extra run in TensorBoard's list

    def writer_now(self) -> SummaryWriter:
        """The open writer, read when a write is made: board() may have opened a new one since."""
        assert self.writer is not None  # board() calls its write with a writer open, as its callers found one
        return self.writer

    def comparison(self, text: str) -> None:
        """The printed table, as text in the first run's folder."""
        if self.tensorboard and self.first_run:
            def table():
                with summary_writer(os.path.join(self.tensorboard, self.first_run)) as writer:
                    writer.add_text("comparison", "\n".join("    " + line for line in text.splitlines()))
            self.board(table)

    def close_writer(self) -> None:
        if self.writer is not None:
            self.board(lambda: self.writer_now().close())  # the writer at the time: board() may open a new one
            self.writer = None

    def close(self) -> None:
        """Close the streams; raise WriteFailed, with every stream's closing sentence, if a write
        failed on the way."""
        self.close_writer()
        if self.jsonl is not None:
            os.close(self.jsonl)
            self.jsonl = None
        failures = [f"{self.failed}; the lines before it are whole." if self.failed else None,
                    f"{self.board_failed}; its logs end where it failed." if self.board_failed else None]
        if self.recreated and not self.failed:
            failures.append(f"--jsonl {self.jsonl_path} was deleted during the run and written anew at "
                            f"{self.recreated}, so it holds only the lines from then on.")
        if self.board_recreated and not self.board_failed:
            when, path = self.board_recreated
            failures.append(f"--tensorboard logs were deleted during the run ({path}) and written anew from {when}, "
                            f"so {self.tensorboard} holds only the logs from then on.")
        if any(failures):
            raise WriteFailed(" ".join(filter(None, failures)))


def same_file(path: str, fd: int) -> bool:
    """Whether `path` still names the open file `fd` (not deleted, moved or replaced)."""
    try:
        return os.path.samestat(os.stat(path), os.fstat(fd))
    except OSError:
        return False


def ends_its_lines(path: str) -> bool:
    """Whether the file at `path` is empty or ends its last line (one it cannot read: as if so)."""
    try:
        with open(path, "rb") as f:
            if f.seek(0, os.SEEK_END) == 0:
                return True
            f.seek(-1, os.SEEK_END)
            return f.read(1) == b"\n"
    except OSError:
        return True


def quiet_writer_threads() -> None:
    """TensorBoard writes from a thread of its own, which re-raises its failure in the next
    write, where board() reports it: the thread's own traceback is not printed."""
    previous = threading.excepthook
    if getattr(previous, "quiet_writer_threads", False):
        return
    threading.excepthook = QuietWriterThreads(previous)


class QuietWriterThreads:
    """The hook that passes on every thread's failure but the writer thread's; its attribute
    marks it, so that it is set once."""
    quiet_writer_threads = True

    def __init__(self, previous: Callable[[threading.ExceptHookArgs], object]):
        self.previous = previous

    def __call__(self, failure: threading.ExceptHookArgs) -> None:
        if type(failure.thread).__name__ != "_AsyncWriterThread":
            self.previous(failure)


def summary_writer(folder: str) -> SummaryWriter:
    from torch.utils.tensorboard import SummaryWriter

    return SummaryWriter(folder)


def event_file(writer: SummaryWriter) -> str:
    """The file a SummaryWriter appends to, reopened at each write: tensorboard names it only
    in this attribute."""
    # torch infers file_writer as None from its __init__; a writer's file_writer is a FileWriter
    return writer.file_writer.event_writer._file_name  # type: ignore[attr-defined]


def made_anew(path: str) -> str:
    """Make the folder `path`, or `path`-2, -3, ... when that name is taken (a run of the same
    second): os.mkdir refuses a name that exists, so two runs can never take one folder, as a
    look before making it would let them. Returns the folder made."""
    os.makedirs(os.path.dirname(path), exist_ok=True)
    candidate, number = path, 1
    while True:
        try:
            os.mkdir(candidate)
            return candidate
        except FileExistsError:
            number += 1
            candidate = f"{path}-{number}"
