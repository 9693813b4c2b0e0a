"""WebDataset tar shards (--data webdataset), as the run reads them and as ampbench-shards writes
them (utils/data/shard_writer.py is the command): images read a shard at a time, one large sequential
read per shard instead of a metadata request per file, which is what parallel file systems serve
best and what HPC centres ask of data sets of many small files.

A sample is the files of one key in a shard (webdataset's convention): KEY.jpg (or .png, ...,
any of torchvision's image extensions) and KEY.cls, its label as decimal text. --data-dir is
 * a folder that ampbench-shards wrote (utils/data/shard_writer.py): its index.json lists the
   train- and eval- shards with their images and bytes per shard and the classes, so that an epoch
   has its exact length, a shard cut short or emptied since is refused before training, and a
   class without training images is refused;
 * or shards written by anything else: a folder of .tar files, or a brace pattern
   (DIR/train-{000000..000146}.tar), all training shards, whose epoch is --epoch-images images
   of --num-classes classes (no evaluation).
The package webdataset reads the tar files (tarfile_samples: one pass, a sample per key). Each
epoch shuffles the shards (from the seed and the epoch), deals them to the ranks and then to each
rank's --workers, and shuffles the samples of each worker in a buffer of SHUFFLE_BUFFER; the
images go through the streamed folder's recipe (streamed.py) and batches as its do.
"""
from __future__ import annotations

import glob
import hashlib
import io
import json
import os
import stat
import tarfile
import time
from dataclasses import dataclass
from typing import Any, Callable, Dict, Iterator, List, Optional, Sequence, Tuple

import numpy as np
import torch
from PIL import Image
from torch.utils.data import DataLoader, Dataset, IterableDataset, get_worker_info
from torchvision.datasets.folder import IMG_EXTENSIONS
from torchvision.transforms import functional as TF

from utils.data import gpu_decode, images, recipe, streamed
from utils.data.images import BadImages, Failed
from utils.data.index import FileIndex
from utils.data.loaders import Normalization
from utils.errors import UserError

INDEX = "index.json"
FORMAT = "ampbench.shards/1"
SOURCE = "--data webdataset"
SPLITS = ("train", "eval")  # the shards' name prefixes in a folder ampbench-shards wrote
SHUFFLE_BUFFER = 1000  # samples each worker shuffles among, as webdataset's shuffle(1000)
JPEG_QUALITY = 90  # of the images ampbench-shards --resize writes
PROGRESS_EVERY_S = 30.0
IMAGE_SUFFIXES = tuple(extension.lstrip(".") for extension in IMG_EXTENSIONS)
INSTALL = "pip install webdataset (requirements-test.txt pins the release tested)"


def webdataset_module() -> Any:
    """The webdataset package, or the sentence saying how to install it."""
    try:
        import webdataset
    except ImportError:
        raise UserError(f"--data webdataset reads tar shards through the webdataset package, which is not installed "
                        f"in this Python; {INSTALL}, or train on the image folder (--data imagefolder).") from None
    return webdataset


@dataclass
class Split:
    """The shards of one split: their paths, and (from an index) their images and bytes."""
    paths: List[str]
    images: Optional[List[int]] = None
    sizes: Optional[List[int]] = None

    @property
    def total(self) -> Optional[int]:
        return sum(self.images) if self.images is not None else None


@dataclass
class Shards:
    """What --data-dir holds: the training and evaluation shards, the classes and the training
    images of an epoch (the index's, else --epoch-images)."""
    where: str
    train: Split
    evaluation: Optional[Split]
    num_classes: int
    classes: Optional[List[str]]  # None without an index: the labels are numbers
    train_images: int
    resized: Optional[int] = None  # the shorter side ampbench-shards --resize brought the images to

    @property
    def test_images(self) -> int:
        return (self.evaluation.total or 0) if self.evaluation is not None else 0

    def fingerprint(self) -> str:
        """A short digest of the shards (split, name, images, bytes) and classes: what a resume and a
        merge tell shard sets apart by, wherever they lie."""
        digest = hashlib.sha256(json.dumps(self.classes or self.num_classes).encode())
        for name, split in (("train", self.train), ("eval", self.evaluation)):
            for number, path in enumerate(split.paths if split is not None else []):
                images_in = split.images[number] if split is not None and split.images is not None else None
                sizes = split.sizes[number] if split is not None and split.sizes is not None else None
                digest.update(f"{name}\t{os.path.basename(path)}\t{images_in}\t{sizes}\n".encode("utf-8",
                                                                                                  "surrogateescape"))
        return digest.hexdigest()[:16]


def refused(why: str) -> UserError:
    return UserError(f"{SOURCE}: {why}")


def read(data_dir: str, epoch_images: Optional[int], num_classes: Optional[int]) -> Shards:
    """The Shards at `data_dir`, checked before anything trains: an index's shards present and
    whole, each split with images and every class with training images; shards without one found,
    with --epoch-images and --num-classes given."""
    webdataset = webdataset_module()
    if os.path.isdir(data_dir) and os.path.exists(os.path.join(data_dir, INDEX)):
        if epoch_images is not None:
            raise refused(f"{data_dir} holds an {INDEX}, which gives the epoch's images; drop --epoch-images.")
        return indexed(data_dir, num_classes)
    if os.path.isdir(data_dir):
        paths = sorted(glob.glob(os.path.join(glob.escape(data_dir), "*.tar")))
        if not paths:
            raise refused(f"{data_dir} holds neither an {INDEX} (ampbench-shards writes one) nor .tar shards; point "
                          "--data-dir at shards, or write them with ampbench-shards IMAGE_FOLDER OUT.")
    else:
        paths = list(webdataset.shardlists.expand_urls(data_dir)) if "{" in data_dir else [data_dir]
        missing = [path for path in paths if not os.path.isfile(path)]
        if missing:
            more = f" (nor are {len(missing) - 1} more)" if len(missing) > 1 else ""
            raise refused(f"{missing[0]} is not a file{more}; --data-dir is a folder of shards or a pattern of them "
                          "(DIR/train-{000000..000099}.tar).")
    if epoch_images is None or num_classes is None:
        needed = " and ".join(flag for flag, value in (("--epoch-images N", epoch_images),
                                                       ("--num-classes K", num_classes)) if value is None)
        raise refused(f"{data_dir} has no {INDEX} to say how many images an epoch holds and of how many classes: give "
                      f"{needed}, or write the shards with ampbench-shards, which indexes them.")
    empty = [path for path in paths if os.path.getsize(path) == 0]
    if empty:
        raise refused(f"{empty[0]} is empty (0 bytes); remove it or write it again.")
    return Shards(data_dir, Split(paths), None, num_classes, None, epoch_images)


def indexed(folder: str, num_classes: Optional[int]) -> Shards:
    """The Shards of an index.json, each of its claims checked against the files and itself."""
    path = os.path.join(folder, INDEX)
    try:
        with open(path, encoding="utf-8") as f:
            index = json.load(f)
        if index.get("format") != FORMAT:
            raise ValueError(f"its format is {str(index.get('format'))[:40]!r}, not {FORMAT}")
        classes = [str(name) for name in index["classes"]]
        splits = {name: index["splits"][name] for name in SPLITS if name in index["splits"]}
        checked = {name: split_of(folder, entry, len(classes)) for name, entry in splits.items()}
        resized = index.get("resized")
    except (OSError, ValueError, KeyError, TypeError, AttributeError) as error:
        raise refused(f"{path} cannot be read as ampbench-shards' index ({images.reason(error)}); write the shards "
                      "again with ampbench-shards.") from None
    if "train" not in checked:
        raise refused(f"{path} lists no training shards; write the shards again with ampbench-shards.")
    if num_classes not in (None, len(classes)):
        raise UserError(f"--num-classes {num_classes} does not fit {SOURCE}: {path} lists {len(classes)} classes; "
                        "drop --num-classes (the index's count is taken).")
    for name, (split, per_class) in checked.items():
        for number, (shard, count) in enumerate(zip(split.paths, split.images or [])):
            whole_or_refused(shard, count, (split.sizes or [])[number])
        lacking = [classes[label] for label, count in enumerate(per_class) if count == 0]
        if name == "train" and lacking:
            raise refused(f"the training shards of {folder} hold no images of class {lacking[0]}"
                          f"{f' (nor of {len(lacking) - 1} more)' if len(lacking) > 1 else ''}: a model cannot learn "
                          "a class it never sees; write the shards again from a folder with images of every class.")
    train = checked["train"][0]
    return Shards(folder, train, checked["eval"][0] if "eval" in checked else None, len(classes), classes,
                  train.total or 0, resized if isinstance(resized, int) else None)


def split_of(folder: str, entry: Dict[str, Any], classes: int) -> Tuple[Split, List[int]]:
    """(the Split an index's entry lists, its images per class), refusing an entry that lies."""
    shards = entry["shards"]
    per_class = [int(count) for count in entry["per_class"]]
    if len(per_class) != classes or any(count < 0 for count in per_class):
        raise ValueError("its images per class do not match its classes")
    names = [str(shard["name"]) for shard in shards]
    if any(os.path.basename(name) != name or name in ("", ".", "..") for name in names):
        raise ValueError("a shard's name is a path, not a file in its folder")
    split = Split([os.path.join(folder, name) for name in names], [int(shard["images"]) for shard in shards],
                  [int(shard["bytes"]) for shard in shards])
    if sum(per_class) != split.total:
        raise ValueError("its images per class do not add up to its shards' images")
    return split, per_class


def whole_or_refused(shard: str, count: int, size: int) -> None:
    """Refuse a shard the index lists that is missing, not a file, empty, or of another size
    than the index's (cut short by a copy that ended early, or written over)."""
    try:
        found = os.stat(shard)
    except OSError as error:
        raise refused(f"{shard}, which {INDEX} lists, cannot be read ({error.strerror or error}); copy it again, or "
                      "write the shards again with ampbench-shards.") from None
    if not stat.S_ISREG(found.st_mode):
        raise refused(f"{shard} is not a file; copy it again.")
    if count <= 0 or found.st_size == 0:
        raise refused(f"{shard} holds no images; write the shards again with ampbench-shards.")
    if found.st_size != size:
        raise refused(f"{shard} is {found.st_size:,} bytes and {INDEX} says {size:,}: it was cut short or written "
                      "over; copy it again, or write the shards again with ampbench-shards.")


Raw = Dict[str, Any]  # a webdataset sample: __key__, __url__ and its files' bytes by suffix


def samples(paths: Sequence[str], failed: List[Failed]) -> Iterator[Raw]:
    """The samples of the shards at `paths`, in order; a shard that cannot be read to its end (cut
    short, not a tar) adds to `failed` and the reading goes on with the next."""
    webdataset = webdataset_module()
    for path in paths:
        def handler(error: Exception, shard: str = path) -> bool:
            failed.append((shard, f"not a whole tar file: {images.reason(error)}"))
            return True
        yield from webdataset.tariterators.tarfile_samples([{"url": path}], handler=handler)


def sample_of(raw: Raw, size: int, draw: Optional[str], classes: int, on_device: bool) -> streamed.Sample:
    """The raw sample through the recipe at `size` (training's, its crop drawn from `draw`, else
    evaluation's): decoded here, or with `on_device` a JPEG left for the device to decode; a sample
    without an image, a label or a whole image comes back empty with why."""
    name = f"{raw['__url__']}:{raw['__key__']}"
    suffix = next((suffix for suffix in IMAGE_SUFFIXES if suffix in raw), None)
    if suffix is None:
        return streamed.Sample(None, -1, [(name, "it holds no image file")])
    try:
        label = int(raw["cls"])
        if not 0 <= label < classes:
            raise ValueError(f"its label {label} is not one of the {classes} classes")
        jpeg = gpu_decode.encoded(raw[suffix], name, size, draw) if on_device else None
        if jpeg is not None:
            return streamed.Sample(None, label, [], jpeg)
        with Image.open(io.BytesIO(raw[suffix])) as image:
            return streamed.Sample(images.tensor_of(recipe.recipe(size, draw)(image)), label, [])
    except Exception as error:  # whatever PIL raises for bytes that are not a whole image, or a label that is none
        return streamed.Sample(None, -1, [(name, images.reason(error))])


Resume = Callable[[int, int], Tuple[int, int]]  # (worker, workers) -> (the stream it reads, samples to pass over)


class ShardSamples(IterableDataset):
    """Training: an endless stream of augmented samples for this rank and worker: each epoch the
    shards shuffled (seed, epoch), dealt to the ranks, then to the workers, their samples shuffled
    in a buffer; a sample that is no whole labelled image reported with the next one. Evaluation
    (`seed` None): this rank's shards once, in order. `resume(worker, workers)` says which worker's
    stream a worker reads and how many of its samples to pass over without decoding (a resume's)."""

    def __init__(self, shards: Split, size: int, classes: int, seed: Optional[int], shard: Tuple[int, int],
                 resume: Resume = lambda worker, workers: (worker, 0), on_device: bool = False):
        self.paths, self.size, self.classes, self.seed, self.shard, self.resume = \
            shards.paths, size, classes, seed, shard, resume
        self.on_device = on_device

    def __iter__(self) -> Iterator[streamed.Sample]:
        info = get_worker_info()
        worker, workers = (info.id, info.num_workers) if info is not None else (0, 1)
        rank, ranks = self.shard
        failed: List[Failed] = []
        worker, to_skip = self.resume(worker, workers)
        for epoch, raw in self.stream(rank, ranks, worker, workers, failed):
            if to_skip:
                to_skip -= 1
                continue
            draw = f"{self.seed}:{epoch}:{os.path.basename(raw['__url__'])}:{raw['__key__']}" \
                if self.seed is not None else None
            sample = sample_of(raw, self.size, draw, self.classes, self.on_device)
            if sample.image is None and sample.encoded is None:
                failed += sample.failed
                continue
            yield streamed.Sample(sample.image, sample.label, list(failed), sample.encoded)
            failed.clear()  # the stream adds to this list: it stays the one it was given
        if failed:  # an evaluation that ended on samples that are no whole images
            yield streamed.Sample(None, -1, list(failed))

    def stream(self, rank: int, ranks: int, worker: int, workers: int,
               failed: List[Failed]) -> Iterator[Tuple[int, Raw]]:
        """(epoch, raw sample) of this worker: training's endless and shuffled, evaluation's once."""
        if self.seed is None:
            for raw in samples(self.paths[rank::ranks][worker::workers], failed):
                yield 0, raw
            return
        epoch = 0
        if len(self.paths) < ranks * workers:  # check_feeds refuses this before training: a worker would spin
            raise RuntimeError(f"{len(self.paths)} shards cannot feed {ranks} rank(s) x {workers} worker(s)")
        while True:
            order = np.random.default_rng([self.seed, epoch]).permutation(len(self.paths))
            mine = [self.paths[number] for number in order[rank::ranks][worker::workers]]
            shuffle = np.random.default_rng([self.seed, epoch, rank, worker])
            buffer: List[Raw] = []
            for raw in samples(mine, failed):
                if len(buffer) < SHUFFLE_BUFFER:
                    buffer.append(raw)
                    continue
                slot = int(shuffle.integers(len(buffer)))
                buffer[slot], raw = raw, buffer[slot]
                yield epoch, raw
            shuffle.shuffle(buffer)
            for raw in buffer:
                yield epoch, raw
            epoch += 1


class ShardLoader(streamed.TrainBatches):
    """An endless stream of augmented, normalised training batches from the shards, read by
    `workers` DataLoader processes (the main process for 0), persistent across epochs, from the
    ShardSamples `samples(resume)` makes. Epochs are counted in batches (the index's images, or
    --epoch-images, over the global batch): each rank reads its own shards."""

    def __init__(self, samples: Callable[[Resume], ShardSamples], bad: BadImages, *, train_images: int,
                 batch_size: int, device: torch.device, workers: int, normalization: Normalization,
                 channels_last: bool = False, ranks: int = 1):
        super().__init__(bad, device, normalization, channels_last)
        self.samples, self.train_images, self.batch_size, self.workers, self.ranks = \
            samples, train_images, batch_size, workers, ranks
        self.start(0)

    def start(self, position: int) -> None:
        """Read from batch `position` on. DataLoader takes a batch from each worker in turn, so batch
        `position` is worker position % workers's: the first worker takes up that one's stream, and
        each worker passes over, undecoded, the samples of the batches its stream made before."""
        def resume(worker: int, workers: int) -> Tuple[int, int]:
            stream = (worker + position) % workers
            return stream, len(range(stream, position, workers)) * self.batch_size

        self.batches = iter(self.persistent(self.samples(resume), self.workers, batch_size=self.batch_size))
        self.position = position

    def __len__(self) -> int:
        return -(-self.train_images // (self.batch_size * self.ranks))


class ShardEvalBatches(streamed.ToDevice):
    """This rank's evaluation shards (`dataset`, once, in order) as normalised batches on the
    device; the samples met that are no whole images go to `bad` (and are left out)."""

    def __init__(self, dataset: ShardSamples, bad: BadImages, *, batch_size: int, device: torch.device,
                 workers: int, normalization: Normalization, channels_last: bool, images_per_rank: int):
        super().__init__(bad, device, normalization, channels_last)
        self.dataset, self.batch_size, self.workers = dataset, batch_size, workers
        self.batches = -(-images_per_rank // batch_size)

    def __len__(self) -> int:
        return self.batches

    def __iter__(self) -> Iterator[Tuple[torch.Tensor, torch.Tensor]]:
        workers = min(self.workers, len(self.dataset.paths))
        return self.evaluated(self.loader(self.dataset, workers, batch_size=self.batch_size))


@dataclass
class ShardStream(streamed.Source):
    """Shards read as the run trains (streamed.FolderStream's counterpart)."""
    shards: Shards

    def train_loader(self, *, batch_size: int, device: torch.device, seed: int, channels_last: bool,
                     shard: Tuple[int, int]) -> ShardLoader:
        """A run's training batches; the samples that are no whole images are counted afresh for it."""
        def samples(resume: Resume) -> ShardSamples:
            return ShardSamples(self.shards.train, self.size, self.shards.num_classes, seed, shard, resume,
                                self.on_device)

        return ShardLoader(samples, self.renewed_bad(), train_images=self.shards.train_images, batch_size=batch_size,
                           device=device, workers=self.workers, normalization=self.normalization,
                           channels_last=channels_last, ranks=shard[1])

    def test_batches(self, *, batch_size: int, device: torch.device, channels_last: bool,
                     shard: Tuple[int, int]) -> ShardEvalBatches:
        assert self.shards.evaluation is not None  # only data with a test set is evaluated
        dataset = ShardSamples(self.shards.evaluation, self.size, self.shards.num_classes, None, shard,
                               on_device=self.on_device)
        return ShardEvalBatches(dataset, self.bad, batch_size=batch_size, device=device, workers=self.workers,
                                normalization=self.normalization, channels_last=channels_last,
                                images_per_rank=-(-self.test_count // shard[1]))


def check_feeds(shards: Shards, ranks: int, workers: int) -> None:
    """Refuse training shards too few to give every rank's every worker one: those without would
    wait for a batch that never comes."""
    readers = ranks * max(1, workers)
    if len(shards.train.paths) < readers:
        raise refused(f"{len(shards.train.paths)} training shards cannot feed {ranks} rank(s) x {max(1, workers)} "
                      f"worker(s), each of which reads shards of its own; write more, smaller shards "
                      "(ampbench-shards --shard-images) or lower --workers.")


def sample_normalization(shards: Shards, size: int) -> Tuple[Normalization, int]:
    """(the channel figures of the first NORMALIZATION_SAMPLE training samples, in shard order,
    decoded as evaluation decodes them; how many there were)."""
    from utils.data.inmemory import normalization_of

    failed: List[Failed] = []
    found: List[torch.Tensor] = []
    for raw in samples(shards.train.paths, failed):
        picture = sample_of(raw, size, None, shards.num_classes, on_device=False).image
        if picture is not None:
            found.append(picture)
        if len(found) == streamed.NORMALIZATION_SAMPLE:
            break
    if not found:
        raise refused(f"the training shards of {shards.where} hold no sample with a whole image and a label; "
                      "write them again with ampbench-shards.")
    return normalization_of(torch.stack(found)), len(found)


class Encoded(Dataset):
    """The files at `positions` of an index, each as (its bytes, suffix, label, "") once checked
    whole (decoded), re-encoded at a shorter side of `resize` where given; (b"", "", label, why)
    for a file that is no whole image."""

    def __init__(self, index: FileIndex, positions: np.ndarray, resize: Optional[int]):
        self.index, self.positions, self.resize = index, positions, resize

    def __len__(self) -> int:
        return len(self.positions)

    def __getitem__(self, item: int) -> Tuple[bytes, str, int, str, str]:
        position = self.positions[item]
        path, label = self.index.path(position), int(self.index.labels[position])
        try:
            with images.opened(path, int(self.index.sizes[position])) as image:
                if self.resize is None:
                    image.load()  # the whole image decodes: no file that is none reaches a shard
                    with open(path, "rb") as f:
                        return f.read(), os.path.splitext(path)[1][1:].lower(), label, "", path
                image.draft("RGB", (self.resize, self.resize))
                picture = images.rgb(image)
                if min(picture.size) > self.resize:  # brought down, never enlarged
                    picture = TF.resize(picture, self.resize)
                encoded = io.BytesIO()
                picture.save(encoded, "JPEG", quality=JPEG_QUALITY)
                return encoded.getvalue(), "jpg", label, "", path
        except Exception as error:  # whatever PIL raises for a file that is not a whole image
            return b"", "", label, images.reason(error), path


def write_split(staging: str, split: str, index: FileIndex, order: np.ndarray, classes: int, shard_images: int,
                resize: Optional[int], workers: int, skipped: BadImages,
                say: Callable[[str], None]) -> Dict[str, Any]:
    """Write the images at `order` of `index` into `staging` as shards SPLIT-NNNNNN.tar of
    `shard_images` each (re-encoded at `resize` where given, read in `workers` processes); the
    index's entry for them: the shards with their images and bytes, the images per class."""
    shards: List[Dict[str, Any]] = []
    per_class = [0] * classes
    reader: DataLoader = DataLoader(Encoded(index, order, resize), batch_size=None,
                                    num_workers=min(workers, len(order)))
    tar: Optional[tarfile.TarFile] = None
    written, said = 0, time.monotonic()
    for data, suffix, label, why, path in reader:
        if why:
            skipped.add([(path, why)])
            if skipped.failure:
                raise images.refusal([(path, why)], "IMAGE_FOLDER")
            continue
        if tar is None or shards[-1]["images"] == shard_images:
            if tar is not None:
                tar.close()
            shards.append({"name": f"{split}-{len(shards):06d}.tar", "images": 0, "bytes": 0})
            tar = tarfile.open(os.path.join(staging, shards[-1]["name"]), "w", format=tarfile.USTAR_FORMAT)
        key = f"{written:09d}"
        for name, content in ((f"{key}.{suffix}", data), (f"{key}.cls", str(label).encode())):
            member = tarfile.TarInfo(name)
            member.size, member.mtime, member.mode = len(content), 0, 0o444
            tar.addfile(member, io.BytesIO(content))
        shards[-1]["images"] += 1
        per_class[label] += 1
        written += 1
        if time.monotonic() - said >= PROGRESS_EVERY_S:
            say(f"{split}: {written:,} of {len(order):,} images written")
            said = time.monotonic()
    if tar is not None:
        tar.close()
    for shard in shards:
        shard["bytes"] = os.path.getsize(os.path.join(staging, shard["name"]))
    return {"shards": shards, "per_class": per_class}
