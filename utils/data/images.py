"""One image file, read as every image-folder path reads it: the decoding once before training,
the streamed loader's workers and the shard writer. A file that is not a whole image never
raises here: its reason comes back in words, so that a worker counts it and the run names it."""
from __future__ import annotations

import os
import stat
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, List, Optional, Sequence, Set, Tuple

import numpy as np
import torch
from PIL import Image

from utils.errors import UserError
from utils.fileio import kind_of

SKIP_FLAG = "--skip-bad-images"
Failed = Tuple[str, str]  # (path, why it is not a whole image)


def reason(error: BaseException) -> str:
    """An exception in words for a refusal: its type and the first line of its message, shortened."""
    said = (str(error).strip().splitlines() or [""])[0][:160]
    return f"{type(error).__name__}{': ' + said if said else ''}"


def checked(path: str, expected_size: Optional[int] = None) -> None:
    """Refuse (OSError) a path that is no regular file (opening a FIFO would wait for a writer) or,
    when `expected_size` is given, not of the size the index found."""
    found = os.stat(path)
    if not stat.S_ISREG(found.st_mode):
        raise OSError(f"it is {kind_of(path)}, not a file")
    if expected_size is not None and found.st_size != expected_size:
        raise ChangedSinceIndexed(f"it changed since the folder was indexed ({expected_size} bytes then, "
                                  f"{found.st_size} now)")


def opened(path: str, expected_size: Optional[int] = None) -> Image.Image:
    """The image at `path`, opened (PIL reads the header only) once checked()."""
    checked(path, expected_size)
    return Image.open(path)


def file_bytes(path: str, expected_size: Optional[int] = None) -> bytes:
    """The bytes of the file at `path`, once checked()."""
    checked(path, expected_size)
    with open(path, "rb") as f:
        return f.read()


class ChangedSinceIndexed(OSError):
    """A file whose size is not the index's: the tree changed under the same names."""


def read_rgb(path: str, transform: Callable[[Image.Image], Image.Image],
             expected_size: Optional[int] = None) -> Tuple[Optional[torch.Tensor], str]:
    """(the image at `path` through `transform` (which receives the opened file, to draft its
    decoding at a smaller scale where it can, and returns an RGB image) as a uint8 3 x H x W
    tensor, ""), or (None, why it cannot be read)."""
    try:
        with opened(path, expected_size) as image:
            return tensor_of(transform(image)), ""
    except Exception as error:  # whatever PIL raises for a file that is not a whole image
        return None, reason(error)


def tensor_of(picture: Image.Image) -> torch.Tensor:
    """An RGB image decoded whole, as a uint8 3 x H x W tensor."""
    picture.load()
    return torch.from_numpy(np.asarray(picture, dtype=np.uint8).copy()).permute(2, 0, 1)


def rgb(image: Image.Image) -> Image.Image:
    return image if image.mode == "RGB" else image.convert("RGB")


def refusal(failed: List[Failed], source: str, total: Optional[int] = None) -> UserError:
    """The one sentence for files that are not whole images: the first named, the others counted,
    and the flag that skips them."""
    path, why = failed[0]
    total = len(failed) if total is None else total
    more = f" (and {total - 1:,} more)" if total > 1 else ""
    return UserError(f"{source}: {path} cannot be read as an image ({why}){more}; remove or replace the files "
                     f"that are not whole images, or pass {SKIP_FLAG} to skip them.")


@dataclass
class BadImages:
    """The files a run's loaders met that were no whole images, each counted once however often
    it is met (once an epoch), the first few kept; with --skip-bad-images they are left out, else
    the first stops the run (`failure`)."""
    skip: bool
    source: str  # how the refusal names the data: "--data imagefolder"
    examples: List[Failed] = field(default_factory=list)
    paths: Set[str] = field(default_factory=set)

    @property
    def count(self) -> int:
        return len(self.paths)

    def add(self, failed: Sequence[Failed]) -> None:
        for path, why in failed:
            if path not in self.paths:
                self.paths.add(path)
                if len(self.examples) < 5:
                    self.examples.append((path, why))

    @property
    def failure(self) -> Optional[str]:
        """The sentence that stops the run, or None: nothing met, or --skip-bad-images."""
        if self.skip or not self.count:
            return None
        return str(refusal(self.examples, self.source, self.count))

    def record(self) -> Optional[Dict[str, Any]]:
        """What the results record (data.skipped_images, runs[].skipped_images): null unless --skip-bad-images."""
        return {"count": self.count, "examples": [{"path": path, "why": why} for path, why in self.examples]} \
            if self.skip else None
