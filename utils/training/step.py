"""The training step, its optimizer and learning-rate schedule, and the test-set evaluation.

The step is PyTorch's AMP recipe: autocast around forward and loss, then GradScaler's
scale(loss).backward(), step(optimizer), update(), with gradient accumulation and clipping
as in PyTorch's AMP examples. Every mode runs this same code; the mode only switches autocast
and the scaler on or off and picks the dtype.
"""
import contextlib
import math
import types

import torch
from torch import nn

from utils import compat
from utils.data.loaders import eval_batches
from utils.training import distributed, precision


def train_step(model, batches, criterion, optimizer, scaler, mode, device, clip_grad=None, skip_nonfinite=False):
    """One optimizer step over the micro-batches `batches` (a sized iterable, which may draw
    each one lazily: one is held at a time); returns the loss of the whole effective batch as a
    device tensor (no host sync, unless `skip_nonfinite`)."""
    total, seen = None, 0
    for images, labels in batches:  # not enumerate(), whose cached result tuple keeps the last batch alive
        seen += 1
        with gradient_sync(model, seen == len(batches)):
            with precision.autocast(mode, device):
                loss = criterion(model(images).float(), labels) / len(batches)  # the loss is always FP32
            scaler.scale(loss).backward()
        total = loss.detach() if total is None else total + loss.detach()
        del images, labels, loss  # freed before the next micro-batch is drawn
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
    overflow, so skipped steps = steps - count, known without any host-device sync.

    Before torch 2.0 (no step hooks) it wraps the optimizer's own step method, which GradScaler
    and the LR scheduler call through the same attribute; build it before the scheduler."""

    def __init__(self, optimizer):
        self.count = 0
        if compat.has_step_hooks():
            optimizer.register_step_post_hook(self.hook)
            return
        step = optimizer.step

        def counted_step(optimizer, *args, **kwargs):
            result = step(*args, **kwargs)
            self.count += 1
            return result

        optimizer.step = types.MethodType(counted_step, optimizer)  # a bound method, as the scheduler expects

    def hook(self, optimizer, args, kwargs):
        self.count += 1


@torch.no_grad()
def evaluate(model, mode, data, batch_size, device, channels_last, world=None, stop=None, reporter=None):
    """Top-1 accuracy on the test set, under the same autocast as training; with several
    ranks each scores its shard of the test set and the counts are summed. None when a stop
    signal (a utils.stop.StopRequest) cut the pass short on any rank. `reporter` (a
    progress.Reporter) shows a bar in a terminal."""
    world = world or distributed.World()
    model.eval()
    counts = torch.zeros(3, dtype=torch.long, device=device)  # correct, seen, stopped
    batches = eval_batches(data.test_images, data.test_labels, batch_size, device, channels_last,
                           (world.rank, world.size))
    if reporter is not None:
        shard = -(-len(data.test_labels) // world.size)
        batches = reporter.evaluation(batches, -(-shard // batch_size), mode.name)
    for images, labels in batches:
        if stop is not None and stop.requested:  # a host flag: no sync
            counts[2] = 1
            break
        with precision.autocast(mode, device):
            counts[0] += (model(images).argmax(dim=1) == labels).sum()
        counts[1] += len(labels)
    model.train()
    correct, seen, stopped = distributed.all_reduce(counts, "sum").tolist()
    return None if stopped else correct / seen
