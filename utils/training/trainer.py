"""Everything one precision mode trains with, built before the timed loop starts: the model
(copied, laid out, cast, wrapped in DDP, compiled), optimizer, schedule, scaler and loader."""
from __future__ import annotations

import copy
import hashlib
from dataclasses import dataclass
from typing import TYPE_CHECKING, Iterable, List, Optional, Tuple, Union, cast

import torch
from torch import nn
from torch.nn.parallel import DistributedDataParallel

from utils.data.loaders import memory_format
from utils.grad_comm import communication
from utils.modes import Mode
from utils.training import distributed, float8, precision
from utils.training.step import make_optimizer, make_scheduler, no_decay_flags

if TYPE_CHECKING:
    from utils.config import DataSettings, Distributed, Precision, Speed, Training, TrainingPlan
    from utils.data.dataset import Data, Loader
    from utils.launch import World
    from utils.training.precision import StaticLossScaler


@dataclass
class Trainer:
    """A mode's training state, handed from setup to the loop, checkpoints and evaluation."""
    mode: Mode
    plan: TrainingPlan  # the run's steps, timing warm-up and recipe
    model: nn.Module  # the weights: checkpoints and evaluation use these
    step_model: nn.Module  # what the step calls: the model, possibly wrapped in DDP, then compiled
    params: List[torch.Tensor]  # what the optimizer updates (FP32 masters in fp16-master)
    scaler: Union[torch.amp.GradScaler, StaticLossScaler]  # StaticLossScaler: fp16-master's
    optimizer: torch.optim.Optimizer
    optimizer_impl: str  # the optimizer's implementation that runs: "fused" or "foreach" (where fused is not available)
    scheduler: torch.optim.lr_scheduler.LRScheduler
    criterion: nn.Module
    loader: Loader  # an endless iterator of (images, labels)
    initial_weights_sha256: str
    grad_comm: Optional[str] = None  # the dtype DDP's gradients travel in; None in one process


def build_trainer(initial_model: nn.Module, mode: Mode, data: Data, plan: TrainingPlan, training: Training,
                  precision_settings: Precision, data_settings: DataSettings, speed: Speed,
                  distributed_settings: Distributed, device: torch.device, world: World) -> Trainer:
    """A copy of `initial_model` set up for `mode` and trained by `plan`: every mode starts from
    the same weights, and the loader, seeded with the run's seed, gives every mode the same
    batches."""
    precision.set_tf32(mode.tf32)
    recipe = plan.recipe
    model = copy.deepcopy(initial_model).to(device)
    initial_weights = digest(model.state_dict().values())
    if speed.channels_last:
        model = model.to(memory_format=memory_format(True))
    if mode.float8:  # before DDP and compile wrap the model, and before the optimizer takes its parameters
        float8.convert(model, mode.float8, precision_settings.fp8_emulate)
    params, scaler = precision.prepare_model(model, mode, device, precision_settings.loss_scale)
    step_model, grad_comm = model, None
    if world.distributed:  # broadcasts rank 0's weights, all-reduces gradients in backward
        step_model, grad_comm = data_parallel(model, device, distributed_settings, world.size)
    if speed.compile:
        # a compiled module is an OptimizedModule, an nn.Module; torch's stubs say a callable
        step_model = cast(nn.Module, torch.compile(step_model, mode=speed.compile_mode))
    loader = data.train_loader(plan.loader, batch_size=training.batch_size, device=device,
                               seed=training.seed, workers=data_settings.workers, channels_last=speed.channels_last,
                               shard=(world.rank, world.size), input_shape=data_settings.input_shape)
    optimizer, optimizer_impl = make_optimizer(params, lr=recipe.lr, momentum=recipe.momentum,
                                               weight_decay=recipe.weight_decay, nesterov=training.nesterov,
                                               impl=training.optimizer_impl, kind=recipe.optimizer,
                                               no_decay=no_decay_flags(model, training.model))
    return Trainer(mode=mode, plan=plan, model=model, step_model=step_model, params=params, scaler=scaler,
                   optimizer=optimizer, optimizer_impl=optimizer_impl,
                   scheduler=make_scheduler(optimizer, training.lr_schedule, plan.steps, recipe.lr_warmup_steps),
                   criterion=nn.CrossEntropyLoss(label_smoothing=recipe.label_smoothing),
                   loader=loader, initial_weights_sha256=initial_weights, grad_comm=grad_comm)


def data_parallel(model: nn.Module, device: torch.device, settings: Distributed,
                  world_size: int) -> Tuple[DistributedDataParallel, str]:
    """The model in DDP with --bucket-mb's buckets and --grad-comm's hook, and the dtype its
    gradients travel in: the hook's, or without one the gradients' own (float16 in fp16-master)."""
    comm = communication(settings.grad_comm, settings.bucket_mb, world_size)
    wrapped = DistributedDataParallel(model, device_ids=[device.index] if device.index is not None else None,
                                      bucket_cap_mb=comm["bucket_mb"])
    if comm["grad_comm"] != "fp32":
        wrapped.register_comm_hook(None, distributed.comm_hook(comm["grad_comm"]))
        return wrapped, comm["grad_comm"]
    own = next(p.dtype for p in model.parameters() if p.requires_grad)
    return wrapped, {dtype: name for name, dtype in distributed.COMM_DTYPES.items()}.get(own, "fp32")


def digest(tensors: Iterable[torch.Tensor]) -> str:
    """A short sha256 of tensors' bytes: equal digests mean bitwise-equal starting points."""
    sha = hashlib.sha256()
    for tensor in tensors:
        sha.update(tensor.detach().cpu().reshape(-1).view(torch.uint8).numpy().tobytes())
    return sha.hexdigest()[:16]
