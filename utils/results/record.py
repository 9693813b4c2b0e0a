"""The result record: the one definition of what a results file holds (schema ampbench.result/7).

A results document is {"schema", "env", "config", "data", "incomplete", "runs", "comparison"};
one that utils.report read from a file of an earlier release also holds "upgraded_from" (upgrade.py);
each entry of "runs" is a RunRecord, one precision mode's run, field for field as below, and
each value of "comparison" a ComparisonRow (comparison_row.py). The comparison, table, CSV and
plot read these fields back from JSON, so their names are the contract README's "Results file"
documents.
"""
from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field, replace
from typing import TYPE_CHECKING, Any, Dict, List, Optional

from utils.clock import now_utc
from utils.config import ACCURACY_KEYS, SETUP_KEYS, usable_cores
from utils.explain.diagnose import diagnose_run
from utils.grad_comm import communication
from utils.measure import host_load
from utils.measure.step_stats import outliers, summarize
from utils.results.compare import learned
from utils.results.comparison_row import ComparisonRow

if TYPE_CHECKING:  # annotations only: they import torch, or the config above this layer
    from utils.config import DataSettings, Distributed, Speed, Training
    from utils.data.dataset import Data
    from utils.explain.profiler import Profile
    from utils.training.context import RunContext
    from utils.training.curve import AccuracyCurve
    from utils.training.loop import LoopOutcome, Statistics
    from utils.training.trainer import Trainer

# A renamed key or one that readers need added is a new schema: docs/results-schema.md lists each release's keys.
SCHEMA = "ampbench.result/7"
# The release whose peak_memory_bytes included the warm-up (cuDNN autotuning, compilation),
# which /2 on measures apart: its runs never pool with later ones, and the table says so.
WARMUP_IN_PEAK = "ampbench.result/1"


@dataclass
class RunRecord:
    mode: str
    description: str
    device: str
    tf32: Dict[str, bool]
    data: str
    loader: str
    channels_last: bool
    compiled: bool
    compile_mode: Optional[str]
    batch_size: int
    accum_steps: int
    effective_batch_size: int
    world_size: int
    global_batch_size: int
    timing_unit: str  # what one timed step is: one optimizer step, all micro-batches included
    steps: int
    completed_steps: int
    incomplete: bool
    stopped_by: Optional[str]
    resumed_from_step: Optional[int]
    segments: int
    warmup: int
    timed_steps: int
    step_time_ms: Optional[Dict[str, float]]  # summarize(): median, mean, p10, p90, min, max
    step_times_ms: List[float]
    images_per_sec: Optional[float]
    data_time_ms: Optional[Dict[str, float]]
    compute_time_ms: Optional[Dict[str, float]]
    peak_memory_bytes: int  # the steady state: the peak over the timed steps (from /2; /1: warm-up included)
    peak_memory_kind: str
    final_loss: Optional[float]
    loss_curve: List[float]
    skipped_steps: int
    final_loss_scale: Optional[float]
    final_lr: float
    test_accuracy: Optional[float]
    epochs_seen: float
    wall_time_s: float
    first_step_s: Optional[float]
    compile_time_s: Optional[float]
    initial_weights_sha256: str
    first_batch_sha256: Optional[str]
    repeat: int = 0
    # flops.utilisation() at the median step time (null for a run with no timed step)
    train_flops_per_step: Optional[int] = None
    tflops: Optional[float] = None
    peak_tflops: Optional[float] = None
    mfu_pct: Optional[float] = None
    mfu_note: Optional[str] = None
    learned: Optional[bool] = None  # compare.learned(): False when the loss or accuracy stayed at chance
    lr_curve: Optional[List[float]] = None  # every step's learning rate
    loss_scale_curve: Optional[List[float]] = None  # the loss scale after every step (null without a scaler)
    finished_utc: Optional[str] = None  # when the run's evaluation ended: each CSV row's timestamp
    profile: Optional[object] = None  # --explain: a utils.explain.profiler.Profile, with this run's diagnosis
    numerics: Optional[Dict] = None  # --numerics: utils.numerics.census' gradient census
    memory: Optional[Dict] = None  # --numerics: utils.measure.footprint's breakdown of one step's memory
    max_batch: Optional[int] = None  # --max-batch (CUDA): the largest batch this mode trains in the GPU's memory
    warmup_peak_memory_bytes: Optional[int] = None  # the warm-up steps' peak (null without warm-up)
    peak_reserved_bytes: Optional[int] = None  # CUDA: the caching allocator's reserved peak over the timed steps
    optimizer_impl: Optional[str] = None  # the SGD that ran: "fused" or "foreach"
    seed: Optional[int] = None  # the seed of its weights and data order: the same in every mode of a seed
    accuracy_curve: Optional[List[Dict]] = None  # {step, epoch, train_s, accuracy}: --eval-every's and the last
    eval_time_s: Optional[float] = None  # the evaluations' own time, apart from train_s
    target_accuracy: Optional[float] = None  # --target-accuracy, and when the curve first reached it:
    time_to_target_s: Optional[float] = None  # training time (steps and warm-up, never evaluations)
    steps_to_target: Optional[int] = None
    epochs_to_target: Optional[float] = None
    best_accuracy: Optional[float] = None  # the curve's best, e.g. of a run that never reached the target
    outlier_steps: Optional[List[Dict]] = None  # step_stats.outliers(): timed steps over 10x the median (a pause)
    grad_comm: Optional[str] = None  # the dtype DDP's gradients travelled in (null in one process)
    bucket_mb: Optional[float] = None  # DDP's bucket_cap_mb (null in one process)
    # the fp8 modes (utils/training/float8.py): recipe, emulated, linear_layers, converted_layers,
    # fp8_flops_per_step, flop_share (of the step's matmul and convolution FLOPs), left_out [{layer, why}],
    # matmul_shapes [[M, K, N]] of the converted layers' forward matmuls (M: rows in one process's batch),
    # prediction (utils/explain/fp8_predict.run_prediction) and prediction_note (why it is null)
    fp8: Optional[Dict] = None
    host: Optional[Dict] = None  # host_load.combined(): load and CPU use over every segment's timed steps, warning
    # utils/measure/nvml_meter.py: this process's GPU over its timed steps (joules_per_image, mean_watts, joules,
    # seconds, images, source, power_samples, nvml_index, window_too_short), or null and the sentence saying why
    energy: Optional[Dict] = None
    energy_unavailable: Optional[str] = None
    # the same meter over the same spans: the share of the time the GPU ran kernels (share, source, window_s,
    # samples, sample_period_s), or null and the sentence saying why
    gpu_busy: Optional[Dict] = None
    gpu_busy_unavailable: Optional[str] = None
    # a streamed run with --skip-bad-images: the files it left out as no whole images (count, examples); else null
    skipped_images: Optional[Dict] = None
    # streamed data: the loader alone, the step alone and training as a whole, per process, with the verdict
    # and the loader's levers (utils/training/feed.py measures it, utils/measure/feed.py says it); else null
    feed: Optional[Dict] = None

    def to_dict(self) -> Dict[str, Any]:
        return asdict(self)


def should_evaluate(training: Training, data: Data, outcome: LoopOutcome) -> bool:
    """Test accuracy is measured for a run that finished with a finite loss on real data."""
    losses = outcome.stats.losses
    return not (training.no_eval or not data.has_test_set or outcome.stopped_by or not losses
                or not math.isfinite(losses[-1]))


@dataclass
class SideMeasurements:
    """What was measured of a run beside its timed loop (none of it changes the loop's figures)."""
    test_accuracy: Optional[float] = None
    profile: Optional[Profile] = None  # --explain: a utils.explain.profiler.Profile, without its diagnosis
    numerics: Optional[Dict] = None  # --numerics: the gradient census
    memory: Optional[Dict] = None  # --numerics: one step's memory, by kind
    max_batch: Optional[int] = None  # --max-batch
    feed: Optional[Dict] = None  # streamed data: whether the loader keeps up with the step (training/feed.py)
    curve: Optional[AccuracyCurve] = None  # the run's AccuracyCurve (training/curve.py), None without evaluation
    stopped_by: Optional[str] = None  # a signal that cut the final evaluation short
    failures: List[str] = field(default_factory=list)  # writes that failed on the way (a trace), in words


def build(training: Training, data_settings: DataSettings, speed: Speed, distributed: Distributed, trainer: Trainer,
          outcome: LoopOutcome, data: Data, context: RunContext, measured: SideMeasurements, repeat: int = 0,
          flops_per_step: Optional[int] = None, fp8: Optional[Dict[str, Any]] = None,
          flops_note: Optional[str] = None) -> RunRecord:
    """The record of one mode's run: the settings it ran with, what its loop measured and what was
    `measured` beside it; with `flops_per_step` (the whole job's), the TFLOP/s and MFU at its
    median, else `flops_note`, why not, as its mfu_note; `fp8` is an fp8 mode's accounting."""
    # imported here, as they import torch: reading result files (utils.report) needs no torch
    from utils.measure import flops, memory
    from utils.measure.envinfo import device_name, tf32_flags

    stats, mode, device, world = outcome.stats, trainer.mode, context.device, context.world
    global_batch = training.global_batch_size(world.size)
    timing = timing_fields(stats, global_batch)
    losses = stats.losses
    utilisation = flops.utilisation(flops_per_step, timing["step_time_ms"]["median"], device_name(device), mode,
                                    device.type == "cuda", world.size, fp8["flop_share"] if fp8 else None) \
        if timing["step_time_ms"] and flops_per_step else {"mfu_note": flops_note}
    record = RunRecord(
        mode=mode.name, description=mode.description, device=str(device), tf32=tf32_flags(), data=data.name,
        loader=trainer.plan.loader, channels_last=speed.channels_last, compiled=speed.compile,
        compile_mode=speed.compile_mode if speed.compile else None, batch_size=training.batch_size,
        accum_steps=training.accum_steps, effective_batch_size=training.effective_batch_size,
        world_size=world.size, global_batch_size=global_batch, timing_unit="optimizer_step", steps=trainer.plan.steps,
        completed_steps=outcome.completed_steps,
        incomplete=not outcome.ran_all_steps(trainer.plan.steps) or measured.stopped_by is not None,
        stopped_by=outcome.stopped_by or measured.stopped_by, resumed_from_step=outcome.start_step or None,
        segments=stats.segments, warmup=trainer.plan.timing_warmup, **timing, peak_memory_bytes=stats.peak_memory_bytes,
        peak_memory_kind=memory.peak_bytes(device)[1], final_loss=losses[-1] if losses else None, loss_curve=losses,
        lr_curve=stats.lrs, loss_scale_curve=stats.loss_scales if trainer.scaler.is_enabled() else None,
        skipped_steps=outcome.skipped_steps,
        final_loss_scale=trainer.scaler.get_scale() if trainer.scaler.is_enabled() else None,
        final_lr=trainer.optimizer.param_groups[0]["lr"], test_accuracy=measured.test_accuracy,
        epochs_seen=outcome.completed_steps * global_batch / data.train_count, wall_time_s=stats.wall_time_s,
        first_step_s=outcome.first_step_s, compile_time_s=outcome.first_step_s if speed.compile else None,
        initial_weights_sha256=trainer.initial_weights_sha256, first_batch_sha256=outcome.first_batch_sha256,
        repeat=repeat, finished_utc=now_utc(), numerics=measured.numerics, memory=measured.memory,
        max_batch=measured.max_batch, warmup_peak_memory_bytes=stats.warmup_peak_memory_bytes or None,
        peak_reserved_bytes=stats.peak_reserved_bytes if device.type == "cuda" else None,
        optimizer_impl=trainer.optimizer_impl, seed=training.seed, fp8=fp8,
        host=host_fields(stats.host_readings, device.type, timing), energy=outcome.energy,
        energy_unavailable=outcome.energy_unavailable, gpu_busy=outcome.gpu_busy,
        gpu_busy_unavailable=outcome.gpu_busy_unavailable, **accuracy_fields(measured.curve), **utilisation,
        grad_comm=trainer.grad_comm, skipped_images=data.run_skipped, feed=measured.feed,
        bucket_mb=communication(distributed.grad_comm, distributed.bucket_mb, world.size)["bucket_mb"])
    record.learned = learned(record.data, record.loss_curve, record.test_accuracy)
    if measured.profile is not None:
        diagnosis = diagnose_run(record, measured.profile, data_settings.workers, usable_cores())
        record.profile = replace(measured.profile, diagnosis=diagnosis)
    return record


def timing_fields(stats: Statistics, global_batch: int) -> Dict[str, Any]:
    """The record's step timings: their statistics, every timed step and the outliers, the
    throughput, and the data wait and compute apart (all None when no step was timed)."""
    timed = bool(stats.step_ms)
    step_stats = summarize(stats.step_ms) if timed else None
    return {"timed_steps": len(stats.step_ms), "step_time_ms": step_stats, "step_times_ms": stats.step_ms,
            "outlier_steps": outliers(stats.step_ms),
            "images_per_sec": global_batch * 1000.0 / step_stats["median"] if step_stats is not None else None,
            "data_time_ms": summarize(stats.data_ms) if timed else None,
            "compute_time_ms": summarize([s - d for s, d in zip(stats.step_ms, stats.data_ms)]) if timed else None}


def host_fields(readings: List[Dict[str, Any]], device_type: str, timing: Dict[str, Any]) -> Optional[Dict[str, Any]]:
    """runs[].host: the host's readings of every process that timed steps, combined, with the
    warning they call for (or null when no process timed a step); `timing` is timing_fields()'."""
    if not readings:
        return None
    step, data = timing["step_time_ms"], timing["data_time_ms"]
    share = data["median"] / step["median"] if step and step["median"] > 0 else None
    return dict(host_load.combined(readings), warning=host_load.warning(readings, device_type, share))


def accuracy_fields(curve: Optional[AccuracyCurve]) -> Dict[str, Any]:
    """The record's accuracy curve and time to target, from the run's AccuracyCurve."""
    if curve is None:
        return {}
    points = list(curve.points)
    first = curve.first_at_target
    return {"accuracy_curve": points, "eval_time_s": curve.eval_time_s, "target_accuracy": curve.target,
            "time_to_target_s": first["train_s"] if first else None,
            "steps_to_target": first["step"] if first else None,
            "epochs_to_target": first["epoch"] if first else None,
            "best_accuracy": max((point["accuracy"] for point in points), default=None)}


def make_document(env: Dict[str, Any], config: Dict[str, Any], data_info: Dict[str, Any], incomplete: bool,
                  runs: List[Dict[str, Any]], comparison: Dict[str, ComparisonRow]) -> Dict[str, Any]:
    """The whole results file."""
    return {"schema": SCHEMA, "env": env, "config": config, "data": data_info, "incomplete": incomplete,
            "runs": runs, "comparison": comparison}


def setup_of(document: Dict[str, Any]) -> Dict[str, Any]:
    """What must match for runs to be compared: everything but the precision mode that can
    change step times, memory or accuracy (a channels_last run never pools with a plain one),
    and the accuracy question asked (target, margin, evaluation cadence), and the schema its runs
    were written in. A document read from a file is upgraded first (upgrade.py)."""
    config, env = document["config"], document["env"]
    setup = {key: config.get(key) for key in (*SETUP_KEYS, *ACCURACY_KEYS)}
    setup["optimizer_impl"] = optimizer_impl(document)
    setup.update(workers=config.get("workers") if config.get("loader") in ("torchvision", "stream", "dali") else None,
                 compile_mode=config.get("compile_mode") if config.get("compile") else None,
                 mode_steps=config.get("mode_steps"),  # runs of a mode timed for other lengths never pool
                 world_size=env["world_size"], device=env["device"], torch=env.get("torch"),
                 data=document["data"]["name"], schema=written_schema(document),
                 decode=document["data"].get("decode"),  # streamed images decoded in the workers or on the GPU
                 # two image folders are two data sets, wherever each lies (CIFAR-10 and synthetic have none)
                 data_fingerprint=document["data"].get("fingerprint"),
                 fp8_emulate=bool(config.get("fp8_emulate")))  # emulated FP8 never pools with FP8 tensor cores
    setup.update(communication(config.get("grad_comm"), config.get("bucket_mb"), setup["world_size"]))
    return setup


def written_schema(document: Dict[str, Any]) -> Optional[str]:
    """The schema `document`'s runs were written in: the earlier release's of a document that
    upgrade.py gave this release's form, else its own."""
    return document.get("upgraded_from") or document.get("schema")


def optimizer_impl(document: Dict[str, Any]) -> str:
    """The SGD the document's runs used ("fused" or "foreach"): what ran, which a degraded run
    records, rather than what was asked for."""
    ran = {run["optimizer_impl"] for run in document["runs"]}
    return ran.pop() if len(ran) == 1 else "mixed"
