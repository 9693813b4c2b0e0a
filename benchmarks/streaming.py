"""How fast, and in how much memory, does ampbench stream an image folder and its tar shards?

Generates a tree of JPEGs of mixed sizes (no download: gradients and noise, 10 classes) in a
temporary folder, writes it as shards (ampbench-shards), then measures in one run, each path in
a fresh process with the same workers, batch and transforms (RandomResizedCrop at --image-size
and a flip, batches normalised as float32):

  ampbench     ampbench's streamed folder (--loader stream: utils/data/streamed.py)
  torchvision  a plain torchvision ImageFolder + DataLoader (ToTensor and Normalize per image)
  shards       ampbench's WebDataset shards of the same images (--data webdataset)

and, for ampbench's path, the same on a tree of half the images, to show that its memory does
not grow with the tree. Prints images per second and peak memory (the proportional set size of
the process and its workers together, sampled every 0.1 s) of each, then the ratios last:
ampbench over torchvision (target: 1.0 or more) and shards over the folder. The tree is removed
at the end unless --keep (it is never the repository's: a folder under $TMPDIR).

    python benchmarks/streaming.py [--images 20000] [--workers 2] [-b 64] [--image-size 224]
"""
import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time

from utils import console  # no torch
from utils.config import COUNT, Range, add_flag, flag_type
from utils.data import shard_writer  # no torch until it writes

HERE = os.path.abspath(__file__)
CLASSES = 10
SIDES = (160, 720)  # the images' widths and heights are drawn from this range
QUALITY = 85
SAMPLE_EVERY_S = 0.1


def build_parser():
    parser = console.Parser("streaming.py", prog="python benchmarks/streaming.py", description=__doc__,
                            formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--images", type=flag_type(Range(int, 2 * CLASSES * 10, 10 ** 7, "from 200 to 10,000,000")),
                        default=20_000, help="JPEGs in the tree (default %(default)s)")
    add_flag(parser, "workers", default=2, help="DataLoader workers of every path (default %(default)s)")
    add_flag(parser, "batch_size", default=64)
    add_flag(parser, "image_size", default=224, help="every path's RandomResizedCrop to N x N (default %(default)s)")
    parser.add_argument("--batches", type=flag_type(COUNT), default=30, help="timed batches per path")
    parser.add_argument("--folder", help="where to generate the tree (default: a new folder under $TMPDIR)")
    parser.add_argument("--keep", action="store_true", help="keep the generated tree and shards")
    parser.add_argument("--measure", choices=("ampbench", "torchvision", "shards"), help=argparse.SUPPRESS)
    parser.add_argument("--data", help=argparse.SUPPRESS)
    return parser


def main():
    options = build_parser().parse_args()
    if options.measure:  # a child: one path, its rate as a JSON line
        print(json.dumps(measure(options)), flush=True)
        return 0
    root = options.folder or tempfile.mkdtemp(prefix="ampbench-streaming-")
    try:
        return compare(options, root)
    finally:
        if not options.keep:
            shutil.rmtree(root, ignore_errors=True)


def compare(options, root):
    os.environ["AMPBENCH_CACHE"] = os.path.join(root, "cache")  # the trees' indexes: never in your home
    half, whole = os.path.join(root, "half"), os.path.join(root, "whole")
    started = time.perf_counter()
    generate(half, whole, options.images, options.workers)
    took = time.perf_counter() - started
    shards = os.path.join(root, "shards")
    per_shard = max(10, min(shard_writer.SHARD_IMAGES, options.images // (8 * max(1, options.workers))))
    subprocess.run([sys.executable, "-m", "utils.data.shard_writer", whole, shards, "--workers",
                    str(max(1, options.workers)), "--shard-images", str(per_shard)], check=True,
                   stdout=subprocess.DEVNULL)
    print(f"{options.images:,} JPEGs of {SIDES[0]} to {SIDES[1]} pixels a side in {CLASSES} classes, "
          f"{folder_bytes(whole) / 2 ** 30:.2f} GiB, generated in {took:.0f} s in {root}; shards of them in "
          f"{len([name for name in os.listdir(shards) if name.endswith('.tar')])} files. Batch {options.batch_size}, "
          f"{options.workers} workers, {options.image_size}x{options.image_size}, {options.batches} timed batches; "
          f"load average {os.getloadavg()[0]:.2f} on {os.cpu_count()} cores at the start")
    decoded = options.images * 3 * options.image_size ** 2
    figures = {}
    for label, kind, data in (("torchvision ImageFolder + DataLoader", "torchvision", whole),
                              ("ampbench streamed folder", "ampbench", whole),
                              ("ampbench shards", "shards", shards),
                              (f"ampbench streamed folder, {options.images // 2:,} images", "ampbench", half)):
        rate, peak = child(options, kind, data)
        figures[label] = rate, peak
        print(f"{label:44s} {rate:8.0f} img/s   peak memory {peak / 2 ** 20:7.0f} MiB")
    vision, folder = figures["torchvision ImageFolder + DataLoader"], figures["ampbench streamed folder"]
    shard, small = figures["ampbench shards"], figures[f"ampbench streamed folder, {options.images // 2:,} images"]
    print(f"the decoded tree would take {decoded / 2 ** 30:.2f} GiB; ampbench's streamed peak is "
          f"{folder[1] / decoded:.1%} of it, and {folder[1] / small[1]:.2f}x its peak on half the images")
    print(f"load average {os.getloadavg()[0]:.2f} at the end")
    print(f"shards/folder ratio: {shard[0] / folder[0]:.2f}")
    print(f"throughput ratio ampbench/torchvision: {folder[0] / vision[0]:.2f}")
    return 0


def generate(half, whole, count, workers):
    """`count` JPEGs in `whole`/CLASS, the first half of them also (hard links) in `half`."""
    from concurrent.futures import ProcessPoolExecutor

    for name in range(CLASSES):
        os.makedirs(os.path.join(whole, f"class{name}"), exist_ok=True)
        os.makedirs(os.path.join(half, f"class{name}"), exist_ok=True)
    with ProcessPoolExecutor(max(1, workers)) as pool:
        paths = list(pool.map(write_jpeg, [(whole, number) for number in range(count)], chunksize=64))
    for path in paths[:count // 2]:
        os.link(path, os.path.join(half, os.path.relpath(path, whole)))


def write_jpeg(job):
    import numpy as np
    from PIL import Image

    folder, number = job
    draws = np.random.default_rng(number)
    width, height = (int(side) for side in draws.integers(SIDES[0], SIDES[1] + 1, 2))
    label = number % CLASSES
    ramp = np.linspace(0, 1, width, dtype=np.float32)[None, :] * np.linspace(0.5, 1, height, dtype=np.float32)[:, None]
    pixels = np.stack([ramp * (40 + 20 * label), ramp * 200, (1 - ramp) * 180], axis=-1)
    pixels += draws.normal(0, 12, (height, width, 3)).astype(np.float32)
    path = os.path.join(folder, f"class{label}", f"{number:07d}.jpg")
    Image.fromarray(pixels.clip(0, 255).astype(np.uint8)).save(path, quality=QUALITY)
    return path


def folder_bytes(folder):
    return sum(entry.stat().st_size for where, _, names in os.walk(folder) for entry in os.scandir(where)
               if entry.is_file())


def child(options, kind, data):
    """(images per second, peak memory of the process and its workers) of `kind`, measured in a
    process of its own."""
    command = [sys.executable, HERE, "--measure", kind, "--data", data, "--workers", str(options.workers),
               "-b", str(options.batch_size), "--image-size", str(options.image_size), "--batches",
               str(options.batches)]
    process = subprocess.Popen(command, stdout=subprocess.PIPE, text=True)
    peak, done = [0], threading.Event()

    def sample():
        while not done.is_set():
            peak[0] = max(peak[0], tree_memory(process.pid))
            time.sleep(SAMPLE_EVERY_S)

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    out, _ = process.communicate()
    done.set()
    sampler.join()
    if process.returncode:
        raise RuntimeError(f"the {kind} measurement failed (exit {process.returncode})")
    return json.loads(out.strip().splitlines()[-1])["images_per_sec"], peak[0]


def tree_memory(pid):
    """The proportional set size (shared pages split among their sharers) of process `pid` and
    every process below it, in bytes: what forked workers add, not what they share."""
    total, pending = 0, [pid]
    while pending:
        current = pending.pop()
        try:
            with open(f"/proc/{current}/smaps_rollup") as f:
                total += next(int(line.split()[1]) * 1024 for line in f if line.startswith("Pss:"))
            with open(f"/proc/{current}/task/{current}/children") as f:
                pending += [int(child) for child in f.read().split()]
        except (OSError, StopIteration, ValueError):
            continue
    return total


def measure(options):
    """The rate of one path: its warm-up batches (workers started, queues filled), then
    --batches timed, each a normalised float32 batch in this process."""
    import torch

    torch.set_num_threads(1)
    batches = iter(loader(options))
    for _ in range(max(1, options.workers) * 2 + 1):
        next(batches)
    started, images = time.perf_counter(), 0
    for _ in range(options.batches):
        pictures = next(batches)[0]
        assert pictures.dtype == torch.float32
        images += len(pictures)
    return {"images_per_sec": images / (time.perf_counter() - started)}


def loader(options):
    import torch

    device, size = torch.device("cpu"), options.image_size
    if options.measure == "torchvision":
        from torch.utils.data import DataLoader
        from torchvision import datasets, transforms

        recipe = transforms.Compose([transforms.RandomResizedCrop(size), transforms.RandomHorizontalFlip(),
                                     transforms.ToTensor(), transforms.Normalize((0.5,) * 3, (0.25,) * 3)])
        return DataLoader(datasets.ImageFolder(options.data, recipe), batch_size=options.batch_size, shuffle=True,
                          drop_last=True, num_workers=options.workers, persistent_workers=options.workers > 0)
    from utils.data import imagefolder, shards, streamed
    from utils.data.images import BadImages

    normalization = ((0.5,) * 3, (0.25,) * 3)  # the same figures as the torchvision path's
    if options.measure == "shards":
        found = shards.read(options.data, None, None)
        stream = shards.ShardStream(size, options.workers, normalization, BadImages(False, shards.SOURCE),
                                    found.train_images, found.test_images, False, found)
    else:
        listing = imagefolder.listing(options.data, False)
        stream = streamed.FolderStream(size, options.workers, normalization, BadImages(False, "--data imagefolder"),
                                       len(listing.training), len(listing.evaluation), False, listing)
    return stream.train_loader(batch_size=options.batch_size, device=device, seed=0, channels_last=False,
                               shard=(0, 1))


if __name__ == "__main__":
    sys.exit(console.run("streaming.py", main))
