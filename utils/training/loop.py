"""The timed run of one precision mode: a trainer and the settings it reads in, statistics out.

The loop does training and timing only. Step boundaries are recorded by StepTimer (CUDA
events, read after the loop), losses stay on the device, and stop signals and divergence are
agreed across ranks without a per-step host sync; the GPU's energy and busy share are read
only where the timing already stops (the warm-up's end, its pauses, the end) or by a thread of
their own. What happens around it
(building the trainer, restoring and writing checkpoints, evaluation, the result record) lives
beside it.
"""
from __future__ import annotations

import math
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable, Dict, List, Optional, Sequence, Tuple, Union, cast

import torch

from utils import compat
from utils.config import usable_cores
from utils.measure import host_load, memory, nvml_meter
from utils.measure.timing import StepTimer
from utils.modes import scale_drop_steps
from utils.training import distributed
from utils.training.precision import StaticLossScaler
from utils.training.rank_agreement import RankAgreement
from utils.training.step import MicroBatches, advance, train_step
from utils.training.trainer import digest

if TYPE_CHECKING:
    from typing import Protocol

    from utils.config import Accuracy, Checkpoints, Training
    from utils.launch import World
    from utils.modes import Mode
    from utils.stop import StopRequest
    from utils.training.context import RunContext
    from utils.training.curve import AccuracyCurve
    from utils.training.trainer import Trainer

    class Census(Protocol):
        """--numerics' census (utils/numerics/census.py): the steps it samples, taken in pauses."""

        def wants(self, step: int) -> bool: ...

        def take(self, trainer: Trainer, images: torch.Tensor, labels: torch.Tensor, step: int) -> None: ...


STOPPED_BY_ANOTHER_RANK = "signal to another rank"  # what stopped_by says on ranks that got no signal
STOPPED_BY_BAD_DATA = "a file that is no whole image"  # the loader met one, without --skip-bad-images


@dataclass
class Statistics:
    """A mode's measurements so far, over every process that trained it (checkpoint segments);
    the timing warm-up's steps (--timing-warmup) removed. Across ranks a step lasts as long as its
    slowest rank, and the loss is the ranks' mean."""
    step_ms: List[float] = field(default_factory=list)
    data_ms: List[float] = field(default_factory=list)
    losses: List[float] = field(default_factory=list)
    lrs: List[float] = field(default_factory=list)  # the learning rate each step used
    loss_scales: List[float] = field(default_factory=list)  # the loss scale after each step (scaled modes)
    wall_time_s: float = 0.0
    peak_memory_bytes: int = 0  # the steady state: over the timed steps, after the warm-up
    warmup_peak_memory_bytes: int = 0  # over the warm-up steps (cuDNN autotuning, compilation); 0: none
    peak_reserved_bytes: int = 0  # CUDA: the caching allocator's reserved peak over the timed steps
    segments: int = 0
    train_time_s: float = 0.0  # every step's time, warm-up included, evaluations and other pauses not
    accuracy_curve: List[dict] = field(default_factory=list)  # --eval-every: {step, epoch, train_s, accuracy}
    eval_time_s: float = 0.0  # the evaluations' own time
    # host_load.over() of each process that timed a step, over its timed steps: runs[].host combines them
    host_readings: List[dict] = field(default_factory=list)


@dataclass
class LoopOutcome:
    stats: Statistics
    start_step: int
    completed_steps: int
    skipped_steps: int  # steps whose update a loss scaler (or --on-nan skip) skipped
    first_step_s: Optional[float]  # wall time of the first step (the compile, with --compile)
    first_batch_sha256: Optional[str]
    stopped_by: Optional[str]  # the signal that ended the run early, if any
    diverged_at: Optional[int]  # 1-based step of the first non-finite loss, when that ends the run
    reached_target: bool = False  # --stop-at-target ended the run at an evaluation that reached it
    # nvml_meter.Meter.finish(): this process's GPU over its timed steps, its energy per image and its busy share
    energy: Optional[dict] = None
    energy_unavailable: Optional[str] = None  # why `energy` is None
    gpu_busy: Optional[dict] = None
    gpu_busy_unavailable: Optional[str] = None  # why `gpu_busy` is None

    def ran_all_steps(self, steps: int) -> bool:
        """Whether the loop ran to its end: all `steps`, or to the evaluation that reached the
        target, with no stop signal (a run that diverged ran to its end too)."""
        return (self.completed_steps == steps or self.reached_target) and self.stopped_by is None


def nonfinite_policy(mode: Mode, on_nan: str) -> str:
    """What a non-finite loss does: "scaler" (the mode's loss scaler skips such steps),
    "stop" (the run ends, --on-nan stop) or "skip" (the step is skipped, --on-nan skip)."""
    return "scaler" if mode.scaled else on_nan


def synchronize(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


class Recorder:
    """What the loop keeps of each step besides its timing, without waiting for the device:
    losses and loss scales stay device tensors, the learning rate is a host float, the first
    batch a device copy hashed afterwards; the timing warm-up's memory peak is taken, and the
    peak reset, when it ends, where the GPU meter starts; pause() and begin_step() keep the
    pauses the step times leave out out of its energy and busy share too."""

    def __init__(self, previous: Statistics, images_per_step: int, timing_warmup: int, start_step: int,
                 context: RunContext, curve: Optional[AccuracyCurve] = None):
        self.previous, self.start_step, self.context = previous, start_step, context
        self.images_per_step = images_per_step  # this process's, in each optimizer step
        self.curve = curve  # an AccuracyCurve: its points and evaluation time go into the statistics
        # this process's, warm-up included (as the timer's)
        self.losses: List[torch.Tensor] = []
        self.lrs: List[float] = []
        self.loss_scales: List[Union[torch.Tensor, float]] = []
        self.first_batch: Optional[Tuple[torch.Tensor, torch.Tensor]] = None
        self.first_step_s: Optional[float] = None
        self.timing_warmup = timing_warmup  # the steps left out of the timings, not the learning rate's warm-up
        self.timing_warmup_peak = 0
        memory.reset_peak(context.device)
        self.started = time.perf_counter()
        self.host_start = host_load.read()  # read again where the warm-up ends
        self.gpu_meter = gpu_meter(context.device, context.read_gpu)
        if self.timing_warmup == 0:
            self.start_gpu_meter()

    def before_step(self, batches: MicroBatches, optimizer: torch.optim.Optimizer) -> None:
        if self.first_batch is None:
            first = batches.first
            assert first is not None  # the step has not taken it yet
            self.first_batch = (first[0].clone(), first[1].clone())
        self.lrs.append(optimizer.param_groups[0]["lr"])

    def after_step(self, step: int, loss: torch.Tensor,
                   scaler: Union[torch.amp.GradScaler, StaticLossScaler]) -> None:
        device = self.context.device
        self.losses.append(loss)
        scale = current_loss_scale(scaler)
        if scale is not None:  # GradScaler's is a device tensor it updates in place: copied on the device
            self.loss_scales.append(scale.detach().clone() if isinstance(scale, torch.Tensor) else scale)
        if step == self.start_step + 1 and self.timing_warmup > 0:  # a warm-up step: waiting costs nothing
            synchronize(device)
            self.first_step_s = time.perf_counter() - self.started
        if step == self.start_step + self.timing_warmup:  # the steady state's peak starts after the warm-up
            self.timing_warmup_peak = memory.peak_bytes(device)[0]
            memory.reset_peak(device)
            self.host_start = host_load.read()  # system calls only: no wait for the device
            self.start_gpu_meter()

    def start_gpu_meter(self) -> None:
        """Start the GPU meter where the timed steps begin. It reads once the GPU has done the
        warm-up's work (a wait before the first timed step, which no step time includes), so
        that the span it reads is the timed steps' own."""
        if self.gpu_meter.live:
            synchronize(self.context.device)
        self.gpu_meter.start()

    def pause(self, timer: StepTimer) -> None:
        """Before a pause in the loop (the census, a checkpoint, an evaluation): the timer's
        segment closes (its one sync) and the GPU meter's span with it, until the next step."""
        timer.close()
        self.gpu_meter.pause()

    def begin_step(self, timer: StepTimer) -> None:
        """A step begins: after a pause, the GPU meter's span opens again, then the timer's
        segment."""
        self.gpu_meter.resume()
        timer.start_step()

    def timed(self, step: int) -> bool:
        """Whether `step` (1-based) is past the timing warm-up."""
        return step > self.start_step + self.timing_warmup

    def train_s(self, timer: StepTimer) -> float:
        """Training time so far: every closed step of every process, warm-up included."""
        return self.previous.train_time_s + sum(timer.step_ms) / 1000.0

    def gpu_readings(self, timer: StepTimer) -> Dict[str, Any]:
        """LoopOutcome's energy and gpu_busy, each with why it is None: this process's GPU over
        its timed steps, with the images this process trained in them; taken before
        statistics(), whose all-reduces wait for the other ranks (the GPU idles then, and that
        is no step's energy or idle time)."""
        timed_steps = max(len(timer.step_ms) - self.timing_warmup, 0)
        return self.gpu_meter.finish(timed_steps * self.images_per_step)

    def statistics(self, timer: StepTimer) -> Statistics:
        """All statistics so far: earlier processes' plus this one's (timings, the memory peak
        and the host's reading, after its warm-up; the warm-up's own peak beside it)."""
        # first: the all-reduces below wait for the other ranks, which would pass for a process starved of CPU
        host = host_load.over(self.host_start, host_load.read(), usable_cores(), torch.get_num_threads())
        device, world, previous = self.context.device, self.context.world, self.previous
        peak, reserved = memory.peak_bytes(device)[0], memory.peak_reserved_bytes(device)
        warmup_peak = self.timing_warmup_peak
        step_ms, data_ms = timer.step_ms[self.timing_warmup:], timer.data_ms[self.timing_warmup:]
        hosts = [host] if step_ms else []  # a process that timed no step has no timed steps to read the host over
        if not step_ms:  # no step of this process was timed: its peak is the warm-up's, or none (no step)
            warmup_peak, peak, reserved = max(warmup_peak, peak) if timer.step_ms else 0, 0, 0
        losses = torch.stack(self.losses).float() if self.losses else torch.zeros(0, device=device)
        if world.distributed:
            step_ms = distributed.all_reduce(torch.tensor(step_ms, dtype=torch.float64, device=device), "max").tolist()
            data_ms = distributed.all_reduce(torch.tensor(data_ms, dtype=torch.float64, device=device), "max").tolist()
            losses = distributed.all_reduce(losses, "sum") / world.size
            peaks = distributed.all_reduce(torch.tensor([peak, warmup_peak, reserved], device=device), "max")
            peak, warmup_peak, reserved = peaks.tolist()
        return Statistics(step_ms=previous.step_ms + step_ms, data_ms=previous.data_ms + data_ms,
                          losses=previous.losses + losses.cpu().tolist(), lrs=previous.lrs + self.lrs,
                          loss_scales=previous.loss_scales + host_values(self.loss_scales),
                          wall_time_s=previous.wall_time_s + time.perf_counter() - self.started,
                          peak_memory_bytes=max(previous.peak_memory_bytes, peak),
                          warmup_peak_memory_bytes=max(previous.warmup_peak_memory_bytes, warmup_peak),
                          peak_reserved_bytes=max(previous.peak_reserved_bytes, reserved),
                          segments=previous.segments + 1, train_time_s=self.train_s(timer),
                          accuracy_curve=list(self.curve.points) if self.curve else previous.accuracy_curve,
                          eval_time_s=self.curve.eval_time_s if self.curve else previous.eval_time_s,
                          host_readings=previous.host_readings + hosts)


def train(trainer: Trainer, training: Training, accuracy: Accuracy, checkpoints: Checkpoints, context: RunContext,
          start_step: int = 0, previous: Optional[Statistics] = None,
          save: Optional[Callable[[int, Statistics], None]] = None, census: Optional[Census] = None,
          curve: Optional[AccuracyCurve] = None) -> LoopOutcome:
    """Train from `start_step` to the plan's steps, continuing `previous` (earlier processes'). A stop signal ends the
    run after the current step; `save(step, stats)` runs every --checkpoint-every steps; `census` (--numerics) examines
    the steps it wants and `curve` evaluates on its cadence, after the step, outside its timing. --stop-at-target ends
    the run at the evaluation that reaches the target (at the first timed step if one in the warm-up did)."""
    device, world, stop = context.device, context.world, context.stop
    policy = nonfinite_policy(trainer.mode, training.on_nan)
    steps, timer = trainer.plan.steps, StepTimer(device)
    recorder = Recorder(previous or Statistics(), training.effective_batch_size, trainer.plan.timing_warmup,
                        start_step, context, curve)
    agreement = RankAgreement(device, world, recorder.losses, policy == "stop") \
        if policy == "stop" or world.distributed else None
    progress = context.reporter.training(steps, trainer.mode.name, training.global_batch_size(world.size),
                                         start_step, (recorder.losses, recorder.lrs, recorder.loss_scales))
    step, stopped_by, reached = start_step, None, False
    every = checkpoints.checkpoint_every
    while step < steps:
        ending, stopped_by = ends_before(step, agreement, stop, world, policy, trainer.loader.failure is not None)
        if ending:
            break
        recorder.begin_step(timer)
        batches = MicroBatches(next(trainer.loader), trainer.loader, training.accum_steps)
        timer.batch_ready()
        recorder.before_step(batches, trainer.optimizer)
        sample = batches.first if census is not None and census.wants(step + 1) else None
        loss = train_step(trainer.step_model, batches, trainer.criterion, trainer.optimizer, trainer.scaler,
                          trainer.mode, device, training.clip_grad, skip_nonfinite=policy == "skip")
        advance(trainer.scheduler)  # every step, skipped or not: knowing which were skipped would need a sync
        step += 1
        recorder.after_step(step, loss, trainer.scaler)
        progress.update(loss)
        if sample is not None and census is not None:  # a pause, as a checkpoint's: the next start_step() leaves it out
            recorder.pause(timer)
            census.take(trainer, sample[0], sample[1], step)
        if save and every and step % every == 0 and step < steps:
            recorder.pause(timer)
            save(step, recorder.statistics(timer))
        if curve is not None and curve.wants(step, steps):
            recorder.pause(timer)
            curve.take(step, recorder.train_s(timer))
        # the target ends the run once a step is timed: one reached in the warm-up ends it after
        if accuracy.stop_at_target and curve is not None and recorder.timed(step) and curve.reached_target:
            reached = True
            break
    timer.close()  # synchronizes: the progress's last line reads its copies without waiting
    progress.close()
    return loop_outcome(trainer, recorder, timer, policy, step, stopped_by, reached)


def ends_before(step: int, agreement: Optional[RankAgreement], stop: StopRequest, world: World,
                policy: str, bad_data: bool = False) -> Tuple[bool, Optional[str]]:
    """Whether the run ends before `step`: a signal here, or a batch that held a file that is no
    whole image (`bad_data`; distributed, on any rank), ends it with the signal's name or
    STOPPED_BY_BAD_DATA; a divergence under --on-nan stop ends it with none."""
    signalled = stop.signal_name is not None or bad_data
    diverged, stopping = agreement.check(step, signalled) if agreement else (False, False)
    if stopping or (signalled and not world.distributed):
        return True, stop.signal_name or (STOPPED_BY_BAD_DATA if bad_data else STOPPED_BY_ANOTHER_RANK)
    return diverged and policy == "stop", None


def loop_outcome(trainer: Trainer, recorder: Recorder, timer: StepTimer, policy: str, completed_steps: int,
                 stopped_by: Optional[str], reached: bool) -> LoopOutcome:
    """The LoopOutcome of a finished loop: what `recorder` kept, and the skipped steps and the
    first divergent one, found in its statistics after the loop."""
    readings = recorder.gpu_readings(timer)  # before statistics()'s all-reduces
    stats = recorder.statistics(timer)
    first_nonfinite = next((step for step, loss in enumerate(stats.losses, 1) if not math.isfinite(loss)), None)
    return LoopOutcome(stats=stats, start_step=recorder.start_step, completed_steps=completed_steps,
                       skipped_steps=skipped_steps(trainer, policy, stats), first_step_s=recorder.first_step_s,
                       first_batch_sha256=digest(recorder.first_batch) if recorder.first_batch is not None else None,
                       stopped_by=stopped_by, diverged_at=first_nonfinite if policy == "stop" else None,
                       reached_target=reached, **readings)


def gpu_meter(device: torch.device, read: bool = True) -> nvml_meter.Meter:
    """The meter of this process's GPU (its energy and busy share): the device's index, or the
    current one; one that reads nothing where `read` is False (RunContext.read_gpu)."""
    if device.type != "cuda":
        return nvml_meter.Meter(reason=nvml_meter.CPU_RUN)
    if not read:
        return nvml_meter.Meter(reason=nvml_meter.NOT_READ)
    index = device.index if device.index is not None else torch.cuda.current_device()
    return nvml_meter.open_meter(index, compat.cuda_pci_bus_id(index))


def current_loss_scale(scaler: Optional[Union[torch.amp.GradScaler, StaticLossScaler]]
                       ) -> Optional[Union[torch.Tensor, float]]:
    """The loss scale as a device tensor or a number (None without a scaler). GradScaler keeps
    it in `_scale` on the device; its get_scale() would make the host wait for the GPU."""
    if scaler is None or not scaler.is_enabled():
        return None
    scale = getattr(scaler, "_scale", None)
    return scale if isinstance(scale, torch.Tensor) else scaler.get_scale()


def host_values(values: Sequence[Union[torch.Tensor, float]]) -> List[float]:
    """Numbers, or device tensors copied to the host in one transfer."""
    if values and isinstance(values[0], torch.Tensor):  # one scaler's: all tensors, or all numbers
        tensors = cast("Sequence[torch.Tensor]", values)
        return torch.cat([value.reshape(1).float() for value in tensors]).cpu().tolist()
    return [float(value) for value in values]


def skipped_steps(trainer: Trainer, policy: str, stats: Statistics) -> int:
    """The steps whose update was skipped, counted after the loop from what it kept on the
    device: a dynamic GradScaler halves its scale at each (the scale curve), fp16-master's
    scaler counts them, and --on-nan skip skips the steps whose loss is not finite."""
    if trainer.mode.master_weights:
        assert isinstance(trainer.scaler, StaticLossScaler)  # master weights come with the static scaler
        return int(trainer.scaler.skipped)
    if trainer.mode.loss_scaling:
        return len(scale_drop_steps(stats.loss_scales, dynamic=True))
    if policy == "skip":
        return sum(not math.isfinite(loss) for loss in stats.losses)
    return 0
