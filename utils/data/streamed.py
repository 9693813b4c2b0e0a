"""Images read from disk per batch as the run trains (--loader stream): an image folder of any
size, in bounded memory, with torchvision's ImageNet recipe at --image-size.

DataLoader workers (--workers) open, decode and augment each batch's files (recipe.py), or with
--decode gpu read them for the device to decode (gpu_decode.py). Batches travel as uint8 (a
quarter of float32's bytes), in pinned memory on CUDA, copied without blocking and normalised on
the device; the loaders here serve tar shards (shards.py) and DALI (dali.py) alike.

The order is the device loader's: consecutive slices of a stream of permutations (one per
epoch, drawn from the seed and the epoch), every batch full, every image once per epoch, each
rank its slice of every global batch. Each image's crop and flip are drawn from the seed and its
place in that stream, so that neither the number of workers nor a resume changes a batch.
Memory stays bounded whatever the tree's size: the index (flat arrays) and --workers x
PREFETCH batches in flight.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Dict, Iterator, List, Optional, Sequence, Tuple

import numpy as np
import torch
from torch.utils.data import DataLoader, Dataset, Sampler

from utils.config import CHANNELS
from utils.data import gpu_decode, images, recipe
from utils.data.imagefolder import Listing
from utils.data.images import BadImages, Failed
from utils.data.index import FileIndex
from utils.data.loaders import Normalization, Normalize, memory_format

PREFETCH = 2  # batches each worker prepares ahead (DataLoader's prefetch_factor)
SUBSTITUTE_TRIES = 16  # files tried in place of one that is not a whole image, so that every batch is full
NORMALIZATION_SAMPLE = 512  # training images whose channel figures normalise the batches


@dataclass
class Sample:
    image: Optional[torch.Tensor]  # None: decoded on the device (`encoded`), or no whole image, left out
    label: int
    failed: List[Failed]  # files that were no whole images, met on the way to this one
    encoded: Optional[gpu_decode.Encoded] = None  # --decode gpu: a JPEG for the device to decode


class FolderImages(Dataset):
    """The index's images at `positions` (item: (place in `positions`, the image's draw seed for
    training, None for evaluation)). A file that is not a whole image is reported with the sample:
    in training replaced by the next one that is, so that every batch is full, in evaluation
    left out; the loader decides whether it stops the run."""

    def __init__(self, index: FileIndex, positions: np.ndarray, size: int, on_device: bool = False):
        self.index, self.positions, self.size, self.on_device = index, positions, size, on_device

    def __len__(self) -> int:
        return len(self.positions)

    def __getitem__(self, item: Tuple[int, Optional[str]]) -> Sample:
        at, draw = item
        failed: List[Failed] = []
        for tried in range(SUBSTITUTE_TRIES if draw is not None else 1):
            position = self.positions[(at + tried) % len(self.positions)]
            drawn = f"{draw}:{tried}" if draw is not None else None
            path, label, size = self.index.path(position), int(self.index.labels[position]), self.index.sizes[position]
            if self.on_device:
                try:
                    jpeg = gpu_decode.encoded(images.file_bytes(path, int(size)), path, self.size, drawn)
                except Exception as error:  # a file that cannot be read, or whose header PIL cannot read
                    failed.append((path, images.reason(error)))
                    continue
                if jpeg is not None:
                    return Sample(None, label, failed, jpeg)
            picture, why = images.read_rgb(path, recipe.recipe(self.size, drawn), int(size))
            if picture is not None:
                return Sample(picture, label, failed)
            failed.append((path, why))
        blank = torch.zeros(CHANNELS, self.size, self.size, dtype=torch.uint8) if draw is not None else None
        return Sample(blank, int(self.index.labels[self.positions[at]]), failed)


Pending = List[Tuple[int, gpu_decode.Encoded]]  # (row of the batch, the JPEG the device decodes into it)
HostBatch = Tuple[torch.Tensor, torch.Tensor, List[Failed], Pending]


def blank(jpeg: Optional[gpu_decode.Encoded]) -> torch.Tensor:
    """The row a JPEG the device decodes takes until then."""
    assert jpeg is not None  # a sample without an image holds a JPEG where it is kept
    return torch.zeros(CHANNELS, jpeg.size, jpeg.size, dtype=torch.uint8)


def collate(samples: Sequence[Sample]) -> HostBatch:
    """A batch of the samples that hold an image or a JPEG for the device (its row blank until
    then), every file met that was no whole image, and the JPEGs with their rows."""
    kept = [sample for sample in samples if sample.image is not None or sample.encoded is not None]
    pictures = [sample.image if sample.image is not None else blank(sample.encoded) for sample in kept]
    pending = [(row, sample.encoded) for row, sample in enumerate(kept) if sample.encoded is not None]
    return (torch.stack(pictures) if pictures else torch.empty(0, dtype=torch.uint8),
            torch.tensor([sample.label for sample in kept], dtype=torch.long),
            [failed for sample in samples for failed in sample.failed], pending)


class StreamOrder(Sampler):
    """Batches of (item, draw seed) for this rank: consecutive slices of a stream of permutations
    of `count` items, one per epoch (drawn from `seed` and the epoch), each rank `shard` (rank,
    ranks) its slice of every global batch, from batch `start` on, without end."""

    def __init__(self, count: int, batch_size: int, seed: int, shard: Tuple[int, int] = (0, 1), start: int = 0):
        self.count, self.batch_size, self.seed, self.shard, self.start = count, batch_size, seed, shard, start

    def permutation(self, epoch: int) -> np.ndarray:
        return np.random.default_rng([self.seed, epoch]).permutation(self.count)

    def __iter__(self) -> Iterator[List[Tuple[int, str]]]:
        rank, ranks = self.shard
        width = self.batch_size * ranks
        number = self.start * width + rank * self.batch_size  # this rank's first sample in the stream
        epoch, order = -1, np.empty(0, dtype=np.int64)
        while True:
            batch = []
            for sample in range(number, number + self.batch_size):
                if sample // self.count != epoch:
                    epoch = sample // self.count
                    order = self.permutation(epoch)
                batch.append((int(order[sample % self.count]), f"{self.seed}:{sample}"))
            yield batch
            number += width


class ToDevice:
    """Batches of streamed data on the device: what the streamed loaders share. Each host batch
    (uint8 images, labels, the files met that were no whole images, from a DataLoader's workers) is
    copied without blocking, normalised and laid out; the files go to `bad`, whose first stops the
    run without --skip-bad-images (`failure`)."""

    def __init__(self, bad: BadImages, device: torch.device, normalization: Normalization, channels_last: bool):
        self.bad, self.device = bad, device
        self.normalize = Normalize(device, normalization)
        self.memory_format = memory_format(channels_last)

    @property
    def failure(self) -> Optional[str]:
        return self.bad.failure

    def on_device(self, host: HostBatch, keep_full: bool) -> Tuple[torch.Tensor, torch.Tensor]:
        """The host batch normalised on the device, its JPEGs decoded there into their rows (--decode
        gpu); a JPEG the device cannot decode leaves its row to a copy of the batch's first whole
        image where `keep_full` (training), else out."""
        host_images, labels, failed, pending = host
        pictures, labels = host_images.to(self.device, non_blocking=True), labels.to(self.device, non_blocking=True)
        if pending:
            decoded, undecoded = gpu_decode.decode_on(self.device, [jpeg for _, jpeg in pending])
            for (row, _), picture in zip(pending, decoded):
                if picture is not None:
                    pictures[row] = picture
            lost = [row for (row, _), picture in zip(pending, decoded) if picture is None]
            failed = failed + undecoded
            if lost:
                pictures, labels = without_rows(pictures, labels, lost, keep_full)
        self.bad.add(failed)
        return self.normalize(pictures).contiguous(memory_format=self.memory_format), labels

    def loader(self, dataset: Dataset, workers: int, **batching: Any) -> DataLoader:
        """The DataLoader of `dataset`: `workers` processes, pinned memory on CUDA."""
        return DataLoader(dataset, num_workers=workers, collate_fn=collate, pin_memory=self.device.type == "cuda",
                          **batching)

    def evaluated(self, loader: DataLoader) -> Iterator[Tuple[torch.Tensor, torch.Tensor]]:
        """`loader`'s batches on the device, those left empty by files that are no whole images left out."""
        for host in loader:
            batch = self.on_device(host, keep_full=False)
            if len(batch[1]):
                yield batch


def without_rows(pictures: torch.Tensor, labels: torch.Tensor, lost: List[int],
                 keep_full: bool) -> Tuple[torch.Tensor, torch.Tensor]:
    """The batch without the rows `lost`: each refilled by a copy of the first other row where
    `keep_full` (a training batch stays full; left blank where none is whole), else left out."""
    kept = [row for row in range(len(labels)) if row not in set(lost)]
    if not keep_full:
        return pictures[kept], labels[kept]
    if kept:
        pictures[lost], labels[lost] = pictures[kept[0]], labels[kept[0]]
    return pictures, labels


class TrainBatches(ToDevice):
    """An endless stream of training batches that a DataLoader's persistent workers make
    (`start(position)` makes the iterator, from batch `position` on); counted, so that a
    checkpoint resumes at its batch."""
    position = 0
    batches: Iterator[HostBatch]

    def start(self, position: int) -> None:
        raise NotImplementedError

    def __iter__(self) -> TrainBatches:
        return self

    def __next__(self) -> Tuple[torch.Tensor, torch.Tensor]:
        host = next(self.batches)
        self.position += 1
        return self.on_device(host, keep_full=True)

    def state_dict(self) -> Dict[str, Any]:
        return {"position": self.position}

    def load_state_dict(self, state: Dict[str, Any]) -> None:
        """Start again at the saved batch."""
        if not isinstance(state.get("position"), int) or state["position"] < 0:
            raise ValueError(f"its loader position {state.get('position')!r} is not a batch number")
        self.start(state["position"])

    def persistent(self, dataset: Dataset, workers: int, **batching: Any) -> DataLoader:
        """The DataLoader of training: workers that persist across epochs, each PREFETCH batches ahead."""
        ahead: Dict[str, Any] = {"prefetch_factor": PREFETCH} if workers > 0 else {}  # torch 1.11 refuses it for 0
        return self.loader(dataset, workers, persistent_workers=workers > 0, **ahead, **batching)


class StreamLoader(TrainBatches):
    """An image folder's training batches, read from its files by `workers` DataLoader processes
    (the main process for 0) in StreamOrder: a resume reads no batch before its own, as the order
    and every draw follow from the seed and the position."""

    def __init__(self, dataset: FolderImages, bad: BadImages, *, batch_size: int, device: torch.device, seed: int,
                 workers: int, normalization: Normalization, channels_last: bool = False,
                 shard: Tuple[int, int] = (0, 1)):
        super().__init__(bad, device, normalization, channels_last)
        self.dataset, self.batch_size, self.seed, self.workers, self.shard = dataset, batch_size, seed, workers, shard
        self.start(0)

    def start(self, position: int) -> None:
        order = StreamOrder(len(self.dataset), self.batch_size, self.seed, self.shard, position)
        self.batches = iter(self.persistent(self.dataset, self.workers, batch_sampler=order))
        self.position = position

    def __len__(self) -> int:
        """Batches in an epoch: the device loader's count (the last partial one completed from the next)."""
        return -(-len(self.dataset) // (self.batch_size * self.shard[1]))


class EvalBatches(ToDevice):
    """This rank's contiguous share of the evaluation images, in order, as normalised batches on
    the device; the files met that are no whole images go to `bad` (and are left out)."""

    def __init__(self, dataset: FolderImages, bad: BadImages, *, batch_size: int, device: torch.device, workers: int,
                 normalization: Normalization, channels_last: bool = False, shard: Tuple[int, int] = (0, 1)):
        super().__init__(bad, device, normalization, channels_last)
        rank, ranks = shard
        share = range(rank * len(dataset) // ranks, (rank + 1) * len(dataset) // ranks)
        self.order = [[(item, None) for item in share[start:start + batch_size]]
                      for start in range(0, len(share), batch_size)]
        self.dataset, self.workers = dataset, workers

    def __len__(self) -> int:
        return len(self.order)

    def __iter__(self) -> Iterator[Tuple[torch.Tensor, torch.Tensor]]:
        return self.evaluated(self.loader(self.dataset, self.workers, batch_sampler=self.order))


@dataclass
class Source:
    """What reads streamed data as the run trains, which Data holds in place of tensors: the images'
    size, the DataLoader workers, the normalisation, the BadImages every loader it makes reports
    to, renewed for each run as it asks for its training batches (renewed_bad), and the images of
    an epoch and of the evaluation."""
    size: int
    workers: int
    normalization: Normalization
    bad: BadImages
    train_count: int
    test_count: int
    on_device: bool  # --decode gpu: the training device decodes the JPEGs

    def renewed_bad(self) -> BadImages:
        self.bad = BadImages(self.bad.skip, self.bad.source)
        return self.bad


@dataclass
class FolderStream(Source):
    """An image folder read from disk per batch."""
    listing: Listing

    def train_loader(self, *, batch_size: int, device: torch.device, seed: int, channels_last: bool,
                     shard: Tuple[int, int]) -> StreamLoader:
        """A run's training batches; the files that are no whole images are counted afresh for it."""
        return StreamLoader(FolderImages(self.listing.index, self.listing.training, self.size, self.on_device),
                            self.renewed_bad(),
                            batch_size=batch_size, device=device, seed=seed, workers=self.workers,
                            normalization=self.normalization, channels_last=channels_last, shard=shard)

    def test_batches(self, *, batch_size: int, device: torch.device, channels_last: bool,
                     shard: Tuple[int, int]) -> EvalBatches:
        return EvalBatches(FolderImages(self.listing.index, self.listing.evaluation, self.size, self.on_device),
                           self.bad,
                           batch_size=batch_size, device=device, workers=self.workers,
                           normalization=self.normalization, channels_last=channels_last, shard=shard)


def sample_normalization(index: FileIndex, positions: np.ndarray, size: int, workers: int) -> Normalization:
    """The channel figures of NORMALIZATION_SAMPLE training images drawn with a seed of their own,
    decoded as evaluation decodes them: the same for every run of the tree."""
    from utils.data.inmemory import normalization_of

    chosen = np.sort(np.random.default_rng(0).permutation(len(positions))[:NORMALIZATION_SAMPLE])
    dataset = FolderImages(index, positions[chosen], size)
    order = [[(item, None) for item in range(start, min(start + 64, len(chosen)))]
             for start in range(0, len(chosen), 64)]
    decoded = [host[0] for host in DataLoader(dataset, batch_sampler=order, num_workers=workers, collate_fn=collate)]
    return normalization_of(torch.cat(decoded))
