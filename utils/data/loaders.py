"""Training and test batches.

The default loader ("device") makes batches on the training device from uint8 tensors held
there: CIFAR-10 is 150 MB as uint8, so it fits on any GPU, and augmenting whole batches with
tensor ops (as airbench and hlb-CIFAR10 do) means the input pipeline never hides the speedup
that mixed precision brings. The "torchvision" loader is the classic per-image path (PIL
transforms in DataLoader workers) that most training scripts use, kept as the reference.

Every path augments at the images' own size (CIFAR-10's 32x32) and then upsamples the batch on
the device to --image-size (bilinear, as torchvision's Resize), so that the stored data stays
150 MB and the upsampling costs the same in each loader. An image folder's images are held at
--image-size already (utils/data/imagefolder.py): nothing to upsample.
"""
from __future__ import annotations

import math
from typing import Any, Callable, Dict, Iterator, Optional, Tuple, Union

import torch
import torch.nn.functional as F
from PIL import Image
from torch.utils.data import DataLoader, Dataset, DistributedSampler
from torchvision import transforms

from models.families import DEFAULT_NUM_CLASSES
from utils.config import DEFAULT_INPUT_SHAPE, InputShape, batches_per_epoch
from utils.data.sizes import SYNTHETIC_BYTES

MEAN = (0.4914, 0.4822, 0.4465)  # CIFAR-10 training-set channel means and standard deviations
STD = (0.2470, 0.2435, 0.2616)
# A dataset's channel (means, standard deviations), as fractions of 255: CIFAR-10's, or those an
# image folder's training images have (utils/data/imagefolder.py)
Normalization = Tuple[Tuple[float, ...], Tuple[float, ...]]
CIFAR10_NORMALIZATION: Normalization = (MEAN, STD)
PADDING = 4


def memory_format(channels_last: bool) -> torch.memory_format:
    """The memory format of models and batches: channels_last (NHWC) or the default NCHW."""
    return torch.channels_last if channels_last else torch.contiguous_format


class Normalize:
    """uint8 images -> float32 (x / 255 - mean) / std, in one multiply and one subtract."""

    def __init__(self, device: torch.device, normalization: Normalization = CIFAR10_NORMALIZATION):
        mean, std = (torch.tensor(values, device=device).view(1, 3, 1, 1) for values in normalization)
        self.scale = 1.0 / (255.0 * std)
        self.shift = mean / std

    def __call__(self, images: torch.Tensor) -> torch.Tensor:
        return images.float().mul_(self.scale).sub_(self.shift)


def upsample(images: torch.Tensor, input_shape: InputShape) -> torch.Tensor:
    """A float batch at `input_shape`'s height and width: bilinear (align_corners=False, as
    torchvision's Resize), or the batch itself when it is that size already."""
    size = tuple(input_shape[1:])
    if tuple(images.shape[-2:]) == size:
        return images
    return F.interpolate(images, size=size, mode="bilinear", align_corners=False)


def random_crop_flip(images: torch.Tensor, generator: torch.Generator, padding: int = PADDING,
                     shard: Tuple[int, int] = (0, 1)) -> torch.Tensor:
    """Per image: a random crop of the zero-padded image at its own size (offsets uniform in
    0..2*padding) and a horizontal flip with probability 1/2, as torchvision's RandomCrop(32, padding=4) and
    RandomHorizontalFlip do, done for the whole batch as one gather of flat pixel indices.

    `images` is shard (rank, ranks) of a global batch: the draws are made for the whole global
    batch and sliced, so the ranks together augment exactly as one process would."""
    n, c, h, w = images.shape
    device = images.device
    rank, ranks = shard
    padded = F.pad(images, (padding, padding, padding, padding))
    mine = slice(rank * n, (rank + 1) * n)
    dy = torch.randint(0, 2 * padding + 1, (n * ranks, 1), device=device, generator=generator)[mine]
    dx = torch.randint(0, 2 * padding + 1, (n * ranks, 1), device=device, generator=generator)[mine]
    flip = torch.randint(0, 2, (n * ranks, 1), device=device, generator=generator)[mine].bool()
    columns = torch.arange(w, device=device)
    rows = dy + torch.arange(h, device=device)  # n x h, rows of the padded image
    cols = dx + torch.where(flip, columns.flip(0), columns)  # n x w, columns, reversed when flipped
    pixel = (rows.unsqueeze(2) * (w + 2 * padding) + cols.unsqueeze(1)).view(n, 1, h * w)
    return padded.view(n, c, -1).gather(2, pixel.expand(n, c, h * w)).view(n, c, h, w)


class DeviceLoader:
    """An endless stream of augmented, normalised training batches.

    Each epoch is a fresh permutation drawn on the device; batches are consecutive slices of
    the stream of permutations, so every batch is full and every image appears exactly once
    per epoch (an epoch's last partial batch is completed from the next permutation).
    With several ranks, all draw the same stream (same seed) and each takes its slice of every
    global batch, so the ranks' batches are disjoint and together form one process's batch.
    """
    failure: Optional[str] = None  # images decoded before training: no batch meets a file that is no image

    def __init__(self, images: torch.Tensor, labels: torch.Tensor, *, batch_size: int, device: torch.device, seed: int,
                 channels_last: bool = False, shard: Tuple[int, int] = (0, 1),
                 input_shape: InputShape = DEFAULT_INPUT_SHAPE, normalization: Normalization = CIFAR10_NORMALIZATION):
        self.images = images.to(device)
        self.input_shape = input_shape
        self.labels = labels.to(device)
        self.batch_size = batch_size
        self.device = device
        self.normalize = Normalize(device, normalization)
        self.generator = torch.Generator(device=device)
        self.generator.manual_seed(seed)
        self.order = torch.empty(0, dtype=torch.long, device=device)
        self.position = 0
        self.memory_format = memory_format(channels_last)
        self.shard = shard

    def __len__(self) -> int:
        return batches_per_epoch("device", len(self.images), self.batch_size, self.shard[1])

    def next_indices(self) -> torch.Tensor:
        """This rank's slice of the next global batch of the stream."""
        parts, wanted = [], self.batch_size * self.shard[1]
        while wanted:
            if self.position == len(self.order):
                self.order = torch.randperm(len(self.images), device=self.device, generator=self.generator)
                self.position = 0
            take = min(wanted, len(self.order) - self.position)
            parts.append(self.order[self.position:self.position + take])
            self.position += take
            wanted -= take
        batch = parts[0] if len(parts) == 1 else torch.cat(parts)
        rank = self.shard[0]
        return batch[rank * self.batch_size:(rank + 1) * self.batch_size]

    def __iter__(self) -> DeviceLoader:
        return self

    def state_dict(self) -> Dict[str, Any]:
        return {"generator": self.generator.get_state(), "order": self.order, "position": self.position}

    def load_state_dict(self, state: Dict[str, Any]) -> None:
        order, position = state["order"], state["position"]
        if order.dtype != torch.long or order.shape not in ((0,), (len(self.images),)):
            raise ValueError(f"its data order is for {len(order)} images, and this data has {len(self.images)}")
        if not 0 <= position <= len(order):
            raise ValueError(f"its position {position} lies outside its data order")
        self.generator.set_state(state["generator"].cpu())
        self.order = order.to(self.device)
        self.position = position

    def __next__(self) -> Tuple[torch.Tensor, torch.Tensor]:
        index = self.next_indices()
        images = random_crop_flip(self.images[index], self.generator, shard=self.shard)
        images = upsample(self.normalize(images), self.input_shape)
        return images.contiguous(memory_format=self.memory_format), self.labels[index]


class CifarImages(Dataset):
    """CIFAR-10 the way torchvision.datasets.CIFAR10 serves it: one PIL image at a time
    through a transform (torchvision's class itself insists on the official checksums); an
    image folder's decoded images alike."""

    def __init__(self, images: torch.Tensor, labels: torch.Tensor, transform: Callable[[Image.Image], torch.Tensor]):
        host = images if images.device.type == "cpu" else copied_to(images, torch.device("cpu"))
        self.images = host.permute(0, 2, 3, 1).numpy()  # N x H x W x 3, as PIL wants
        self.labels = labels.cpu().tolist()
        self.transform = transform

    def __len__(self) -> int:
        return len(self.labels)

    def __getitem__(self, index: int) -> Tuple[torch.Tensor, int]:
        return self.transform(Image.fromarray(self.images[index])), self.labels[index]


def copied_to(images: torch.Tensor, device: torch.device) -> torch.Tensor:
    """A copy of `images` on `device` in their own layout: the memory the view spans is copied,
    so overlapping synthetic images move as their buffer, where .to() would copy every image."""
    span = images.storage_offset() + sum((size - 1) * stride for size, stride in zip(images.shape, images.stride())) + 1
    return images.as_strided((span,), (1,), 0).to(device, copy=True).as_strided(
        images.shape, images.stride(), images.storage_offset())


def standard_transform(size: int = DEFAULT_INPUT_SHAPE[1],
                       normalization: Normalization = CIFAR10_NORMALIZATION) -> transforms.Compose:
    """The usual CIFAR-10 training transforms, for images held at `size`: the same augmentation
    as random_crop_flip."""
    return transforms.Compose([transforms.RandomCrop(size, padding=PADDING), transforms.RandomHorizontalFlip(),
                               transforms.ToTensor(), transforms.Normalize(*normalization)])


class TorchvisionLoader:
    """The classic path: a CIFAR10-style Dataset with standard transforms in a DataLoader
    (shuffled, `workers` processes, pinned memory on CUDA, persistent workers), batches
    copied to the device without blocking; an endless stream like DeviceLoader's. With several
    ranks a DistributedSampler gives each its share of every epoch (set_epoch each epoch)."""
    failure: Optional[str] = None  # images decoded before training: no batch meets a file that is no image

    def __init__(self, images: torch.Tensor, labels: torch.Tensor, *, batch_size: int, device: torch.device, seed: int,
                 workers: int, channels_last: bool = False, shard: Tuple[int, int] = (0, 1),
                 input_shape: InputShape = DEFAULT_INPUT_SHAPE, normalization: Normalization = CIFAR10_NORMALIZATION):
        self.input_shape = input_shape
        self.generator = torch.Generator()
        self.generator.manual_seed(seed)
        dataset = CifarImages(images, labels, standard_transform(images.shape[-1], normalization))
        self.sampler: Optional[DistributedSampler] = None
        if shard[1] > 1:
            self.sampler = DistributedSampler(dataset, num_replicas=shard[1], rank=shard[0], shuffle=True, seed=seed,
                                              drop_last=True)
        self.loader = DataLoader(dataset, batch_size=batch_size, shuffle=self.sampler is None, sampler=self.sampler,
                                 drop_last=True, num_workers=workers, generator=self.generator,
                                 pin_memory=device.type == "cuda", persistent_workers=workers > 0)
        self.device = device
        self.memory_format = memory_format(channels_last)
        self.epoch = 0
        self.start_epoch()

    def start_epoch(self) -> None:
        """The epoch's order and worker seeds are drawn from the generator here, so its state
        now is all that is needed to replay the epoch."""
        self.epoch_start_state = self.generator.get_state()
        self.epoch += 1
        if self.sampler is not None:
            self.sampler.set_epoch(self.epoch)
        self.batches = iter(self.loader)
        self.position = 0

    def state_dict(self) -> Dict[str, Any]:
        return {"epoch_start_state": self.epoch_start_state, "position": self.position, "epoch": self.epoch}

    def load_state_dict(self, state: Dict[str, Any]) -> None:
        """Replay the saved epoch's order and skip the batches already trained on."""
        if not 0 <= state["position"] <= len(self.loader):
            raise ValueError(f"its position {state['position']} lies outside an epoch of {len(self.loader)} batches")
        self.generator.set_state(state["epoch_start_state"].cpu())
        self.epoch = state["epoch"] - 1
        self.start_epoch()
        for _ in range(state["position"]):
            next(self.batches)
        self.position = state["position"]

    def __len__(self) -> int:
        return len(self.loader)

    def __iter__(self) -> TorchvisionLoader:
        return self

    def __next__(self) -> Tuple[torch.Tensor, torch.Tensor]:
        try:
            images, labels = next(self.batches)
        except StopIteration:
            self.start_epoch()
            images, labels = next(self.batches)
        self.position += 1
        images = upsample(images.to(self.device, non_blocking=True), self.input_shape)
        return images.contiguous(memory_format=self.memory_format), labels.to(self.device, non_blocking=True)


def make_train_loader(kind: str, images: torch.Tensor, labels: torch.Tensor, *, batch_size: int, device: torch.device,
                      seed: int, workers: int, channels_last: bool, shard: Tuple[int, int] = (0, 1),
                      input_shape: InputShape = DEFAULT_INPUT_SHAPE,
                      normalization: Normalization = CIFAR10_NORMALIZATION) -> Union[TorchvisionLoader, DeviceLoader]:
    """The --loader `kind`'s training loader (`workers` serves the DataLoader alone)."""
    if kind == "torchvision":
        return TorchvisionLoader(images, labels, batch_size=batch_size, device=device, seed=seed, workers=workers,
                                 channels_last=channels_last, shard=shard, input_shape=input_shape,
                                 normalization=normalization)
    return DeviceLoader(images, labels, batch_size=batch_size, device=device, seed=seed, channels_last=channels_last,
                        shard=shard, input_shape=input_shape, normalization=normalization)


def eval_batches(images: torch.Tensor, labels: torch.Tensor, *, batch_size: int, device: torch.device,
                 channels_last: bool = False, shard: Tuple[int, int] = (0, 1),
                 input_shape: InputShape = DEFAULT_INPUT_SHAPE,
                 normalization: Normalization = CIFAR10_NORMALIZATION) -> Iterator[Tuple[torch.Tensor, torch.Tensor]]:
    """This rank's contiguous share of the test set, in order, unaugmented, normalised and
    upsampled to `input_shape`, one batch at a time (for either loader: evaluation is not timed)."""
    normalize = Normalize(device, normalization)
    layout = memory_format(channels_last)
    rank, ranks = shard
    share = slice(rank * len(images) // ranks, (rank + 1) * len(images) // ranks)
    images, labels = images[share].to(device), labels[share].to(device)
    for start in range(0, len(images), batch_size):
        batch = upsample(normalize(images[start:start + batch_size]), input_shape).contiguous(memory_format=layout)
        yield batch, labels[start:start + batch_size]


def synthetic_images(count: int, device: torch.device, seed: int, input_shape: InputShape = DEFAULT_INPUT_SHAPE,
                     classes: int = DEFAULT_NUM_CLASSES) -> Tuple[torch.Tensor, torch.Tensor]:
    """`count` fixed random uint8 images of `input_shape` and their labels of `classes` classes,
    made on the device in at most SYNTHETIC_BYTES and one image more: image i is the image-sized
    window that starts at byte i * stride of one random buffer. Up to CIFAR-10's bytes the windows
    lie side by side (a plain tensor); beyond them they overlap, each still random and other than
    its neighbours, so that 4,096 images of 1024x1024 hold 0.15 GiB instead of 12.0. A read-only
    view: the loaders gather their batches from it as from any tensor, at the same cost."""
    generator = torch.Generator(device=device)
    generator.manual_seed(seed)
    size = math.prod(input_shape)
    stride = max(1, min(size, SYNTHETIC_BYTES // count))
    buffer = torch.randint(0, 256, (stride * (count - 1) + size,), dtype=torch.uint8, device=device,
                           generator=generator)
    channels, height, width = input_shape
    images = buffer.as_strided((count, *input_shape), (stride, height * width, width, 1))
    labels = torch.randint(0, classes, (count,), device=device, generator=generator)
    return images, labels
