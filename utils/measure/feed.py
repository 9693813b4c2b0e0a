"""Whether the input pipeline keeps up with the step: what a run's three rates say (runs[].feed,
measured by utils/training/feed.py) and which of them bounds it, in words, with the loader's own
levers. No torch: utils.report, --explain and the adviser read results files with it.

A mode whose step alone could take more images per second than its loader alone delivers is
input-bound: training runs at the loader's rate, and a faster number format changes nothing
until the loader keeps up. The rates are per process (each rank has its loader and its step).
"""
from __future__ import annotations

from typing import Any, Dict, List, Optional

from utils.console import plural

KEEPS_UP = 0.9  # one rate under this share of the other's: the slower bounds the run
CONTENDED = 0.8  # training under this share of the slower rate alone: the loader and the step compete

Feed = Dict[str, Any]  # runs[].feed: the rates, the loader's setup, the verdict and the levers


def bound(loader_images_per_sec: float, step_images_per_sec: float) -> str:
    """"input" where the loader alone delivers under KEEPS_UP of what the step alone could take,
    "step" where the step takes under KEEPS_UP of what the loader delivers, else "balanced"."""
    if loader_images_per_sec < KEEPS_UP * step_images_per_sec:
        return "input"
    if step_images_per_sec < KEEPS_UP * loader_images_per_sec:
        return "step"
    return "balanced"


def contended(loader_images_per_sec: float, step_images_per_sec: float, train_images_per_sec: float) -> bool:
    """Whether training ran well under the slower of the two alone: they share the host's cores
    (the workers decode while the step's host thread launches it), or the copy to the device."""
    return train_images_per_sec < CONTENDED * min(loader_images_per_sec, step_images_per_sec)


def levers(*, workers: int, cores: int, decode: str, device_type: str, data: str, resized: Optional[int],
           resize_side: int) -> List[Dict[str, str]]:
    """The loader's own levers that would change this setup, each {lever, flags, why}, in the
    order to try them: more workers, decoding on the GPU, tar shards, a copy pre-resized to
    `resize_side` (the evaluation's resize: nothing either recipe uses is lost)."""
    found = []
    if workers < cores:
        found.append({"lever": "more workers", "flags": f"--workers {cores}",
                      "why": f"{workers} of the {cores} cores this process may use decode"})
    if device_type == "cuda" and decode == "cpu":
        found.append({"lever": "GPU decode", "flags": "--decode gpu",
                      "why": "the GPU decodes the JPEGs, the workers only read the files"})
    if data == "imagefolder":
        found.append({"lever": "shards", "flags": "ampbench-shards DIR SHARDS, then --data webdataset --data-dir "
                      "SHARDS", "why": "one sequential read per shard instead of a file system request per image"})
    if resized is None:
        found.append({"lever": "a pre-resized copy", "flags": f"ampbench-shards DIR SHARDS --resize {resize_side}",
                      "why": "images stored near the training size decode in a fraction of the time"})
    return found


def per_second(value: float) -> str:
    return f"{value:,.0f}" if value >= 100 else f"{value:.3g}"


def sentence(mode: str, feed: Feed, ranks: int = 1) -> str:
    """What bounds `mode`'s run, in one sentence from its feed figures: "amp-bf16's step alone could
    take 6,000 img/s; the loader alone delivers 1,150 with 8 workers; training ran at 1,140:
    input-bound, ...", naming the loader's levers where the input bounds it."""
    loader, step, train = feed["loader_images_per_sec"], feed["step_images_per_sec"], feed["train_images_per_sec"]
    unit = "img/s per process" if ranks > 1 else "img/s"
    by = f"with {plural(feed['workers'], 'worker')}" if feed["workers"] else "in the training process (--workers 0)"
    said = (f"{mode}'s step alone could take {per_second(step)} {unit}; the loader alone delivers "
            f"{per_second(loader)} {by}{' and the GPU decoding' if feed['decode'] == 'gpu' else ''}; training ran at "
            f"{per_second(train)}")
    verdict = bound(loader, step)
    if verdict == "input":
        said += ": input-bound, precision is not what limits this run"
        if feed["levers"]:
            said += "; the loader's levers: " + ", ".join(f"{item['lever']} ({item['flags']})"
                                                          for item in feed["levers"])
    elif verdict == "step":
        said += ": the step bounds this run, so its number format sets the pace"
    else:
        said += ": the loader and the step are within 10% of each other, so either may bound this run"
    if contended(loader, step, train):
        said += ("; training ran well under both alone: the loader's workers and the step compete for the host's "
                 f"{feed['cores']} cores")
    return said + "."
