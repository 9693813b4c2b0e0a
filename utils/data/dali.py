"""--loader dali: NVIDIA DALI reads an image folder's training images and decodes and augments
them on the GPU (nvJPEG through DALI's "mixed" decoder, or its CPU decoder with --decode cpu),
the same recipe as --loader stream: a random resized crop (area 0.08 to 1, aspect 3/4 to 4/3)
decoded straight from the file (DALI's image_random_crop decodes only the crop's region), a
resize to --image-size and a flip with probability 1/2, handed to the run as uint8 batches on
the device that ampbench normalises as it normalises every streamed batch. DALI's file reader
shards the files over the ranks and shuffles them (its own buffer, seeded by --seed). Evaluation,
which is not timed, reads the evaluation images as --loader stream does.

DALI is optional and needs CUDA: where nvidia-dali is not installed, or the run is not on a GPU,
--loader dali is refused in one sentence that says what to install or to use instead.
"""
from __future__ import annotations

from typing import Any, Dict, Optional, Tuple

import torch

from utils.data import images, recipe, streamed
from utils.data.images import BadImages
from utils.data.loaders import Normalization
from utils.errors import UserError

THREADS = 4  # DALI's CPU threads per pipeline (reading, and decoding with --decode cpu)
PREFETCH = 2  # batches DALI prepares ahead (prefetch_queue_depth)


def install_line() -> str:
    """The pip command that installs the DALI build of this torch's CUDA."""
    major = (torch.version.cuda or "12").split(".")[0]
    return f"pip install nvidia-dali-cuda{major}0 --extra-index-url https://pypi.nvidia.com"


def modules() -> Dict[str, Any]:
    """DALI's pieces this loader uses (fn, types, pipeline_def, DALIGenericIterator,
    LastBatchPolicy), or the sentence that says how to install it."""
    try:
        from nvidia.dali import fn, pipeline_def, types
        from nvidia.dali.plugin.pytorch import DALIGenericIterator, LastBatchPolicy
    except ImportError:
        raise UserError(f"--loader dali needs NVIDIA DALI, which is not installed in this Python; {install_line()}, "
                        "or use --loader stream (with --decode gpu to decode on the GPU).") from None
    return {"fn": fn, "types": types, "pipeline_def": pipeline_def, "DALIGenericIterator": DALIGenericIterator,
            "LastBatchPolicy": LastBatchPolicy}


def pipeline(dali: Dict[str, Any], stream: streamed.FolderStream, *, batch_size: int, device: torch.device, seed: int,
             shard: Tuple[int, int], on_gpu: bool) -> Any:
    """The DALI pipeline of the folder's training images for this rank, built."""
    fn, types = dali["fn"], dali["types"]
    index, positions = stream.listing.index, stream.listing.training
    files = [index.path(position) for position in positions]
    labels = [int(label) for label in index.labels[positions]]
    size, pipeline_def = stream.size, dali["pipeline_def"]

    @pipeline_def(batch_size=batch_size, num_threads=THREADS, device_id=device.index or 0, seed=seed,
                  prefetch_queue_depth=PREFETCH)
    def training() -> Tuple[Any, Any]:
        encoded, label = fn.readers.file(files=files, labels=labels, random_shuffle=True, shard_id=shard[0],
                                         num_shards=shard[1], name="Reader")
        pictures = fn.decoders.image_random_crop(encoded, device="mixed" if on_gpu else "cpu",
                                                 output_type=types.RGB, random_area=list(recipe.SCALE),
                                                 random_aspect_ratio=list(recipe.RATIO), num_attempts=10)
        pictures = fn.resize(pictures, resize_x=size, resize_y=size)
        pictures = fn.crop_mirror_normalize(pictures, dtype=types.UINT8, output_layout="CHW",
                                            mirror=fn.random.coin_flip(probability=0.5))
        return pictures, label

    built = training()
    built.build()
    return built


class DaliLoader(streamed.TrainBatches):
    """An endless stream of normalised training batches from a DALI pipeline (`make()` builds
    one); DALI cannot start mid-epoch, so a resume reads and passes over the batches before its own."""

    def __init__(self, dali: Dict[str, Any], make: Any, bad: BadImages, *, device: torch.device,
                 normalization: Normalization, channels_last: bool, batches_per_epoch: int):
        super().__init__(bad, device, normalization, channels_last)
        self.dali, self.make, self.batches_per_epoch = dali, make, batches_per_epoch
        self.last: Optional[Tuple[torch.Tensor, torch.Tensor]] = None
        self.start(0)

    def start(self, position: int) -> None:
        self.iterator = self.dali["DALIGenericIterator"]([self.make()], ["images", "labels"], reader_name="Reader",
                                                         auto_reset=True,
                                                         last_batch_policy=self.dali["LastBatchPolicy"].DROP)
        self.position = 0
        for _ in range(position):
            next(self)

    def __len__(self) -> int:
        return self.batches_per_epoch

    def __next__(self) -> Tuple[torch.Tensor, torch.Tensor]:
        """The next batch; where DALI fails to make one (a file it cannot decode, which it does not
        name), that is said as a file that is no whole image, which stops the run before the next
        step, and this step trains on the batch before again."""
        try:
            try:
                produced = next(self.iterator)
            except StopIteration:  # an epoch ended: auto_reset has started the next
                produced = next(self.iterator)
        except RuntimeError as error:
            if self.last is None:
                raise UserError(f"--loader dali could not make a first batch ({images.reason(error)}); run with "
                                "--loader stream, which names a file it cannot read.") from None
            self.bad.add([("a file of this batch (DALI names none; --loader stream would)", images.reason(error))])
            return self.last
        self.position += 1
        pictures, labels = produced[0]["images"], produced[0]["labels"].reshape(-1).long()
        self.last = (self.normalize(pictures).contiguous(memory_format=self.memory_format), labels.to(self.device))
        return self.last


def loader(stream: streamed.FolderStream, *, batch_size: int, device: torch.device, seed: int, channels_last: bool,
           shard: Tuple[int, int], on_gpu: bool, dali: Optional[Dict[str, Any]] = None) -> DaliLoader:
    """The run's DALI loader of `stream`'s training images; `dali`, modules()' (given by a test)."""
    dali = dali or modules()
    per_rank = -(-len(stream.listing.training) // shard[1])
    return DaliLoader(dali, lambda: pipeline(dali, stream, batch_size=batch_size, device=device, seed=seed,
                                             shard=shard, on_gpu=on_gpu),
                      stream.renewed_bad(), device=device, normalization=stream.normalization,
                      channels_last=channels_last, batches_per_epoch=-(-per_rank // batch_size))
