"""--max-batch (CUDA): the largest batch each precision mode trains in this GPU's memory, so
that the report can say how much larger a batch mixed precision fits.

Each try trains two steps (the second holds the optimizer's state) of a fresh copy of the
model on random images of that batch; out of memory is caught and the allocator's cache
emptied before the next try. The batch doubles from --batch-size until a try fails, then
bisection finds the largest that fits.
"""
from __future__ import annotations

import copy
import gc
from typing import TYPE_CHECKING, Callable

import torch
from torch import nn

from utils.measure import memory
from utils.training import precision
from utils.training.step import MicroBatches, make_optimizer, no_decay_flags, train_step

if TYPE_CHECKING:
    from utils.config import DataSettings, Precision, Training, TrainingPlan
    from utils.modes import Mode

LARGEST_TRY = 1 << 20  # a million images a step: beyond any GPU today


def largest_batch(fits: Callable[[int], bool], start: int, limit: int = LARGEST_TRY) -> int:
    """The largest batch for which fits(batch) holds, assuming every smaller one fits: doubling
    from `start`, then bisection; 0 when even `start` does not fit."""
    fitted, failed, batch = 0, None, start
    while batch <= limit:
        if not fits(batch):
            failed = batch
            break
        fitted, batch = batch, batch * 2
    if failed is None:
        return fitted
    while failed - fitted > 1:
        middle = (fitted + failed) // 2
        if fits(middle):
            fitted = middle
        else:
            failed = middle
    return fitted


def fits_on_gpu(initial_model: nn.Module, mode: Mode, training: Training, precision_settings: Precision,
                data_settings: DataSettings, plan: TrainingPlan, device: torch.device) -> Callable[[int], bool]:
    """fits(batch) for largest_batch: two training steps of a fresh copy in `mode`, with the
    plan's recipe, on labels of its classes."""
    recipe = plan.recipe

    def attempt(batch):
        model = copy.deepcopy(initial_model).to(device)
        params, scaler = precision.prepare_model(model, mode, device, precision_settings.loss_scale)
        optimizer, _ = make_optimizer(params, lr=0.01, momentum=recipe.momentum, weight_decay=recipe.weight_decay,
                                      nesterov=training.nesterov, impl=training.optimizer_impl,
                                      kind=recipe.optimizer, no_decay=no_decay_flags(model, training.model))
        images = torch.randn(batch, *data_settings.input_shape, device=device)
        labels = torch.randint(0, plan.num_classes, (batch,), device=device)
        batches = iter(lambda: (images, labels), None)
        for _ in range(2):
            train_step(model, MicroBatches(next(batches), batches, 1), nn.CrossEntropyLoss(), optimizer, scaler,
                       mode, device)
        torch.cuda.synchronize(device)

    def fits(batch):
        try:
            attempt(batch)
            fitted = True
        except (RuntimeError, MemoryError) as error:
            if not memory.is_out_of_memory(error):
                raise
            fitted = False
        gc.collect()  # the attempt's tensors are unreachable once it has returned
        torch.cuda.empty_cache()
        return fitted
    return fits


def largest_batch_of(initial_model: nn.Module, mode: Mode, training: Training, precision_settings: Precision,
                     data_settings: DataSettings, plan: TrainingPlan, device: torch.device) -> int:
    """The largest batch `mode` trains on `device` (CUDA), searched from the run's batch."""
    precision.set_tf32(mode.tf32)
    fits = fits_on_gpu(initial_model, mode, training, precision_settings, data_settings, plan, device)
    return largest_batch(fits, training.batch_size)
