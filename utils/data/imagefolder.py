"""Your own images (--data imagefolder): the torchvision ImageFolder tree, its splits and classes,
and the images a run reads of it (its Listing, on index.py's cached index). inmemory.py decodes
them once before training; streamed.py reads them from disk per batch as the run trains.

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
it; names starting with "." (.ipynb_checkpoints, macOS's ._ files) are skipped.
"""
from __future__ import annotations

import hashlib
import os
from dataclasses import dataclass
from typing import Any, Callable, Dict, List, Optional, Tuple

import numpy as np
import torch
from torchvision.datasets.folder import IMG_EXTENSIONS

from utils.data import images
from utils.data.images import Failed
from utils.data.index import EVAL, TRAIN, FileIndex, index_of
from utils.errors import UserError
from utils.stop import at_once

EVAL_SPLITS = ("val", "validation", "test")  # beside train/, the first found evaluates
HELD_OUT_SHARE = 0.1  # of each class of a tree without train/, held out for evaluation
SPLIT_SEED = 0  # the held-out images' draw: the same for every --seed
Files = List[Tuple[str, int]]  # (path, label)


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


@dataclass
class Listing:
    """The images a run reads of a tree: its index, the positions in it that train and those that
    evaluate, and the files named like images that it left out (--skip-bad-images)."""
    tree: Layout
    index: FileIndex
    training: np.ndarray  # int64 positions in `index`
    evaluation: np.ndarray
    skipped: List[Failed]

    def files(self, positions: np.ndarray) -> Files:
        return [(self.index.path(position), int(self.index.labels[position])) for position in positions]

    def info(self) -> Dict[str, Any]:
        """The results' data section as the listing knows it (the way the images are read adds to it)."""
        tree = self.tree
        return {"name": "imagefolder", "folder": os.path.realpath(tree.root),
                "train_folder": os.path.realpath(tree.train_folder),
                "eval_folder": os.path.realpath(tree.eval_folder) if tree.eval_folder else None,
                "held_out_share": None if tree.eval_folder else HELD_OUT_SHARE, "left_out": list(tree.left_out),
                "classes": list(tree.classes), "num_classes": len(tree.classes),
                "train_images": len(self.training), "test_images": len(self.evaluation),
                "fingerprint": fingerprint(self.index, self.training, self.evaluation)}


def listing(data_dir: str, skip_bad: bool, say: Callable[[str], None] = lambda sentence: None) -> Listing:
    """The Listing of the tree at `data_dir` (index.py's cached index), or a refusal: a file named
    like an image that cannot be one (empty, not a regular file, a link leading nowhere) unless
    `skip_bad`, a class folder without images, a tree without an evaluation folder in which no
    class has two images to hold one out."""
    tree = layout(data_dir)
    splits = [(TRAIN, tree.train_folder)] + ([(EVAL, tree.eval_folder)] if tree.eval_folder else [])
    with at_once("indexing the image folder"):  # minutes for a large folder: a signal need not wait for its end
        index = index_of(tree.root, splits, tree.classes, say)
    skipped = [(os.path.join(tree.root, relative), why) for relative, why in index.bad]
    if skipped and not skip_bad:
        raise images.refusal(skipped, "--data imagefolder")
    for split, folder in splits:
        for label, name in enumerate(tree.classes):
            class_folder = os.path.join(folder, name)
            if (split == TRAIN or os.path.isdir(class_folder)) and \
                    not np.any((index.splits == split) & (index.labels == label)):
                raise no_images(class_folder)
    positions = np.arange(len(index), dtype=np.int64)
    training = positions[index.splits == TRAIN]
    if tree.eval_folder is not None:
        evaluation = positions[index.splits == EVAL]
    else:
        training, evaluation = held_out(index.labels, training)
        if not len(evaluation):
            raise none_to_hold_out(tree.train_folder)
    return Listing(tree, index, training, evaluation, skipped)


def no_images(class_folder: str) -> UserError:
    return UserError(f"--data imagefolder: {class_folder} holds no images (files ending in "
                     f"{', '.join(IMG_EXTENSIONS[:4])}, ...); add images, or remove the folder.")


def none_to_hold_out(train_folder: str) -> UserError:
    return UserError(f"--data imagefolder: no class of {train_folder} has two images or more, so none can be held "
                     "out for evaluation; add images, or give DIR/train beside DIR/val.")


def held_out(labels: np.ndarray, positions: np.ndarray) -> Tuple[np.ndarray, np.ndarray]:
    """(training, held-out) of `positions` (in ImageFolder's order; `labels` by position):
    HELD_OUT_SHARE of each class, at least one of a class of two or more, drawn with SPLIT_SEED."""
    generator = torch.Generator().manual_seed(SPLIT_SEED)
    keep = np.ones(len(positions), dtype=bool)
    of = labels[positions]
    for label in np.unique(of):
        mine = np.flatnonzero(of == label)
        count = max(1, round(HELD_OUT_SHARE * len(mine))) if len(mine) > 1 else 0
        keep[mine[torch.randperm(len(mine), generator=generator)[:count].numpy()]] = False
    return positions[keep], positions[~keep]


def fingerprint(index: FileIndex, training: np.ndarray, evaluation: np.ndarray) -> str:
    """A short digest of the tree's files (split, label, path from the root, size): what a
    resume and a merge tell image folders apart by, wherever the folder lies."""
    digest = hashlib.sha256()
    for split, positions in (("eval", evaluation), ("train", training)):
        for position in positions:
            digest.update(f"{split}\t{index.labels[position]}\t{index.relative(position)}\t"
                          f"{index.sizes[position]}\n".encode("utf-8", "surrogateescape"))
    return digest.hexdigest()[:16]
