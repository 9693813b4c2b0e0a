"""The training step and the timed run of one precision mode.

The step is PyTorch's AMP recipe: autocast around forward and loss, then GradScaler's
scale(loss).backward(), step(optimizer), update(). Every mode runs this same code; the mode
only switches autocast and the scaler on or off and picks the dtype.
"""
import copy
import hashlib
import time

import torch
from torch import nn

from utils import memory, precision
from utils.loaders import DeviceLoader, eval_batches
from utils.progress import Progress
from utils.timing import StepTimer, summarize


def train_step(model, images, labels, criterion, optimizer, scaler, mode, device):
    """One optimizer step; returns the loss as a device tensor (no host sync)."""
    with precision.autocast(mode, device):
        loss = criterion(model(images).float(), labels)  # the loss is always computed in FP32
    scaler.scale(loss).backward()
    scaler.step(optimizer)  # skipped by GradScaler when a gradient is inf/NaN
    scaler.update()
    optimizer.zero_grad(set_to_none=True)
    return loss.detach()


def make_optimizer(params, lr):
    return torch.optim.SGD(params, lr=lr, momentum=0.9, weight_decay=5e-4)


class StepCounter:
    """Counts the optimizer steps that really ran: GradScaler skips optimizer.step() on
    overflow, so skipped steps = steps - count, known without any host-device sync."""

    def __init__(self, optimizer):
        self.count = 0
        optimizer.register_step_post_hook(self.hook)

    def hook(self, optimizer, args, kwargs):
        self.count += 1


@torch.no_grad()
def evaluate(model, mode, data, batch_size, device):
    """Top-1 accuracy on the test set, under the same autocast as training."""
    model.eval()
    correct = torch.zeros((), dtype=torch.long, device=device)
    for images, labels in eval_batches(data.test_images, data.test_labels, batch_size, device):
        with precision.autocast(mode, device):
            correct += (model(images).argmax(dim=1) == labels).sum()
    model.train()
    return correct.item() / len(data.test_labels)


def digest(tensors):
    """A short sha256 of tensors' bytes: equal digests mean bitwise-equal starting points."""
    sha = hashlib.sha256()
    for tensor in tensors:
        sha.update(tensor.detach().cpu().reshape(-1).view(torch.uint8).numpy().tobytes())
    return sha.hexdigest()[:16]


def run_mode(initial_model, mode, data, args, device):
    """Train a copy of `initial_model` for args.steps steps in `mode`; return its result record.

    Each call starts from the same weights and the same data order (the loader is seeded with
    args.seed), so runs of different modes differ by precision alone.
    """
    precision.set_tf32(mode.tf32)
    model = copy.deepcopy(initial_model).to(device)
    initial_weights = digest(model.state_dict().values())
    loader = DeviceLoader(data.train_images, data.train_labels, args.batch_size, device, args.seed)
    criterion = nn.CrossEntropyLoss()
    params, scaler = precision.prepare(model, mode, device, args.loss_scale)
    optimizer = make_optimizer(params, args.lr)
    optimizer_steps = StepCounter(optimizer)
    timer = StepTimer(device)
    progress = Progress(args.steps, mode.name, args.batch_size, enabled=not args.no_progress)
    losses = []

    memory.reset_peak(device)
    started = time.perf_counter()
    for step in range(args.steps):
        timer.start_step()
        images, labels = next(loader)
        timer.batch_ready()
        if step == 0:  # a device-side copy now, hashed after the timed loop
            first_batch = (images.clone(), labels.clone())
        loss = train_step(model, images, labels, criterion, optimizer, scaler, mode, device)
        losses.append(loss)
        progress.update(loss)
    timer.stop()
    wall_time = time.perf_counter() - started
    progress.close()
    peak, peak_kind = memory.peak_bytes(device)

    step_ms = timer.step_ms()[args.warmup:]
    data_ms = timer.data_ms()[args.warmup:]
    loss_curve = torch.stack(losses).cpu().tolist()
    step_stats = summarize(step_ms)
    return {
        "mode": mode.name,
        "description": mode.description,
        "device": str(device),
        "tf32": precision.tf32_flags(),
        "data": data.name,
        "batch_size": args.batch_size,
        "steps": args.steps,
        "warmup": args.warmup,
        "timed_steps": len(step_ms),
        "step_time_ms": step_stats,
        "step_times_ms": step_ms,
        "images_per_sec": args.batch_size * 1000.0 / step_stats["median"],
        "data_time_ms": summarize(data_ms),
        "compute_time_ms": summarize([s - d for s, d in zip(step_ms, data_ms)]),
        "peak_memory_bytes": peak,
        "peak_memory_kind": peak_kind,
        "final_loss": loss_curve[-1],
        "loss_curve": loss_curve,
        "skipped_steps": args.steps - optimizer_steps.count,
        "final_loss_scale": scaler.get_scale() if scaler.is_enabled() else None,
        "test_accuracy": None if args.no_eval or data.test_images is None
        else evaluate(model, mode, data, args.batch_size, device),
        "epochs_seen": args.steps * args.batch_size / len(data.train_images),
        "wall_time_s": wall_time,
        "initial_weights_sha256": initial_weights,
        "first_batch_sha256": digest(first_batch),
    }
