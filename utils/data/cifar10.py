"""CIFAR-10 on disk: find it, verify it against the official md5 sums, download it, read it safely.

The official archive is a set of Python pickles. Reading a pickle can execute code, so every
batch file is read with a restricted unpickler that only rebuilds what CIFAR batches hold
(dicts, lists, strings, numbers and numpy arrays), whether or not its checksum matched.
"""
from __future__ import annotations

import codecs
import hashlib
import math
import os
import pickle
import socket
import sys
from dataclasses import dataclass
from typing import TYPE_CHECKING, List, Optional, Sequence, Tuple, Type

import numpy as np

from utils import safepickle
from utils.errors import UserError, not_installed

if TYPE_CHECKING:
    import torch

    from utils.safepickle import Allowed

# torchvision's CIFAR10 files and sums (tests check they agree), here so that finding and reading
# a copy takes no torch: the GPU suite's --plan asks what the runs would train on without it
FOLDER = "cifar-10-batches-py"
TRAIN_FILES = [[f"data_batch_{number}", md5] for number, md5 in enumerate(
    ["c99cafc152244af753f735de768cd75f", "d4bba439e000b95fd0a9bffe97cbabec", "54ebc095f3ab1f0389bbae665268c751",
     "634d18415352ddfa80567beed471001a", "482c414d41f54cd18b22e5b47cb7c3cb"], start=1)]  # [[name, md5], ...]
TEST_FILES = [["test_batch", "40351d587109b95175f43aff81a1287e"]]
META_FILE = ["batches.meta", "5ff9c542aee3614f3951f8cda6e48888"]
URL = "https://www.cs.toronto.edu/~kriz/cifar-10-python.tar.gz"  # the official archive, which holds FOLDER
ARCHIVE = "cifar-10-python.tar.gz"
ARCHIVE_MD5 = "c58f30108f718f92721af3b95e74349a"
CLASSES = ("airplane", "automobile", "bird", "cat", "deer", "dog", "frog", "horse", "ship", "truck")


@dataclass
class Cifar10:
    """The whole dataset as uint8 NCHW images and int64 labels, on the CPU."""
    train_images: torch.Tensor
    train_labels: torch.Tensor
    test_images: torch.Tensor
    test_labels: torch.Tensor
    folder: str
    verified: bool


def batches_folder(data_dir: str) -> str:
    """`data_dir` may be the folder holding cifar-10-batches-py or that folder itself."""
    if os.path.basename(os.path.normpath(data_dir)) == FOLDER:
        return data_dir
    return os.path.join(data_dir, FOLDER)


def is_present(data_dir: str) -> bool:
    folder = batches_folder(data_dir)
    return all(os.path.isfile(os.path.join(folder, name)) for name, _ in TRAIN_FILES + TEST_FILES)


def mismatched_files(data_dir: str) -> List[str]:
    """Names of the files whose md5 differs from the official one (empty when all match)."""
    folder = batches_folder(data_dir)
    return [name for name, md5 in TRAIN_FILES + TEST_FILES + [META_FILE]
            if not matches_md5(os.path.join(folder, name), md5)]


def matches_md5(path: str, md5: str) -> bool:
    """Is `path` a file whose md5 sum is `md5` (torchvision's check_integrity)?"""
    if not os.path.isfile(path):
        return False
    digest = hashlib.md5(usedforsecurity=False) if sys.version_info >= (3, 9) else hashlib.md5()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest() == md5


def why_unusable(data_dir: str, allow_download: bool, allow_unverified: bool) -> Optional[str]:
    """Why --data auto cannot take the copy in `data_dir` (None when it can): its files do not
    match the official sums, or it is missing and cannot be downloaded (a missing copy is
    downloaded here where `allow_download`)."""
    present = is_present(data_dir)
    if present and not (allow_unverified or not mismatched_files(data_dir)):
        return "its files do not match the official md5 sums (pass --allow-unverified to use it)"
    if not present and not allow_download:
        return "it was not found and --no-download forbids fetching it (set --data-dir or $CIFAR10_DIR)"
    if not present:
        try:
            download(data_dir)
        except UserError as error:
            return f"it was not found, and {str(error)[0].lower()}{str(error)[1:].rstrip('.')}"
    return None


DOWNLOAD_TIMEOUT_S = 10  # per connection attempt and read: a compute node without internet fails fast


def download(data_dir: str) -> None:
    """Fetch and unpack the official archive with torchvision's own md5-checked download; a
    network that does not answer within DOWNLOAD_TIMEOUT_S fails instead of hanging."""
    root = os.path.dirname(os.path.normpath(batches_folder(data_dir))) or "."
    previous = socket.getdefaulttimeout()
    try:
        from torchvision.datasets.utils import download_and_extract_archive
    except ImportError as error:
        raise UserError(f"could not download CIFAR-10 from {URL}: {not_installed(error.name or 'torchvision')}"
                        ) from None
    socket.setdefaulttimeout(DOWNLOAD_TIMEOUT_S)  # urllib, which torchvision uses, takes no timeout there
    try:
        download_and_extract_archive(URL, root, filename=ARCHIVE, md5=ARCHIVE_MD5)
    except Exception as error:  # URLError, HTTPError, OSError, RuntimeError (bad md5), ...
        raise UserError(
            f"could not download CIFAR-10 from {URL} into {root} ({error}); on a machine "
            "without internet, download it elsewhere and copy cifar-10-batches-py into --data-dir.") from None
    finally:
        socket.setdefaulttimeout(previous)


# The plain integer dtypes a CIFAR batch stores (images uint8; labels, when arrays, integers),
# and the one state numpy pickles for each: (version, byte order, subarray, names, fields,
# element size, alignment, flags). Nothing else is built, so a forged dtype (an object or
# structured type, or a state that hides objects) is refused instead of turning bytes into
# pointers.
INTEGER_CODES = ("u1", "i1", "u2", "i2", "u4", "i4", "u8", "i8")


class PickledDtype:
    """What the pickle's numpy.dtype(code, align, copy) + BUILD(state) describes, checked."""

    def __init__(self, code: object, align: object = False, copy: object = True):
        code = code.decode("latin1") if isinstance(code, bytes) else code
        if not isinstance(code, str) or code.lstrip("<>|=") not in INTEGER_CODES:
            raise pickle.UnpicklingError(f"refusing dtype {code!r}: CIFAR batches hold plain integers")
        self.dtype = np.dtype(code.lstrip("<>|="))

    def __setstate__(self, state: object) -> None:
        if not (isinstance(state, tuple) and len(state) in (8, 9) and state[0] == 3 and state[1] in "<>|="
                and state[2:8] == (None, None, None, -1, -1, 0)):
            raise pickle.UnpicklingError(f"refusing a forged dtype state {state!r:.80}")
        if state[1] == ">":
            self.dtype = self.dtype.newbyteorder(">")


class PickledArray:
    """What numpy's _reconstruct(ndarray, (0,), b) + BUILD(state) describes, built from the raw
    bytes by np.frombuffer once its dtype, shape and length are checked."""

    def __init__(self, cls: object, shape: object, code: object):
        if cls is not PickledArray or shape != (0,):
            raise pickle.UnpicklingError("refusing an array rebuilt from anything but numpy.ndarray")
        self.array: Optional[np.ndarray] = None

    def __setstate__(self, state: object) -> None:
        if not (isinstance(state, tuple) and len(state) == 5 and isinstance(state[2], PickledDtype)):
            raise pickle.UnpicklingError("refusing an array state that is not (version, shape, dtype, order, bytes)")
        _, shape, dtype, fortran, raw = state
        raw = raw.encode("latin1") if isinstance(raw, str) else raw
        if not (isinstance(shape, tuple) and 1 <= len(shape) <= 2 and all(isinstance(n, int) and n >= 0 for n in shape)
                and fortran is False and isinstance(raw, bytes)):
            raise pickle.UnpicklingError(f"refusing an array of shape {shape!r:.40} or order {fortran!r:.10}")
        if len(raw) != math.prod(shape) * dtype.dtype.itemsize:
            raise pickle.UnpicklingError(f"an array of shape {shape} has {len(raw)} bytes of data")
        self.array = np.frombuffer(raw, dtype=dtype.dtype).reshape(shape)


def empty_bytes(*args: object) -> bytes:
    """builtins.bytes(), as protocol 2 pickles the empty bytes of an empty array."""
    if args:
        raise pickle.UnpicklingError("refusing bytes() of anything: only the empty bytes are pickled so")
    return b""


def latin1_encode(text: object, encoding: object) -> bytes:
    """_codecs.encode, as Python 3 pickles bytes for protocol 2: only str to latin-1 bytes."""
    if not isinstance(text, str) or encoding not in ("latin1", "latin-1"):
        raise pickle.UnpicklingError("refusing _codecs.encode of anything but text to latin-1")
    return codecs.encode(text, "latin1")


# Everything a CIFAR batch pickle may name: numpy array rebuilding (under numpy 1 and 2 module
# names), each rebuilt by the checked stand-ins above, and the latin-1 bytes encoding (or
# empty bytes).
SAFE_GLOBALS: Allowed = {
    ("numpy.core.multiarray", "_reconstruct"): PickledArray,
    ("numpy._core.multiarray", "_reconstruct"): PickledArray,
    ("numpy", "ndarray"): PickledArray,
    ("numpy", "dtype"): PickledDtype,
    ("_codecs", "encode"): latin1_encode,
    ("__builtin__", "bytes"): empty_bytes,
    ("builtins", "bytes"): empty_bytes,
}


def as_array(value: object, dtype: Type[np.integer]) -> np.ndarray:
    """A batch entry (a checked pickled array, or a list) as a numpy array of `dtype`."""
    if isinstance(value, PickledArray):
        if value.array is None:
            raise ValueError("an array without its data")
        value = value.array
    elif not isinstance(value, list) or not all(type(item) is int for item in value):
        raise TypeError(f"a {type(value).__name__} where an array or a list of integers belongs")
    wide = np.asarray(value, dtype=np.int64)
    limits = np.iinfo(dtype)
    if wide.size and (wide.min() < limits.min or wide.max() > limits.max):
        raise ValueError(f"values outside the range of {np.dtype(dtype).name}")
    return wide.astype(dtype)


IMAGE_BYTES = 3 * 32 * 32  # one row of a batch's data: the R, G and B planes of a 32 x 32 image


def read_batch(path: str) -> Tuple[torch.Tensor, torch.Tensor]:
    """One CIFAR batch file as (uint8 images N x 3 x 32 x 32, int64 labels N), or a UserError
    that names the file and its problem."""
    import torch

    data, labels = read_arrays(path)
    return torch.from_numpy(data.reshape(-1, 3, 32, 32).copy()), torch.from_numpy(labels)


def read_arrays(path: str) -> Tuple[np.ndarray, np.ndarray]:
    """read_batch's arrays as numpy holds them (images N x 3072), checked, without torch."""
    try:
        with open(path, "rb") as f:
            batch = safepickle.unpickler(SAFE_GLOBALS)(f, encoding="latin1").load()  # never runs code
        if not isinstance(batch, dict):
            raise TypeError(f"a {type(batch).__name__}, not a dict")
        data = as_array(batch["data"], np.uint8)
        labels = as_array(batch["labels"] if "labels" in batch else batch["fine_labels"], np.int64)
    except Exception as error:  # whatever the file's bytes make the unpickler or the checks raise
        raise UserError(f"{path} is not a readable CIFAR-10 batch ({failure(error)}); "
                        "delete the folder and download the dataset again.") from None
    problem = batch_problem(data, labels)
    if problem:
        raise UserError(f"{path} {problem}; delete the folder and download the dataset again.")
    return data, labels


def failure(error: Exception) -> str:
    """A read failure in words, never an empty "()"."""
    if isinstance(error, KeyError):
        return f"it has no {error.args[0]!r} entry" if error.args else "an entry is missing"
    if isinstance(error, EOFError):
        return "the file ends early"
    return (str(error).strip().splitlines() or [type(error).__name__])[0][:200]


def batch_problem(data: np.ndarray, labels: np.ndarray) -> Optional[str]:
    """What is wrong with a batch's arrays, in words (None when nothing is)."""
    if data.ndim != 2 or data.shape[1] != IMAGE_BYTES:
        return f"holds data of shape {data.shape}, not N x {IMAGE_BYTES} (N images of 3 x 32 x 32 bytes)"
    if len(data) == 0:
        return "holds no images"
    if labels.ndim != 1 or len(labels) != len(data):
        return f"has {len(data)} images but {labels.size} labels"
    if labels.min() < 0 or labels.max() >= len(CLASSES):
        return f"has labels outside 0..{len(CLASSES) - 1} (from {labels.min()} to {labels.max()})"
    return None


def read_split(folder: str, files: Sequence[Sequence[str]]) -> Tuple[torch.Tensor, torch.Tensor]:
    import torch

    parts = [read_batch(os.path.join(folder, name)) for name, _ in files]
    return torch.cat([images for images, _ in parts]), torch.cat([labels for _, labels in parts])


def load(data_dir: str, allow_download: bool = False, allow_unverified: bool = False) -> Cifar10:
    """The dataset from `data_dir`, downloading it first if allowed and missing.

    A copy whose md5 sums are not the official ones is refused unless `allow_unverified`.
    """
    folder = batches_folder(data_dir)
    if not is_present(data_dir):
        if not allow_download:
            raise UserError(f"CIFAR-10 not found in {folder}; drop --no-download to fetch it, or point "
                            "--data-dir (or $CIFAR10_DIR) at a folder holding cifar-10-batches-py.")
        download(data_dir)
    bad = mismatched_files(data_dir)
    if bad and not allow_unverified:
        raise UserError(f"{os.path.join(folder, bad[0])} does not match the official CIFAR-10 md5 sum"
                        f"{f' (nor do {len(bad) - 1} more files)' if len(bad) > 1 else ''}; download it "
                        "again, or pass --allow-unverified to use this copy as it is.")
    train_images, train_labels = read_split(folder, TRAIN_FILES)
    test_images, test_labels = read_split(folder, TEST_FILES)
    return Cifar10(train_images, train_labels, test_images, test_labels, folder, verified=not bad)


def image_counts(data_dir: str) -> Tuple[int, int]:
    """(training images, test images) of the copy in `data_dir`, each batch read and checked as
    load() reads it (a UserError names a bad one), without torch."""
    folder = batches_folder(data_dir)
    train, test = (sum(len(read_arrays(os.path.join(folder, name))[1]) for name, _ in files)
                   for files in (TRAIN_FILES, TEST_FILES))
    return train, test
