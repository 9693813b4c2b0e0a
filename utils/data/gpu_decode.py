"""--decode gpu: the training device decodes each streamed batch's JPEGs and crops, flips and
resizes them there, so that the CPU cores the DataLoader workers have left read the files and
nothing more. torchvision.io.decode_jpeg decodes a batch at a time (nvJPEG on CUDA, torchvision
0.19 and newer); the workers read each file's bytes and its JPEG header, on whose size they draw
the crop and the flip exactly as --decode cpu draws them. A file that is no JPEG (a PNG) is
decoded by its worker as --decode cpu decodes it; a JPEG the device cannot decode is reported as
a file that is no whole image."""
from __future__ import annotations

import io
import random
from dataclasses import dataclass
from typing import List, Optional, Sequence, Tuple

import torch
from PIL import Image
from torchvision.transforms import functional as TF

from utils.data import images, recipe
from utils.data.images import Failed
from utils.errors import UserError

JPEG_START = b"\xff\xd8\xff"
Box = Tuple[int, int, int, int]  # top, left, height, width, in the image's own pixels


@dataclass
class Encoded:
    """A JPEG for the device to decode, with the crop and flip drawn for it."""
    data: torch.Tensor  # the file's bytes, uint8
    box: Box
    flip: bool
    name: str  # the file (or SHARD:KEY) a decode that fails names
    size: int  # the side of the square it becomes


def crop_plan(width: int, height: int, size: int, draw: Optional[str]) -> Tuple[Box, bool]:
    """(the box the recipe crops from an image of width x height, whether it flips): training's
    RandomResizedCrop and flip drawn from `draw` (recipe.train_transform's draws, in its order);
    evaluation's Resize(size / 0.875) and CenterCrop(size) as the one box they take."""
    if draw is not None:
        draws = random.Random(draw)
        box = recipe.crop_box(width, height, draws)
        return box, draws.random() < 0.5
    side = min(width, height) * size / recipe.eval_resize(size)
    side_h, side_w = min(height, round(side)), min(width, round(side))
    return ((height - side_h) // 2, (width - side_w) // 2, side_h, side_w), False


def encoded(data: bytes, name: str, size: int, draw: Optional[str]) -> Optional[Encoded]:
    """`data` as an Encoded JPEG (its header read for the size), or None where it is no JPEG."""
    if not data.startswith(JPEG_START):
        return None
    with Image.open(io.BytesIO(data)) as image:  # the header alone
        box, flip = crop_plan(*image.size, size, draw)
    return Encoded(torch.frombuffer(bytearray(data), dtype=torch.uint8), box, flip, name, size)


def decode_on(device: torch.device, batch: Sequence[Encoded]) -> Tuple[List[Optional[torch.Tensor]], List[Failed]]:
    """Each JPEG of `batch` decoded on `device` (all in one call; one at a time where that call
    fails, to name the file), cropped, flipped and resized to its square as uint8; None and the
    file with why for each the device could not decode."""
    from torchvision.io import ImageReadMode, decode_jpeg

    try:
        pictures: List[Optional[torch.Tensor]] = list(decode_jpeg([item.data for item in batch],
                                                                  mode=ImageReadMode.RGB, device=device))
    except RuntimeError:  # one bad file fails the whole call
        pictures = [one(item, device) for item in batch]
    failed = [(item.name, "the JPEG decoder on the device could not decode it")
              for item, picture in zip(batch, pictures) if picture is None]
    cropped = [TF.resized_crop(picture, *item.box, [item.size, item.size], antialias=True) if picture is not None
               else None for item, picture in zip(batch, pictures)]
    return [TF.hflip(picture) if picture is not None and item.flip else picture
            for item, picture in zip(batch, cropped)], failed


def one(item: Encoded, device: torch.device) -> Optional[torch.Tensor]:
    from torchvision.io import ImageReadMode, decode_jpeg

    try:
        return decode_jpeg(item.data, mode=ImageReadMode.RGB, device=device)
    except RuntimeError:
        return None


TINY_JPEG_SIDE = 16  # the JPEG check_available decodes


def check_available(device: torch.device) -> None:
    """Refuse --decode gpu where it cannot run: off CUDA, with a torchvision older than batched GPU
    decoding, or one built without nvJPEG (a JPEG decoded on the device here fails)."""
    from utils import compat

    if device.type != "cuda":
        raise UserError("--decode gpu decodes JPEGs on a CUDA GPU, and this run is on the CPU; add -p on a machine "
                        "with a GPU, or drop --decode gpu (the DataLoader workers decode on the CPU).")
    if compat.torchvision_release() < (0, 19):
        import torchvision
        raise UserError(f"--decode gpu needs torchvision 0.19 or newer (batched decode_jpeg on CUDA), and this is "
                        f"{torchvision.__version__}; install a newer torchvision with its torch, or drop --decode gpu.")
    from torchvision.io import ImageReadMode, decode_jpeg

    picture = io.BytesIO()
    Image.new("RGB", (TINY_JPEG_SIDE, TINY_JPEG_SIDE)).save(picture, "JPEG")
    try:
        decode_jpeg([torch.frombuffer(bytearray(picture.getvalue()), dtype=torch.uint8)], mode=ImageReadMode.RGB,
                    device=device)
    except Exception as error:  # whatever a torchvision without GPU decoding raises
        raise UserError(f"this torchvision cannot decode JPEGs on {device} ({images.reason(error)}); install a CUDA "
                        "build of torchvision 0.19 or newer (with nvJPEG), or drop --decode gpu.") from None
