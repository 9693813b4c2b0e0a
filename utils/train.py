"""The training step and the timed run of one precision mode.

The step is PyTorch's AMP recipe: autocast around forward and loss, then GradScaler's
scale(loss).backward(), step(optimizer), update(), with gradient accumulation and clipping
as in PyTorch's AMP examples. Every mode runs this same code; the mode only switches autocast
and the scaler on or off and picks the dtype.
"""
import contextlib
import copy
import hashlib
import math
import time

import torch
from torch import nn
from torch.nn.parallel import DistributedDataParallel

from utils import checkpoint, distributed, memory, precision
from utils.hostcopy import HostCopy
from utils.loaders import eval_batches, make_train_loader
from utils.progress import Progress
from utils.timing import StepTimer, summarize


def train_step(model, batches, criterion, optimizer, scaler, mode, device, clip_grad=None, skip_nonfinite=False):
    """One optimizer step over one or more micro-batches; returns the loss of the whole
    effective batch as a device tensor (no host sync, unless `skip_nonfinite`)."""
    total = None
    for index, (images, labels) in enumerate(batches):
        last = index == len(batches) - 1
        with gradient_sync(model, last):
            with precision.autocast(mode, device):
                loss = criterion(model(images).float(), labels) / len(batches)  # the loss is always FP32
            scaler.scale(loss).backward()
        total = loss.detach() if total is None else total + loss.detach()
    if skip_nonfinite and not torch.isfinite(total).item():  # --on-nan skip, without a scaler
        model.zero_grad(set_to_none=True)
        optimizer.zero_grad(set_to_none=True)
        return total
    if clip_grad is not None:
        scaler.unscale_(optimizer)  # clip the true gradients, not the scaled ones
        nn.utils.clip_grad_norm_([p for group in optimizer.param_groups for p in group["params"]], clip_grad)
    scaler.step(optimizer)  # skipped by the scaler when a gradient is inf/NaN
    scaler.update()
    optimizer.zero_grad(set_to_none=True)
    return total


def gradient_sync(model, enabled):
    """DDP all-reduces gradients in backward; while accumulating, only the last micro-batch
    needs to (the others run under no_sync)."""
    if enabled or not hasattr(model, "no_sync"):
        return contextlib.nullcontext()
    return model.no_sync()


def make_optimizer(params, lr, momentum=0.9, weight_decay=5e-4, nesterov=False):
    return torch.optim.SGD(params, lr=lr, momentum=momentum, weight_decay=weight_decay, nesterov=nesterov)


def make_scheduler(optimizer, schedule, steps, warmup_steps):
    """LR per optimizer step: a linear warm-up over `warmup_steps`, then constant or cosine to
    zero; or torch's OneCycleLR (its ramp-up takes the warm-up steps, else 30%)."""
    if schedule == "onecycle":
        return torch.optim.lr_scheduler.OneCycleLR(
            optimizer, max_lr=[group["lr"] for group in optimizer.param_groups], total_steps=steps,
            pct_start=warmup_steps / steps if warmup_steps else 0.3)

    def factor(step):
        if step < warmup_steps:
            return (step + 1) / warmup_steps
        if schedule == "cosine":
            return 0.5 * (1 + math.cos(math.pi * (step - warmup_steps) / max(1, steps - warmup_steps)))
        return 1.0

    return torch.optim.lr_scheduler.LambdaLR(optimizer, factor)


class StepCounter:
    """Counts the optimizer steps that really ran: the scalers skip optimizer.step() on
    overflow, so skipped steps = steps - count, known without any host-device sync."""

    def __init__(self, optimizer):
        self.count = 0
        optimizer.register_step_post_hook(self.hook)

    def hook(self, optimizer, args, kwargs):
        self.count += 1


class RankAgreement:
    """Lets every rank decide at the same step whether any rank saw a non-finite loss or a
    stop signal, without a host-device sync per step: every `every` steps the flags are
    max-reduced across ranks on the device and copied to the host without blocking; the copy
    is read at the next check, `every` steps later, long after it has landed. So a problem is
    acted on one to two checks late, identically on every rank (a hang otherwise)."""
    CHECK_EVERY = 20

    def __init__(self, device, world):
        self.device = device
        self.every = self.CHECK_EVERY if device.type == "cuda" or world.distributed else 1
        self.nonfinite = torch.zeros((), dtype=torch.uint8, device=device)
        self.pending = None

    def note_loss(self, loss):
        self.nonfinite |= (~torch.isfinite(loss)).to(torch.uint8)

    def check(self, step, stop_requested):
        """(diverged, stop) as agreed by all ranks; (False, False) between checks."""
        if step % self.every:
            return False, False
        agreed = (False, False)
        if self.pending is not None:
            diverged, stop = self.pending.value()
            agreed = (bool(diverged), bool(stop))
        stop_flag = torch.tensor(int(stop_requested), dtype=torch.uint8).to(self.device, non_blocking=True)
        self.pending = HostCopy(distributed.all_reduce(torch.stack([self.nonfinite, stop_flag]), "max"))
        return agreed


class Diverged(Exception):
    """Training produced a non-finite loss without a loss scaler (--on-nan stop)."""

    def __init__(self, step, value, result):
        super().__init__(step, value)
        self.step, self.value, self.result = step, value, result


def synchronize(device):
    if device.type == "cuda":
        torch.cuda.synchronize(device)


@torch.no_grad()
def evaluate(model, mode, data, batch_size, device, channels_last, world=None):
    """Top-1 accuracy on the test set, under the same autocast as training; with several
    ranks each scores its shard of the test set and the counts are summed."""
    world = world or distributed.World()
    model.eval()
    counts = torch.zeros(2, dtype=torch.long, device=device)  # correct, seen
    for images, labels in eval_batches(data.test_images, data.test_labels, batch_size, device, channels_last,
                                       (world.rank, world.size)):
        with precision.autocast(mode, device):
            counts[0] += (model(images).argmax(dim=1) == labels).sum()
        counts[1] += len(labels)
    model.train()
    correct, seen = distributed.all_reduce(counts, "sum").tolist()
    return correct / seen


def digest(tensors):
    """A short sha256 of tensors' bytes: equal digests mean bitwise-equal starting points."""
    sha = hashlib.sha256()
    for tensor in tensors:
        sha.update(tensor.detach().cpu().reshape(-1).view(torch.uint8).numpy().tobytes())
    return sha.hexdigest()[:16]


class ModeRun:
    """Everything one mode's training holds: model, optimizer, schedule, scaler, loader,
    and the statistics gathered so far (also across a checkpoint and resume)."""

    def __init__(self, initial_model, mode, data, args, device, world=None):
        self.mode, self.data, self.args, self.device = mode, data, args, device
        self.world = world or distributed.World()
        precision.set_tf32(mode.tf32)
        self.model = copy.deepcopy(initial_model).to(device)
        self.initial_weights = digest(self.model.state_dict().values())
        if args.channels_last:
            self.model = self.model.to(memory_format=torch.channels_last)
        self.params, self.scaler = precision.prepare(self.model, mode, device, args.loss_scale)
        self.trained = self.model  # what the step calls: possibly wrapped in DDP, then compiled
        if self.world.distributed:  # broadcasts rank 0's weights, all-reduces gradients in backward
            self.trained = DistributedDataParallel(self.model, device_ids=[device.index] if device.index is not None
                                                   else None)
        if args.compile:
            self.trained = torch.compile(self.trained, mode=args.compile_mode)
        self.loader = make_train_loader(args.loader, data.train_images, data.train_labels, args.batch_size,
                                        device, args.seed, args.workers, args.channels_last,
                                        (self.world.rank, self.world.size))
        self.criterion = nn.CrossEntropyLoss(label_smoothing=args.label_smoothing)
        self.optimizer = make_optimizer(self.params, args.lr, args.momentum, args.weight_decay, args.nesterov)
        self.scheduler = make_scheduler(self.optimizer, args.lr_schedule, args.steps, args.warmup_lr_steps)
        self.counter = StepCounter(self.optimizer)
        self.scaled = mode.loss_scaling or mode.master_weights  # the scaler already handles inf/NaN
        # statistics of earlier processes (from a checkpoint), warm-up already removed
        self.start_step = 0
        self.earlier = {"step_ms": [], "data_ms": [], "losses": [], "wall_time_s": 0.0, "peak_memory_bytes": 0,
                        "segments": 0}

    def resume(self, state, warning):
        """Continue from a checkpoint (checked compatible by checkpoint.check_compatible)."""
        self.model.load_state_dict(state["model"])
        if self.mode.master_weights:
            with torch.no_grad():
                for param, saved in zip(self.params, state["masters"]):
                    param.copy_(saved)
        self.optimizer.load_state_dict(state["optimizer"])
        self.scheduler.load_state_dict(state["scheduler"])
        if state["scaler"] is not None and self.scaler.is_enabled() and state["mode"] == self.mode.name:
            self.scaler.load_state_dict(state["scaler"])
        torch.set_rng_state(state["rng"]["torch"].cpu())
        if self.device.type == "cuda" and state["rng"]["cuda"] is not None:
            torch.cuda.set_rng_state_all([s.cpu() for s in state["rng"]["cuda"]])
        self.loader.load_state_dict(state["rng"]["loader"])
        self.start_step = state["step"]
        self.counter.count = state["stats"]["optimizer_steps"]
        if warning is None:  # same mode: the statistics go on
            self.earlier = state["stats"]

    def state(self, step, stats):
        return {
            "config": vars(self.args), "mode": self.mode.name, "step": step,
            "model": self.model.state_dict(),
            "masters": [p.detach() for p in self.params] if self.mode.master_weights else None,
            "optimizer": self.optimizer.state_dict(), "scheduler": self.scheduler.state_dict(),
            "scaler": self.scaler.state_dict() if self.scaler.is_enabled() else None,
            "rng": {"torch": torch.get_rng_state(),
                    "cuda": torch.cuda.get_rng_state_all() if self.device.type == "cuda" else None,
                    "loader": self.loader.state_dict()},
            "stats": {**stats, "optimizer_steps": self.counter.count},
        }

    def run(self, stop=None):
        """Train from self.start_step to args.steps; return the result record. `stop` (a
        StopRequest) ends the run early after the current step, marked incomplete."""
        args, device, mode = self.args, self.device, self.mode
        timer = StepTimer(device)
        watch_divergence = not self.scaled and args.on_nan == "stop"
        agreement = RankAgreement(device, self.world) if watch_divergence or self.world.distributed else None
        progress = Progress(args.steps, mode.name, args.batch_size * args.accum_steps * self.world.size,
                            enabled=not args.no_progress and self.world.is_main, initial=self.start_step)
        step_ms, data_ms, losses = [], [], []  # this process's, warm-up included
        first_step_s = first_batch = None
        step = self.start_step
        stopped_by = None

        memory.reset_peak(device)
        started = time.perf_counter()
        while step < args.steps:
            signalled = stop is not None and stop.signal_name is not None
            diverged, stopping = agreement.check(step, signalled) if agreement else (False, False)
            if stopping or (signalled and not self.world.distributed):
                stopped_by = stop.signal_name if signalled else "signal to another rank"
                break
            if diverged and watch_divergence:
                break
            timer.start_step()
            batches = [next(self.loader) for _ in range(args.accum_steps)]
            timer.batch_ready()
            if first_batch is None:  # a device-side copy now, hashed after the timed loop
                first_batch = (batches[0][0].clone(), batches[0][1].clone())
            optimizer_steps = self.counter.count
            loss = train_step(self.trained, batches, self.criterion, self.optimizer, self.scaler, mode, device,
                              args.clip_grad, skip_nonfinite=not self.scaled and args.on_nan == "skip")
            if self.counter.count != optimizer_steps:  # the LR schedule follows real optimizer steps
                self.scheduler.step()
            step += 1
            losses.append(loss)
            if step == self.start_step + 1 and args.warmup > 0:  # a warm-up step: waiting costs nothing
                synchronize(device)
                first_step_s = time.perf_counter() - started
            progress.update(loss)
            if watch_divergence:
                agreement.note_loss(loss)
            if args.checkpoint and args.checkpoint_every and step % args.checkpoint_every == 0 and step < args.steps:
                self.collect(timer, step_ms, data_ms)
                self.save(step, self.stats(step_ms, data_ms, losses, started))
                timer = StepTimer(device)
        self.collect(timer, step_ms, data_ms)
        progress.close()
        stats = self.stats(step_ms, data_ms, losses, started)
        result = self.result(stats, step, first_step_s, first_batch, stopped_by)
        curve = stats["losses"]
        bad = next((i for i, value in enumerate(curve) if not math.isfinite(value)), None)
        if bad is not None and not self.scaled and args.on_nan == "stop":
            raise Diverged(bad + 1, curve[bad], result)
        if args.checkpoint and step > self.start_step:
            self.save(step, stats)
        return result

    def save(self, step, stats):
        """Rank 0 writes the checkpoint (every rank holds the same weights)."""
        if self.world.is_main:
            checkpoint.save(self.args.checkpoint, self.state(step, stats), self.model)

    def collect(self, timer, step_ms, data_ms):
        """Close the timer's steps (one synchronize) and add their times to the lists."""
        timer.stop()
        step_ms += timer.step_ms()
        data_ms += timer.data_ms()

    def stats(self, step_ms, data_ms, losses, started):
        """All statistics so far: earlier processes' plus this one's after its warm-up. Across
        ranks a step lasts as long as its slowest rank, and the loss is the ranks' mean."""
        peak, _ = memory.peak_bytes(self.device)
        earlier, world, device = self.earlier, self.world, self.device
        step_ms, data_ms = step_ms[self.args.warmup:], data_ms[self.args.warmup:]
        curve = torch.stack(losses).float() if losses else torch.zeros(0, device=device)
        if world.distributed:
            step_ms = distributed.all_reduce(torch.tensor(step_ms, dtype=torch.float64, device=device), "max").tolist()
            data_ms = distributed.all_reduce(torch.tensor(data_ms, dtype=torch.float64, device=device), "max").tolist()
            curve = distributed.all_reduce(curve, "sum") / world.size
            peak = int(distributed.all_reduce(torch.tensor(peak, device=device), "max").item())
        return {"step_ms": earlier["step_ms"] + step_ms,
                "data_ms": earlier["data_ms"] + data_ms,
                "losses": earlier["losses"] + curve.cpu().tolist(),
                "wall_time_s": earlier["wall_time_s"] + time.perf_counter() - started,
                "peak_memory_bytes": max(earlier["peak_memory_bytes"], peak),
                "segments": earlier["segments"] + 1}

    def result(self, stats, step, first_step_s, first_batch, stopped_by):
        args, mode = self.args, self.mode
        timed = bool(stats["step_ms"])
        step_stats = summarize(stats["step_ms"]) if timed else None
        effective_batch = args.batch_size * args.accum_steps
        global_batch = effective_batch * self.world.size
        curve = stats["losses"]
        evaluated = not (args.no_eval or self.data.test_images is None or stopped_by or not curve
                         or not math.isfinite(curve[-1]))
        return {
            "mode": mode.name,
            "description": mode.description,
            "device": str(self.device),
            "tf32": precision.tf32_flags(),
            "data": self.data.name,
            "loader": args.loader,
            "channels_last": args.channels_last,
            "compiled": args.compile,
            "compile_mode": args.compile_mode if args.compile else None,
            "batch_size": args.batch_size,
            "accum_steps": args.accum_steps,
            "effective_batch_size": effective_batch,
            "world_size": self.world.size,
            "global_batch_size": global_batch,
            "timing_unit": "optimizer_step",
            "steps": args.steps,
            "completed_steps": step,
            "incomplete": step < args.steps,
            "stopped_by": stopped_by,
            "resumed_from_step": self.start_step or None,
            "segments": stats["segments"],
            "warmup": args.warmup,
            "timed_steps": len(stats["step_ms"]),
            "step_time_ms": step_stats,
            "step_times_ms": stats["step_ms"],
            "images_per_sec": global_batch * 1000.0 / step_stats["median"] if timed else None,
            "data_time_ms": summarize(stats["data_ms"]) if timed else None,
            "compute_time_ms": summarize([s - d for s, d in zip(stats["step_ms"], stats["data_ms"])])
            if timed else None,
            "peak_memory_bytes": stats["peak_memory_bytes"],
            "peak_memory_kind": memory.peak_bytes(self.device)[1],
            "final_loss": curve[-1] if curve else None,
            "loss_curve": curve,
            "skipped_steps": step - self.counter.count,
            "final_loss_scale": self.scaler.get_scale() if self.scaler.is_enabled() else None,
            "final_lr": self.optimizer.param_groups[0]["lr"],
            "test_accuracy": evaluate(self.model, mode, self.data, args.batch_size, self.device,
                                      args.channels_last, self.world) if evaluated else None,
            "epochs_seen": step * global_batch / len(self.data.train_images),
            "wall_time_s": stats["wall_time_s"],
            "first_step_s": first_step_s,
            "compile_time_s": first_step_s if args.compile else None,
            "initial_weights_sha256": self.initial_weights,
            "first_batch_sha256": digest(first_batch) if first_batch is not None else None,
        }


def run_mode(initial_model, mode, data, args, device, stop=None):
    """Train a copy of `initial_model` for args.steps steps in `mode`; return its result record.

    Each call starts from the same weights and the same data order (the loader is seeded with
    args.seed), so runs of different modes differ by precision alone. With --compile, the
    first step (always a warm-up step) compiles; its wall time is reported as compile time.
    """
    return ModeRun(initial_model, mode, data, args, device).run(stop)
