"""What every run starts from: the device it trains on and the model's initial weights for its
seed. utils/app.py starts runs from them, and --advise's preflight builds the same model on the
same device before it plans."""
from __future__ import annotations

from typing import TYPE_CHECKING, Callable, Optional

import torch
from torch import nn

from models import factory, user
from utils.data import dataset
from utils.errors import UserError

if TYPE_CHECKING:
    from utils.config import DataSettings, Training


def pick_device(use_gpu: bool, cudnn_benchmark: bool) -> torch.device:
    if not use_gpu:
        return torch.device("cpu")
    if not torch.cuda.is_available():
        raise UserError("CUDA is not available: run without -p/--gpu to train on the CPU, or run on a "
                        "GPU node with a CUDA build of torch (in a container: singularity exec --nv).")
    torch.backends.cudnn.benchmark = cudnn_benchmark
    return torch.device("cuda")


def seeded_model(training: Training, data: DataSettings, num_classes: Optional[int] = None,
                 device: Optional[torch.device] = None, warn: Optional[Callable[[str, str], None]] = None) -> nn.Module:
    """The model's initial weights for training.seed, with a head of `num_classes` (None:
    dataset.class_count's, which lists an image folder's class folders): every mode of that seed
    copies them. A --model-factory model is checked on `device` (the CPU unless given) where the
    meta device cannot run it, and what its build put back or took is said to `warn`
    (models/user.py)."""
    if num_classes is None:
        num_classes = dataset.class_count(data)
    torch.manual_seed(training.seed)
    if training.model_factory is not None:
        return user.build_user_model(training.model_factory, num_classes, data.image_size, training.dropout,
                                     training.batch_size, device, warn)
    return factory.build_model(training.model, training.stem, training.dropout, training.batch_size,
                               data.image_size, num_classes)
