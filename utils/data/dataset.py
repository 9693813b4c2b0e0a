"""The images a run trains on: CIFAR-10 when a usable copy is there, else synthetic images; or
the user's own image folder (--data imagefolder)."""
from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable, Dict, Iterable, List, Optional, Tuple, Union

import torch

from models.families import DEFAULT_NUM_CLASSES
from utils import launch
from utils.config import DEFAULT_INPUT_SHAPE, InputShape, usable_cores
from utils.console import human_bytes, plural
from utils.data import cifar10, dali, gpu_decode, imagefolder, inmemory, recipe, shards, streamed
from utils.data.images import BadImages
from utils.data.loaders import (
    CIFAR10_NORMALIZATION,
    DeviceLoader,
    Normalization,
    TorchvisionLoader,
    eval_batches,
    make_train_loader,
    synthetic_images,
)
from utils.data.sizes import synthetic_count
from utils.errors import UserError

if TYPE_CHECKING:
    from utils.config import DataSettings

# --loader auto holds an image folder in memory where its decoded images take at most this much, and at
# most MEMORY_SHARE of the memory free (the host's, and the GPU's where the device loader holds them):
# beyond it decoding would delay the first step by minutes and crowd out training, and streaming starts at once.
MEMORY_BUDGET_BYTES = 4 * 2 ** 30
MEMORY_SHARE = 0.25
Loader = Union[DeviceLoader, TorchvisionLoader, streamed.StreamLoader, shards.ShardLoader, dali.DaliLoader]
Stream = Union[streamed.FolderStream, shards.ShardStream]  # what reads streamed data as the run trains


@dataclass
class Data:
    """The images a run trains on: held in memory on the training device (an image folder's, for
    --loader torchvision, on the CPU, where its workers read them), or streamed from files
    (`stream`, --loader stream), whose images and labels are then None."""
    name: str  # "cifar10", "synthetic", "imagefolder" or "webdataset"
    train_images: Optional[torch.Tensor]
    train_labels: Optional[torch.Tensor]
    test_images: Optional[torch.Tensor]  # None for synthetic data (accuracy would mean nothing) and streamed data
    test_labels: Optional[torch.Tensor]
    info: dict
    normalization: Normalization = CIFAR10_NORMALIZATION
    fingerprint: Optional[str] = None  # an image folder's files, digested: which tree it is, wherever it lies
    loader: Optional[str] = None  # the loader an image folder settled (--loader auto); else --loader's
    stream: Optional[Stream] = None
    notes: List[str] = field(default_factory=list)  # what the run says of it: splits left out, the loader chosen

    @property
    def identity(self) -> str:
        """What a resume must find again: the data's name, and for an image folder its fingerprint."""
        return self.name if self.fingerprint is None else f"{self.name} {self.fingerprint}"

    @property
    def train_count(self) -> int:
        if self.stream is not None:
            return self.stream.train_count
        assert self.train_images is not None  # held in memory where not streamed
        return len(self.train_images)

    @property
    def test_count(self) -> int:
        """The evaluation images; 0 for synthetic data, which has none."""
        if self.stream is not None:
            return self.stream.test_count
        return 0 if self.test_images is None else len(self.test_images)

    @property
    def has_test_set(self) -> bool:
        return self.test_count > 0

    @property
    def failure(self) -> Optional[str]:
        """The sentence that stops the run: a streamed file that is no whole image (None without one)."""
        return self.stream.bad.failure if self.stream is not None else None

    @property
    def run_skipped(self) -> Optional[Dict[str, Any]]:
        """runs[].skipped_images: the streamed files the run left out (--skip-bad-images), else None."""
        return self.stream.bad.record() if self.stream is not None else None

    def train_loader(self, kind: str, *, batch_size: int, device: torch.device, seed: int, workers: int,
                     channels_last: bool, shard: Tuple[int, int], input_shape: InputShape) -> Loader:
        """The run's endless stream of training batches: the --loader `kind`'s (the TrainingPlan's,
        which streamed data settled; `workers` serves the DataLoader paths). A run asks for one as it
        begins: the streamed files it meets that are no whole images are counted afresh."""
        if kind == "dali":
            assert isinstance(self.stream, streamed.FolderStream)  # --loader dali reads image folders
            return dali.loader(self.stream, batch_size=batch_size, device=device, seed=seed,
                               channels_last=channels_last, shard=shard, on_gpu=self.info.get("decode") != "cpu")
        if self.stream is not None:
            return self.stream.train_loader(batch_size=batch_size, device=device, seed=seed,
                                            channels_last=channels_last, shard=shard)
        assert self.train_images is not None and self.train_labels is not None
        return make_train_loader(kind, self.train_images, self.train_labels, batch_size=batch_size,
                                 device=device, seed=seed, workers=workers, channels_last=channels_last, shard=shard,
                                 input_shape=input_shape, normalization=self.normalization)

    def test_batches(self, *, batch_size: int, device: torch.device, channels_last: bool, shard: Tuple[int, int],
                     input_shape: InputShape) -> Iterable[Tuple[torch.Tensor, torch.Tensor]]:
        """This rank's share of the test set, in order, unaugmented and normalised."""
        if self.stream is not None:
            return self.stream.test_batches(batch_size=batch_size, device=device, channels_last=channels_last,
                                            shard=shard)
        assert self.test_images is not None and self.test_labels is not None  # only data with a test set is evaluated
        return eval_batches(self.test_images, self.test_labels, batch_size=batch_size, device=device,
                            channels_last=channels_last, shard=shard, input_shape=input_shape,
                            normalization=self.normalization)


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
    if settings.data == "webdataset":
        return shards.read(settings.data_dir, settings.epoch_images, settings.num_classes).num_classes
    if settings.data != "imagefolder":
        return settings.num_classes or DEFAULT_NUM_CLASSES
    found = len(imagefolder.layout(settings.data_dir).classes)
    if settings.num_classes not in (None, found):
        raise UserError(f"--num-classes {settings.num_classes} does not fit --data imagefolder: {settings.data_dir} "
                        f"holds {found} class folders; drop --num-classes (the folder's count is taken).")
    return found


def image_folder(settings: DataSettings, device: torch.device, say: Callable[[str], None]) -> Data:
    """The image folder at --data-dir at --image-size: decoded once and held on the training device
    (the device loader) or on the CPU (the DataLoader's workers read it there), or streamed from its
    files per batch (--loader stream or dali); --loader auto chooses by memory_budget()."""
    listing = imagefolder.listing(settings.data_dir, settings.skip_bad_images, say)
    loader, chosen = choose_loader(settings.loader, len(listing.training) + len(listing.evaluation),
                                   settings.image_size, device, settings.workers, settings.decode)
    notes = listing.tree.notes() + ([chosen] if chosen else [])
    if loader in ("stream", "dali"):
        return streamed_folder(settings, listing, loader, device, say, notes)
    held = device if loader == "device" else torch.device("cpu")
    train, test, info, normalization = inmemory.load(listing, settings.image_size, settings.workers, held,
                                                     settings.skip_bad_images, say)
    return Data("imagefolder", train.images.to(held), train.labels.to(held), test.images.to(held),
                test.labels.to(held), info, normalization, str(info["fingerprint"]), loader, None, notes)


def decoding(settings: DataSettings, loader: str, device: torch.device) -> str:
    """Where streamed images are decoded ("cpu" or "gpu": --decode, auto settled by the loader),
    once whatever decodes them on the GPU is found able to (refused in one sentence where not)."""
    where = "gpu" if settings.decode == "gpu" or (settings.decode == "auto" and loader == "dali") else "cpu"
    if loader == "dali":
        dali.modules()
    elif where == "gpu":
        gpu_decode.check_available(device)
    return where


def streamed_folder(settings: DataSettings, listing: imagefolder.Listing, loader: str, device: torch.device,
                    say: Callable[[str], None], notes: List[str]) -> Data:
    """The folder of `listing` read from its files per batch: normalised with the channel figures of
    a fixed sample of its training images."""
    size, decode = settings.image_size, decoding(settings, loader, device)
    sampled = min(streamed.NORMALIZATION_SAMPLE, len(listing.training))
    say(f"computing the channel figures of {sampled} training images")
    normalization = streamed.sample_normalization(listing.index, listing.training, size, settings.workers)
    stream = streamed.FolderStream(size, settings.workers, normalization,
                                   BadImages(settings.skip_bad_images, "--data imagefolder"), len(listing.training),
                                   len(listing.evaluation), decode == "gpu", listing)
    skipped = BadImages(settings.skip_bad_images, "--data imagefolder")
    skipped.add(listing.skipped)
    info = dict(listing.info(), augmentation=recipe.TRAIN_RECIPE.format(size=size),
                resize=recipe.EVAL_RECIPE.format(resize=recipe.eval_resize(size), size=size),
                mean=list(normalization[0]), std=list(normalization[1]), normalized_by=f"{sampled} training images",
                workers=settings.workers, decode=decode, skipped_images=skipped.record())
    return Data("imagefolder", None, None, None, None, info, normalization, str(info["fingerprint"]), loader, stream,
                notes)


def shard_data(settings: DataSettings, device: torch.device, say: Callable[[str], None]) -> Data:
    """The WebDataset shards at --data-dir, read as the run trains: checked whole, enough for every
    rank's every worker, normalised with the channel figures of their first training images."""
    found = shards.read(settings.data_dir, settings.epoch_images, settings.num_classes)
    shards.check_feeds(found, launch.detect().size, settings.workers)
    say(f"computing the channel figures of the first {streamed.NORMALIZATION_SAMPLE} training images of the shards")
    normalization, sampled = shards.sample_normalization(found, settings.image_size)
    decode = decoding(settings, "stream", device)
    stream = shards.ShardStream(settings.image_size, settings.workers, normalization,
                                BadImages(settings.skip_bad_images, shards.SOURCE), found.train_images,
                                found.test_images, decode == "gpu", found)
    size = settings.image_size
    info = {"name": "webdataset", "folder": os.path.realpath(settings.data_dir) if os.path.isdir(settings.data_dir)
            else settings.data_dir, "classes": found.classes, "num_classes": found.num_classes,
            "train_images": found.train_images, "test_images": found.test_images,
            "train_shards": len(found.train.paths),
            "eval_shards": len(found.evaluation.paths) if found.evaluation is not None else 0,
            "epoch_from": "index" if found.classes is not None else "--epoch-images", "resized": found.resized,
            "augmentation": recipe.TRAIN_RECIPE.format(size=size),
            "resize": recipe.EVAL_RECIPE.format(resize=recipe.eval_resize(size), size=size),
            "mean": list(normalization[0]), "std": list(normalization[1]),
            "normalized_by": f"the first {sampled} training images",
            "workers": settings.workers, "decode": decode, "skipped_images": None, "fingerprint": found.fingerprint()}
    return Data("webdataset", None, None, None, None, info, normalization, str(info["fingerprint"]), "stream", stream)


def memory_budget(device: torch.device) -> Tuple[int, str]:
    """(bytes, in words) of decoded images --loader auto holds in memory: MEMORY_BUDGET_BYTES, or
    MEMORY_SHARE of the memory free where that is less."""
    budget, free = MEMORY_BUDGET_BYTES, []
    for where, have in inmemory.free_memory(device):
        if have is not None:
            budget = min(budget, int(have * MEMORY_SHARE))
            free.append(f"{human_bytes(have)} of {where}")
    return budget, (f"the least of {MEMORY_BUDGET_BYTES / 2 ** 30:g} GiB and {MEMORY_SHARE:.0%} of the memory free: "
                    f"{', '.join(free) or 'none could be read'}")


def choose_loader(asked: str, images: int, size: int, device: torch.device, workers: int,
                  decode: str) -> Tuple[str, Optional[str]]:
    """(the loader of an image folder of `images` images at `size`, the note that says why --loader
    auto chose it; None where --loader named it, or --decode gpu, which streams, settled it)."""
    if asked != "auto" or decode == "gpu":
        return asked if asked != "auto" else "stream", None
    needed = inmemory.decoded_bytes(images, size)
    budget, words = memory_budget(device)
    taken = (f"--data imagefolder: its {images:,} images take {human_bytes(needed)} decoded at {size}x{size}, "
             f"{'within' if needed <= budget else 'more than'} the in-memory budget of {human_bytes(budget)} ({words})")
    if needed <= budget:
        return "device", (f"{taken}: decoded once and held on {device} (--loader stream reads them from disk per "
                          "batch instead).")
    return "stream", (f"{taken}: streamed from disk per batch by {plural(workers, 'DataLoader worker')} "
                      f"(--workers; this process may use {plural(usable_cores(), 'core')}; --loader device decodes "
                      "them once and holds them instead).")



def check_listing(settings: DataSettings) -> None:
    """--check-flags: what listing the data refuses, without reading an image (an image folder's
    index, built and cached as a run builds it)."""
    if settings.data == "imagefolder":
        imagefolder.listing(settings.data_dir, settings.skip_bad_images)
    if settings.data == "webdataset":
        shards.check_feeds(shards.read(settings.data_dir, settings.epoch_images, settings.num_classes),
                           launch.detect().size, settings.workers)


def load(settings: DataSettings, device: torch.device, seed: int,
         say: Callable[[str], None] = lambda sentence: None) -> Tuple[Data, List[str]]:
    """(data moved to the device once, warnings). --data auto takes CIFAR-10 when a usable
    copy is there, or downloads it when none is there and --download allows (a first run gets
    real data); else synthetic data with a loud warning, in seconds where there is no network.
    --data cifar10 downloads a missing copy unless --no-download. `say(sentence)` tells the
    user what takes the time (decoding an image folder)."""
    choice, data_dir, download = settings.data, settings.data_dir, settings.download
    if choice == "imagefolder":
        return image_folder(settings, device, say), []
    if choice == "webdataset":
        return shard_data(settings, device, say), []
    classes = settings.num_classes or DEFAULT_NUM_CLASSES
    allow_unverified = settings.allow_unverified
    warnings = []
    if choice == "auto":
        why = cifar10.why_unusable(data_dir, download, allow_unverified)
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
