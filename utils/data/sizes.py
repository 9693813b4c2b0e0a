"""How many synthetic images a run trains on, known without torch: the GPU suite plans by it."""
from __future__ import annotations

import math

from utils.config import DEFAULT_INPUT_SHAPE, InputShape

SYNTHETIC_TRAIN_IMAGES = 50_000  # as many as CIFAR-10 ...
SYNTHETIC_BYTES = SYNTHETIC_TRAIN_IMAGES * math.prod(DEFAULT_INPUT_SHAPE)  # ... and its bytes, held at any size
FEWEST_SYNTHETIC_IMAGES = 4096  # at larger sizes as few as hold CIFAR-10's bytes, but a few global batches


def synthetic_count(input_shape: InputShape) -> int:
    """How many synthetic images of `input_shape` a run trains on: as many as CIFAR-10's bytes
    hold, at least FEWEST_SYNTHETIC_IMAGES (loaders.synthetic_images holds those in CIFAR-10's bytes too)."""
    return min(SYNTHETIC_TRAIN_IMAGES, max(FEWEST_SYNTHETIC_IMAGES, SYNTHETIC_BYTES // math.prod(input_shape)))
