"""RunConfig: what the user asked for, in typed sections, built and validated once.

main.py parses the command line into `Arguments`, one field per flag; `RunConfig.build` checks
every rule that involves more than one flag, translates the precision flags (--fp16 [-s],
--bf16, --amp [--amp-dtype], --tf32, --compare, --modes) into one tuple of modes, and hands the
pipeline a frozen RunConfig of sections (training, accuracy, precision, data, speed,
measurement, distributed, checkpoints): each builder reads the sections it needs. What only the
data and the model settle (the steps of --epochs, the family's recipe) is a TrainingPlan of its
own, resolved once in utils/app.py's prepare(); nothing in RunConfig is filled in later.

This module sits at the bottom of the house: the modules that read the config import it, and it
imports none of them (the mode table and the model families lie below it). No torch here: main.py
takes its defaults from `defaults()` and still answers `-h` at once, and a config that breaks a
rule is refused before the slow imports.
"""
from __future__ import annotations

import argparse
import math
import os
import re
from dataclasses import MISSING, asdict, dataclass, field, fields
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple, Union

from models import families
from utils import console
from utils.errors import UserError
from utils.modes import BASELINES, DEFAULT_COMPARE, DEFAULT_COMPARE_CPU, FP8_NEEDS_A_GPU, MODES, Mode, parse_modes
from utils.setup_keys import GRAD_COMM

DEFAULT_STEPS = 200
# Every family's recipe (models/families.py) starts with a linear learning-rate warm-up over this
# share of the steps, then follows --lr-schedule (cosine decay to zero by default).
LR_WARMUP_SHARE = 0.05
LARGEST_COUNT = 2 ** 31 - 1  # the most steps, images or seconds a flag may ask for
LARGEST_FLOAT = 3.4028234663852886e38  # float32's largest finite value: torch holds no larger rate or scale
LARGEST_SEED = 2 ** 63 - 1  # torch.manual_seed's largest
MOST_WORKERS = 256
# DDP holds its bucket size in bytes as a 64-bit integer, which 1e30 MB overflows deep in its
# Reducer; a TiB bucket already holds any model whole.
LARGEST_BUCKET_MB = 2 ** 20
EXPLAIN_STEPS = 5  # steps --explain profiles per mode
NUMERICS_EVERY = 50  # --numerics samples every this many steps, and the last
DEFAULT_TIMING_WARMUP = 10  # steps left out of the timings; a run of fewer than twice as many warms up for half
DEFAULT_LOSS_SCALE = 128.0  # fp16-master's static loss scale
DEFAULT_MARGIN_POINTS = 0.5  # --accuracy-margin: a mode holds within +-0.5 points of the baseline
DEFAULT_BUDGET_MINUTES = 10.0  # --advise's wall time unless --budget says otherwise
OUTPUT_FLAGS = ("json", "csv", "plot", "tensorboard", "jsonl", "trace_dir", "checkpoint")
# One image as a model takes it, (channels, height, width): what the loaders make, the FLOP count and
# FP8's accounting and prediction read (timm's input_size); CIFAR-10's RGB at --image-size.
InputShape = Tuple[int, int, int]
CHANNELS = 3


def input_shape_of(image_size: int) -> InputShape:
    return (CHANNELS, image_size, image_size)


DEFAULT_INPUT_SHAPE = input_shape_of(families.DEFAULT_IMAGE_SIZE)


@dataclass(frozen=True)
class Range:
    """The values a numeric flag takes: a `kind` (int or float) from `low` to `high`, either end
    left open where said. Numbers beyond what torch's int64 counters and float32 tensors hold
    are refused with the limit, instead of failing deep inside torch."""
    kind: type
    low: float
    high: float
    wording: str
    low_open: bool = False
    high_open: bool = False

    def accepts(self, value: object) -> bool:
        """`value` set in code: a number of this kind (an int will do for a float) in the range."""
        numeric = (int,) if self.kind is int else (int, float)
        return isinstance(value, numeric) and not isinstance(value, bool) and self.holds(value)

    def holds(self, value: float) -> bool:
        above = value > self.low if self.low_open else value >= self.low
        below = value < self.high if self.high_open else value <= self.high
        return above and below  # False for NaN


COUNT = Range(int, 1, LARGEST_COUNT, f"a positive integer up to {LARGEST_COUNT}")
COUNT_OR_ZERO = Range(int, 0, LARGEST_COUNT, f"zero or a positive integer up to {LARGEST_COUNT}")
POSITIVE = Range(float, 0, LARGEST_FLOAT, f"a positive number up to {LARGEST_FLOAT:.4g}", low_open=True)
POSITIVE_OR_ZERO = Range(float, 0, LARGEST_FLOAT, f"zero or a positive number up to {LARGEST_FLOAT:.4g}")
FRACTION = Range(float, 0, 1, "at least 0 and below 1", high_open=True)
# Every numeric argument's range, checked by RunConfig.build (and by main.py's parser, for its flags).
RANGES = {
    "lr": POSITIVE, "steps": COUNT, "epochs": POSITIVE, "batch_size": COUNT, "dropout": FRACTION,
    "seed": Range(int, 0, LARGEST_SEED, "an integer from 0 to 2**63-1"), "momentum": POSITIVE_OR_ZERO,
    "weight_decay": POSITIVE_OR_ZERO, "label_smoothing": FRACTION, "warmup_lr_steps": COUNT_OR_ZERO,
    "clip_grad": POSITIVE, "accum_steps": COUNT, "eval_every": POSITIVE, "seeds": COUNT,
    "accuracy_margin": POSITIVE_OR_ZERO, "target_accuracy": POSITIVE, "repeats": COUNT, "loss_scale": POSITIVE,
    "workers": Range(int, 0, MOST_WORKERS, f"from 0 to {MOST_WORKERS}"), "warmup": COUNT_OR_ZERO,
    "explain_steps": COUNT, "numerics_every": COUNT, "log_every": COUNT, "dist_timeout": COUNT,
    "checkpoint_every": COUNT_OR_ZERO, "budget": POSITIVE,
    "num_classes": Range(int, 2, LARGEST_COUNT, f"a whole number of classes from 2 to {LARGEST_COUNT}"),
    "image_size": Range(int, *families.IMAGE_SIZES,
                        f"a whole number of pixels from {families.IMAGE_SIZES[0]} to {families.IMAGE_SIZES[1]}"),
    "bucket_mb": Range(float, 0, LARGEST_BUCKET_MB, f"a positive number of MB up to {LARGEST_BUCKET_MB} (1 TiB)",
                       low_open=True),
}


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


DEFAULT_MODEL = "resnet50"  # -m/--model unless given; --model-factory replaces it
# --model-factory's MODULE:FUNCTION: a dotted module path as `import` takes it, then the dotted
# path of a callable in it (a function, a class, a class's staticmethod)
DOTTED = r"[^\W\d]\w*(?:\.[^\W\d]\w*)*"  # Python's identifiers: a letter or _ (any alphabet's), then \w
FACTORY_SPEC = re.compile(rf"({DOTTED}):({DOTTED})")


def factory_spec(spec: str) -> Tuple[str, str]:
    """(module, attribute path) of --model-factory's MODULE:FUNCTION, or a refusal that shows the form."""
    match = FACTORY_SPEC.fullmatch(spec)
    if match is None:
        raise UserError(f"--model-factory takes MODULE:FUNCTION, the module as `import` names it and a function or "
                        f"class in it, e.g. mymodels:build_net; got '{console.shortened(spec)}'.")
    return match.group(1), match.group(2)


def default_data_dir() -> str:
    return os.environ.get("CIFAR10_DIR", "./data")


def default_workers() -> int:
    return min(8, os.cpu_count() or 1)


@dataclass(frozen=True)
class Arguments:
    """The command line as parsed, one field per flag (argparse's dest), None where a flag that
    has no fixed default was not given. RunConfig.build checks and translates it; the results
    file's `config` records it, with what the run resolved (record())."""
    # training
    lr: Optional[float] = None
    steps: Optional[int] = None
    epochs: Optional[float] = None
    batch_size: int = 128
    model: str = DEFAULT_MODEL  # with --model-factory, the factory's model replaces it
    model_factory: Optional[str] = None
    stem: Optional[str] = None
    dropout: Optional[float] = None
    seed: int = 0
    optimizer: Optional[str] = None
    momentum: Optional[float] = None
    weight_decay: Optional[float] = None
    nesterov: bool = False
    label_smoothing: Optional[float] = None
    lr_schedule: str = "cosine"
    warmup_lr_steps: Optional[int] = None  # the learning rate's warm-up (--lr-warmup-steps)
    clip_grad: Optional[float] = None
    optimizer_impl: str = "fused"
    accum_steps: int = 1
    on_nan: str = "stop"
    no_eval: bool = False
    # does accuracy hold?
    eval_every: Optional[float] = None
    seeds: int = 1
    accuracy_margin: float = DEFAULT_MARGIN_POINTS
    target_accuracy: Optional[float] = None
    stop_at_target: bool = False
    list_models: bool = False  # an action, in -h's training group
    check_flags: bool = False
    # precision: five spellings, translated into modes by modes_of()
    gpu: bool = False
    fp16: bool = False
    bf16: bool = False
    loss_scaling: bool = False
    amp: bool = False
    amp_dtype: Optional[str] = None  # None when not given, so that it can be refused without --amp
    tf32: bool = False
    allow_slow_fp16: bool = False
    fp8_emulate: bool = False
    compare: bool = False
    modes: Optional[str] = None
    baseline: Optional[str] = None
    repeats: int = 1
    loss_scale: Optional[float] = None
    # data
    data: str = "auto"
    data_dir: str = field(default_factory=default_data_dir)
    num_classes: Optional[int] = None  # None: the data's (CIFAR-10's 10, an image folder's class folders)
    download: bool = True
    allow_unverified: bool = False
    image_size: int = families.DEFAULT_IMAGE_SIZE
    loader: str = "device"
    workers: int = field(default_factory=default_workers)
    # speed levers
    channels_last: bool = False
    compile: bool = False
    compile_mode: str = "default"
    no_cudnn_benchmark: bool = False
    # measurement and output
    warmup: Optional[int] = None  # the timing's warm-up (--timing-warmup)
    json: Optional[str] = None
    csv: Optional[str] = None
    plot: Optional[str] = None
    tensorboard: Optional[str] = None
    jsonl: Optional[str] = None
    wide: bool = False
    no_progress: bool = False
    log_every: Optional[int] = None
    explain: bool = False
    explain_steps: Optional[int] = None
    trace_dir: Optional[str] = None
    numerics: bool = False
    numerics_every: Optional[int] = None
    max_batch: bool = False
    # distributed
    dist_timeout: int = 600
    grad_comm: str = "fp32"
    bucket_mb: Optional[float] = None
    # checkpoints
    checkpoint: Optional[str] = None
    checkpoint_every: int = 0
    resume: bool = False
    # which precision should I train with?
    advise: bool = False
    budget: Optional[float] = None  # minutes; None when not given, so that it can be refused without --advise
    from_results: Optional[str] = None
    advice_dir: Optional[str] = None


@dataclass(frozen=True)
class Training:
    """What is trained and how: the model, the batches, the optimizer's implementation and the
    recipe settings the user gave (None: the model family's, resolved into a Recipe)."""
    model: str  # a torchvision name, or --model-factory's MODULE:FUNCTION, which builds it
    model_factory: Optional[str]
    stem: str
    batch_size: int
    accum_steps: int
    steps: Optional[int]  # None with --epochs: the dataset's size settles them (TrainingPlan)
    epochs: Optional[float]
    seed: int
    dropout: Optional[float]
    optimizer: Optional[str]
    lr: Optional[float]
    momentum: Optional[float]
    weight_decay: Optional[float]
    nesterov: bool
    label_smoothing: Optional[float]
    lr_schedule: str
    lr_warmup_steps: Optional[int]
    clip_grad: Optional[float]
    optimizer_impl: str  # fused where this torch and device have it; else foreach, noted in env.degraded
    on_nan: str
    no_eval: bool

    @property
    def effective_batch_size(self) -> int:
        """Images per optimizer step in one process."""
        return self.batch_size * self.accum_steps

    def global_batch_size(self, world_size: int) -> int:
        """Images per optimizer step across all processes."""
        return self.effective_batch_size * world_size


@dataclass(frozen=True)
class Accuracy:
    """Does accuracy hold? The evaluations, the seeds, the verdict's margin and the target."""
    eval_every: Optional[float]  # epochs
    seeds: int
    margin_points: float
    target_accuracy: Optional[float]
    stop_at_target: bool


@dataclass(frozen=True)
class Precision:
    """The modes to run, in order, and what they need: one word for precision, whichever of the
    command line's spellings asked for it."""
    modes: Tuple[Mode, ...]
    gpu: bool
    baseline: str
    repeats: int
    loss_scale: float  # fp16-master's static scale
    allow_slow_fp16: bool
    fp8_emulate: bool


@dataclass(frozen=True)
class DataSettings:
    """What the runs train on and how it is fed."""
    data: str  # auto, cifar10, synthetic or imagefolder
    data_dir: str
    num_classes: Optional[int]  # --num-classes; None: the data's, settled when it is read (TrainingPlan)
    download: bool
    allow_unverified: bool
    image_size: int
    loader: str
    workers: int

    @property
    def input_shape(self) -> InputShape:
        return input_shape_of(self.image_size)


@dataclass(frozen=True)
class Speed:
    """The speed levers."""
    channels_last: bool
    compile: bool
    compile_mode: str
    cudnn_benchmark: bool


@dataclass(frozen=True)
class Measurement:
    """What is measured beside the step times, and where the results go."""
    timing_warmup: Optional[int]  # steps left out of the timings; None: settled with the steps
    json: Optional[str]
    csv: Optional[str]
    plot: Optional[str]
    tensorboard: Optional[str]
    jsonl: Optional[str]
    wide: bool
    no_progress: bool
    log_every: Optional[int]
    explain: bool
    explain_steps: int
    trace_dir: Optional[str]
    numerics: bool
    numerics_every: int
    max_batch: bool


@dataclass(frozen=True)
class Distributed:
    dist_timeout: int
    grad_comm: str
    bucket_mb: Optional[float]  # None: DDP's own (setup_keys.DDP_BUCKET_MB)


@dataclass(frozen=True)
class Checkpoints:
    checkpoint: Optional[str]
    checkpoint_every: int
    resume: bool


@dataclass(frozen=True)
class Advice:
    """--advise: measure within a budget and say which precision and speed levers to train with,
    or decide from saved results alone (`from_results`)."""
    advise: bool
    budget_minutes: float
    from_results: Optional[str]
    advice_dir: Optional[str]  # None: a folder of its own under ./advice


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


@dataclass(frozen=True)
class RunConfig:
    training: Training
    accuracy: Accuracy
    precision: Precision
    data: DataSettings
    speed: Speed
    measurement: Measurement
    distributed: Distributed
    checkpoints: Checkpoints
    advice: Advice
    list_models: bool
    check_flags: bool
    warnings: Tuple[str, ...]  # flags accepted but without effect, said once when the run starts
    arguments: Arguments  # the command line, as the results file records it; the code reads the sections
    spelled: Dict[str, str] = field(default_factory=dict, compare=False)  # setting: the name its flag was typed as

    @classmethod
    def from_args(cls, namespace: argparse.Namespace) -> RunConfig:
        """The config for main.py's parsed arguments (main.py's Spelled records how a flag of
        several names was typed)."""
        values = dict(vars(namespace))
        spelled = values.pop("spelled", {})
        return cls.build(spelled=spelled, **values)

    @classmethod
    def build(cls, spelled: Optional[Dict[str, str]] = None, **values: Any) -> RunConfig:
        """A validated config from argument values (by argparse's dest; defaults for the rest):
        every cross-flag rule checked, the precision flags translated into modes, the flags that
        tune a measurement taken to ask for it (--explain-steps and --trace-dir imply --explain,
        --numerics-every implies --numerics: never silently ignored)."""
        args = Arguments(**values)
        modes, warnings = check(args)
        training = Training(
            model=model_name(args), model_factory=args.model_factory,
            stem=args.stem or families.default_stem(args.image_size), batch_size=args.batch_size,
            accum_steps=args.accum_steps, steps=None if args.epochs is not None else args.steps or DEFAULT_STEPS,
            epochs=args.epochs, seed=args.seed, dropout=args.dropout, optimizer=args.optimizer, lr=args.lr,
            momentum=args.momentum, weight_decay=args.weight_decay, nesterov=args.nesterov,
            label_smoothing=args.label_smoothing, lr_schedule=args.lr_schedule, lr_warmup_steps=args.warmup_lr_steps,
            clip_grad=args.clip_grad, optimizer_impl=args.optimizer_impl, on_nan=args.on_nan, no_eval=args.no_eval)
        measurement = Measurement(
            timing_warmup=args.warmup, json=args.json, csv=args.csv, plot=args.plot, tensorboard=args.tensorboard,
            jsonl=args.jsonl, wide=args.wide, no_progress=args.no_progress, log_every=args.log_every,
            explain=args.explain or args.explain_steps is not None or bool(args.trace_dir),
            explain_steps=args.explain_steps or EXPLAIN_STEPS, trace_dir=args.trace_dir,
            numerics=args.numerics or args.numerics_every is not None,
            numerics_every=args.numerics_every or NUMERICS_EVERY, max_batch=args.max_batch)
        config = cls(
            training=training,
            accuracy=Accuracy(eval_every=args.eval_every, seeds=args.seeds, margin_points=args.accuracy_margin,
                              target_accuracy=args.target_accuracy, stop_at_target=args.stop_at_target),
            precision=Precision(modes=modes, gpu=args.gpu, baseline=args.baseline or BASELINES["default"],
                                repeats=args.repeats, loss_scale=args.loss_scale or DEFAULT_LOSS_SCALE,
                                allow_slow_fp16=args.allow_slow_fp16, fp8_emulate=args.fp8_emulate),
            data=DataSettings(data=args.data, data_dir=args.data_dir, num_classes=args.num_classes,
                              download=args.download, allow_unverified=args.allow_unverified,
                              image_size=args.image_size, loader=args.loader, workers=args.workers),
            speed=Speed(channels_last=args.channels_last, compile=args.compile, compile_mode=args.compile_mode,
                        cudnn_benchmark=not args.no_cudnn_benchmark),
            measurement=measurement,
            distributed=Distributed(dist_timeout=args.dist_timeout, grad_comm=args.grad_comm, bucket_mb=args.bucket_mb),
            checkpoints=Checkpoints(checkpoint=args.checkpoint, checkpoint_every=args.checkpoint_every,
                                    resume=args.resume),
            advice=Advice(advise=args.advise, budget_minutes=args.budget or DEFAULT_BUDGET_MINUTES,
                          from_results=args.from_results, advice_dir=args.advice_dir),
            list_models=args.list_models, check_flags=args.check_flags, warnings=tuple(warnings), arguments=args,
            spelled=dict(spelled or {}))
        if training.steps is not None:  # the steps are known: the timing's warm-up is checked against them now
            config.length(training.steps)
        return config

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
             num_classes: Optional[int] = None, model_class: Optional[str] = None) -> TrainingPlan:
        """The run's TrainingPlan: its steps (with --epochs, from `train_images`, which is then
        needed) checked against the dataset's size, its timing warm-up and the model family's
        recipe, `batch_norm` saying whether the model has batch norms; the data's `num_classes`
        (else --num-classes', else CIFAR-10's) and the built model's class, `model_class`."""
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
                            model_class=model_class)

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
        lr_warmup = training.lr_warmup_steps
        if lr_warmup is None:  # one-cycle ramps up by itself (30% of the steps)
            lr_warmup = 0 if training.lr_schedule == "onecycle" else round(LR_WARMUP_SHARE * steps)
        return Recipe(
            family=family, optimizer=optimizer, lr=lr, lr_warmup_steps=lr_warmup,
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
        """Optimizer steps in one epoch of `train_images` (a fraction with --accum-steps)."""
        return batches_per_epoch(self.data.loader, train_images, self.training.batch_size, ranks) / \
            self.training.accum_steps

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
        return accuracy_flags(self.arguments)

    def record(self, plan: Optional[TrainingPlan] = None) -> Dict[str, Any]:
        """The results file's `config`: every argument by its flag's name, as resolved: the model
        (--model-factory's MODULE:FUNCTION for a model of the user's own), the stem, the baseline,
        the loss scale and what --explain-steps, --trace-dir and --numerics-every imply; with
        `plan`, the steps, the timing warm-up, the recipe (as `recipe`, the family whose defaults
        filled the unset settings, or `user`), the classes and the model's class."""
        resolved: Dict[str, Any] = {}
        for name, value in asdict(self.arguments).items():
            resolved[name] = value
            if name == "optimizer":
                resolved["recipe"] = None  # beside the optimizer, as the results files of earlier releases hold it
        resolved.update(model=self.training.model, stem=self.training.stem, baseline=self.precision.baseline,
                        loss_scale=self.precision.loss_scale, explain=self.measurement.explain,
                        explain_steps=self.measurement.explain_steps,
                        numerics=self.measurement.numerics, numerics_every=self.measurement.numerics_every)
        if self.training.steps is not None:
            resolved.update(zip(("steps", "warmup"), self.length(self.training.steps)))
        if plan is not None:
            recipe = plan.recipe
            resolved.update(steps=plan.steps, warmup=plan.timing_warmup, lr=recipe.lr, optimizer=recipe.optimizer,
                            recipe=recipe.family, momentum=recipe.momentum, weight_decay=recipe.weight_decay,
                            label_smoothing=recipe.label_smoothing, warmup_lr_steps=recipe.lr_warmup_steps,
                            num_classes=plan.num_classes, model_class=plan.model_class)
        return resolved


def batches_per_epoch(kind: str, images: int, batch_size: int, ranks: int) -> int:
    """Global batches in one epoch: the device loader completes the last partial batch from
    the next epoch (rounds up); the DataLoader path drops it, after DistributedSampler has
    dropped the images that do not divide among the ranks (rounds down)."""
    if kind == "torchvision":
        return images // ranks // batch_size
    return -(-images // (batch_size * ranks))


def check(args: Arguments) -> Tuple[Tuple[Mode, ...], List[str]]:
    """Every rule between flags, in the order a user meets them; returns the modes and the
    warnings the precision flags give (modes_of)."""
    check_ranges(args)
    check_advice_flags(args)  # before the rules between the flags it owns
    modes, warnings = modes_of(args)  # refuses unknown, empty or repeated --modes
    names = [mode.name for mode in modes]
    if args.baseline is not None and args.baseline not in names:
        raise UserError(f"--baseline {args.baseline} is not among the modes this run trains ({', '.join(names)}); "
                        f"add it to --modes or choose one of them.")
    check_model_flags(args)
    check_data_flags(args)
    empty = [name for name in OUTPUT_FLAGS if getattr(args, name) == ""]
    if empty:
        flag = "--" + empty[0].replace("_", "-")
        raise UserError(f"{flag} needs a path, and got an empty one; give a path or leave out {flag}.")
    if args.loss_scale is not None and not any(mode.master_weights for mode in modes):
        raise UserError("--loss-scale sets the static loss scale of fp16-master, which this run does not use "
                        f"({', '.join(names)} scale dynamically or not at all); drop "
                        "--loss-scale or add fp16-master to --modes.")
    if args.fp8_emulate and not any(mode.float8 for mode in modes):
        raise UserError("--fp8-emulate applies to the fp8 modes, which this run does not use; add fp8 or "
                        "fp8-rowwise to --modes, or drop --fp8-emulate.")
    float8 = [mode.name for mode in modes if mode.float8]
    if float8 and not args.gpu and not args.fp8_emulate:  # a flags rule, so that --check-flags refuses it too
        raise UserError(f"mode {float8[0]} {FP8_NEEDS_A_GPU}")
    check_precision_flags(args)
    if args.grad_comm not in GRAD_COMM:
        raise UserError(f"--grad-comm is one of {', '.join(GRAD_COMM)}; got {args.grad_comm}.")
    if args.steps and args.epochs:
        raise UserError("give either --steps/-n or --epochs, not both.")
    if args.seed + args.seeds - 1 > LARGEST_SEED:
        raise UserError(f"--seed {args.seed} with --seeds {args.seeds} runs seeds up to {args.seed + args.seeds - 1}, "
                        f"beyond the largest seed {LARGEST_SEED} (2**63-1); lower --seed or --seeds.")
    check_optimizer_flags(args)
    if args.resume and not args.checkpoint:
        raise UserError("--resume needs --checkpoint PATH, the checkpoint to continue from.")
    if args.max_batch and not args.gpu:
        raise UserError("--max-batch measures how large a batch fits in GPU memory: add -p/--gpu on a GPU node.")
    check_accuracy_flags(args)
    if args.checkpoint and (len(modes) > 1 or args.repeats > 1 or args.seeds > 1):
        raise UserError("--checkpoint works with one precision mode, one seed and no --repeats; run each mode "
                        "and seed as a job of its own and merge the results with python -m utils.report.")
    return modes, warnings


def modes_of(args: Arguments) -> Tuple[Tuple[Mode, ...], List[str]]:
    """The one translation of the precision flags into the modes to run, in order: --modes
    (--compare's list), --compare's default, --amp [--amp-dtype], --fp16 [-s], --bf16 or --tf32;
    and the warnings for a flag accepted without effect (-s where nothing scales). A refused
    combination says which flags to drop."""
    if args.modes is not None:
        modes = tuple(parse_modes(args.modes))
    elif args.compare:
        modes = tuple(MODES[name] for name in (DEFAULT_COMPARE if args.gpu else DEFAULT_COMPARE_CPU))
    elif args.amp:  # dynamic loss scaling for float16, none needed for bfloat16
        modes = (MODES["amp-bf16" if args.amp_dtype == "bfloat16" else "amp-fp16"],)  # float16 by default
    elif args.fp16:
        modes = (MODES["amp-fp16" if args.loss_scaling else "amp-fp16-noscale"],)
    else:
        modes = (MODES["amp-bf16" if args.bf16 else "tf32" if args.tf32 else "fp32"],)
    return modes, loss_scaling_warnings(args)


def check_precision_flags(args: Arguments) -> None:
    """The precision flags agree with each other: one spelling at a time, and none that the
    chosen mode would not use (refused, never silently dropped)."""
    if sum((args.fp16, args.bf16, args.amp)) > 1:
        raise UserError("--fp16, --bf16 and --amp exclude each other; choose one (--amp --amp-dtype bfloat16 "
                        "is --bf16).")
    if args.amp_dtype is not None and not args.amp:
        raise UserError(f"--amp-dtype sets the dtype of --amp, which is not given; add --amp (--amp --amp-dtype "
                        f"{args.amp_dtype}) or drop --amp-dtype.")
    if args.tf32 and (args.fp16 or args.bf16 or args.amp):
        raise UserError("--tf32 is the FP32 mode with TF32 tensor cores, and --fp16/--bf16/--amp choose an autocast "
                        "mode instead; drop one, or compare them with --modes tf32,amp-fp16,amp-bf16.")
    if (args.compare or args.modes) and (args.fp16 or args.bf16 or args.amp or args.tf32 or args.loss_scaling):
        raise UserError("--compare runs the modes listed in --modes; drop --fp16/--bf16/--amp/--tf32/-s and "
                        "name the modes instead, e.g. --modes fp32,amp-fp16,amp-bf16.")


def loss_scaling_warnings(args: Arguments) -> List[str]:
    """-s/--loss_scaling where the mode scales nothing more, as sentences to print once."""
    if not args.loss_scaling:
        return []
    if args.bf16 or (args.amp and args.amp_dtype == "bfloat16"):
        return [f"-s/--loss_scaling is ignored with {'--bf16' if args.bf16 else '--amp --amp-dtype bfloat16'}: "
                "bfloat16 has FP32's exponent range, so gradients do not underflow and need no loss scaling."]
    if args.amp:
        return ["-s/--loss_scaling adds nothing to --amp, which scales float16's loss already."]
    if not args.fp16:
        return ["-s/--loss_scaling is ignored without --fp16: FP32 gradients need no loss scaling."]
    return []


# What --advise decides or writes itself, and so refuses from the command line: the precision
# modes, their repeats and seeds, the timing and the measurements each phase takes, the outputs.
ADVISER_SETS = ("fp16", "bf16", "amp", "amp_dtype", "tf32", "loss_scaling", "compare", "modes", "baseline",
                "repeats", "seeds", "loss_scale", "fp8_emulate", "warmup", "explain", "explain_steps", "trace_dir",
                "numerics", "numerics_every", "max_batch", "eval_every", "target_accuracy", "stop_at_target",
                "no_eval", "check_flags", *OUTPUT_FLAGS, "checkpoint_every", "resume")
ADVICE_ONLY = ("budget", "from_results", "advice_dir")  # flags that only --advise reads


def given(args: Arguments, names: Sequence[str]) -> List[str]:
    """The flags of the settings `names` that the command line gave (not at their default), as
    typed in -h: --json, --from."""
    default = Arguments()
    return ["--" + FLAG_NAMES.get(name, name.replace("_", "-")) for name in names
            if getattr(args, name) != getattr(default, name)]


FLAG_NAMES = {"from_results": "from", "warmup": "timing-warmup", "loss_scaling": "loss_scaling"}


def check_advice_flags(args: Arguments) -> None:
    """--advise owns the flags of ADVISER_SETS; --budget, --from and --advice-dir need it, and
    --from measures nothing, so it takes no --budget."""
    if not args.advise:
        needs = given(args, ADVICE_ONLY)
        if needs:
            raise UserError(f"{needs[0]} applies to --advise, which is not given; add --advise or drop {needs[0]}.")
        return
    owned = given(args, ADVISER_SETS)
    if owned:
        raise UserError(f"--advise chooses the precision modes, repeats, seeds, measurements and outputs of its "
                        f"phases itself; drop {owned[0]} (the advice names the mode and flags to train with, and "
                        "--advice-dir where it writes).")
    if args.from_results is not None and args.budget is not None:
        raise UserError("--budget limits the time --advise measures, and --from measures nothing: drop --budget.")


def check_ranges(args: Arguments) -> None:
    """Every numeric argument within its range, as main.py's parser checks its flags; here for
    configs built in code (benchmarks, tests) too."""
    for name, allowed in RANGES.items():
        value = getattr(args, name)
        if value is not None and not allowed.accepts(value):
            raise UserError(f"--{name.replace('_', '-')} must be {allowed.wording}, got {value!r}.")


def model_name(args: Arguments) -> str:
    """The model's name in the run and its results: -m's, or --model-factory's MODULE:FUNCTION."""
    return args.model_factory or args.model


def check_model_flags(args: Arguments) -> None:
    """The model takes the image size, and --stem changes it (or is the size's default, as
    recorded); a model of the user's own (--model-factory) is built as its factory builds it."""
    if args.model_factory is not None:
        factory_spec(args.model_factory)
        if args.model != DEFAULT_MODEL:  # the default is what the factory replaces
            raise UserError(f"--model-factory builds the model, and -m/--model {args.model} names a torchvision one; "
                            "drop -m/--model (the results name the model MODULE:FUNCTION, with its class).")
        if args.stem is not None:
            raise UserError("--stem changes the first layers of torchvision's ResNet-family models, and a "
                            "--model-factory model trains as its factory builds it; drop --stem.")
        return
    model = model_name(args)
    refusal = families.size_refusal(model, args.image_size)
    if refusal:
        raise UserError(refusal)
    default_stem = families.default_stem(args.image_size)
    if args.stem not in (None, default_stem) and not families.uses_resnet_stem(model):
        raise UserError(f"--stem {args.stem} changes the first conv and max-pool of ResNet-family models, and "
                        f"{model} has no such stem: it would be recorded but change nothing; drop --stem.")


def check_data_flags(args: Arguments) -> None:
    """--num-classes where the data has its own count (CIFAR-10's 10), and the CIFAR-10 flags
    with an image folder, which they would not change."""
    cifar = args.data in ("auto", "cifar10")
    if cifar and args.num_classes not in (None, families.DEFAULT_NUM_CLASSES):
        raise UserError(f"--num-classes {args.num_classes} does not fit --data {args.data}: CIFAR-10 has "
                        f"{families.DEFAULT_NUM_CLASSES} classes; drop --num-classes, or train on --data synthetic "
                        "(labels of that many classes) or --data imagefolder.")
    if args.data == "imagefolder" and args.allow_unverified:
        raise UserError("--allow-unverified accepts a CIFAR-10 copy whose md5 sums differ, and --data imagefolder "
                        "reads no CIFAR-10; drop --allow-unverified.")


def check_optimizer_flags(args: Arguments) -> None:
    model = model_name(args)
    adamw = (args.optimizer or families.recipe_of(model, args.model_factory is not None).optimizer) == "adamw"
    if adamw and (args.momentum is not None or args.nesterov):
        flag = "--momentum" if args.momentum is not None else "--nesterov"
        raise UserError(f"{flag} sets SGD's momentum, and {model} trains with AdamW here; drop {flag} or "
                        "add --optimizer sgd.")
    if args.nesterov and args.momentum == 0:
        raise UserError("--nesterov needs a non-zero --momentum.")


def accuracy_flags(args: Arguments) -> List[str]:
    """The flags given that need test-set evaluations."""
    return [flag for flag, value in (("--eval-every", args.eval_every), ("--target-accuracy", args.target_accuracy),
                                     ("--stop-at-target", args.stop_at_target)) if value]


def check_accuracy_flags(args: Arguments) -> None:
    asked = accuracy_flags(args)
    if args.no_eval and asked:
        raise UserError(f"--no-eval skips the evaluations that {asked[0]} needs; drop one of them.")
    if args.target_accuracy is not None and not 0 < args.target_accuracy <= 1:
        raise UserError(f"--target-accuracy is a fraction of the test images in (0, 1], e.g. 0.9 for 90%; got "
                        f"{args.target_accuracy:g}.")
    if args.stop_at_target and args.target_accuracy is None:
        raise UserError("--stop-at-target needs --target-accuracy A, the accuracy to stop at.")
    if args.target_accuracy is not None and not args.eval_every:
        raise UserError("--target-accuracy needs --eval-every E (epochs) to see when the target is reached.")
    if args.data == "synthetic" and asked:
        raise UserError(no_test_images(asked[0]))


def no_test_images(flag: str) -> str:
    """Why `flag` cannot be served by a data set without test images (synthetic data)."""
    return (f"{flag} measures test accuracy, and synthetic data has no test images; use CIFAR-10 (--data cifar10) "
            f"or drop {flag}.")


def defaults() -> Dict[str, Any]:
    """{argument name: default}, for main.py's parser: one definition of every default."""
    return {f.name: f.default_factory() if f.default_factory is not MISSING else f.default for f in fields(Arguments)}
