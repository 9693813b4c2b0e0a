"""A CIFAR-10 stand-in for the tests, built where the genuine subset is not at hand (a stranger's
clone has no ../shared beside it).

It has the official `cifar-10-batches-py` layout and pickle format (five data batches, a test
batch, `batches.meta`) and the subset's batch sizes, so that every test reads it as it reads the
subset, with --allow-unverified (its md5 sums are not the official ones either). Its images are
made, not photographed: each class has a colour and a striped pattern at an angle of its own, and
every image shifts the stripes, tints and fades them and varies the colour under heavy noise, so
that a model learns them the way it learns CIFAR-10 (the loss falls and the accuracy climbs above
chance over an epoch) without knowing them at once. The same seed gives the same bytes on every
machine, in a second or two.
"""
from __future__ import annotations

import math
import pickle
import shutil
import tempfile
from pathlib import Path

FOLDER = "cifar-10-batches-py"
# The genuine subset's batches and their sizes (its README): tests count epochs in them.
BATCHES = (("data_batch_1", 1102), ("data_batch_2", 1017), ("data_batch_3", 1017), ("data_batch_4", 1285),
           ("data_batch_5", 1017), ("test_batch", 1017))
CLASSES = ("airplane", "automobile", "bird", "cat", "deer", "dog", "frog", "horse", "ship", "truck")
SIDE = 32
SEED = 20261129


def class_looks(rng):
    """Each class's mean colour (RGB offsets from grey), stripe angle and stripe frequency: the
    angles 18 degrees apart and the colours drawn close enough that neither alone tells every
    class apart."""
    import numpy as np

    colours = rng.uniform(-45, 45, size=(len(CLASSES), 3))
    angles = np.arange(len(CLASSES)) * math.pi / len(CLASSES)
    frequencies = 2.0 + (np.arange(len(CLASSES)) % 3)  # 2 to 4 stripes across an image
    return colours, angles, frequencies


def images_of(labels, looks, rng):
    """uint8 images, N x 3072 (the R, G and B planes of each 32 x 32 image, as CIFAR stores them)."""
    import numpy as np

    colours, angles, frequencies = looks
    count = len(labels)
    grid = (np.arange(SIDE) - SIDE / 2) / SIDE
    y, x = np.meshgrid(grid, grid, indexing="ij")
    angle = angles[labels] + rng.normal(0, 0.12, count)  # a class's stripes wobble a few degrees
    phase = rng.uniform(0, 2 * math.pi, count)
    along = x[None] * np.cos(angle)[:, None, None] + y[None] * np.sin(angle)[:, None, None]
    stripes = np.sin(2 * math.pi * frequencies[labels][:, None, None] * along + phase[:, None, None])
    contrast = rng.uniform(15, 60, count)[:, None, None, None]
    tint = rng.uniform(0.4, 1.0, (count, 3))[:, :, None, None]  # how strongly each channel shows the stripes
    colour = (colours[labels] + rng.normal(0, 30, (count, 3)))[:, :, None, None]
    noise = rng.normal(0, 35, (count, 3, SIDE, SIDE))
    pixels = 128 + colour + contrast * tint * stripes[:, None] + noise
    return np.clip(np.rint(pixels), 0, 255).astype(np.uint8).reshape(count, 3 * SIDE * SIDE)


def write(folder: Path) -> None:
    """The stand-in's seven files in `folder`, written with protocol 2 as the official ones are.
    numpy is imported here, not above: conftest imports this module before it sets the thread count."""
    import numpy as np

    rng = np.random.default_rng(SEED)
    looks = class_looks(rng)
    folder.mkdir(parents=True, exist_ok=True)
    for name, count in BATCHES:
        labels = rng.permutation(np.arange(count) % len(CLASSES))  # every class in every batch
        batch = {"batch_label": f"stand-in {name} (made by tests/cifar10_standin.py, not CIFAR-10)",
                 "labels": [int(label) for label in labels], "data": images_of(labels, looks, rng)}
        with open(folder / name, "wb") as f:
            pickle.dump(batch, f, protocol=2)
    with open(folder / "batches.meta", "wb") as f:
        pickle.dump({"num_cases_per_batch": 10000, "label_names": list(CLASSES), "num_vis": 3 * SIDE * SIDE}, f,
                    protocol=2)


def build() -> Path:
    """A new stand-in's cifar-10-batches-py folder in a fresh temporary folder (the caller removes
    its parent)."""
    folder = Path(tempfile.mkdtemp(prefix="ampbench-cifar10-standin-")) / FOLDER
    write(folder)
    return folder


def remove(folder: Path) -> None:
    """The stand-in built by build(), and the temporary folder around it."""
    if folder.name == FOLDER and folder.parent.name.startswith("ampbench-cifar10-standin-"):
        shutil.rmtree(folder.parent, ignore_errors=True)


if __name__ == "__main__":  # python tests/cifar10_standin.py DIR: a stand-in to look at or train on
    import sys

    target = Path(sys.argv[1] if len(sys.argv) > 1 else ".") / FOLDER
    there = [name for name in [*dict(BATCHES), "batches.meta"] if (target / name).exists()]
    if there:  # a genuine copy (./data's, downloaded once) must never be replaced by made-up images
        sys.exit(f"cifar10_standin.py: error: {target} holds CIFAR-10 files already ({', '.join(there)}); give a "
                 "folder without a cifar-10-batches-py of its own.")
    write(target)
    print(f"wrote a CIFAR-10 stand-in to {target} ({sum(count for _, count in BATCHES[:-1])} training and "
          f"{BATCHES[-1][1]} test images); train on it with --data-dir {target} --allow-unverified")
