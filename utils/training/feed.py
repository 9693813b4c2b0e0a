"""Whether the input pipeline keeps up with the step, measured in the run's own process after its
timed steps and evaluation (so that neither changes): the loader alone, the images per second it
delivers to the device with the run's workers and nothing trained; the step alone, on one batch
held on the device with the loader idle; beside the rate the run trained at. runs[].feed records
them with the verdict and the loader's levers (utils/measure/feed.py says them in words).

The loader alone is timed over LOADER_BATCHES batches once the batches its workers prepared
ahead while the run trained are drained, the step alone over STEP_STEPS steps after one that
warms up, each with a host sync at its ends only (CUDA events time the steps, as the loop's)."""
from __future__ import annotations

import statistics
import time
from typing import TYPE_CHECKING, Any, Dict, List, Optional

import torch

from utils.config import usable_cores
from utils.data import recipe, streamed
from utils.data.images import BadImages
from utils.measure import feed
from utils.measure.timing import StepTimer
from utils.training.step import train_step

if TYPE_CHECKING:
    from utils.config import DataSettings, Training
    from utils.data.dataset import Data
    from utils.stop import StopRequest
    from utils.training.context import RunContext
    from utils.training.trainer import Trainer

LOADER_BATCHES = 8
STEP_STEPS = 4


def synchronize(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def measure(trainer: Trainer, training: Training, data_settings: DataSettings, data: Data, context: RunContext,
            step_ms: List[float]) -> Optional[Dict[str, Any]]:
    """runs[].feed of a run on streamed data whose timed steps took `step_ms` (None for data held
    in memory, for a run with no timed step, and where a stop signal arrives while it measures)."""
    loader = trainer.loader
    if not isinstance(loader, streamed.TrainBatches) or not step_ms:
        return None
    device, stop = context.device, context.stop
    context.reporter.phase(f"{trainer.mode.name}: timing the loader alone and the step alone")
    kept, loader.bad = loader.bad, BadImages(True, loader.bad.source)  # what it meets here is not the run's
    try:
        loader_rate = delivered_per_second(loader, data_settings.workers, device, stop)
        step_rate = stepped_per_second(trainer, training, device, stop)
    finally:
        loader.bad = kept
    if loader_rate is None or step_rate is None:
        return None
    train_images_per_sec = training.effective_batch_size * 1000.0 / statistics.median(step_ms)
    decode = str(data.info.get("decode", "cpu"))
    cores = usable_cores()
    return {"loader": trainer.plan.loader, "workers": data_settings.workers, "decode": decode, "cores": cores,
            "loader_images_per_sec": loader_rate, "loader_batches": LOADER_BATCHES,
            "step_images_per_sec": step_rate, "step_steps": STEP_STEPS, "train_images_per_sec": train_images_per_sec,
            "bound": feed.bound(loader_rate, step_rate),
            "contended": feed.contended(loader_rate, step_rate, train_images_per_sec),
            "levers": feed.levers(workers=data_settings.workers, cores=cores, decode=decode,
                                  device_type=device.type, data=data.name, resized=data.info.get("resized"),
                                  resize_side=recipe.eval_resize(data_settings.image_size))}


def delivered_per_second(loader: streamed.TrainBatches, workers: int, device: torch.device,
                         stop: StopRequest) -> Optional[float]:
    """Images per second the loader alone delivers to the device, after draining the batches its
    workers prepared ahead."""
    for _ in range(max(1, workers) * streamed.PREFETCH):
        next(loader)
    synchronize(device)
    started, images = time.perf_counter(), 0
    for _ in range(LOADER_BATCHES):
        if stop.requested:
            return None
        images += len(next(loader)[1])
    synchronize(device)
    return images / (time.perf_counter() - started)


def stepped_per_second(trainer: Trainer, training: Training, device: torch.device,
                       stop: StopRequest) -> Optional[float]:
    """Images per second the step alone trains, on one batch held on the device: the median of
    STEP_STEPS steps after one that warms up (every micro-batch of --accum-steps is that batch)."""
    held = [next(trainer.loader)] * training.accum_steps
    timer = StepTimer(device)
    for number in range(STEP_STEPS + 1):
        if stop.requested:
            return None
        if number:
            timer.start_step()
        train_step(trainer.step_model, held, trainer.criterion, trainer.optimizer, trainer.scaler, trainer.mode,
                   device, training.clip_grad)
    timer.close()
    return training.effective_batch_size * 1000.0 / statistics.median(timer.step_ms)
