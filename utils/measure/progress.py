"""Progress on stderr that never makes the host wait for the GPU: a tqdm bar in a terminal,
plain timestamped lines otherwise (a batch job's redirected output, where a bar's carriage
returns make an unreadable log), nothing with --no-progress or on ranks other than 0.

On CUDA, the loss and loss scale shown are copied to pinned host memory without blocking and
shown once their copy has finished; step times here are host wall-clock intervals (the
reported statistics come from StepTimer's CUDA events after the loop).
"""
from __future__ import annotations

import datetime
import shutil
import statistics
import sys
import time
from typing import TYPE_CHECKING, Iterable, Iterator, List, Optional, Tuple, Union, cast

import torch
from tqdm import tqdm

from utils.measure.hostcopy import HostCopy

if TYPE_CHECKING:
    from typing import Any, Dict, Protocol, Sequence

    class LiveStream(Protocol):
        """Where a run streams while it trains (--jsonl, --tensorboard): utils/results/live.py's
        LiveLog, which the progress feeds at the log's cadence and the run at its phases."""
        tensorboard: Optional[str]

        def phase(self, text: str) -> None: ...

        def train(self, first_step: int, losses: Sequence[float], lrs: Sequence[float], scale: Optional[float],
                  host_step_ms: float, images_per_sec: Optional[float]) -> None: ...

        def evaluation(self, step: int, accuracy: float) -> None: ...

        def begin_run(self, run: str) -> None: ...

        def end_run(self, run: Dict[str, Any], setup: Dict[str, Any]) -> None: ...

        def comparison(self, text: str) -> None: ...

        def close(self) -> None: ...

    Batch = Tuple[torch.Tensor, torch.Tensor]  # (images, labels)
    # the loop's lists of every step's loss (a device tensor), lr, and loss scale (a device tensor or a number)
    History = Tuple[List[torch.Tensor], List[float], List[Union[torch.Tensor, float]]]
    # (step, HostCopy of the losses since the last line, their lrs, the scale)
    Pending = Tuple[int, HostCopy, List[float], Union[HostCopy, float, None]]

REFRESH_S = 0.5  # the bar's postfix
LOG_INTERVAL_S = 30.0  # a log line this often when --log-every is not given
BAR_COLUMNS = 80


class Reporter:
    """How one run shows its progress: chosen once, from the terminal and the flags."""

    def __init__(self, enabled: bool, log_every: Optional[int] = None, live: Optional[LiveStream] = None):
        terminal = sys.stderr.isatty()
        self.bars = enabled and terminal
        self.lines = enabled and not terminal
        self.log_every = log_every
        self.live = live  # fed at the log's cadence

    def phase(self, text: str) -> None:
        """One line per phase (model built, data loaded, evaluation) in a batch job's log."""
        self.log(text)
        if self.live is not None:
            self.live.phase(text)

    def log(self, text: str) -> None:
        if self.lines:
            print(f"[{datetime.datetime.now():%H:%M:%S}] {text}", file=sys.stderr, flush=True)

    def training(self, total: int, label: str, batch_size: int, initial: int = 0,
                 history: Optional[History] = None) -> TrainingProgress:
        """`history`: the loop's own lists of every step's loss (on the device), lr, and loss
        scale (a device tensor or a number; empty without a scaler), which the lines show and
        the live log sends on, read where the loop keeps them."""
        return TrainingProgress(self, total, label, batch_size, initial, history or ([], [], []))

    def evaluation(self, batches: Iterable[Batch], total: int, label: str) -> Iterable[Batch]:
        """`batches`, shown as a bar in a terminal and as a line every LOG_INTERVAL_S in a log."""
        if self.lines:
            return self.logged(batches, total, label)
        if not self.bars:
            return batches
        return tqdm(batches, total=total, desc=f"{label} eval", unit="batch", file=sys.stderr, leave=False,
                    ncols=bar_columns())

    def logged(self, batches: Iterable[Batch], total: int, label: str) -> Iterator[Batch]:
        """`batches`, with a log line whenever LOG_INTERVAL_S have passed: a slow evaluation (11
        minutes of float16 on a CPU) is never a silent stretch of a batch job's log."""
        last = started = time.perf_counter()
        for index, batch in enumerate(batches, 1):
            yield batch
            now = time.perf_counter()
            if now - last >= LOG_INTERVAL_S:
                remaining = datetime.timedelta(seconds=round((now - started) / index * (total - index)))
                self.phase(f"{label} evaluation batch {index}/{total}  ETA {remaining}")
                last = now


def bar_columns() -> int:
    return min(BAR_COLUMNS, shutil.get_terminal_size((BAR_COLUMNS, 24)).columns)


class TrainingProgress:
    def __init__(self, reporter: Reporter, total: int, label: str, batch_size: int, initial: int, history: History):
        self.reporter, self.total, self.label, self.batch_size = reporter, total, label, batch_size
        self.step = initial
        self.step_ms: List[float] = []  # host wall-clock per step: what the log's median and ETA use
        self.last_time = self.last_shown = time.perf_counter()
        self.pending: Optional[Pending] = None  # what the next log line shows, its copies under way
        self.losses, self.lrs, self.loss_scales = history
        self.sent = 0  # how many of them the live log has been handed
        self.bar = tqdm(total=total, initial=initial, desc=label, file=sys.stderr, disable=not reporter.bars,
                        ncols=bar_columns(), leave=False,
                        bar_format="{desc}: {percentage:3.0f}%|{bar}| {n_fmt}/{total_fmt} [{elapsed}<{remaining}"
                                   "{postfix}]")
        self.bar_loss: Optional[HostCopy] = None  # HostCopy of a recent loss, for the bar
        self.bar_shown = False  # whether the bar has shown a loss yet

    def update(self, loss: torch.Tensor) -> None:
        self.step += 1
        live = self.reporter.live is not None
        if not (self.reporter.bars or self.reporter.lines or live):  # --no-progress, other ranks: nothing to do
            return
        now = time.perf_counter()
        self.step_ms.append((now - self.last_time) * 1000.0)
        self.last_time = now
        if self.reporter.bars:
            self.update_bar(loss, now)
        if self.reporter.lines or live:
            self.update_log(loss, now)

    def update_bar(self, loss: torch.Tensor, now: float) -> None:
        """The postfix shows the first loss as soon as its copy has arrived (however short the
        run), then a newer one every REFRESH_S."""
        self.bar.update(1)
        first = not self.bar_shown
        if not first and now - self.last_shown < REFRESH_S:
            return
        if self.bar_loss is None or self.bar_loss.done():
            shown = self.bar_loss.value() if self.bar_loss is not None else None
            self.bar_loss = HostCopy(loss.detach().float())
            if shown is not None:
                self.last_shown = now
                self.bar.set_postfix_str(f"loss {shown:.3f}, {self.images_per_sec():.0f} img/s", refresh=first)
                self.bar_shown = True

    def update_log(self, loss: torch.Tensor, now: float) -> None:
        every = self.reporter.log_every
        due = self.step % every == 0 if every else now - self.last_shown >= LOG_INTERVAL_S
        if self.pending is None and (due or self.step == self.total):
            self.start_copies(loss)
            self.last_shown = now
        if self.pending is not None and self.pending[1].done():
            self.print_line()

    def start_copies(self, loss: torch.Tensor) -> None:
        """Copy, without waiting, what the next line shows: the losses since the last line (the
        live log wants every step's; the log line, the last), and the loss scale."""
        scale = self.loss_scales[-1] if self.loss_scales else None
        live = self.reporter.live is not None and self.sent < len(self.losses)
        losses = torch.stack(self.losses[self.sent:]).detach() if live else loss.detach().reshape(1)
        self.pending = (self.step, HostCopy(losses.float()), self.lrs[self.sent:] if live else [],
                        HostCopy(scale) if isinstance(scale, torch.Tensor) else scale)
        self.sent = len(self.losses)

    def print_line(self) -> None:
        """The log line of the pending step, and the steps since the last one to the live log."""
        assert self.pending is not None  # called once a line's copies are under way
        step, copies, lrs, scale_copy = self.pending
        self.pending = None
        median = statistics.median(self.step_ms)
        scale = scale_copy.number() if isinstance(scale_copy, HostCopy) else scale_copy
        losses = cast("List[float]", copies.value())  # a 1-d tensor's copy: a list
        if lrs:
            assert self.reporter.live is not None  # only the live log is handed lrs (start_copies)
            self.reporter.live.train(step - len(losses) + 1, losses, lrs, scale, median, self.images_per_sec())
        remaining = datetime.timedelta(seconds=round(median * (self.total - step) / 1000.0))
        parts = [f"{self.label} step {step}/{self.total}", f"loss {losses[-1]:.4f}",
                 f"step {median:.1f} ms (median so far)", f"{self.images_per_sec():.0f} img/s"]
        parts += [f"loss scale {scale:g}"] if scale is not None else []
        self.reporter.log("  ".join(parts + [f"ETA {remaining}"]))

    def images_per_sec(self) -> float:
        return self.batch_size * 1000.0 / statistics.median(self.step_ms[-50:])

    def close(self) -> None:
        """The last lines: the loop has synchronized by now, so the copies have arrived."""
        if self.pending is not None:
            self.print_line()
        if self.reporter.live is not None and self.sent < len(self.losses):  # steps after the last line
            self.start_copies(self.losses[-1])  # (a stop signal, or a line still pending then)
            self.print_line()
        self.bar.close()
