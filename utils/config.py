"""RunConfig: what the user asked for, in typed sections, built and validated once.

Every setting is one field of a section (training, accuracy, actions, precision, data, speed,
measurement, distributed, checkpoints, advice) that carries its flag (utils/settings.py): main.py's
parser (and a study's flag for a setting it shares with main.py: add_flag), docs/flags.md, the
defaults, the range checks and the results record are all read from the fields (SETTINGS), so
adding a setting is adding a field. main.py parses a command line (the spellings kept for old
scripts settled into current ones by utils/spellings.py) into its settings by key;
`RunConfig.build` checks each setting's range, settles the settings whose default the run decides
(resolve(): --modes or --compare into one tuple of modes, the stem, the steps ...), fills the
frozen sections and checks every rule that involves more than one flag, each a typed function of
the sections it reads; utils/app.py hands the sections to each stage as it needs them. What only
the data and the model settle (the steps of --epochs, the family's recipe) is a TrainingPlan of
its own, resolved once in app.py's prepare(); nothing in RunConfig is filled in later.

This module sits at the bottom of the house: the modules that read the config import it, and it
imports none of them (the mode table and the model families lie below it). No torch here: main.py
takes its defaults from `defaults()` and still answers `-h` at once, and a config that breaks a
rule is refused before the slow imports.
"""
from __future__ import annotations

import argparse
import dataclasses
import math
import os
import typing
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple, Type, Union

from models import families
from models.spec import factory_spec
from utils import console, launch, spellings
from utils.errors import UserError
from utils.grad_comm import DDP_BUCKET_MB, GRAD_COMM
from utils.modes import (
    BASELINES,
    DEFAULT_COMPARE,
    DEFAULT_COMPARE_CPU,
    FP8_NEEDS_A_GPU,
    MODES,
    Mode,
    listed,
    parse_modes,
)
from utils.settings import (
    ADVICE,
    CHECKED,
    COUNT,
    COUNT_OR_ZERO,
    FRACTION,
    FREE,
    KEPT,
    LARGEST_COUNT,
    LENGTH,
    LEVER,
    NAMED,
    OWNED,
    PASSED,
    POOLED,
    POSITIVE,
    POSITIVE_OR_ZERO,
    STEP_TIMES,
    VERDICT,
    Range,
    Section,
    keys_with,
    refused,
    setting,
    settings_of,
)

DEFAULT_STEPS = 200
# Every family's recipe (models/families.py) starts with a linear learning-rate warm-up over this
# share of the steps, then follows --lr-schedule (cosine decay to zero by default).
LR_WARMUP_SHARE = 0.05
LARGEST_SEED = 2 ** 63 - 1  # torch.manual_seed's largest
MOST_WORKERS = 256
MOST_DEFAULT_WORKERS = 16  # past this many decoding processes a GPU's feed gains little, and each holds its own memory
# DDP holds its bucket size in bytes as a 64-bit integer, which 1e30 MB overflows deep in its
# Reducer; a TiB bucket already holds any model whole.
LARGEST_BUCKET_MB = 2 ** 20
EXPLAIN_STEPS = 5  # steps --explain profiles per mode
NUMERICS_EVERY = 50  # --numerics samples every this many steps, and the last
DEFAULT_TIMING_WARMUP = 10  # steps left out of the timings; a run of fewer than twice as many warms up for half
DEFAULT_LOSS_SCALE = 128.0  # fp16-master's static loss scale
DEFAULT_MARGIN_POINTS = 0.5  # --accuracy-margin: a mode holds within +-0.5 points of the baseline
DEFAULT_BUDGET_MINUTES = 10.0  # --advise's wall time unless --budget says otherwise
# Why a resume refuses a change of these settings, as the refusal says it (Flag.resume).
KEPT_BY_THE_OPTIMIZER = ("the resumed optimizer keeps the checkpoint's, so the results would record a setting that "
                         "never ran")
MIXED_TIMINGS = "the step times would mix two setups"
# One image as a model takes it, (channels, height, width): what the loaders make, the FLOP count and
# FP8's accounting and prediction read (timm's input_size); CIFAR-10's RGB at --image-size.
InputShape = Tuple[int, int, int]
CHANNELS = 3


def input_shape_of(image_size: int) -> InputShape:
    return (CHANNELS, image_size, image_size)


DEFAULT_INPUT_SHAPE = input_shape_of(families.DEFAULT_IMAGE_SIZE)


def flag_type(allowed: Range) -> Callable[[str], Union[int, float]]:
    """argparse's type for a flag whose values are `allowed`: a value out of range, or no number
    of its kind, is refused at parsing with the flag named."""
    def parse(text: str) -> Union[int, float]:
        try:
            value = allowed.kind(text)
        except ValueError:  # not a number, or more digits than int() reads
            value = None
        if value is None or not allowed.holds(value):
            raise argparse.ArgumentTypeError(f"must be {allowed.wording}, got {console.shortened(text)}")
        return value

    parse.__name__ = allowed.kind.__name__
    return parse


def mode_names(text: str) -> List[str]:
    """argparse's type for a study's --modes (main.py settles its own in RunConfig.build): the
    names of a comma list of modes, one that parse_modes refuses refused at parsing."""
    try:
        return [mode.name for mode in parse_modes(text)]
    except UserError as error:
        raise argparse.ArgumentTypeError(str(error).rstrip(".")) from None


DEFAULT_MODEL = "resnet50"  # -m/--model unless given; --model-factory replaces it
def default_data_dir() -> str:
    return os.environ.get("CIFAR10_DIR", "./data")


def usable_cores() -> int:
    """The cores this process may run on (its CPU affinity: a batch job's share of the node)."""
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):  # macOS has no affinity
        return os.cpu_count() or 1


def default_workers() -> int:
    """The cores this process may use, shared among the ranks its launcher started on its node
    (each feeds its own GPU), at most MOST_DEFAULT_WORKERS."""
    try:
        local = launch.detect().local_size
    except UserError:  # a garbled launch: its rank refuses it once parsing is over
        local = 1
    return max(1, min(MOST_DEFAULT_WORKERS, usable_cores() // local))


SGD, ADAMW = families.OPTIMIZER_DEFAULTS["sgd"], families.OPTIMIZER_DEFAULTS["adamw"]
LOADERS = ("auto", "device", "torchvision", "stream", "dali")
STREAMED_DATA = ("imagefolder", "webdataset")  # the data --loader stream reads from files
WORKERS = ("DataLoader worker processes that read and decode streamed images (--loader stream) or serve --loader "
           "torchvision, and that decode an image folder held in memory (default: the cores this process may use, "
           f"shared among the ranks on its node, at most {MOST_DEFAULT_WORKERS}")
PRECISION_MODES_LINK = "[Precision modes](modes.md#precision-modes)"
COMPARING_LINK = "[Comparing precisions](modes.md#comparing-precisions---compare)"
LONG_RUNS_LINK = "[Long runs](long-runs-and-clusters.md#long-runs)"
TRAINING = "training"  # the -h group of two sections: what is trained, and what main.py does instead


# The sections, each a frozen dataclass of settings (utils/settings.py): a field holds the value as
# given on the command line, or as RunConfig.build resolved it where the flag's default is "the run
# decides" (the model of --model-factory, the stem, the steps, the modes, the baseline, the loss
# scale, what --explain-steps and --numerics-every imply). Fields are in -h's order.

@dataclass(frozen=True)
class Training(Section):
    """What is trained and how: the model, the batches, the optimizer's implementation and the
    recipe settings the user gave (None: the model family's, resolved into a Recipe)."""
    GROUP = TRAINING
    lr: Optional[float] = setting(
        "--lr", range=POSITIVE,
        record=STEP_TIMES, recorded_always=True, resume=refused(KEPT_BY_THE_OPTIMIZER), adviser=PASSED,
        help=f"peak learning rate (default: SGD {SGD.base_lr} x global batch / {families.BASE_BATCH}, "
        f"{SGD.base_lr_without_batch_norm} x global batch / {families.BASE_BATCH} for models without batch norm; "
        f"AdamW {ADAMW.base_lr:g} x sqrt(global batch / {families.BASE_BATCH}))",
        doc="{help}; see [the default recipe](#the-default-recipe)")
    optimizer: Optional[str] = setting(
        "--optimizer", choices=tuple(families.OPTIMIZER_DEFAULTS),
        record=STEP_TIMES, resume=refused("the checkpoint's optimizer state is that optimizer's"), adviser=PASSED,
        help="sgd or adamw (default: the model family's recipe: adamw for vision transformers and --model-factory "
        "models, sgd for the rest)",
        doc="{help}; `--momentum` and `--nesterov` are SGD's and refused with AdamW")
    steps: Optional[int] = setting(  # resolved: None with --epochs (the dataset's size settles them: TrainingPlan)
        "--steps", "-n", range=COUNT,
        record=STEP_TIMES, recorded_always=True, resume=FREE, adviser=LENGTH, job=True,
        help=f"optimizer steps to run (default {DEFAULT_STEPS}; the ThetaGPU AMP tutorial counted epochs with -n)")
    epochs: Optional[float] = setting(
        "--epochs", range=POSITIVE,
        record=POOLED, resume=FREE, adviser=LENGTH, job=True,
        help="train this many epochs instead of --steps (fractions allowed)",
        doc="{help}; see " + LONG_RUNS_LINK)
    batch_size: int = setting(
        "--batch-size", "-b", default=128, range=COUNT,
        record=STEP_TIMES, recorded_always=True, resume=CHECKED, adviser=NAMED, job=True,
        help="batch size (default %(default)s)")
    model: str = setting(  # resolved: a torchvision name, or --model-factory's MODULE:FUNCTION, which builds it
        "--model", "-m", default=DEFAULT_MODEL,
        record=STEP_TIMES, recorded_always=True, resume=CHECKED, adviser=NAMED, job=True,
        help="torchvision classification model (default %(default)s; see --list-models)")
    model_factory: Optional[str] = setting(
        "--model-factory", metavar="MODULE:FUNCTION",
        record=POOLED, resume=refused("the weights are those of the model its factory built"), adviser=PASSED,
        help="train your own model: MODULE:FUNCTION, a function or class importable from the working directory or "
        "PYTHONPATH that returns a torch.nn.Module classifier (instead of -m; called with num_classes=, "
        "image_size= and dropout= where it takes them)",
        doc="{help}; see [Your own model and data](data-and-models.md#your-own-model-and-data)")
    stem: str = setting(  # resolved: the image size's default where not given
        "--stem", choices=families.STEMS,
        record=STEP_TIMES, recorded_always=True, resume=CHECKED, adviser=PASSED,
        help="cifar: 3x3 stride-1 first conv and no max-pool for ResNet-family models; imagenet: torchvision's "
        f"layout unchanged (default: cifar up to --image-size {families.CIFAR_STEM_UP_TO}, imagenet above, where "
        "the ImageNet stem's quarter resolution leaves layer4 feature maps of 3x3 and more)",
        doc="{help}; see [Models](data-and-models.md#models)")
    dropout: Optional[float] = setting(
        "--dropout", range=FRACTION, metavar="P",
        record=POOLED, resume=refused("the weights so far were trained with the checkpoint's dropout"), adviser=PASSED,
        help="dropout probability for models that have one (default: the model's own)")
    seed: int = setting(
        "--seed", default=0, range=Range(int, 0, LARGEST_SEED, "an integer from 0 to 2**63-1"),
        record=POOLED, resume=refused("the weights and the data order are the checkpoint's seed's"), adviser=PASSED,
        job=True,
        help="seed for weights, data order and augmentation", doc="{help} (default %(default)s)")
    momentum: Optional[float] = setting(
        "--momentum", range=POSITIVE_OR_ZERO,
        record=STEP_TIMES, resume=refused(KEPT_BY_THE_OPTIMIZER), adviser=PASSED,
        help=f"SGD momentum (default {SGD.momentum}; not for AdamW)")
    weight_decay: Optional[float] = setting(
        "--weight-decay", range=POSITIVE_OR_ZERO,
        record=STEP_TIMES, resume=refused(KEPT_BY_THE_OPTIMIZER), adviser=PASSED,
        help=f"weight decay (default: SGD {SGD.weight_decay:g}, AdamW {ADAMW.weight_decay:g}, which spares biases, "
        "norms, the class token and the position embedding)")
    nesterov: bool = setting(
        "--nesterov", action="store_true",
        record=POOLED, resume=refused(KEPT_BY_THE_OPTIMIZER), adviser=PASSED, help="Nesterov momentum")
    label_smoothing: Optional[float] = setting(
        "--label-smoothing", range=FRACTION,
        record=STEP_TIMES, resume=refused(KEPT_BY_THE_OPTIMIZER), adviser=PASSED,
        help=f"label smoothing (default: {families.RECIPES['convnet'].label_smoothing:g} for convnets and "
        f"--model-factory models, {families.RECIPES['transformer'].label_smoothing:g} for vision transformers)")
    lr_schedule: str = setting(
        "--lr-schedule", default="cosine", choices=("constant", "cosine", "onecycle"),
        record=STEP_TIMES, resume=CHECKED, adviser=PASSED,
        help="learning-rate schedule over the run (default %(default)s)")
    lr_warmup_steps: Optional[int] = setting(
        "--lr-warmup-steps", key="warmup_lr_steps", range=COUNT_OR_ZERO, metavar="N",
        record=STEP_TIMES, resume=FREE, adviser=PASSED,
        help="linear learning-rate warm-up steps (default: 5%% of the steps; one-cycle ramps up by itself)")
    clip_grad: Optional[float] = setting(
        "--clip-grad", range=POSITIVE, metavar="NORM",
        record=STEP_TIMES, resume=refused(KEPT_BY_THE_OPTIMIZER), adviser=PASSED,
        help="clip the gradient norm (of the unscaled gradients) to NORM")
    optimizer_impl: str = setting(  # fused where this torch and device have it; else foreach, noted in env.degraded
        "--optimizer-impl", default="fused", choices=("fused", "foreach"),
        record=STEP_TIMES, resume=refused(MIXED_TIMINGS), adviser=LEVER,
        help="SGD or AdamW implementation: fused (GradScaler's inf check and skip stay on the device; foreach where "
        "torch has no fused one) or foreach (the classic recipe: one host sync per scaled step) (default %(default)s)",
        doc="{help}; see " + PRECISION_MODES_LINK)
    accum_steps: int = setting(
        "--accum-steps", default=1, range=COUNT, metavar="K",
        record=STEP_TIMES, resume=CHECKED, adviser=PASSED,
        help="accumulate gradients over K micro-batches of --batch-size per optimizer step",
        doc="{help}; see " + LONG_RUNS_LINK)
    on_nan: str = setting(
        "--on-nan", default="stop", choices=("stop", "skip"),
        record=POOLED, resume=refused("the steps so far met a non-finite loss by the checkpoint's rule"),
        adviser=PASSED,
        help="without a loss scaler, a non-finite loss stops the run or skips the step (default %(default)s)")
    no_eval: bool = setting(
        "--no-eval", action="store_true",
        record=POOLED, resume=FREE, adviser=OWNED, help="skip the test-set accuracy pass")

    @property
    def effective_batch_size(self) -> int:
        """Images per optimizer step in one process."""
        return self.batch_size * self.accum_steps

    def global_batch_size(self, world_size: int) -> int:
        """Images per optimizer step across all processes."""
        return self.effective_batch_size * world_size


@dataclass(frozen=True)
class Accuracy(Section):
    """Does accuracy hold? The evaluations, the seeds, the verdict's margin and the target."""
    GROUP = "does accuracy hold?"
    eval_every: Optional[float] = setting(  # epochs
        "--eval-every", range=POSITIVE, metavar="E",
        record=VERDICT, resume=refused("the accuracy curve would mix two cadences"), adviser=OWNED,
        help="also evaluate the test set every E epochs during training (fractions allowed); the evaluations are "
        "timed apart from the steps",
        doc="{help}; see [Does accuracy hold?](accuracy.md)")
    seeds: int = setting(
        "--seeds", default=1, range=COUNT, metavar="K",
        record=POOLED, resume=FREE, adviser=OWNED,
        help="run every mode with seeds --seed .. --seed+K-1, paired: for one seed every mode starts from the same "
        "weights and batches (default %(default)s)",
        doc="{help}; the last seed must be at most `2**63-1`")
    margin_points: float = setting(
        "--accuracy-margin", key="accuracy_margin", default=DEFAULT_MARGIN_POINTS, range=POSITIVE_OR_ZERO,
        metavar="POINTS",
        record=VERDICT, resume=FREE, adviser=PASSED,
        help="the accuracy verdict's margin: a mode holds when the 95%% interval of its paired difference from the "
        "baseline lies within +-POINTS (default %(default)s)",
        doc="{help}; POINTS are percentage points (the JSON's accuracies are fractions); the baseline is "
        "`--baseline`, fp32 unless told")
    target_accuracy: Optional[float] = setting(
        "--target-accuracy", metavar="A",
        range=Range(float, 0, 1, "a fraction of the test images above 0 and at most 1 (0.9 for 90 percent)",
                    low_open=True),
        record=VERDICT, resume=refused("the run would be asked another question than its evaluations so far"),
        adviser=OWNED,
        help="report the training time, steps and epochs to reach test accuracy A (a fraction, e.g. 0.9), per mode "
        "and against fp32; needs --eval-every")
    stop_at_target: bool = setting(
        "--stop-at-target", action="store_true",
        record=POOLED, resume=refused("the run would end by another rule than its evaluations so far"), adviser=OWNED,
        help="end each run at the first evaluation that reaches --target-accuracy",
        doc="{help} (after the warm-up: one in it ends the run at the first timed step)")


@dataclass(frozen=True)
class Actions(Section):
    """What main.py does instead of a run: list the models, or check the flags."""
    GROUP = TRAINING
    list_models: bool = setting(
        "--list-models", action="store_true",
        record=POOLED, resume=FREE, adviser=KEPT, help="print every usable model name and exit",
        doc="{help}: the models that take the run's --image-size (stdout), and those left out, with why (stderr)")
    check_flags: bool = setting(
        "--check-flags", action="store_true",
        record=POOLED, resume=FREE, adviser=KEPT,
        help="make the checks a run makes before its first step, but for its data and a checkpoint, then exit 0 "
        "without training",
        doc="make the checks a run makes before its first step, by the run's own code, but for reading its data or "
        "a checkpoint: every flag and the rules between them (before torch is imported, so a bad flag is refused "
        "in a tenth of a second), then this torch, the device and the modes on it, every output, an image folder's "
        "class folders (listed, no image read), the model (a torchvision one built without its weights on torch 2.1 "
        "and up: an unknown name, a size it does not take, a `--dropout` it lacks, a batch too small for its batch "
        "norms; a `--model-factory` one built whole and checked with one forward) and the layers fp8 converts in "
        "it; then exit 0 (or 2 with the refusal's sentence), having written nothing and said no warning (the run "
        "says them), in about the time torch takes to import (4 to 5 s on a 2-core CPU): what the job scripts and "
        "the scaling study run before any stage. Under a launcher's variables (torchrun's `WORLD_SIZE` and `RANK`, "
        "mpirun's, srun's) it checks them as that rank would, so `--grad-comm` and `--bucket-mb` are refused in one "
        "process")


@dataclass(frozen=True)
class Precision(Section):
    """The modes to run, in order, and what they need: one word for precision, whichever of the
    command line's spellings asked for it."""
    GROUP = "precision"
    gpu: bool = setting(
        "--gpu", "-p", action="store_true",
        record=POOLED, resume=FREE, adviser=PASSED, job=True, help="train on CUDA (default: CPU)")
    allow_slow_fp16: bool = setting(
        "--allow-slow-fp16", action="store_true",
        record=POOLED, resume=FREE, adviser=PASSED,
        help="run float16 modes on a CPU without fast float16 arithmetic (avx512_fp16, amx_fp16), where they are "
        "refused: they take many times longer than fp32",
        doc="{help}; see " + PRECISION_MODES_LINK)
    fp8_emulate: bool = setting(
        "--fp8-emulate", action="store_true",
        record=POOLED, resume=FREE, adviser=OWNED,
        help="run the fp8 modes with FP8 computed in software, on the CPU or any GPU: checks that they train; "
        "emulated times are not FP8 speed",
        doc="{help}; see [Transformers and FP8](transformers-and-fp8.md)")
    compare: bool = setting(
        "--compare", action="store_true",
        record=POOLED, resume=FREE, adviser=OWNED,
        help="run several precision modes back to back from the same weights and batches (default modes: "
        f"{','.join(DEFAULT_COMPARE)} with -p, {','.join(DEFAULT_COMPARE_CPU)} on the CPU)",
        doc="{help}; on the CPU the default leaves float16 out, as it is slow there; see " + COMPARING_LINK)
    modes: Tuple[Mode, ...] = setting(  # resolved from --modes, --compare and the device (modes_of)
        "--modes", metavar="LIST",
        record=POOLED, resume=FREE, adviser=OWNED,
        help=f"the precision modes to train, a comma list from {', '.join(MODES)}: one mode trains alone, several "
        "are compared as --compare compares them (default fp32)",
        doc="{help}; see " + PRECISION_MODES_LINK)
    baseline: str = setting(  # resolved: fp32 where not given
        "--baseline", metavar="MODE",
        record=POOLED, resume=FREE, adviser=OWNED,
        help="the mode the speedups, memory ratios, accuracy differences and verdicts compare with "
        f"(default {BASELINES['default']}; when given, one of the modes run)",
        doc="{help}: one that is not exits 2 before training; the intervals compare with it too, `--explain`'s "
        "categories stay against fp32; recorded as `config.precision.baseline`")
    repeats: int = setting(
        "--repeats", default=1, range=COUNT,
        record=POOLED, resume=FREE, adviser=OWNED,
        help="run the whole set of modes R times, in alternating order (default %(default)s)")
    mode_steps: Optional[str] = setting(  # resolved: each entry checked, in the modes' order (mode_steps_of)
        "--mode-steps", metavar="MODE=N,...",
        record=POOLED, resume=FREE, adviser=OWNED,
        help="optimizer steps of the named modes instead of --steps/-n, e.g. fp32=140,amp-bf16=460: each mode "
        "timed for about the same seconds, as an energy figure needs 10 s of timed steps; with --no-eval, as the "
        "modes then stop at different steps",
        doc="{help}; the results record each run's `steps`; see [Energy that resolves](modes.md#energy-that-resolves)")
    loss_scale: float = setting(  # resolved: fp16-master's static scale
        "--loss-scale", range=POSITIVE,
        record=POOLED, resume=refused("fp16-master's steps so far were scaled by the checkpoint's loss scale"),
        adviser=OWNED,
        help=f"static loss scale of the fp16-master mode (default {DEFAULT_LOSS_SCALE:g})",
        doc="{help}; refused for runs without `fp16-master`, where it would do nothing")


@dataclass(frozen=True)
class DataSettings(Section):
    """What the runs train on and how it is fed."""
    GROUP = "data"
    data: str = setting(
        "--data", default="auto", choices=("auto", "cifar10", "synthetic", "imagefolder", "webdataset"),
        record=POOLED, resume=FREE, adviser=PASSED, job=True,
        help="auto: CIFAR-10 if a verified copy is present or can be downloaded (10 s connection timeout), else "
        "synthetic with a warning; imagefolder: your own images in --data-dir, a folder per class; webdataset: "
        "WebDataset tar shards in --data-dir (ampbench-shards writes them from an image folder) (default "
        "%(default)s)",
        doc="{help}; see [Your own model and data](data-and-models.md#your-own-model-and-data)")
    data_dir: str = setting(
        "--data-dir", default_factory=default_data_dir,
        record=POOLED, resume=FREE, adviser=PASSED, job=True,
        help="folder holding cifar-10-batches-py, or that folder itself; with --data imagefolder, the image folder "
        "(DIR/CLASS/IMAGE, or DIR/train/CLASS/IMAGE beside DIR/val, DIR/validation or DIR/test); with --data "
        "webdataset, the shards' folder or a brace pattern of them (default $CIFAR10_DIR, else ./data)")
    num_classes: Optional[int] = setting(  # None: the data's, settled when it is read (TrainingPlan)
        "--num-classes", range=Range(int, 2, LARGEST_COUNT, f"a whole number of classes from 2 to {LARGEST_COUNT}"),
        metavar="N",
        record=POOLED, resume=refused("the model's head was built for that many classes"), adviser=PASSED,
        help="the classes the model outputs and the labels take (default: the data's: 10 for CIFAR-10 and synthetic "
        "images, an image folder's class folders, which a different count is refused against)")
    download: bool = setting(
        "--no-download", key="download", action="store_false", default=True,
        record=POOLED, resume=FREE, adviser=PASSED,
        help="never try the network: without a copy on disk, --data auto uses synthetic data")
    allow_unverified: bool = setting(
        "--allow-unverified", action="store_true",
        record=POOLED, resume=FREE, adviser=PASSED, help="use a CIFAR-10 copy whose md5 sums differ from the official "
        "ones", doc="{help} (e.g. the test subset)")
    image_size: int = setting(
        "--image-size", default=families.DEFAULT_IMAGE_SIZE, metavar="N",
        range=Range(int, *families.IMAGE_SIZES,
                    f"a whole number of pixels from {families.IMAGE_SIZES[0]} to {families.IMAGE_SIZES[1]}"),
        record=STEP_TIMES, resume=CHECKED, adviser=PASSED,
        help="train and test at N x N images: CIFAR-10 upsampled (bilinear) on the device after augmentation, "
        "synthetic images made at N; models, FLOPs and --max-batch follow (default %(default)s)",
        doc="{help}; see [Image sizes](data-and-models.md#image-sizes)")
    loader: str = setting(  # resolved: auto is device but for an image folder, whose size settles it (TrainingPlan)
        "--loader", default="auto", choices=LOADERS,
        record=STEP_TIMES, resume=CHECKED, adviser=PASSED,
        help="device: dataset decoded once and held on the training device, whole-batch augmentation; torchvision: "
        "held in memory, the classic per-image DataLoader path; stream: an image folder's files (or shards) read "
        "and decoded per batch by --workers processes, in bounded memory; dali: the same read, decoded and augmented "
        "by an NVIDIA DALI pipeline on the GPU (needs DALI); auto: device, but for an image folder whose decoded "
        "images exceed the in-memory budget, and shards, which stream (default %(default)s)",
        doc="{help}; see [Feeding the GPU](data-and-models.md#feeding-the-gpu-loaders-and-speed-levers)")
    workers: int = setting(
        "--workers", default_factory=default_workers, range=Range(int, 0, MOST_WORKERS, f"from 0 to {MOST_WORKERS}"),
        record=POOLED, resume=FREE, adviser=PASSED,
        help=WORKERS + " = %(default)s)", doc=WORKERS + ")")  # the page leaves out this machine's count
    decode: str = setting(
        "--decode", default="auto", choices=("auto", "cpu", "gpu"),
        record=POOLED, resume=FREE, adviser=PASSED,
        help="where streamed images (--loader stream or dali, --data webdataset) are decoded: cpu, in the "
        "DataLoader workers (DALI's CPU threads); gpu, each batch's JPEGs on the training GPU (torchvision's "
        "decode_jpeg with nvJPEG, or DALI's mixed decoder), cropped and resized there; auto: gpu for --loader dali, "
        "else cpu (default %(default)s)",
        doc="{help}; see [Decoding on the GPU](data-and-models.md#decoding-on-the-gpu---decode-gpu---loader-dali)")
    epoch_images: Optional[int] = setting(  # None: an index.json's, which ampbench-shards writes
        "--epoch-images", range=COUNT, metavar="N",
        record=POOLED, resume=FREE, adviser=PASSED, help="--data webdataset without an index.json (shards "
        "ampbench-shards did not write): the training images in one epoch of the shards")
    skip_bad_images: bool = setting(
        "--skip-bad-images", action="store_true",
        record=POOLED, resume=FREE, adviser=PASSED,
        help="--data imagefolder and webdataset: leave out the files (samples) that are not whole images (empty, "
        "truncated, not an image, unreadable), counted and recorded in the results, instead of stopping at the "
        "first",
        doc="{help}; see [Bad data](data-and-models.md#bad-data)")

    @property
    def input_shape(self) -> InputShape:
        return input_shape_of(self.image_size)


@dataclass(frozen=True)
class Speed(Section):
    """The speed levers."""
    GROUP = "speed levers"
    channels_last: bool = setting(
        "--channels-last", action="store_true",
        record=STEP_TIMES, resume=refused(MIXED_TIMINGS), adviser=LEVER,
        help="model and inputs in channels_last memory format (tensor cores for convolutions)")
    compile: bool = setting(
        "--compile", action="store_true",
        record=STEP_TIMES, resume=refused(MIXED_TIMINGS), adviser=LEVER,
        help="torch.compile the model; compile time is reported apart from step times")
    compile_mode: str = setting(
        "--compile-mode", default="default",
        choices=("default", "reduce-overhead", "max-autotune", "max-autotune-no-cudagraphs"),
        record=POOLED, resume=refused(MIXED_TIMINGS), adviser=LEVER, help="torch.compile mode (default %(default)s)")
    no_cudnn_benchmark: bool = setting(
        "--no-cudnn-benchmark", action="store_true",
        record=POOLED, resume=refused(MIXED_TIMINGS), adviser=PASSED,
        help="turn off cuDNN autotuning (on by default on CUDA)")

    @property
    def cudnn_benchmark(self) -> bool:
        return not self.no_cudnn_benchmark


@dataclass(frozen=True)
class Measurement(Section):
    """What is measured beside the step times, and where the results go."""
    GROUP = "measurement and output"
    timing_warmup: Optional[int] = setting(  # steps left out of the timings; None: settled with the steps
        "--timing-warmup", key="warmup", range=COUNT_OR_ZERO, metavar="N",
        record=STEP_TIMES, recorded_always=True, resume=FREE, adviser=OWNED,
        help=f"steps excluded from timing statistics (default {DEFAULT_TIMING_WARMUP}, at most half of the run)",
        doc="{help}; a run shorter than twice the default warms up for half of its steps and says so")
    json: Optional[str] = setting(
        "--json", metavar="PATH",
        record=POOLED, resume=FREE, adviser=OWNED, writes=True, help="write the results as one JSON document",
        doc="{help} (folders created, written atomically)")
    csv: Optional[str] = setting(
        "--csv", metavar="PATH",
        record=POOLED, resume=FREE, adviser=OWNED, writes=True,
        help="append one row per mode to a CSV file (header once)")
    plot: Optional[str] = setting(
        "--plot", metavar="PATH.png",
        record=POOLED, resume=FREE, adviser=OWNED, writes=True,
        help="draw step-time distributions and speedups as .png, .pdf or .svg (needs matplotlib)",
        doc="{help}; the figure also shows the speedups' intervals, memory and accuracy; matplotlib must be 3.5 or "
        "newer")
    tensorboard: Optional[str] = setting(
        "--tensorboard", metavar="DIR",
        record=POOLED, resume=FREE, adviser=OWNED, writes=True,
        help="write TensorBoard logs under DIR while training: each run's loss, lr, loss scale and accuracy at the "
        "log's cadence, then its step ms, img/s and hparams (needs tensorboard)",
        doc="{help}; see " + COMPARING_LINK)
    jsonl: Optional[str] = setting(
        "--jsonl", metavar="PATH",
        record=POOLED, resume=FREE, adviser=OWNED, writes=True,
        help="append one JSON line per phase, per log interval and per run to PATH while training (what a killed "
        "run leaves)",
        doc="{help}; each evaluation gets a line too; see " + COMPARING_LINK)
    explain: bool = setting(  # resolved: implied by --explain-steps and --trace-dir
        "--explain", action="store_true",
        record=POOLED, resume=FREE, adviser=OWNED,
        help="after each mode's timed steps, profile a few more (torch.profiler) and report where the step time "
        "goes by category, against fp32, with a diagnosis",
        doc="{help}; see [Why is it (not) faster?](explain.md)")
    explain_steps: int = setting(  # resolved: EXPLAIN_STEPS where not given
        "--explain-steps", range=COUNT, metavar="N",
        record=POOLED, resume=FREE, adviser=OWNED,
        help=f"steps --explain profiles per mode, besides one warm-up (default {EXPLAIN_STEPS}; implies --explain)")
    trace_dir: Optional[str] = setting(
        "--trace-dir", metavar="DIR",
        record=POOLED, resume=FREE, adviser=OWNED, writes=True,
        help="write each mode's profiled steps as a Chrome/Perfetto trace under DIR, to open in ui.perfetto.dev or "
        "TensorBoard (implies --explain)")
    numerics: bool = setting(  # resolved: implied by --numerics-every
        "--numerics", action="store_true",
        record=POOLED, resume=FREE, adviser=OWNED,
        help="on sampled steps, compare each layer's low-precision gradients with an FP32 backward of the same "
        "batch (underflow, subnormals, overflow: why FP16 needs loss scaling) and measure where the step's memory "
        "goes",
        doc="{help}; see [Why loss scaling?](numerics-and-memory.md#why-loss-scaling---numerics)")
    numerics_every: int = setting(  # resolved: NUMERICS_EVERY where not given
        "--numerics-every", range=COUNT, metavar="N",
        record=POOLED, resume=FREE, adviser=OWNED,
        help=f"--numerics samples every N steps and the last (default {NUMERICS_EVERY}; implies --numerics); the "
        "samples are left out of the step times")
    max_batch: bool = setting(
        "--max-batch", action="store_true",
        record=POOLED, resume=FREE, adviser=OWNED,
        help="CUDA: after each mode's run, find the largest batch it trains in this GPU's memory (doubling, then "
        "bisection)")
    wide: bool = setting(
        "--wide", action="store_true",
        record=POOLED, resume=FREE, adviser=KEPT,
        help="print the results as one wide table instead of blocks that fit 80 columns")
    no_progress: bool = setting(
        "--no-progress", action="store_true",
        record=POOLED, resume=FREE, adviser=KEPT, help="no progress bar and no progress lines")
    log_every: Optional[int] = setting(
        "--log-every", range=COUNT, metavar="N",
        record=POOLED, resume=FREE, adviser=KEPT,
        help="when stderr is not a terminal (batch jobs), a progress line every N steps (default: about every 30 s)")


@dataclass(frozen=True)
class Distributed(Section):
    GROUP = "distributed (launch with torchrun or mpirun; -b is per process)"
    dist_timeout: int = setting(
        "--dist-timeout", default=600, range=COUNT, metavar="S",
        record=POOLED, resume=FREE, adviser=PASSED,
        help="seconds the rendezvous and each collective may wait for the other ranks before the job fails "
        "(default %(default)s)")
    grad_comm: str = setting(
        "--grad-comm", default="fp32", choices=GRAD_COMM,
        record=STEP_TIMES, resume=refused(MIXED_TIMINGS), adviser=PASSED,
        help="the dtype DDP all-reduces gradients in: fp32 (default), or fp16/bf16 through PyTorch's compression "
        "hooks (half the bytes; the optimizer still steps in FP32)",
        doc="{help}; the hooks are `fp16_compress_hook` and `bf16_compress_hook`; refused in a single process and "
        "where the backend cannot all-reduce the dtype; see "
        "[Gradient communication](long-runs-and-clusters.md#gradient-communication---grad-comm---bucket-mb)")
    bucket_mb: Optional[float] = setting(  # None: DDP's own (grad_comm.DDP_BUCKET_MB)
        "--bucket-mb", metavar="MB",
        range=Range(float, 0, LARGEST_BUCKET_MB, f"a positive number of MB up to {LARGEST_BUCKET_MB} (1 TiB)",
                    low_open=True),
        record=STEP_TIMES, resume=refused(MIXED_TIMINGS), adviser=PASSED,
        help=f"DDP's gradient bucket size in MB (bucket_cap_mb; default DDP's own, {DDP_BUCKET_MB:g})",
        doc="{help}; refused in a single process")


@dataclass(frozen=True)
class Checkpoints(Section):
    GROUP = "checkpoints"
    checkpoint: Optional[str] = setting(
        "--checkpoint", metavar="PATH",
        record=POOLED, resume=FREE, adviser=OWNED, writes=True,
        help="save a checkpoint here at the end, when stopped, and every --checkpoint-every steps",
        doc="{help}; see " + LONG_RUNS_LINK)
    checkpoint_every: int = setting(
        "--checkpoint-every", default=0, range=COUNT_OR_ZERO, metavar="K",
        record=POOLED, resume=FREE, adviser=OWNED,
        help="also save every K steps (default 0: only at the end and when stopped)")
    resume: bool = setting(
        "--resume", action="store_true",
        record=POOLED, resume=FREE, adviser=OWNED, help="continue from --checkpoint")

    @property
    def resume_from(self) -> Optional[str]:
        """The checkpoint a run continues: --checkpoint's with --resume (refused without it), else None."""
        return self.checkpoint if self.resume else None


@dataclass(frozen=True)
class Advice(Section):
    """--advise: measure within a budget and say which precision and speed levers to train with,
    or decide from saved results alone (`from_results`)."""
    GROUP = "which precision should I train with?"
    advise: bool = setting(
        "--advise", action="store_true",
        record=POOLED, resume=FREE, adviser=KEPT,
        help="measure this model, batch and data on this machine within --budget and say which precision mode and "
        "speed levers to train with, each sentence with its evidence; the model and data flags are passed to every "
        "run it makes",
        doc="{help}; writes a report, advice.json and the results it rests on into --advice-dir; see "
        "[Which precision should I train with?](advice.md)")
    budget: Optional[float] = setting(  # None when not given, so that it can be refused without --advise
        "--budget", range=POSITIVE, metavar="MINUTES",
        record=POOLED, resume=FREE, adviser=ADVICE,
        help=f"the wall time --advise may spend, in minutes (default {DEFAULT_BUDGET_MINUTES:g}); refused below what "
        "one comparison of two modes needs here")
    from_results: Optional[str] = setting(
        "--from", metavar="RESULTS.json",
        record=POOLED, resume=FREE, adviser=ADVICE,
        help="with --advise: decide from saved results instead of training: a --json file, the list python -m "
        "utils.report --json writes, or an advice.json")
    advice_dir: Optional[str] = setting(  # None: a folder of its own under ./advice
        "--advice-dir", metavar="DIR",
        record=POOLED, resume=FREE, adviser=ADVICE,
        help="where --advise writes report.txt, advice.json, results.json and each run's log (default: "
        "advice/MODEL-UTC TIME)")

    @property
    def budget_minutes(self) -> float:
        return self.budget or DEFAULT_BUDGET_MINUTES


# RunConfig's sections, in -h's order, and every setting of them by its key.
SECTIONS: Tuple[Tuple[str, Type[Section]], ...] = (
    ("training", Training), ("accuracy", Accuracy), ("actions", Actions), ("precision", Precision),
    ("data", DataSettings), ("speed", Speed), ("measurement", Measurement), ("distributed", Distributed),
    ("checkpoints", Checkpoints), ("advice", Advice))
SETTINGS = settings_of(SECTIONS)
# The settings by their roles (utils/settings.py's Flag), in -h's order. Runs are merged into one
# comparison only where the settings that change the step times and those that change the
# accuracy question match (utils/results/record.py's setup_of, which adds the device, torch, ranks
# and data); each is a CSV column; a checkpoint holds them.
SETUP_KEYS = keys_with(SETTINGS, lambda flag: flag.record == STEP_TIMES)
ACCURACY_KEYS = keys_with(SETTINGS, lambda flag: flag.record == VERDICT)
RECORDED_ALWAYS = keys_with(SETTINGS, lambda flag: flag.recorded_always)  # in every release's results files
JOB_KEYS = keys_with(SETTINGS, lambda flag: flag.job)  # what the batch-job scripts type themselves
# What a resume checks in every checkpoint's config, and what it refuses to change where the
# checkpoint holds it (earlier releases' lack some), with why.
RESUME_KEYS = keys_with(SETTINGS, lambda flag: flag.resume.always)
RESUME_SETTINGS = {key: SETTINGS[key].flag.resume.why for key in keys_with(
    SETTINGS, lambda flag: flag.resume.refused and not flag.resume.always)}
OUTPUT_FLAGS = keys_with(SETTINGS, lambda flag: flag.writes)  # the files and folders a run writes
# What --advise decides or writes itself, and so refuses from the command line: the precision
# modes, their repeats and seeds, the timing and the measurements each phase takes, the outputs.
# (--check-flags with --advise checks the adviser's own command, before a batch job queues it.)
ADVISER_SETS = keys_with(SETTINGS, lambda flag: flag.adviser == OWNED)
ADVICE_ONLY = keys_with(SETTINGS, lambda flag: flag.adviser == ADVICE)  # flags that only --advise reads
NOT_PASSED = keys_with(SETTINGS, lambda flag: flag.adviser in (OWNED, ADVICE, KEPT))  # no phase takes them
LENGTH_KEYS = keys_with(SETTINGS, lambda flag: flag.adviser == LENGTH)  # a run's length: steps or epochs
NAMED_KEYS = keys_with(SETTINGS, lambda flag: flag.adviser == NAMED)  # in every command, at their defaults too
LEVER_KEYS = keys_with(SETTINGS, lambda flag: flag.adviser == LEVER)  # the speed levers' settings


def record_kind(key: str) -> type:
    """The type of setting `key`'s value in a results file or a checkpoint (None aside): a
    number's kind, bool for a switch, else str."""
    flag = SETTINGS[key].flag
    return flag.range.kind if flag.range else bool if flag.action in ("store_true", "store_false") else str
# Every numeric setting's range, checked by main.py's parser and by RunConfig.build (for configs built in code).
RANGES = {key: each.flag.range for key, each in SETTINGS.items() if each.flag.range is not None}


def add_flag(parser: argparse._ActionsContainer, key: str, **own: Any) -> argparse.Action:
    """Add main.py's setting `key` to `parser` (main.py's, or a study's in benchmarks/ that shares
    the setting): the flag's names, range, choices, metavar, action, help and default, its value
    under `key`; `own` replaces any of them (a study's own default or help, main.py's action, an
    earlier spelling's names)."""
    flag = SETTINGS[key].flag
    names = own.pop("names", flag.names)
    details = {"dest": key, "action": flag.action, "choices": flag.choices, "metavar": flag.metavar,
               "type": flag.range and flag_type(flag.range), "help": flag.help, "default": flag.default, **own}
    return parser.add_argument(*names, **{name: value for name, value in details.items() if value is not None})


def flag_names(key: str) -> str:
    """How a sentence about every rank's flags names the setting `key`: its flag with that flag's
    earlier spellings (--timing-warmup/--warmup), as any rank may have typed it; a switch that
    turns its setting off (--no-download) as the setting itself, which on and off describe."""
    setting = SETTINGS.get(key)
    if setting is None or setting.flag.action == "store_false":
        return "--" + key.replace("_", "-")
    return "/".join([setting.name, *(typed for typed, now in spellings.RENAMED.items() if now == setting.name)])


def defaults() -> Dict[str, Any]:
    """{setting: its value when not given}, for main.py's parser and RunConfig.build."""
    return {key: each.default() for key, each in SETTINGS.items()}


def at_default(key: str, value: Any) -> bool:
    """Whether `value` is setting `key`'s default, of its type too (True is no --repeats 1)."""
    default = SETTINGS[key].default()
    return type(value) is type(default) and value == default


def command_line(**given: Any) -> Dict[str, Any]:
    """A command line as its settings by key: those `given`, every other at its default (what
    --advise passes on to the runs it starts, and rebuilds their flags from)."""
    return {**defaults(), **given}


def flag_words(key: str, value: Any, spelled: Optional[str] = None) -> List[str]:
    """The words that set `key` to `value` on main.py's command line, as main.py reads them back:
    its flag typed as `spelled` (another of its names, or the earlier precision spelling that names
    the mode `value`, --fp16 -s), else as its first name; a switch typed where `value` is not its
    default, nothing where it is."""
    setting = SETTINGS[key]
    name = spelled or setting.name
    if tuple(name.split()) in spellings.MODE_OF:
        if spellings.MODE_OF[tuple(name.split())] != value:
            raise ValueError(f"{name} names --modes {spellings.MODE_OF[tuple(name.split())]}, not {value}")
        return name.split()
    if name not in setting.flag.names:
        raise ValueError(f"{name} is not a name of {setting.name}")
    if setting.flag.action in ("store_true", "store_false"):
        return [name] if value != setting.default() else []
    return [name, str(value)]


@dataclass(frozen=True)
class Recipe:
    """The model family's recipe (models/families.py) where the flags left a setting unset: the
    optimizer and its settings, the label smoothing and the learning rate's linear warm-up."""
    family: str  # convnet or transformer
    optimizer: str
    lr: float
    momentum: Optional[float]  # SGD's; None with AdamW
    weight_decay: float
    label_smoothing: float
    lr_warmup_steps: int


@dataclass(frozen=True)
class TrainingPlan:
    """What a run settles once its data and model are known: how many steps it trains (the
    steps of --epochs come from the dataset's size), how many of them warm up before the timing
    starts, and the recipe (whose learning rate scales with the global batch and depends on the
    model's batch norms)."""
    steps: int
    timing_warmup: int
    recipe: Recipe
    num_classes: int = families.DEFAULT_NUM_CLASSES  # the classes of the data's labels and the model's output
    model_class: Optional[str] = None  # the built model's class, with its module (where the caller knows it)
    model_output: Optional[str] = None  # what of its output is taken as the logits, where it is not them alone
    loader: str = "device"  # the loader that makes the batches: --loader's, auto settled (by the data)


@dataclass(frozen=True)
class RunConfig:
    training: Training
    accuracy: Accuracy
    actions: Actions
    precision: Precision
    data: DataSettings
    speed: Speed
    measurement: Measurement
    distributed: Distributed
    checkpoints: Checkpoints
    advice: Advice
    warnings: Tuple[str, ...]  # flags accepted but without effect, said once when the run starts
    given: Dict[str, Any]  # the settings the command line set away from their defaults, by key, as parsed
    spelled: Dict[str, str] = field(default_factory=dict, compare=False)  # setting: the name its flag was typed as
    command: Tuple[str, ...] = ()  # main.py's arguments in current spellings, as a resume line repeats them

    @classmethod
    def from_args(cls, namespace: argparse.Namespace) -> RunConfig:
        """The config for main.py's parsed arguments: their values, and what main.py's parser
        keeps beside them (how each flag was typed, the earlier spellings' warnings, the command
        line in current spellings)."""
        values = dict(vars(namespace))
        return cls.build(spelled=values.pop("spelled", {}), warnings=values.pop("warnings", ()),
                         command=values.pop("command", ()), **values)

    @classmethod
    def build(cls, spelled: Optional[Dict[str, str]] = None, warnings: Sequence[str] = (),
              command: Sequence[str] = (), **values: Any) -> RunConfig:
        """A validated config from setting values (by key; defaults for the rest): the ranges of
        those given and what --advise owns checked, each section filled from its settings as
        resolve() settles those whose default the run decides, then every rule between the
        sections checked (check_rules)."""
        unknown = sorted(set(values) - set(SETTINGS))
        if unknown:
            raise TypeError(f"RunConfig.build() got settings it does not have: {', '.join(unknown)}")
        given = {key: value for key, value in values.items() if not at_default(key, value)}
        spelled = dict(spelled or {})
        check_ranges(given=given)
        values = command_line(**given)
        check_advice_flags(advice=Advice(**section_values("advice", values)),
                           actions=Actions(**section_values("actions", values)), given=given, spelled=spelled)
        settled = resolve(values)
        sections = {attribute: section(**section_values(attribute, settled)) for attribute, section in SECTIONS}
        config = cls(**sections, warnings=tuple(warnings), given=given, spelled=spelled,  # type: ignore[arg-type]
                     command=tuple(command))
        config.check_rules()
        if config.training.steps is not None:  # the steps are known: the timing's warm-up is checked against them now
            config.length(config.training.steps)
        for steps in mode_steps_of(config.precision.mode_steps).values():
            config.length(steps)
        return config

    def check_rules(self) -> None:
        """Every rule between the settled sections, in the order a user meets them."""
        precision, training, given = self.precision, self.training, self.given
        check_baseline(precision=precision, given=given)
        check_mode_steps(training=training, precision=precision, checkpoints=self.checkpoints)
        check_model_flags(training=training, data=self.data, given=given)
        check_data_flags(data=self.data, precision=precision)
        check_output_paths(given=given)
        check_precision_flags(precision=precision, given=given)
        check_run_flags(training=training, accuracy=self.accuracy, distributed=self.distributed, given=given)
        check_optimizer_flags(training=training)
        check_device_flags(precision=precision, measurement=self.measurement, checkpoints=self.checkpoints)
        check_accuracy_flags(training=training, accuracy=self.accuracy, data=self.data)
        one_run = len(precision.modes) == 1 and precision.repeats == 1 and self.accuracy.seeds == 1
        if self.checkpoints.checkpoint and not one_run:
            raise UserError("--checkpoint works with one precision mode, one seed and no --repeats; run each mode "
                            "and seed as a job of its own and merge the results with python -m utils.report.")

    @property
    def command_line(self) -> Dict[str, Any]:
        """The command line as parsed: every setting by key, as given or at its default."""
        return command_line(**self.given)

    @property
    def list_models(self) -> bool:
        return self.actions.list_models

    @property
    def check_flags(self) -> bool:
        return self.actions.check_flags

    @property
    def modes(self) -> Tuple[Mode, ...]:
        return self.precision.modes

    def flag(self, setting: str, name: str) -> str:
        """The name a message gives `setting`'s flag: the one the user typed, else `name`, its current one."""
        return self.spelled.get(setting, name)

    def length(self, steps: int) -> Tuple[int, int]:
        """(steps, the timing's warm-up) for a run of `steps` steps, checked: the warm-up's
        default shrinks to half of a short run, so that `-n 5` times 3 steps instead of being
        refused."""
        warmup = self.measurement.timing_warmup
        if warmup is None:
            warmup = min(DEFAULT_TIMING_WARMUP, steps // 2)
        timing_flag = self.flag("warmup", "--timing-warmup")
        if self.speed.compile and warmup == 0:
            raise UserError(f"--compile needs {timing_flag} 1 or more (and at least 2 steps): the first step "
                            "compiles, and it must stay out of the step statistics.")
        if warmup >= steps:
            steps_flag = "--epochs" if self.training.epochs is not None else self.flag("steps", "--steps")
            raise UserError(f"{timing_flag} ({warmup}) must be smaller than the {steps} steps to run so that "
                            f"some steps are timed; lower {timing_flag} or raise {steps_flag}.")
        lr_warmup = self.training.lr_warmup_steps
        if lr_warmup is not None and lr_warmup >= steps:
            raise UserError(f"{self.flag('warmup_lr_steps', '--lr-warmup-steps')} ({lr_warmup}) must be smaller than "
                            f"the {steps} steps to run.")
        return steps, warmup

    def plan(self, batch_norm: bool, world_size: int, train_images: Optional[int] = None,
             num_classes: Optional[int] = None, model_class: Optional[str] = None,
             model_output: Optional[str] = None, loader: Optional[str] = None) -> TrainingPlan:
        """The run's TrainingPlan: its steps (with --epochs, from `train_images`, which is then
        needed) checked against the dataset's size, its timing warm-up and the model family's
        recipe, `batch_norm` saying whether the model has batch norms; the data's `num_classes`
        (else --num-classes', else CIFAR-10's), the built model's class, `model_class`, what of
        its output is the logits, `model_output` (ImageClassifierOutput.logits), and the loader
        that makes the batches: the data's `loader` where it settled one (an image folder's, for
        --loader auto), else --loader's, auto being the device loader."""
        training = self.training
        if train_images is not None and training.batch_size * world_size > train_images:
            raise UserError(f"a batch of {training.batch_size} images"
                            f"{f' on each of {world_size} ranks' if world_size > 1 else ''} is more than the "
                            f"{train_images} training images hold; lower --batch-size/-b.")
        steps = training.steps
        if steps is None:
            if train_images is None or training.epochs is None:
                raise ValueError("a run of --epochs is planned with the dataset's size")
            steps = math.ceil(training.epochs * self.steps_per_epoch(train_images, world_size))
            if steps > LARGEST_COUNT:
                raise UserError(f"--epochs {training.epochs:g} is {steps} steps, more than the {LARGEST_COUNT} a run "
                                "can count; lower --epochs.")
        steps, warmup = self.length(max(1, steps))
        every = self.eval_every_steps(train_images, world_size) if train_images is not None else None
        if every is not None and every > steps:
            raise UserError(f"--eval-every {self.accuracy.eval_every:g} epochs is {every} steps, more than the {steps} "
                            "of the run; lower --eval-every (fractions of an epoch are allowed).")
        return TrainingPlan(steps=steps, timing_warmup=warmup, recipe=self.recipe(batch_norm, world_size, steps),
                            num_classes=num_classes or self.data.num_classes or families.DEFAULT_NUM_CLASSES,
                            model_class=model_class, model_output=model_output,
                            loader=loader or loader_of(self.data.loader))

    def plan_of(self, plan: TrainingPlan, mode: str) -> TrainingPlan:
        """The run plan of `mode`: `plan`, or with --mode-steps its own steps, timing warm-up and
        learning-rate warm-up (its schedule spans its own steps)."""
        steps = mode_steps_of(self.precision.mode_steps).get(mode)
        if steps is None:
            return plan
        steps, warmup = self.length(steps)
        return dataclasses.replace(plan, steps=steps, timing_warmup=warmup,
                                   recipe=dataclasses.replace(plan.recipe, lr_warmup_steps=self.lr_warmup(steps)))

    def lr_warmup(self, steps: int) -> int:
        """The learning rate's warm-up steps in a run of `steps`: --lr-warmup-steps, else a share of
        the steps (one-cycle ramps up by itself, over 30% of them)."""
        given = self.training.lr_warmup_steps
        if given is not None:
            return given
        return 0 if self.training.lr_schedule == "onecycle" else round(LR_WARMUP_SHARE * steps)

    def recipe(self, batch_norm: bool, world_size: int, steps: int) -> Recipe:
        """The model family's recipe (models/families.py) where the flags left a setting unset;
        the lr scales with the global batch."""
        training = self.training
        family = families.recipe_name(training.model, training.model_factory is not None)
        defaults_of_family = families.RECIPES[family]
        optimizer = training.optimizer or defaults_of_family.optimizer
        defaults_of_optimizer = families.OPTIMIZER_DEFAULTS[optimizer]
        lr = training.lr
        if lr is None:
            lr = defaults_of_optimizer.lr(training.global_batch_size(world_size), batch_norm)
        return Recipe(
            family=family, optimizer=optimizer, lr=lr, lr_warmup_steps=self.lr_warmup(steps),
            momentum=defaults_of_optimizer.momentum if training.momentum is None else training.momentum,
            weight_decay=defaults_of_optimizer.weight_decay if training.weight_decay is None else training.weight_decay,
            label_smoothing=(defaults_of_family.label_smoothing if training.label_smoothing is None
                             else training.label_smoothing))

    def short_run_note(self, plan: TrainingPlan) -> Optional[str]:
        """A sentence when the warm-up is half of a short run: the timings rest on few steps."""
        steps, warmup = plan.steps, plan.timing_warmup
        if steps < 2 * DEFAULT_TIMING_WARMUP and warmup == steps // 2:
            return (f"the warm-up is {warmup} of the {steps} steps (the default is {DEFAULT_TIMING_WARMUP}, at most "
                    f"half of a run), so the timings rest on {steps - warmup} steps; run more steps for steadier "
                    "figures.")
        return None

    def steps_per_epoch(self, train_images: int, ranks: int) -> float:
        return steps_per_epoch(self.training, self.data, train_images, ranks)

    def eval_every_steps(self, train_images: int, ranks: int) -> Optional[int]:
        """--eval-every in steps (at least one), or None."""
        if not self.accuracy.eval_every:
            return None
        return max(1, round(self.accuracy.eval_every * self.steps_per_epoch(train_images, ranks)))

    def check_world(self, ranks: int) -> None:
        """Refuse the settings of gradient communication in a job of one process, which has none."""
        distributed = self.distributed
        given = ([f"--grad-comm {distributed.grad_comm}"] if distributed.grad_comm != "fp32" else []) + \
            ([f"--bucket-mb {distributed.bucket_mb:g}"] if distributed.bucket_mb else [])
        if ranks == 1 and given:
            raise UserError(f"{' and '.join(given)} {'set' if len(given) > 1 else 'sets'} how DDP sends gradients "
                            "between processes, and this run is a single process; launch it on 2 or more ranks "
                            "(torchrun, mpirun) or drop the flag.")

    @property
    def accuracy_flags(self) -> List[str]:
        return accuracy_flags(self.accuracy)

    def record(self, plan: Optional[TrainingPlan] = None) -> Dict[str, Any]:
        """The results file's `config`: every setting by its key, as its section holds it (the
        model, the stem, the baseline, the loss scale and what --explain-steps, --trace-dir and
        --numerics-every imply resolved); `modes` as given (the section holds the Mode tuple);
        the steps and the timing warm-up once the steps are known; with `plan`, the recipe (as
        `recipe`, the family whose defaults filled the unset settings, or `user`), the classes, the
        model's class, what of its output is the logits and the loader that made the batches
        (--loader auto settled)."""
        resolved: Dict[str, Any] = {}
        for key, each in SETTINGS.items():
            resolved[key] = getattr(getattr(self, each.section), each.field)
            if key == "optimizer":
                resolved["recipe"] = None  # beside the optimizer, as the results files of earlier releases hold it
        resolved["modes"] = self.given.get("modes")
        if self.training.steps is not None:
            resolved.update(zip(("steps", "warmup"), self.length(self.training.steps)))
        if plan is not None:
            recipe = plan.recipe
            resolved.update(steps=plan.steps, warmup=plan.timing_warmup, lr=recipe.lr, optimizer=recipe.optimizer,
                            recipe=recipe.family, momentum=recipe.momentum, weight_decay=recipe.weight_decay,
                            label_smoothing=recipe.label_smoothing, warmup_lr_steps=recipe.lr_warmup_steps,
                            num_classes=plan.num_classes, model_class=plan.model_class,
                            model_output=plan.model_output, loader=plan.loader)
        return resolved


def steps_per_epoch(training: Training, data: DataSettings, train_images: int, ranks: int) -> float:
    """Optimizer steps in one epoch of `train_images` (a fraction with --accum-steps)."""
    return batches_per_epoch(data.loader, train_images, training.batch_size, ranks) / training.accum_steps


def loader_of(asked: str) -> str:
    """The loader --loader `asked` makes batches of data held in memory with: auto's is the device loader."""
    return "device" if asked == "auto" else asked


def batches_per_epoch(kind: str, images: int, batch_size: int, ranks: int) -> int:
    """Global batches in one epoch: the device loader and the streamed one (as auto, which is
    either) complete the last partial batch from the next epoch (rounds up); the torchvision
    DataLoader path drops it, after DistributedSampler has dropped the images that do not divide
    among the ranks (rounds down)."""
    if kind == "torchvision":
        return images // ranks // batch_size
    return -(-images // (batch_size * ranks))


def section_values(attribute: str, values: Dict[str, Any]) -> Dict[str, Any]:
    """{field: value} of the section RunConfig holds as `attribute`, from settings `values` by key."""
    return {each.field: values[key] for key, each in SETTINGS.items() if each.section == attribute}


def resolve(values: Dict[str, Any]) -> Dict[str, Any]:
    """Every setting as its section holds it, from the command line's `values` (every setting by
    key): as given, but those whose default the run decides, settled: the modes (modes_of's), the
    model (--model-factory's, which replaces -m's), the stem (the image size's), the steps (none
    with --epochs, whose steps the dataset settles), the baseline and fp16-master's loss scale,
    --mode-steps in the modes' order, and the measurements the flags that tune them ask for
    (--explain-steps and --trace-dir imply --explain, --numerics-every --numerics: never silently
    ignored)."""
    modes = modes_of(modes=values["modes"], compare=values["compare"], gpu=values["gpu"])
    return {**values, "model": values["model_factory"] or values["model"],
            "stem": values["stem"] or families.default_stem(values["image_size"]),
            "steps": None if values["epochs"] is not None else values["steps"] or DEFAULT_STEPS, "modes": modes,
            "baseline": values["baseline"] or BASELINES["default"],
            "loss_scale": values["loss_scale"] or DEFAULT_LOSS_SCALE,
            "mode_steps": ",".join(f"{mode}={steps}" for mode, steps in
                                   mode_steps_of(values["mode_steps"], [mode.name for mode in modes]).items()) or None,
            "explain": values["explain"] or values["explain_steps"] is not None or bool(values["trace_dir"]),
            "explain_steps": values["explain_steps"] or EXPLAIN_STEPS,
            "numerics": values["numerics"] or values["numerics_every"] is not None,
            "numerics_every": values["numerics_every"] or NUMERICS_EVERY}


def modes_of(*, modes: Optional[str], compare: bool, gpu: bool) -> Tuple[Mode, ...]:
    """The one translation of the precision flags into the modes to run, in order: --modes, else
    --compare's default (which depends on the device, -p), else fp32. The earlier spellings (--fp16
    -s, --bf16, --amp, --tf32) arrive as --modes (utils/spellings.py)."""
    if modes is not None:
        return tuple(parse_modes(modes))
    if compare:
        return tuple(MODES[name] for name in (DEFAULT_COMPARE if gpu else DEFAULT_COMPARE_CPU))
    return (MODES[BASELINES["default"]],)


def check_ranges(*, given: Dict[str, Any]) -> None:
    """Every numeric setting `given` within its range, as main.py's parser checks its flags; here
    for configs built in code (benchmarks, tests) too."""
    for key, value in given.items():
        allowed = RANGES.get(key)
        if allowed is not None and value is not None and not allowed.accepts(value):
            raise UserError(f"{SETTINGS[key].name} must be {allowed.wording}, got {value!r}.")


def named(given: Dict[str, Any], keys: Sequence[str], spelled: Dict[str, str]) -> List[str]:
    """The flags of the settings `keys` that the command line gave (`given`), as typed
    (`spelled`), else as -h names them: --json, --from."""
    return [spelled.get(key, SETTINGS[key].name) for key in keys if key in given]


def check_advice_flags(*, advice: Advice, actions: Actions, given: Dict[str, Any], spelled: Dict[str, str]) -> None:
    """--advise owns the flags of ADVISER_SETS; --budget, --from and --advice-dir need it, and
    --from measures nothing, so it takes no --budget."""
    if not advice.advise:
        needs = named(given, ADVICE_ONLY, spelled)
        if needs:
            raise UserError(f"{needs[0]} applies to --advise, which is not given; add --advise or drop {needs[0]}.")
        return
    owned = named(given, ADVISER_SETS, spelled)
    if owned:
        raise UserError(f"--advise chooses the precision modes, repeats, seeds, measurements and outputs of its "
                        f"phases itself; drop {owned[0]} (the advice names the mode and flags to train with, and "
                        "--advice-dir where it writes).")
    if advice.from_results is not None and advice.budget is not None:
        raise UserError("--budget limits the time --advise measures, and --from measures nothing: drop --budget.")
    if advice.from_results is not None and actions.check_flags:
        raise UserError("--check-flags checks the command --advise would measure with, and --from measures nothing: "
                        "drop --check-flags.")


def check_baseline(*, precision: Precision, given: Dict[str, Any]) -> None:
    names = [mode.name for mode in precision.modes]
    if "baseline" in given and precision.baseline not in names:
        raise UserError(f"--baseline {precision.baseline} is not among the modes this run trains ({', '.join(names)}); "
                        f"add it to --modes or choose one of them.")


def mode_steps_of(text: Optional[str], names: Sequence[str] = ()) -> Dict[str, int]:
    """--mode-steps MODE=N,... as {mode: N} in the order of `names` (the run's modes), else as
    typed; a UserError where an entry is no MODE=N with N in COUNT's range, or names a mode twice
    or, where `names` are given, one this run does not train."""
    found: Dict[str, int] = {}
    for entry in (text or "").split(",") if text is not None else []:
        mode, equals, count = entry.strip().partition("=")
        steps = int(count) if count.strip().isdigit() else None
        if not equals or steps is None or not COUNT.holds(steps):
            raise UserError(f"--mode-steps takes MODE=N entries, N {COUNT.wording}, separated by commas "
                            f"(fp32=140,amp-bf16=460); got {console.shortened(entry.strip()) or 'an empty one'}.")
        if mode in found:
            raise UserError(f"--mode-steps names {mode} twice; give each mode's steps once.")
        if names and mode not in names:
            raise UserError(f"--mode-steps names {console.shortened(mode)}, which this run does not train "
                            f"({', '.join(names)}); add it to --modes or drop its entry.")
        found[mode] = steps
    return {name: found[name] for name in names if name in found} if names else found


def check_mode_steps(*, training: Training, precision: Precision, checkpoints: Checkpoints) -> None:
    """--mode-steps (its entries checked as it settled): a run of steps (not --epochs), no
    accuracy (the modes stop at different steps) and no checkpoint (a resume continues --steps)."""
    if precision.mode_steps is None:
        return
    clash = next((flag for flag, given in (("--epochs", training.epochs is not None),
                                           ("--checkpoint", bool(checkpoints.checkpoint))) if given), None)
    if clash:
        raise UserError(f"--mode-steps sets each mode's steps, and {clash} "
                        + ("sets one length for every mode" if clash == "--epochs" else "resumes one run of --steps")
                        + "; drop one of them.")
    if not training.no_eval:
        raise UserError("--mode-steps trains the modes for different numbers of steps, so their test accuracies "
                        "would compare runs of different lengths; add --no-eval (step times, memory and energy "
                        "still compare).")


def unusable_value(key: str, value: Any) -> Optional[str]:
    """Why `value` is not one main.py's parser could have given setting `key` (its type, its
    choices, its range), in words after the flag's name; None when it could. For command lines
    read back from a file (an advice.json's arguments)."""
    setting = SETTINGS[key]
    flag, section = setting.flag, dict(SECTIONS)[setting.section]
    kind = typing.get_type_hints(section)[setting.field]
    optional = type(None) in typing.get_args(kind)
    kinds = [each for each in (typing.get_args(kind) or (kind,)) if each is not type(None)]
    if value is None:
        return None if optional or setting.default() is None else "must be given, got null"
    if flag.action in ("store_true", "store_false") or kinds == [bool]:
        return None if isinstance(value, bool) else f"is a switch (true or false), got {value!r}"
    if flag.choices is not None:
        return None if value in flag.choices else f"must be one of {', '.join(flag.choices)}, got {value!r}"
    if flag.range is not None:
        return None if flag.range.accepts(value) else f"must be {flag.range.wording}, got {value!r}"
    if kinds and all(each in (int, float, str) for each in kinds):
        fits = any(isinstance(value, each) and not isinstance(value, bool) for each in kinds) or \
            (float in kinds and isinstance(value, int) and not isinstance(value, bool))
        return None if fits else f"must be {' or '.join(each.__name__ for each in kinds)}, got {value!r}"
    return None


def check_model_flags(*, training: Training, data: DataSettings, given: Dict[str, Any]) -> None:
    """The model takes the image size, and --stem changes it (or is the size's default, as
    recorded); a model of the user's own (--model-factory) is built as its factory builds it."""
    if training.model_factory is not None:
        factory_spec(training.model_factory)
        if "model" in given:  # the default is what the factory replaces
            raise UserError(f"--model-factory builds the model, and -m/--model {given['model']} names a torchvision "
                            "one; drop -m/--model (the results name the model MODULE:FUNCTION, with its class).")
        if "stem" in given:
            raise UserError("--stem changes the first layers of torchvision's ResNet-family models, and a "
                            "--model-factory model trains as its factory builds it; drop --stem.")
        return
    refusal = families.size_refusal(training.model, data.image_size)
    if refusal:
        raise UserError(refusal)
    if training.stem != families.default_stem(data.image_size) and not families.uses_resnet_stem(training.model):
        raise UserError(f"--stem {training.stem} changes the first conv and max-pool of ResNet-family models, and "
                        f"{training.model} has no such stem: it would be recorded but change nothing; drop --stem.")


def check_data_flags(*, data: DataSettings, precision: Precision) -> None:
    """--num-classes where the data has its own count (CIFAR-10's 10), and the CIFAR-10 flags
    with an image folder, which they would not change."""
    cifar = data.data in ("auto", "cifar10")
    if cifar and data.num_classes not in (None, families.DEFAULT_NUM_CLASSES):
        raise UserError(f"--num-classes {data.num_classes} does not fit --data {data.data}: CIFAR-10 has "
                        f"{families.DEFAULT_NUM_CLASSES} classes; drop --num-classes, or train on --data synthetic "
                        "(labels of that many classes) or --data imagefolder.")
    if data.data in STREAMED_DATA and data.allow_unverified:
        raise UserError(f"--allow-unverified accepts a CIFAR-10 copy whose md5 sums differ, and --data {data.data} "
                        "reads no CIFAR-10; drop --allow-unverified.")
    check_streaming_flags(data=data, gpu=precision.gpu)


def check_streaming_flags(*, data: DataSettings, gpu: bool) -> None:
    """The flags of data read from files as the run trains (--loader stream and dali, --decode,
    --skip-bad-images, --epoch-images) where there is none, or with a loader that holds the data."""
    if data.loader in ("stream", "dali") and data.data not in STREAMED_DATA:
        raise UserError(f"--loader {data.loader} reads an image folder's files (or shards) per batch, and --data "
                        f"{data.data} is held in memory; use --data imagefolder or webdataset, or drop --loader "
                        f"{data.loader}.")
    if data.skip_bad_images and data.data not in STREAMED_DATA:
        raise UserError(f"--skip-bad-images leaves out the image files that cannot be read, and --data {data.data} "
                        "reads none; drop --skip-bad-images.")
    if data.data == "webdataset" and data.loader in ("device", "torchvision"):
        raise UserError(f"--loader {data.loader} holds the data set in memory, and --data webdataset is read from its "
                        "shards as the run trains; drop --loader (or give --loader stream).")
    if data.decode == "gpu" and data.data not in STREAMED_DATA:
        raise UserError(f"--decode gpu decodes each batch's files as the run trains, and --data {data.data} is held "
                        "in memory, decoded before it; drop --decode gpu, or use --data imagefolder or webdataset.")
    if data.decode == "gpu" and data.loader in ("device", "torchvision"):
        raise UserError(f"--decode gpu decodes each batch's files as the run trains, and --loader {data.loader} "
                        "decodes the folder once before it; drop one (--loader stream or auto streams it).")
    if data.decode == "gpu" and not gpu:
        raise UserError("--decode gpu decodes JPEGs on a CUDA GPU, and this run is on the CPU (no -p); add -p/--gpu "
                        "on a GPU node, or drop --decode gpu (the DataLoader workers decode on the CPU).")
    if data.loader == "dali" and not gpu:
        raise UserError("--loader dali runs NVIDIA DALI's pipeline on a CUDA GPU, and this run is on the CPU (no -p); "
                        "add -p/--gpu on a GPU node, or use --loader stream.")
    if data.loader == "dali" and data.data == "webdataset":
        raise UserError("--loader dali reads image folders: DALI's tar reader cannot parse the text labels of "
                        "WebDataset shards; use --loader stream --decode gpu for shards.")
    if data.loader == "dali" and data.skip_bad_images:
        raise UserError("--loader dali stops at a file it cannot decode and cannot leave it out; use --loader stream "
                        "with --skip-bad-images, which names and counts such files.")
    if data.epoch_images is not None and data.data != "webdataset":
        raise UserError("--epoch-images gives the images an epoch of tar shards holds (--data webdataset without an "
                        f"index.json), and --data {data.data} counts its own; drop --epoch-images.")


def check_output_paths(*, given: Dict[str, Any]) -> None:
    empty = [key for key in OUTPUT_FLAGS if given.get(key) == ""]
    if empty:
        flag = "--" + empty[0].replace("_", "-")
        raise UserError(f"{flag} needs a path, and got an empty one; give a path or leave out {flag}.")


def check_precision_flags(*, precision: Precision, given: Dict[str, Any]) -> None:
    """The flags that tune a kind of mode (fp16-master's loss scale, the fp8 modes' emulation)
    where no mode of that kind runs, and an fp8 mode where it cannot run."""
    modes = precision.modes
    if "loss_scale" in given and not any(mode.master_weights for mode in modes):
        raise UserError("--loss-scale sets the static loss scale of fp16-master, which this run does not use "
                        f"({', '.join(mode.name for mode in modes)} scale dynamically or not at all); drop "
                        "--loss-scale or add fp16-master to --modes.")
    if precision.fp8_emulate and not any(mode.float8 for mode in modes):
        raise UserError("--fp8-emulate applies to the fp8 modes, which this run does not use; add "
                        f"{listed([name for name, mode in MODES.items() if mode.float8])} to --modes, or drop "
                        "--fp8-emulate.")
    float8 = [mode.name for mode in modes if mode.float8]
    if float8 and not precision.gpu and not precision.fp8_emulate:  # a flags rule, so that --check-flags refuses it too
        raise UserError(f"mode {float8[0]} {FP8_NEEDS_A_GPU}")


def check_run_flags(*, training: Training, accuracy: Accuracy, distributed: Distributed,
                    given: Dict[str, Any]) -> None:
    if distributed.grad_comm not in GRAD_COMM:
        raise UserError(f"--grad-comm is one of {', '.join(GRAD_COMM)}; got {distributed.grad_comm}.")
    if "steps" in given and training.epochs is not None:
        raise UserError("give either --steps/-n or --epochs, not both.")
    last_seed = training.seed + accuracy.seeds - 1
    if last_seed > LARGEST_SEED:
        raise UserError(f"--seed {training.seed} with --seeds {accuracy.seeds} runs seeds up to {last_seed}, "
                        f"beyond the largest seed {LARGEST_SEED} (2**63-1); lower --seed or --seeds.")


def check_optimizer_flags(*, training: Training) -> None:
    adamw = (training.optimizer or families.recipe_of(training.model, training.model_factory is not None).optimizer
             ) == "adamw"
    if adamw and (training.momentum is not None or training.nesterov):
        flag = "--momentum" if training.momentum is not None else "--nesterov"
        raise UserError(f"{flag} sets SGD's momentum, and {training.model} trains with AdamW here; drop {flag} or "
                        "add --optimizer sgd.")
    if training.nesterov and training.momentum == 0:
        raise UserError("--nesterov needs a non-zero --momentum.")


def check_device_flags(*, precision: Precision, measurement: Measurement, checkpoints: Checkpoints) -> None:
    if checkpoints.resume and not checkpoints.checkpoint:
        raise UserError("--resume needs --checkpoint PATH, the checkpoint to continue from.")
    if measurement.max_batch and not precision.gpu:
        raise UserError("--max-batch measures how large a batch fits in GPU memory: add -p/--gpu on a GPU node.")


def accuracy_flags(accuracy: Accuracy) -> List[str]:
    """The flags given that need test-set evaluations."""
    return [flag for flag, value in (("--eval-every", accuracy.eval_every),
                                     ("--target-accuracy", accuracy.target_accuracy),
                                     ("--stop-at-target", accuracy.stop_at_target)) if value]


def check_accuracy_flags(*, training: Training, accuracy: Accuracy, data: DataSettings) -> None:
    asked = accuracy_flags(accuracy)
    if training.no_eval and asked:
        raise UserError(f"--no-eval skips the evaluations that {asked[0]} needs; drop one of them.")
    if accuracy.stop_at_target and accuracy.target_accuracy is None:
        raise UserError("--stop-at-target needs --target-accuracy A, the accuracy to stop at.")
    if accuracy.target_accuracy is not None and not accuracy.eval_every:
        raise UserError("--target-accuracy needs --eval-every E (epochs) to see when the target is reached.")
    if data.data == "synthetic" and asked:
        raise UserError(no_test_images(asked[0]))


def no_test_images(flag: str, data: str = "synthetic") -> str:
    """Why `flag` cannot be served by a data set without test images: synthetic data, or shards
    without an index.json (`data` "webdataset")."""
    if data == "webdataset":
        return (f"{flag} measures test accuracy, and shards without an index.json have no evaluation shards; write "
                f"them with ampbench-shards (train- and eval- shards), or drop {flag}.")
    return (f"{flag} measures test accuracy, and synthetic data has no test images; use CIFAR-10 (--data cifar10) "
            f"or drop {flag}.")

