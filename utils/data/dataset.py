"""The images a run trains on: CIFAR-10 when a usable copy is there, else synthetic images; or
the user's own image folder (--data imagefolder)."""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, Callable, List, Optional, Tuple

import torch

from models.families import DEFAULT_NUM_CLASSES
from utils.config import DEFAULT_INPUT_SHAPE, InputShape
from utils.data import cifar10, imagefolder, inmemory
from utils.data.loaders import (
    CIFAR10_NORMALIZATION,
    SYNTHETIC_BYTES,
    SYNTHETIC_TRAIN_IMAGES,
    Normalization,
    synthetic_images,
)
from utils.errors import UserError

if TYPE_CHECKING:
    from utils.config import DataSettings

FEWEST_SYNTHETIC_IMAGES = 4096  # at larger sizes as few as hold CIFAR-10's bytes, but a few global batches


@dataclass
class Data:
    """The images a run trains on, held on the training device (an image folder's, for
    --loader torchvision, on the CPU, where its workers read them)."""
    name: str  # "cifar10", "synthetic" or "imagefolder"
    train_images: torch.Tensor
    train_labels: torch.Tensor
    test_images: Optional[torch.Tensor]  # None for synthetic data: accuracy would mean nothing
    test_labels: Optional[torch.Tensor]
    info: dict
    normalization: Normalization = CIFAR10_NORMALIZATION
    fingerprint: Optional[str] = None  # an image folder's files, digested: which tree it is, wherever it lies

    @property
    def identity(self) -> str:
        """What a resume must find again: the data's name, and for an image folder its fingerprint."""
        return self.name if self.fingerprint is None else f"{self.name} {self.fingerprint}"


def synthetic_count(input_shape: InputShape) -> int:
    """How many synthetic images of `input_shape` a run trains on: as many as CIFAR-10's bytes
    hold, at least FEWEST_SYNTHETIC_IMAGES (synthetic_images holds those in CIFAR-10's bytes too)."""
    return min(SYNTHETIC_TRAIN_IMAGES, max(FEWEST_SYNTHETIC_IMAGES, SYNTHETIC_BYTES // math.prod(input_shape)))


def synthetic(device: torch.device, seed: int, count: Optional[int] = None,
              input_shape: InputShape = DEFAULT_INPUT_SHAPE, classes: int = DEFAULT_NUM_CLASSES) -> Data:
    """Synthetic images made at `input_shape` (no upsampling): `count`, or synthetic_count's,
    labelled with `classes` classes."""
    images, labels = synthetic_images(count or synthetic_count(input_shape), device, seed, input_shape, classes)
    return Data("synthetic", images, labels, None, None,
                {"name": "synthetic", "train_images": len(images), "test_images": 0, "num_classes": classes})


def class_count(settings: DataSettings) -> int:
    """The classes of the run's labels, known before the data is read: an image folder's class
    folders (listed, a different --num-classes refused), else --num-classes, else CIFAR-10's."""
    if settings.data != "imagefolder":
        return settings.num_classes or DEFAULT_NUM_CLASSES
    found = len(imagefolder.layout(settings.data_dir).classes)
    if settings.num_classes not in (None, found):
        raise UserError(f"--num-classes {settings.num_classes} does not fit --data imagefolder: {settings.data_dir} "
                        f"holds {found} class folders; drop --num-classes (the folder's count is taken).")
    return found


def image_folder(settings: DataSettings, device: torch.device, say: Callable[[str], None]) -> Tuple[Data, List[str]]:
    """The image folder at --data-dir, decoded at --image-size: on the training device for the
    device loader, on the CPU for the DataLoader's workers; and the notes on what it left out."""
    held = device if settings.loader == "device" else torch.device("cpu")
    listing = imagefolder.listing(settings.data_dir, settings.skip_bad_images, say)
    train, test, info, normalization = inmemory.load(listing, settings.image_size, settings.workers, held,
                                                     settings.skip_bad_images, say)
    return Data("imagefolder", train.images.to(held), train.labels.to(held), test.images.to(held),
                test.labels.to(held), info, normalization, str(info["fingerprint"])), listing.tree.notes()


def check_listing(settings: DataSettings) -> None:
    """--check-flags: what listing the data refuses, without reading an image (an image folder's
    index, built and cached as a run builds it)."""
    if settings.data == "imagefolder":
        imagefolder.listing(settings.data_dir, settings.skip_bad_images)


def load(settings: DataSettings, device: torch.device, seed: int,
         say: Callable[[str], None] = lambda sentence: None) -> Tuple[Data, List[str]]:
    """(data moved to the device once, warnings). --data auto takes CIFAR-10 when a usable
    copy is there, or downloads it when none is there and --download allows (a first run gets
    real data); else synthetic data with a loud warning, in seconds where there is no network.
    --data cifar10 downloads a missing copy unless --no-download. `say(sentence)` tells the
    user what takes the time (decoding an image folder)."""
    choice, data_dir, download = settings.data, settings.data_dir, settings.download
    if choice == "imagefolder":
        return image_folder(settings, device, say)
    classes = settings.num_classes or DEFAULT_NUM_CLASSES
    allow_unverified = settings.allow_unverified
    warnings = []
    if choice == "auto":
        present = cifar10.is_present(data_dir)
        usable = present and (allow_unverified or not cifar10.mismatched_files(data_dir))
        why = None
        if present and not usable:
            why = "its files do not match the official md5 sums (pass --allow-unverified to use it)"
        elif not present and not download:
            why = "it was not found and --no-download forbids fetching it (set --data-dir or $CIFAR10_DIR)"
        elif not present:
            try:
                cifar10.download(data_dir)
            except UserError as error:
                why = f"it was not found, and {str(error)[0].lower()}{str(error)[1:].rstrip('.')}"
        if why:
            warnings.append(f"USING SYNTHETIC DATA: CIFAR-10 in {cifar10.batches_folder(data_dir)} is not usable: "
                            f"{why}. Step times are valid, loss and accuracy are meaningless.")
            return synthetic(device, seed, input_shape=settings.input_shape, classes=classes), warnings
    if choice == "synthetic":
        return synthetic(device, seed, input_shape=settings.input_shape, classes=classes), warnings
    dataset = cifar10.load(data_dir, download, allow_unverified)
    if not dataset.verified:
        warnings.append(f"using CIFAR-10 from {dataset.folder} although its md5 sums are not the official ones.")
    data = Data("cifar10", dataset.train_images.to(device), dataset.train_labels.to(device),
                dataset.test_images.to(device), dataset.test_labels.to(device),
                {"name": "cifar10", "folder": dataset.folder, "verified": dataset.verified,
                 "train_images": len(dataset.train_images), "test_images": len(dataset.test_images),
                 "num_classes": len(cifar10.CLASSES)})
    return data, warnings
