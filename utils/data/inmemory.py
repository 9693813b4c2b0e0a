"""An image folder decoded once before training (--loader device or torchvision) into uint8
tensors at --image-size and held as CIFAR-10 is, so that both loaders and the evaluation serve it
as they serve CIFAR-10, and no step time includes decoding a file.

Each image is converted to RGB, resized so that its shorter side is --image-size (bilinear,
antialiased) and cropped to the centre square: torchvision's Resize(N) and CenterCrop(N); a JPEG
is decoded at the smallest of libjpeg's scales that keeps that side at least N (PIL's draft
mode). It is normalised with the channel means and standard deviations of the training images.
"""
from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any, Callable, Dict, List, Optional, Tuple

import numpy as np
import torch
from PIL import Image
from torch.utils.data import DataLoader, Dataset
from torchvision.transforms import functional as TF

from utils.config import CHANNELS
from utils.data import images
from utils.data.imagefolder import Listing
from utils.data.images import Failed
from utils.data.index import FileIndex
from utils.data.loaders import Normalization
from utils.errors import UserError
from utils.stop import at_once

DECODE_BATCH = 64  # images a decoding worker hands back at a time
PROGRESS_EVERY_S = 30.0  # a line on how far the decoding is, as a batch job's progress lines
RESIZE = "shorter side resized to {size} (bilinear, antialiased), centre {size}x{size} crop"


def centre_square(size: int) -> Callable[[Image.Image], Image.Image]:
    """Resize(size) then CenterCrop(size), a JPEG drafted at a scale that keeps its shorter side at least `size`."""
    def transform(image: Image.Image) -> Image.Image:
        image.draft("RGB", (size, size))
        return TF.center_crop(TF.resize(images.rgb(image), size), size)
    return transform


class Decoded(Dataset):
    """Each file as a uint8 3 x size x size tensor, with "" or why it could not be read (a
    worker never raises: every unreadable file is counted, and the refusal names the first)."""

    def __init__(self, index: FileIndex, positions: np.ndarray, size: int):
        self.index, self.positions, self.size = index, positions, size

    def __len__(self) -> int:
        return len(self.positions)

    def __getitem__(self, item: int) -> Tuple[torch.Tensor, str]:
        picture, why = images.read_rgb(self.index.path(self.positions[item]), centre_square(self.size))
        return picture if picture is not None else torch.zeros(CHANNELS, self.size, self.size, dtype=torch.uint8), why


def stack(items: List[Tuple[torch.Tensor, str]]) -> Tuple[torch.Tensor, List[str]]:
    return torch.stack([image for image, _ in items]), [why for _, why in items]


def decode(index: FileIndex, positions: np.ndarray, size: int, workers: int,
           say: Callable[[str], None] = lambda sentence: None) -> Tuple[torch.Tensor, List[Tuple[int, str]]]:
    """(every file at `positions` decoded at `size` in `workers` processes (the main one for 0), as
    one uint8 N x 3 x size x size tensor, (item, why) of each that could not be read), saying how
    far it is every PROGRESS_EVERY_S."""
    batches = DataLoader(Decoded(index, positions, size), batch_size=DECODE_BATCH,
                         num_workers=min(workers, len(positions)), collate_fn=stack)
    decoded = torch.empty(len(positions), CHANNELS, size, size, dtype=torch.uint8)
    failed: List[Tuple[int, str]] = []
    start, said = 0, time.monotonic()
    for batch, reasons in batches:
        decoded[start:start + len(batch)] = batch
        failed += [(start + item, why) for item, why in enumerate(reasons) if why]
        start += len(batch)
        if time.monotonic() - said >= PROGRESS_EVERY_S:
            say(f"decoded {start} of {len(positions)} images")
            said = time.monotonic()
    return decoded, failed


def normalization_of(decoded: torch.Tensor) -> Normalization:
    """The channel means and standard deviations of uint8 images, as fractions of 255."""
    total = torch.zeros(CHANNELS, dtype=torch.float64)
    squares = torch.zeros(CHANNELS, dtype=torch.float64)
    for chunk in decoded.split(DECODE_BATCH):
        values = chunk.double()
        total += values.sum(dim=(0, 2, 3))
        squares += values.square().sum(dim=(0, 2, 3))
    count = decoded.numel() // CHANNELS
    mean = total / count
    std = (squares / count - mean.square()).clamp(min=0).sqrt().clamp(min=1.0)  # a flat channel: no division by 0
    return tuple((mean / 255).tolist()), tuple((std / 255).tolist())


def decoded_bytes(count: int, size: int) -> int:
    return count * CHANNELS * size * size


def free_memory(device: torch.device) -> List[Tuple[str, Optional[int]]]:
    """(where, bytes free now) of the memory the decoded images take: the host's, where they are
    decoded, and a GPU's, where the device loader holds them (None where it cannot be read)."""
    free = [("host memory", available_host_bytes())]
    if device.type == "cuda":
        free.append((f"{device}'s free memory", torch.cuda.mem_get_info(device)[0]))
    return free


def check_fits(count: int, size: int, device: torch.device) -> None:
    """Refuse a tree whose decoded images would not fit in the memory free now (a GPU's halved,
    so that training has the other half)."""
    needed = decoded_bytes(count, size)
    for where, have in free_memory(device):
        if have is not None and where != "host memory":
            where, have = f"{where}, halved for training,", have // 2
        if have is not None and needed > have:
            raise UserError(f"--data imagefolder: {count} images of {size}x{size} take {needed / 2 ** 30:.1f} GiB "
                            f"decoded, more than the {have / 2 ** 30:.1f} GiB of {where} here; lower --image-size, "
                            "train on a subset of the folder, or stream it (--loader stream).")


def available_host_bytes() -> Optional[int]:
    """MemAvailable of /proc/meminfo (Linux), or None where there is none to read."""
    try:
        with open("/proc/meminfo") as f:
            fields = dict(line.split(":", 1) for line in f if ":" in line)
        return int(fields["MemAvailable"].split()[0]) * 1024
    except (OSError, KeyError, ValueError):
        return None


@dataclass
class Split:
    """The images of one split, decoded, with their labels (int64), on the CPU."""
    images: torch.Tensor
    labels: torch.Tensor


def read_split(listing: Listing, positions: np.ndarray, size: int, workers: int, skip_bad: bool,
               say: Callable[[str], None]) -> Tuple[Split, List[Failed]]:
    """(the images at `positions`, decoded, and the files skipped): a file that is not a whole image
    is refused, or left out with `skip_bad`."""
    index = listing.index
    decoded, failed = decode(index, positions, size, workers, say)
    bad = [(index.path(positions[item]), why) for item, why in failed]
    if bad and not skip_bad:
        raise images.refusal(bad, "--data imagefolder")
    keep = np.ones(len(positions), dtype=bool)
    keep[[item for item, _ in failed]] = False
    labels = torch.from_numpy(index.labels[positions[keep]].astype(np.int64))
    return Split(decoded[torch.from_numpy(keep)] if bad else decoded, labels), bad


def load(listing: Listing, size: int, workers: int, device: torch.device, skip_bad: bool,
         say: Callable[[str], None]) -> Tuple[Split, Split, Dict[str, Any], Normalization]:
    """(training split, evaluation split, the data section of the results, normalisation) of
    `listing`, decoded at `size` in `workers` processes after check_fits(`device`); `say(sentence)`
    tells the user what takes the time."""
    training, evaluation = listing.training, listing.evaluation
    check_fits(len(training) + len(evaluation), size, device)
    with at_once("decoding the image folder"):  # hours for a large folder: a signal need not wait for its end
        say(f"decoding {len(training)} training and {len(evaluation)} evaluation images of {listing.tree.root} at "
            f"{size}x{size}")
        train, train_bad = read_split(listing, training, size, workers, skip_bad, say)
        test, test_bad = read_split(listing, evaluation, size, workers, skip_bad, say)
    normalization = normalization_of(train.images)
    skipped = images.BadImages(skip_bad, "--data imagefolder")
    skipped.add(listing.skipped + train_bad + test_bad)
    info = dict(listing.info(), train_images=len(train.labels), test_images=len(test.labels),
                resize=RESIZE.format(size=size), mean=list(normalization[0]), std=list(normalization[1]),
                skipped_images=skipped.record())
    return train, test, info, normalization
