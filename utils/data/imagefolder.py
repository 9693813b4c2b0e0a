"""Your own images (--data imagefolder): a torchvision ImageFolder tree, decoded once before
training into uint8 tensors at --image-size and held as CIFAR-10 is, so that both loaders and
the evaluation serve it as they serve CIFAR-10, and no step time includes decoding a file.

The tree (docs/data-and-models.md says the same to users):
* DIR/CLASS/IMAGE (or DIR/train/CLASS/IMAGE alone): a fixed tenth of each class's images (one
  at least, of a class of two or more) is held out for evaluation, drawn with a seed of its
  own, so that every --seed, repeat and resume evaluates the same images; the rest trains.
* DIR/train/CLASS/IMAGE beside DIR/val/CLASS/IMAGE, else DIR/validation/..., else DIR/test/...:
  train/ trains, the first of those evaluates (its classes are among train/'s; a class it lacks
  is fine) and the others are left out, which the run says. Any other folder beside train/ is
  refused: it may be a class folder put in the wrong place, which would silently train on a
  class fewer.
Classes are the sorted names of the class folders, numbered as torchvision's ImageFolder numbers
them; images are the files with torchvision's image extensions, in the class folder or below
it; names starting with "." (.ipynb_checkpoints, macOS's ._ files) are skipped. Each image is
converted to RGB, resized so that its shorter side is --image-size (bilinear, antialiased) and
cropped to the centre square: torchvision's Resize(N) and CenterCrop(N). It is normalised with
the channel means and standard deviations of the training images, computed here.
"""
from __future__ import annotations

import hashlib
import itertools
import os
import stat
import time
from dataclasses import dataclass
from typing import Any, Callable, Dict, Iterator, List, Optional, Sequence, Tuple

import numpy as np
import torch
from PIL import Image
from torch.utils.data import DataLoader, Dataset
from torchvision.datasets.folder import IMG_EXTENSIONS
from torchvision.transforms import functional as TF

from utils.config import CHANNELS
from utils.data.loaders import Normalization
from utils.errors import UserError
from utils.fileio import kind_of
from utils.stop import at_once

EVAL_SPLITS = ("val", "validation", "test")  # beside train/, the first found evaluates
HELD_OUT_SHARE = 0.1  # of each class of a tree without train/, held out for evaluation
SPLIT_SEED = 0  # the held-out images' draw: the same for every --seed
DECODE_BATCH = 64  # images a decoding worker hands back at a time
PROGRESS_EVERY_S = 30.0  # a line on how far the decoding is, as a batch job's progress lines
RESIZE = "shorter side resized to {size} (bilinear, antialiased), centre {size}x{size} crop"


@dataclass(frozen=True)
class Layout:
    """Where an image folder's splits and classes are, read from its folder names alone."""
    root: str
    train_folder: str
    eval_folder: Optional[str]  # None: a share of train_folder's images is held out
    classes: Tuple[str, ...]  # label i is classes[i]
    left_out: Tuple[str, ...] = ()  # evaluation splits beside train/ that another one takes the place of

    def notes(self) -> List[str]:
        """What the run says about folders of the tree it does not read."""
        if not self.left_out:
            return []
        named = " and ".join(f"{name}/" for name in self.left_out)
        verb = "is" if len(self.left_out) == 1 else "are"
        return [f"--data imagefolder: {named} beside train/ in {self.root} {verb} left out: "
                f"{os.path.basename(str(self.eval_folder))}/ evaluates (the first of "
                f"{', '.join(name + '/' for name in EVAL_SPLITS)} found)."]


def layout(data_dir: str) -> Layout:
    """The Layout of the tree at `data_dir`, or a refusal saying what is missing: the folder,
    its class folders, a second class; an evaluation folder whose classes train/ lacks."""
    if not os.path.isdir(data_dir):
        what = "is not a folder" if os.path.exists(data_dir) else "does not exist"
        raise UserError(f"--data imagefolder: --data-dir {data_dir} {what}; point --data-dir at a folder with a "
                        "subfolder of images per class (DIR/CLASS/IMAGE, or DIR/train/CLASS/IMAGE beside DIR/val).")
    folders = subfolders(data_dir)
    train, evaluation = data_dir, None
    left_out: Tuple[str, ...] = ()
    if "train" in folders:
        train = os.path.join(data_dir, "train")
        splits = [name for name in EVAL_SPLITS if name in folders]
        evaluation = os.path.join(data_dir, splits[0]) if splits else None
        left_out = tuple(splits[1:])
        strays = [name for name in folders if name != "train" and name not in EVAL_SPLITS]
        if strays:
            beside = "train/" + "".join(f" and {name}/" for name in splits)
            raise UserError(f"--data imagefolder: {data_dir} holds {beside} and also {strays[0]}/"
                            f"{f' (and {len(strays) - 1} more)' if len(strays) > 1 else ''}, which is none of "
                            f"train/, {', '.join(name + '/' for name in EVAL_SPLITS)}: move a class folder into "
                            f"train/ (and its evaluation folder), anything else out of {data_dir}, or point "
                            "--data-dir at train/ alone.")
    classes = subfolders(train)
    if len(classes) < 2:
        held = f"only the class folder {classes[0]}" if classes else "no class folder"
        raise UserError(f"--data imagefolder: {train} holds {held}, and a classifier needs two classes or more; "
                        "give it a subfolder of images per class, or point --data-dir at your image folder.")
    if evaluation is not None:
        unknown = sorted(set(subfolders(evaluation)) - set(classes))
        if unknown or not subfolders(evaluation):
            problem = f"has class folders that {train} lacks ({', '.join(unknown[:3])})" if unknown else \
                "holds no class folder"
            raise UserError(f"--data imagefolder: {evaluation} {problem}; its classes must be among those "
                            "the model trains on.")
    return Layout(data_dir, train, evaluation, tuple(classes), left_out)


def subfolders(folder: str) -> List[str]:
    """The sorted names of `folder`'s folders (symlinks followed), hidden ones left out."""
    try:
        with os.scandir(folder) as entries:
            return sorted(entry.name for entry in entries if entry.is_dir() and not entry.name.startswith("."))
    except OSError as error:
        raise UserError(f"--data imagefolder: {folder} cannot be read ({error.strerror or error}); check its "
                        "permissions.") from None


def image_files(folder: str) -> List[str]:
    """The image files in `folder` and below it, sorted."""
    return sorted(walk_images(folder))


def walk_images(folder: str) -> Iterator[str]:
    """The image files in `folder` and below it, as the walk meets them; hidden files and folders
    left out, and each folder read once however many symlinks lead to it (a link to a folder
    above it would otherwise repeat its images until the path grew too long)."""
    walked = set()
    for where, folders, files in os.walk(folder, followlinks=True, onerror=raise_unreadable):
        real = os.path.realpath(where)
        folders[:] = [name for name in folders if not name.startswith(".")] if real not in walked else []
        if real in walked:
            continue
        walked.add(real)
        yield from (os.path.join(where, name) for name in files
                    if not name.startswith(".") and name.lower().endswith(IMG_EXTENSIONS))


def raise_unreadable(error: OSError) -> None:
    raise UserError(f"--data imagefolder: {error.filename} cannot be read ({error.strerror or error}); check its "
                    "permissions.")


Files = List[Tuple[str, int]]  # (path, label)


def files_of(folder: str, classes: Sequence[str], required: bool) -> Files:
    """Every image of `folder`'s class folders with its label; a class folder without images is
    refused, as torchvision's ImageFolder refuses it (`required`: every class has its folder)."""
    found: Files = []
    for label, name in enumerate(classes):
        class_folder = os.path.join(folder, name)
        if not required and not os.path.isdir(class_folder):
            continue
        images = image_files(class_folder)
        if not images:
            raise no_images(class_folder)
        found += [(path, label) for path in images]
    return found


def no_images(class_folder: str) -> UserError:
    return UserError(f"--data imagefolder: {class_folder} holds no images (files ending in "
                     f"{', '.join(IMG_EXTENSIONS[:4])}, ...); add images, or remove the folder.")


def none_to_hold_out(train_folder: str) -> UserError:
    return UserError(f"--data imagefolder: no class of {train_folder} has two images or more, so none can be held "
                     "out for evaluation; add images, or give DIR/train beside DIR/val.")


def check_listing(data_dir: str) -> Layout:
    """--check-flags: what a listing of the tree refuses, without reading an image: its layout's
    refusals, a class folder without images (each walked to its first image only), and a tree
    without an evaluation folder in which no class has two images to hold one out."""
    tree = layout(data_dir)
    for folder, required in ((tree.train_folder, True), (tree.eval_folder, False)):
        for name in tree.classes if folder is not None else ():
            class_folder = os.path.join(str(folder), name)
            if (required or os.path.isdir(class_folder)) and next(walk_images(class_folder), None) is None:
                raise no_images(class_folder)
    if tree.eval_folder is None and not any(len(list(itertools.islice(walk_images(os.path.join(
            tree.train_folder, name)), 2))) == 2 for name in tree.classes):
        raise none_to_hold_out(tree.train_folder)
    return tree


def held_out(files: Files) -> Tuple[Files, Files]:
    """(training, held-out) files: HELD_OUT_SHARE of each class, at least one of a class of two
    or more, drawn with SPLIT_SEED."""
    generator = torch.Generator().manual_seed(SPLIT_SEED)
    training: Files = []
    evaluation: Files = []
    for label in sorted({label for _, label in files}):
        mine = [entry for entry in files if entry[1] == label]
        count = max(1, round(HELD_OUT_SHARE * len(mine))) if len(mine) > 1 else 0
        chosen = set(torch.randperm(len(mine), generator=generator)[:count].tolist())
        for index, entry in enumerate(mine):
            (evaluation if index in chosen else training).append(entry)
    return training, evaluation


def fingerprint(splits: Dict[str, Files], root: str) -> str:
    """A short digest of the tree's files (split, label, path from the root, size): what a
    resume and a merge tell image folders apart by, wherever the folder lies."""
    digest = hashlib.sha256()
    for split, files in sorted(splits.items()):
        for path, label in files:
            digest.update(f"{split}\t{label}\t{os.path.relpath(path, root)}\t{os.path.getsize(path)}\n".encode())
    return digest.hexdigest()[:16]


class Decoded(Dataset):
    """Each file as a uint8 3 x size x size tensor, with "" or why it could not be read (a
    worker never raises: every unreadable file is counted, and the refusal names the first)."""

    def __init__(self, files: Files, size: int):
        self.paths, self.size = [path for path, _ in files], size

    def __len__(self) -> int:
        return len(self.paths)

    def __getitem__(self, index: int) -> Tuple[torch.Tensor, str]:
        try:
            if not stat.S_ISREG(os.stat(self.paths[index]).st_mode):  # a FIFO's open would wait for a writer
                raise OSError(f"it is {kind_of(self.paths[index])}, not a file")
            with Image.open(self.paths[index]) as image:
                square = TF.center_crop(TF.resize(image.convert("RGB"), self.size), self.size)
                return torch.from_numpy(np.asarray(square, dtype=np.uint8).copy()).permute(2, 0, 1), ""
        except Exception as error:  # whatever PIL raises for a file that is not a whole image
            reason = (str(error).strip().splitlines() or [""])[0][:160]
            return torch.zeros(CHANNELS, self.size, self.size, dtype=torch.uint8), \
                f"{type(error).__name__}{': ' + reason if reason else ''}"


def stack(items: List[Tuple[torch.Tensor, str]]) -> Tuple[torch.Tensor, List[str]]:
    return torch.stack([image for image, _ in items]), [why for _, why in items]


def decode(files: Files, size: int, workers: int,
           say: Callable[[str], None] = lambda sentence: None) -> torch.Tensor:
    """Every file decoded at `size`, in `workers` processes (the main one for 0), as one uint8
    N x 3 x size x size tensor, saying how far it is every PROGRESS_EVERY_S; a refusal naming
    the first unreadable file and the count."""
    batches = DataLoader(Decoded(files, size), batch_size=DECODE_BATCH, num_workers=min(workers, len(files)),
                         collate_fn=stack)
    images = torch.empty(len(files), CHANNELS, size, size, dtype=torch.uint8)
    failed: List[Tuple[str, str]] = []
    start, said = 0, time.monotonic()
    for batch, reasons in batches:
        images[start:start + len(batch)] = batch
        failed += [(files[start + index][0], why) for index, why in enumerate(reasons) if why]
        start += len(batch)
        if time.monotonic() - said >= PROGRESS_EVERY_S:
            say(f"decoded {start} of {len(files)} images")
            said = time.monotonic()
    if failed:
        more = f" (and {len(failed) - 1} more)" if len(failed) > 1 else ""
        raise UserError(f"--data imagefolder: {failed[0][0]} cannot be read as an image ({failed[0][1]}){more}; "
                        "remove or replace the files that are not whole images.")
    return images


def normalization_of(images: torch.Tensor) -> Normalization:
    """The channel means and standard deviations of uint8 `images`, as fractions of 255."""
    total = torch.zeros(CHANNELS, dtype=torch.float64)
    squares = torch.zeros(CHANNELS, dtype=torch.float64)
    for chunk in images.split(DECODE_BATCH):
        values = chunk.double()
        total += values.sum(dim=(0, 2, 3))
        squares += values.square().sum(dim=(0, 2, 3))
    count = images.numel() // CHANNELS
    mean = total / count
    std = (squares / count - mean.square()).clamp(min=0).sqrt().clamp(min=1.0)  # a flat channel: no division by 0
    return tuple((mean / 255).tolist()), tuple((std / 255).tolist())


def check_fits(images: int, size: int, device: torch.device) -> None:
    """Refuse a tree whose decoded images would not fit in the memory free now: the host's,
    where they are decoded, and a GPU's, where the device loader holds them (half of it, so that
    training has the other)."""
    needed = images * CHANNELS * size * size
    free = [("memory", available_host_bytes())]
    if device.type == "cuda":
        free.append((f"{device}'s free memory, halved for training,", torch.cuda.mem_get_info(device)[0] // 2))
    for where, have in free:
        if have is not None and needed > have:
            raise UserError(f"--data imagefolder: {images} images of {size}x{size} take {needed / 2 ** 30:.1f} GiB "
                            f"decoded, more than the {have / 2 ** 30:.1f} GiB of {where} here; lower --image-size "
                            "or train on a subset of the folder.")


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


def read_split(files: Files, size: int, workers: int, say: Callable[[str], None]) -> Split:
    return Split(decode(files, size, workers, say), torch.tensor([label for _, label in files], dtype=torch.long))


def load(data_dir: str, size: int, workers: int, device: torch.device,
         say: Callable[[str], None]) -> Tuple[Split, Split, Dict[str, Any], Normalization, List[str]]:
    """(training split, evaluation split, the data section of the results, normalisation, the
    notes on folders left out) of the tree at `data_dir`, decoded at `size` in `workers` processes
    after check_fits(`device`); `say(sentence)` tells the user what takes the time."""
    tree = layout(data_dir)
    training = files_of(tree.train_folder, tree.classes, required=True)
    if tree.eval_folder is not None:
        evaluation = files_of(tree.eval_folder, tree.classes, required=False)
    else:
        training, evaluation = held_out(training)
        if not evaluation:
            raise none_to_hold_out(tree.train_folder)
    check_fits(len(training) + len(evaluation), size, device)
    with at_once("decoding the image folder"):  # hours for a large folder: a signal need not wait for its end
        say(f"decoding {len(training)} training and {len(evaluation)} evaluation images of {tree.root} at "
            f"{size}x{size}")
        train, test = read_split(training, size, workers, say), read_split(evaluation, size, workers, say)
    normalization = normalization_of(train.images)
    info: Dict[str, Any] = {"name": "imagefolder", "folder": os.path.realpath(tree.root),
            "train_folder": os.path.realpath(tree.train_folder),
            "eval_folder": os.path.realpath(tree.eval_folder) if tree.eval_folder else None,
            "held_out_share": None if tree.eval_folder else HELD_OUT_SHARE, "left_out": list(tree.left_out),
            "classes": list(tree.classes),
            "num_classes": len(tree.classes), "train_images": len(training), "test_images": len(evaluation),
            "resize": RESIZE.format(size=size), "mean": list(normalization[0]), "std": list(normalization[1]),
            "fingerprint": fingerprint({"train": training, "eval": evaluation}, tree.root)}
    return train, test, info, normalization, tree.notes()
