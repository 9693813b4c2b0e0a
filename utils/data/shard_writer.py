"""Write an image folder as WebDataset tar shards that `main.py --data webdataset` trains on: the
layout HPC centres ask of a data set of many small files on a parallel file system (a few hundred
large files read from start to end, where a folder costs a metadata request per image).

    ampbench-shards IMAGE_FOLDER OUT [--shard-images 1000] [--resize N] [--workers N]
    python -m utils.data.shard_writer IMAGE_FOLDER OUT ...

The folder is read as --data imagefolder reads it (the same splits, held-out images and classes),
each image checked whole (decoded) and, with --resize N, brought to a shorter side of N (a
pre-resized copy: JPEG, quality 90; no image is enlarged), which takes the decoding of large
photographs off every epoch. The images of each split are shuffled (a seed of their own) before
they are cut into shards, so that every shard holds every class; each sample is KEY.EXT and
KEY.cls. OUT gets train-NNNNNN.tar, eval-NNNNNN.tar and index.json (shards, images and bytes each,
images per class, the classes, the source folder's fingerprint), written into a folder beside OUT
and renamed to OUT once whole: a stopped or failed run leaves no OUT.
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
from typing import Any, Dict, Optional, Sequence, Tuple

from utils import console
from utils.errors import UserError

NAME = "shard_writer"
SHARD_IMAGES = 1000  # images per shard: about 100 MB of ImageNet's JPEGs, as webdataset's examples cut them


def build_parser() -> console.Parser:
    from utils.config import COUNT, MOST_WORKERS, Range, default_workers, flag_type

    parser = console.Parser(NAME, prog="python -m utils.data.shard_writer", description=__doc__,
                            formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("folder", metavar="IMAGE_FOLDER", help="the image folder, as --data imagefolder reads it")
    parser.add_argument("out", metavar="OUT", help="the folder to write, which must not exist (or be empty)")
    parser.add_argument("--shard-images", type=flag_type(COUNT), default=SHARD_IMAGES, metavar="N",
                        help="images per shard (default %(default)s)")
    parser.add_argument("--resize", type=flag_type(Range(int, 8, 65536, "a whole number of pixels from 8 to 65536")),
                        metavar="N", help="write each image with its shorter side brought down to N pixels (JPEG, "
                        "quality 90), a pre-resized copy; default: the files as they are")
    parser.add_argument("--workers", type=flag_type(Range(int, 0, MOST_WORKERS, f"from 0 to {MOST_WORKERS}")),
                        default=default_workers(), help="processes that read and check the images (default "
                        "%(default)s: the cores this process may use)")
    parser.add_argument("--skip-bad-images", action="store_true",
                        help="leave out the files that are not whole images, counted, instead of stopping at the first")
    return parser


def main(argv: Optional[Sequence[str]] = None) -> int:
    options = vars(build_parser().parse_args(argv))
    given, folder = options["out"], options["folder"]
    out = writable_out(given)
    splits, skipped = write_shards(folder, out, options["shard_images"], options["resize"], options["workers"],
                                   options["skip_bad_images"])
    train, evaluation = splits["train"], splits["eval"]
    print(f"wrote {sum(train['per_class']):,} training images in {console.plural(len(train['shards']), 'shard')} "
          f"and {sum(evaluation['per_class']):,} evaluation images in "
          f"{console.plural(len(evaluation['shards']), 'shard')} to {given}"
          + (f", leaving out {skipped} that are no whole images" if skipped else "")
          + f"; train on them with: python main.py --data webdataset --data-dir {given}")
    return 0


def writable_out(given: str) -> str:
    """OUT as an absolute path, refused where it exists (but as an empty folder) or cannot be made."""
    out = os.path.abspath(given)
    if os.path.lexists(out) and not (os.path.isdir(out) and not os.listdir(out)):
        raise UserError(f"{given} exists and is not an empty folder; give a new folder for the shards (nothing "
                        "there is replaced).")
    parent = os.path.dirname(out)
    if not os.path.isdir(parent) or not os.access(parent, os.W_OK):
        raise UserError(f"{parent} is not a folder you can write, so {given} cannot be made there; give another OUT.")
    return out


def write_shards(folder: str, out: str, shard_images: int, resize: Optional[int], workers: int,
                 skip_bad: bool) -> Tuple[Dict[str, Any], int]:
    """Write the image folder's splits as shards with their index into a folder beside `out`,
    renamed to `out` once whole (removed on any failure or stop); (the index's splits, the files
    left out as no whole images)."""
    import numpy as np

    from utils.data import imagefolder, images, shards

    listing = imagefolder.listing(folder, skip_bad, say)
    staging = tempfile.mkdtemp(prefix=f".{os.path.basename(out)}.partial-", dir=os.path.dirname(out))
    try:
        skipped = images.BadImages(skip_bad, "IMAGE_FOLDER")
        skipped.add(listing.skipped)
        splits = {}
        for split, positions in (("train", listing.training), ("eval", listing.evaluation)):
            order = positions[np.random.default_rng(0).permutation(len(positions))]
            splits[split] = shards.write_split(staging, split, listing.index, order, len(listing.tree.classes),
                                               shard_images, resize, workers, skipped, say)
        empty = [name for name, entry in splits.items() if not entry["shards"]]
        if empty:
            raise UserError(f"every {empty[0]} image of {folder} was left out as no whole image; nothing is left to "
                            "write.")
        index = {"format": shards.FORMAT, "classes": list(listing.tree.classes), "resized": resize,
                 "source": {"folder": os.path.realpath(folder), "fingerprint": listing.info()["fingerprint"]},
                 "splits": splits}
        with open(os.path.join(staging, shards.INDEX), "w", encoding="utf-8") as f:
            json.dump(index, f, indent=1)
        if os.path.isdir(out):
            os.rmdir(out)  # empty, as checked: the whole folder takes its place
        os.rename(staging, out)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    return splits, skipped.count


def say(sentence: str) -> None:
    print(f"{NAME}: {sentence}", file=sys.stderr, flush=True)


command = console.program(NAME, main)  # the installed `ampbench-shards`

if __name__ == "__main__":
    sys.exit(command())
