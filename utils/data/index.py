"""An image folder's file index: every image of the splits a run reads, with its label, size and
modification time, found by one walk of the tree and cached, so that a folder of a million
files is listed once rather than at every start.

The walk costs one stat per image, the metadata a parallel file system serves slowest. The
cache is checked against the tree's folders alone, their paths and modification times (adding,
removing or renaming a file changes its folder's time), at one stat per folder. A file rewritten
in place under its old name is caught when it is read: its size is no longer the index's. An
index whose newest folder changed within SETTLE_NS of the walk is not cached, as file systems
such as Lustre keep whole seconds and a file added in that second would go unseen. The cache
lives in $AMPBENCH_CACHE, else $XDG_CACHE_HOME/ampbench, else ~/.cache/ampbench: never in the
image folder, which many sites mount read-only and whose times a file written there would change.

The index is held as flat numpy arrays (the relative paths as one byte buffer with offsets):
DataLoader workers forked from the run share them without copying, where a list of a million
Python strings is copied page by page as each worker touches their reference counts.
"""
from __future__ import annotations

import hashlib
import io
import json
import os
import stat
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, Iterator, List, Optional, Tuple

import numpy as np
from torchvision.datasets.folder import IMG_EXTENSIONS

from utils.errors import UserError, WriteFailed
from utils.fileio import atomic_write, kind_of

INDEX_VERSION = 1
SETTLE_NS = 2_000_000_000  # a folder changed this close to the walk may hide a change the walk missed
PROGRESS_EVERY_S = 30.0  # a line on how far the walk is
TRAIN, EVAL = 0, 1  # IndexedFiles.splits: the train folder's images, the evaluation folder's


def is_image_name(name: str) -> bool:
    """Whether `name` is an image's as torchvision's ImageFolder takes them: not hidden, with one
    of its extensions."""
    return not name.startswith(".") and name.lower().endswith(IMG_EXTENSIONS)


@dataclass
class FileIndex:
    """The images of a tree, in the order torchvision's ImageFolder lists them (split, then class,
    then path), with what could not be used (`bad`: (path from the root, why), for files named
    like images that are empty, not regular files or cannot be reached)."""
    root: str  # the folder the paths are relative to, as the user gave it
    paths: np.ndarray  # uint8: every path from the root, UTF-8 (undecodable bytes escaped), one after another
    offsets: np.ndarray  # int64: path i is paths[offsets[i]:offsets[i + 1]]
    labels: np.ndarray  # int32
    splits: np.ndarray  # uint8: TRAIN or EVAL
    sizes: np.ndarray  # int64: bytes, as the walk found them
    bad: List[Tuple[str, str]] = field(default_factory=list)
    folders: str = ""  # the digest of the folders' paths and times the cache is checked by

    def __len__(self) -> int:
        return len(self.labels)

    def relative(self, position: int) -> str:
        return bytes(self.paths[self.offsets[position]:self.offsets[position + 1]]).decode("utf-8", "surrogateescape")

    def path(self, position: int) -> str:
        return os.path.join(self.root, self.relative(position))


def cache_folder() -> str:
    base = os.environ.get("AMPBENCH_CACHE")
    if not base:
        base = os.path.join(os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache"),
                            "ampbench")
    return os.path.join(base, "index")


def cache_path(root: str) -> str:
    return os.path.join(cache_folder(), hashlib.sha256(os.path.realpath(root).encode("utf-8", "surrogateescape"))
                        .hexdigest()[:24] + ".npz")


@dataclass
class Walked:
    """What one walk of the tree found: its folders with their times, and (when files are
    stat'ed) every image's path from the root, label, split, size; the files that cannot be used."""
    folders: List[Tuple[str, int]] = field(default_factory=list)
    files: List[Tuple[int, int, str, int]] = field(default_factory=list)  # split, label, path, size
    bad: List[Tuple[str, str]] = field(default_factory=list)


def walk(root: str, splits: List[Tuple[int, str]], classes: Tuple[str, ...], files: bool,
         say: Callable[[str], None] = lambda sentence: None) -> Walked:
    """Walk each class folder of the `splits` ((TRAIN or EVAL, folder)) below `root`: every folder
    with its modification time, and with `files` every image with its size. Hidden files and folders
    are left out, and each folder is read once however many symlinks lead to it (a loop of links
    would otherwise never end)."""
    found, said = Walked(), time.monotonic()
    for split, folder in splits:
        for label, name in enumerate(classes):
            top = os.path.join(folder, name)
            if split == EVAL and not os.path.isdir(top):  # an evaluation folder may lack a class
                continue
            images: List[Tuple[int, int, str, int]] = []
            for where, entries in folders_below(top):
                found.folders.append((os.path.relpath(where, root), folder_time(where)))
                if not files:
                    continue
                for entry in entries:
                    size, why = file_size(entry)
                    relative = os.path.relpath(entry.path, root)
                    if why:
                        found.bad.append((relative, why))
                    else:
                        images.append((split, label, relative, size))
                if time.monotonic() - said >= PROGRESS_EVERY_S:
                    say(f"indexing {root}: {len(found.files) + len(images):,} images so far")
                    said = time.monotonic()
            found.files += sorted(images, key=lambda item: item[2])  # ImageFolder's order: by path
    found.bad.sort()
    return found


def folders_below(top: str) -> Iterator[Tuple[str, List[os.DirEntry]]]:
    """(folder, its entries named like images) for `top` and every folder below it, each read once."""
    walked, pending = set(), [top]
    while pending:
        where = pending.pop()
        real = os.path.realpath(where)
        if real in walked:
            continue
        walked.add(real)
        try:
            with os.scandir(where) as listing:
                entries = [entry for entry in listing if not entry.name.startswith(".")]
        except OSError as error:
            raise UserError(f"--data imagefolder: {where} cannot be read ({error.strerror or error}); check its "
                            "permissions.") from None
        folders = [entry for entry in entries if is_folder(entry)]
        pending += sorted((entry.path for entry in folders), reverse=True)
        yield where, [entry for entry in entries if not is_folder(entry) and is_image_name(entry.name)]


def is_folder(entry: os.DirEntry) -> bool:
    """Whether `entry` is a folder, a symlink followed; a link that leads nowhere or in a loop is none."""
    try:
        return entry.is_dir()
    except OSError:
        return False


def folder_time(folder: str) -> int:
    try:
        return os.stat(folder).st_mtime_ns
    except OSError:
        return -1


def file_size(entry: os.DirEntry) -> Tuple[int, str]:
    """(bytes, "") of a file named like an image, or (0, why it cannot be one): a link that leads
    nowhere or in a loop, a FIFO or a device (opening a FIFO would wait for a writer), an empty file."""
    try:
        found = entry.stat()  # follows a symlink
    except OSError as error:
        return 0, f"{error.strerror or error}"
    if not stat.S_ISREG(found.st_mode):
        return 0, f"it is {kind_of(entry.path)}, not a file"
    if found.st_size == 0:
        return 0, "an empty file"
    return found.st_size, ""


def folders_digest(walked: Walked, splits: List[Tuple[int, str]], root: str, classes: Tuple[str, ...]) -> str:
    """What the cache is checked by: the splits and classes read, every folder's path and time."""
    digest = hashlib.sha256(json.dumps([[split, os.path.relpath(folder, root)] for split, folder in splits]
                                       + [list(classes)]).encode("utf-8", "surrogateescape"))
    for where, when in sorted(walked.folders):
        digest.update(f"{where}\t{when}\n".encode("utf-8", "surrogateescape"))
    return digest.hexdigest()


def index_of(root: str, splits: List[Tuple[int, str]], classes: Tuple[str, ...],
             say: Callable[[str], None] = lambda sentence: None, cache: bool = True) -> FileIndex:
    """The FileIndex of the class folders of `splits` below `root`: its cache's when the tree's
    folders are as they were, else a new walk (saying which and why), cached where `cache`."""
    folders = walk(root, splits, classes, files=False)
    digest = folders_digest(folders, splits, root, classes)
    path = cache_path(root)
    cached, why = read_cache(path, root, digest)
    if cached is not None:
        say(f"the index of {root}'s {len(cached):,} images read from {path} (its folders are as they were)")
        return cached
    started = time.time_ns()
    walked = walk(root, splits, classes, files=True, say=say)
    index = from_walk(walked, root, folders_digest(walked, splits, root, classes))
    seconds = (time.time_ns() - started) / 1e9
    said = f"indexed {len(index):,} images of {root} in {seconds:.1f} s" + (f" ({why})" if why else "")
    newest = max((when for _, when in walked.folders), default=0)
    if cache and newest < started - SETTLE_NS:
        try:
            write_cache(path, index, root)
            said += f"; cached in {path}"
        except WriteFailed as failed:
            said += f"; not cached: {str(failed).rstrip('.')}"
    say(said)
    return index


def from_walk(walked: Walked, root: str, digest: str) -> FileIndex:
    encoded = [relative.encode("utf-8", "surrogateescape") for _, _, relative, _ in walked.files]
    offsets = np.zeros(len(encoded) + 1, dtype=np.int64)
    np.cumsum([len(path) for path in encoded], out=offsets[1:])
    return FileIndex(root=root, paths=np.frombuffer(b"".join(encoded), dtype=np.uint8).copy(), offsets=offsets,
                     labels=np.array([label for _, label, _, _ in walked.files], dtype=np.int32),
                     splits=np.array([split for split, _, _, _ in walked.files], dtype=np.uint8),
                     sizes=np.array([size for _, _, _, size in walked.files], dtype=np.int64),
                     bad=walked.bad, folders=digest)


ARRAYS = ("paths", "offsets", "labels", "splits", "sizes")


def read_cache(path: str, root: str, digest: str) -> Tuple[Optional[FileIndex], str]:
    """(the cached index, "") when `path` holds one of `root` whose folders digest to `digest`;
    else (None, why not, in words: "" where there is no cache)."""
    if not os.path.exists(path):
        return None, ""
    try:
        with np.load(path, allow_pickle=False) as saved:
            meta: Dict[str, Any] = json.loads(bytes(saved["meta"]).decode("utf-8", "surrogateescape"))
            arrays = {name: saved[name] for name in ARRAYS}
    except (OSError, ValueError, KeyError, UnicodeDecodeError) as error:
        return None, f"its cached index could not be read: {type(error).__name__}"
    if meta.get("version") != INDEX_VERSION or meta.get("root") != os.path.realpath(root):
        return None, "its cached index is of another release or folder"
    if meta.get("folders") != digest:
        return None, "the tree changed since its index was cached: a folder's files or time differ"
    return FileIndex(root=root, bad=[(str(a), str(b)) for a, b in meta.get("bad", [])], folders=digest,
                     **arrays), ""


def write_cache(path: str, index: FileIndex, root: str) -> None:
    meta = {"version": INDEX_VERSION, "root": os.path.realpath(root), "folders": index.folders, "bad": index.bad}
    buffer = io.BytesIO()
    np.savez(buffer, meta=np.frombuffer(json.dumps(meta).encode("utf-8", "surrogateescape"), dtype=np.uint8),
             **{name: getattr(index, name) for name in ARRAYS})
    atomic_write(path, lambda f: f.write(buffer.getvalue()))


def forget(root: str) -> None:
    """Drop `root`'s cached index (a file in it changed under the same name): the next run walks again."""
    try:
        os.unlink(cache_path(root))
    except OSError:
        pass
