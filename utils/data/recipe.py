"""torchvision's ImageNet recipe at --image-size, as every streamed path applies it (the folder's
and the shards' DataLoader workers, the GPU's decoding, DALI): RandomResizedCrop (scale 0.08 to 1,
aspect 3/4 to 4/3) and a horizontal flip for training, Resize(N / 0.875) and CenterCrop(N) for
evaluation. Each crop and flip is drawn from a seed string of its own (the run's seed and the
image's place in its order), so that neither the worker that draws it nor a resume changes it. A
JPEG is decoded at the smallest of libjpeg's scales (1/2, 1/4, 1/8) that keeps the crop at least N
pixels (PIL's draft mode), which a large photograph cropped to 224 turns into a fraction of the work.
"""
from __future__ import annotations

import math
import random
from typing import Callable, Optional, Tuple

from PIL import Image
from torchvision.transforms import functional as TF

from utils.data import images

SCALE, RATIO = (0.08, 1.0), (3 / 4, 4 / 3)  # RandomResizedCrop's defaults
EVAL_CROP_SHARE = 0.875  # Resize(256) then CenterCrop(224): the crop is this share of the resized side
TRAIN_RECIPE = "RandomResizedCrop({size}, scale=(0.08, 1), ratio=(3/4, 4/3)), RandomHorizontalFlip()"
EVAL_RECIPE = "Resize({resize}), CenterCrop({size})"


def eval_resize(size: int) -> int:
    return round(size / EVAL_CROP_SHARE)


def crop_box(width: int, height: int, draws: random.Random) -> Tuple[int, int, int, int]:
    """(top, left, height, width) of a random resized crop, as torchvision's
    RandomResizedCrop.get_params draws it (ten tries within the image, else the centre), from `draws`."""
    area = height * width
    low, high = math.log(RATIO[0]), math.log(RATIO[1])
    for _ in range(10):
        target = area * draws.uniform(*SCALE)
        aspect = math.exp(draws.uniform(low, high))
        w, h = int(round(math.sqrt(target * aspect))), int(round(math.sqrt(target / aspect)))
        if 0 < w <= width and 0 < h <= height:
            return draws.randint(0, height - h), draws.randint(0, width - w), h, w
    ratio = width / height
    if ratio < RATIO[0]:
        w, h = width, int(round(width / RATIO[0]))
    elif ratio > RATIO[1]:
        w, h = int(round(height * RATIO[1])), height
    else:
        w, h = width, height
    return (height - h) // 2, (width - w) // 2, h, w


def drafted(image: Image.Image, needed: Tuple[int, int]) -> Tuple[float, float]:
    """Have a JPEG decode at the smallest scale that keeps it at least `needed` (width, height)
    pixels; the (x, y) factors it was scaled by (1, 1 for other formats)."""
    width, height = image.size
    image.draft("RGB", (max(1, needed[0]), max(1, needed[1])))
    return image.size[0] / width, image.size[1] / height


def train_transform(size: int, draw_seed: str) -> Callable[[Image.Image], Image.Image]:
    """The training recipe for one image, its crop and flip drawn from `draw_seed`."""
    def transform(image: Image.Image) -> Image.Image:
        draws = random.Random(draw_seed)
        top, left, height, width = crop_box(*image.size, draws)
        flip = draws.random() < 0.5
        sx, sy = drafted(image, (math.ceil(image.size[0] * size / width), math.ceil(image.size[1] * size / height)))
        picture = TF.resized_crop(images.rgb(image), int(top * sy), int(left * sx), max(1, round(height * sy)),
                                  max(1, round(width * sx)), [size, size])  # PIL always antialiases
        return TF.hflip(picture) if flip else picture
    return transform


def eval_transform(size: int) -> Callable[[Image.Image], Image.Image]:
    """Resize(size / 0.875) and CenterCrop(size), drafted to a scale that keeps the shorter side."""
    resize = eval_resize(size)

    def transform(image: Image.Image) -> Image.Image:
        drafted(image, (resize, resize))
        return TF.center_crop(TF.resize(images.rgb(image), resize), size)
    return transform


def recipe(size: int, draw: Optional[str]) -> Callable[[Image.Image], Image.Image]:
    """Training's transform, its crop and flip drawn from `draw`; evaluation's where `draw` is None."""
    return train_transform(size, draw) if draw is not None else eval_transform(size)
