"""Profile a few training steps of a mode, after its timed steps, and attribute their time
to categories (utils/explain/categories.py).

The profiled steps are the timed loop's training step (utils/training/step.py), run under
torch.profiler with the input pipeline and the loss scaler labelled; they come after the
timed steps and the evaluation, so they change neither the step statistics nor the accuracy.
torch.profiler's first profiled step is a warm-up that is left out. On the CPU each
category holds the ops' own (self) time on the training thread; on CUDA the GPU time of the
kernels each op launched, and "idle" the rest of the step: the GPU waiting for the host.
"""
from __future__ import annotations

import collections
import os
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Counter, DefaultDict, Dict, Iterable, Iterator, List, Optional, Tuple, Union

import torch
from torch.profiler import ProfilerActivity, profile, record_function, schedule

from utils.errors import WriteFailed
from utils.explain import exposed
from utils.explain.categories import DATA_LABEL, NAMES, PYTHON, SCALER_LABEL, STEP_MARK, category_of, kind_of
from utils.measure import gpus
from utils.training import cpu_arithmetic
from utils.training.loop import synchronize
from utils.training.step import MicroBatches, train_step

if TYPE_CHECKING:
    from torch.autograd.profiler_util import FunctionEvent

    from utils.config import Training
    from utils.stop import StopRequest
    from utils.training.precision import StaticLossScaler
    from utils.training.trainer import Trainer

    Batch = Tuple[torch.Tensor, torch.Tensor]  # (images, labels)

TOP_OPS = 15
# Where the host waits for the device: .item(), bool() and float() of a tensor run
# aten::_local_scalar_dense; CUDA's runtime records its explicit synchronizations.
SYNC_OPS = ("aten::_local_scalar_dense", "cudaStreamSynchronize", "cudaDeviceSynchronize")


class LabelledLoader:
    """The trainer's loader, each batch drawn inside a profiler label."""

    def __init__(self, loader: Iterator[Batch]):
        self.loader = loader

    def __iter__(self) -> LabelledLoader:
        return self

    def __next__(self) -> Batch:
        with record_function(DATA_LABEL):
            return next(self.loader)


class LabelledScaler:
    """The trainer's loss scaler, each call inside a profiler label (GradScaler.step calls the
    optimizer's step, which keeps its own label inside this one)."""

    def __init__(self, scaler: Union[torch.amp.GradScaler, StaticLossScaler]):
        self.scaler = scaler

    def is_enabled(self) -> bool:
        return self.scaler.is_enabled()

    def scale(self, loss: torch.Tensor) -> torch.Tensor:
        with record_function(SCALER_LABEL):
            return self.scaler.scale(loss)

    def unscale_(self, optimizer: torch.optim.Optimizer) -> None:
        with record_function(SCALER_LABEL):
            return self.scaler.unscale_(optimizer)

    def step(self, optimizer: torch.optim.Optimizer) -> Optional[float]:
        with record_function(SCALER_LABEL):
            return self.scaler.step(optimizer)

    def update(self) -> None:
        with record_function(SCALER_LABEL):
            return self.scaler.update()


@dataclass
class Profile:
    """--explain's profile of one run: what the profiled steps measured (ms per step by
    category, the host's own time, the top ops, the host syncs), the model's and CPU's facts the
    rules read, and the rules' findings for this run alone (set with its record)."""
    steps: int
    activities: List[str]
    wall_ms: float  # a profiled step's wall time
    total_ms: float  # the categories' sum
    categories: Dict[str, Dict[str, float]]  # {category: {"ms", "share"}}
    idle_ms: Optional[float]  # the GPU's idle time per step (None on the CPU)
    host_ms: Dict[str, float]  # the host's own time per category, inside the step
    host_syncs_per_step: float
    host_syncs: List[Dict]  # [{"in", "per_step"}], the most frequent first
    top_ops: List[Dict]  # [{"name", "calls", "self_ms", "category"}]
    comm_exposed_ms: float  # all-reduce time per step that no compute overlapped (0 in one process)
    gpu_kernels_missing: bool  # on CUDA, no kernel recorded: the categories are host time
    unaligned_layers: List[str]  # layers and batch off the tensor cores' multiple
    cpu_fast_half_flags: Optional[List[str]]  # on the CPU, its fast float16/bfloat16 flags
    diagnosis: List[Dict] = field(default_factory=list)


def profile_steps(trainer: Trainer, training: Training, device: torch.device, steps: int,
                  stop: Optional[StopRequest] = None,
                  trace_path: Optional[str] = None) -> Tuple[Optional[Profile], Optional[str]]:
    """Run `steps` profiled training steps (plus the profiler's warm-up step) and return
    (Profile, None when a stop signal cut the profiling short; the sentence saying why the trace
    could not be written, or None). With `trace_path`, also write the Chrome/Perfetto trace; a
    trace that cannot be written costs only itself."""
    # kineto, torch.profiler's engine, writes its stages and, without a GPU, an "ERROR ...
    # gpuGetDeviceCount" line to stderr: quiet unless the user set its level. Its one message a
    # user needs on a GPU, that no kernel could be recorded, is checked below instead.
    os.environ.setdefault("KINETO_LOG_LEVEL", "6")
    loader, scaler = LabelledLoader(trainer.loader), LabelledScaler(trainer.scaler)
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if device.type == "cuda" else [])
    started = wall_ms = None
    with profile(activities=activities, schedule=schedule(wait=0, warmup=1, active=steps, repeat=1)) as profiler:
        for step in range(steps + 1):
            if stop is not None and stop.requested:
                return None, None
            if step == 1:  # the warm-up step is over: time the profiled ones
                synchronize(device)
                started = time.perf_counter()
            batches = MicroBatches(next(loader), loader, training.accum_steps)
            train_step(trainer.step_model, batches, trainer.criterion, trainer.optimizer, scaler, trainer.mode, device,
                       training.clip_grad)
            if step == steps:  # before the last profiler.step(), which stops the recording
                synchronize(device)
                assert started is not None  # steps >= 1: step 1 started the clock
                wall_ms = 1000.0 * (time.perf_counter() - started) / steps
            profiler.step()
    trace_failed = None
    if trace_path:
        try:
            write_trace(profiler, trace_path)
        except WriteFailed as error:
            trace_failed = str(error)
    assert wall_ms is not None  # the loop ran to its last step, which timed the steps
    events = profiler.events()
    cuda = device.type == "cuda"
    kernels = cuda and any(event.device_type != torch.autograd.DeviceType.CPU for event in events)
    facts = {"comm_exposed_ms": exposed_comm_us(events, kernels) / 1000.0 / steps,
             "gpu_kernels_missing": cuda and not kernels,
             "unaligned_layers": gpus.unaligned_layers(trainer.model, training.batch_size),
             "cpu_fast_half_flags": None if cuda else cpu_arithmetic.cpu_flags()}
    return profile_of(events, steps, wall_ms, kernels, facts), trace_failed


def write_trace(profiler: profile, path: str) -> None:
    """torch.profiler's Chrome trace (opens in Perfetto and TensorBoard), all or nothing."""
    partial = f"{path}.tmp-{os.getpid()}.json"
    try:
        os.makedirs(os.path.dirname(path), exist_ok=True)
        profiler.export_chrome_trace(partial)
        os.replace(partial, path)
    except OSError as error:
        if os.path.exists(partial):
            os.unlink(partial)
        raise WriteFailed(f"could not write the trace {path} ({error.strerror or error}).") from None


def chain_of(event: FunctionEvent) -> List[str]:
    """The names of the ops enclosing `event`, from the outermost in, `event` last."""
    names = []
    enclosing: Optional[FunctionEvent] = event
    while enclosing is not None:
        names.append(enclosing.name)
        enclosing = enclosing.cpu_parent
    return names[::-1]


def device_us(event: FunctionEvent, own: bool) -> float:
    """An event's device time in µs: its kernels' (own) or its whole span (a kernel's own event)."""
    if hasattr(event, "self_device_time_total"):  # torch 2.4; before, the cuda_ names
        return event.self_device_time_total if own else event.device_time_total
    return event.self_cuda_time_total if own else event.cuda_time_total


def exposed_comm_us(events: Iterable[FunctionEvent], cuda: bool) -> float:
    """µs of all-reduce that nothing overlapped (utils/explain/exposed.py): on CUDA between
    kernels, on the CPU against the training thread's other ops."""
    events = [event for event in events if not getattr(event, "is_async", False)]
    if cuda:
        kernels = [event for event in events if event.device_type != torch.autograd.DeviceType.CPU]
        return exposed.exposed([span(event) for event in kernels if kind_of(event.name) == "comm"],
                               [span(event) for event in kernels if kind_of(event.name) != "comm"])
    training = {event.thread for event in events if event.name.startswith(STEP_MARK)}
    comm: List[Tuple[float, float]] = []
    busy: List[Tuple[float, float]] = []
    comm_on_training_thread: List[Tuple[float, float]] = []
    for event in events:
        is_comm = category_of(chain_of(event)) == "comm"
        if is_comm:
            comm.append(span(event))
        if event.thread in training and not event.name.startswith(STEP_MARK):
            (comm_on_training_thread if is_comm else busy).append(span(event))
    return exposed.exposed(comm, busy, comm_on_training_thread)


def span(event: FunctionEvent) -> Tuple[float, float]:
    return event.time_range.start, event.time_range.end


def profile_of(events: Iterable[FunctionEvent], steps: int, wall_ms: float, cuda: bool,
               facts: Dict[str, Any]) -> Profile:
    """The Profile of `events`, recorded over `steps` steps that took `wall_ms` each, with the
    exposed communication's and the model's and machine's `facts` (Profile's fields after top_ops)."""
    category_us: DefaultDict[str, float] = collections.defaultdict(float)
    host_us: DefaultDict[str, float] = collections.defaultdict(float)
    # (name, category) -> [calls, µs]
    ops: DefaultDict[Tuple[str, str], List[float]] = collections.defaultdict(lambda: [0, 0.0])
    syncs: Counter[str] = collections.Counter()  # the op of the step that synced -> count
    device_busy_us = 0.0
    for event in events:
        if getattr(event, "is_async", False):
            continue
        if event.device_type != torch.autograd.DeviceType.CPU:  # a kernel, memcpy or memset on the GPU
            device_busy_us += device_us(event, own=False)
            continue
        chain = chain_of(event)
        category, in_step = category_of(chain), chain[0].startswith(STEP_MARK)
        own_us = device_us(event, own=True) if cuda else event.self_cpu_time_total
        if in_step:
            host_us[category] += event.self_cpu_time_total
            if event.name in SYNC_OPS:
                syncs[chain[1] if len(chain) > 2 else event.name] += 1
        elif not cuda:  # another thread's time is not the step's
            continue
        name = PYTHON if event.name.startswith(STEP_MARK) else event.name
        ops[(name, category)][0] += 1
        ops[(name, category)][1] += own_us
        category_us[category] += own_us
    if cuda:  # kernels no op claimed (e.g. launched by a library's own thread) are "other"
        category_us["other"] += max(0.0, device_busy_us - sum(category_us.values()))
        category_us["idle"] = max(0.0, 1000.0 * wall_ms * steps - device_busy_us)
    per_step = {name: category_us[name] / 1000.0 / steps for name in NAMES}
    total = sum(per_step.values())
    top = sorted(ops.items(), key=lambda item: -item[1][1])[:TOP_OPS]
    return Profile(
        steps=steps, activities=["cpu", "cuda"] if cuda else ["cpu"], wall_ms=wall_ms, total_ms=total,
        categories={name: {"ms": per_step[name], "share": per_step[name] / total if total else 0.0} for name in NAMES},
        idle_ms=per_step["idle"] if cuda else None,
        host_ms={name: host_us[name] / 1000.0 / steps for name in NAMES if host_us[name]},
        host_syncs_per_step=sum(syncs.values()) / steps,
        host_syncs=[{"in": name, "per_step": count / steps} for name, count in syncs.most_common()],
        top_ops=[{"name": name, "calls": calls / steps, "self_ms": us / 1000.0 / steps, "category": category}
                 for (name, category), (calls, us) in top], **facts)
