"""RunConfig: what the user asked for, built and validated once from the parsed arguments.

main.py parses the command line; `RunConfig.from_args` turns the result into this frozen
object, applying defaults and every rule that involves more than one flag. Below this module
nothing sees argparse: the pipeline receives the config, or the values it needs. Tests and
benchmarks build one with `RunConfig.build(steps=3, ...)`.

Nothing here imports torch: main.py takes its defaults from `defaults()` and still answers
`-h` at once, and a config that breaks a rule is refused before the slow imports.
"""
from __future__ import annotations

import argparse
import math
import os
from dataclasses import MISSING, asdict, dataclass, field, fields, replace
from typing import TYPE_CHECKING, Any, Callable, Dict, List, Optional, Union

from models import families
from utils import console
from utils.errors import UserError
from utils.results.accuracy import DEFAULT_MARGIN_POINTS
from utils.setup_keys import GRAD_COMM
from utils.training.modes import BASELINES, FP8_NEEDS_A_GPU

if TYPE_CHECKING:
    from utils.training.modes import Mode

DEFAULT_STEPS = 200
# Every family's recipe (models/families.py) starts with a linear warm-up over this share of the
# steps, then follows --lr-schedule (cosine decay to zero by default).
WARMUP_LR_SHARE = 0.05
LARGEST_COUNT = 2 ** 31 - 1  # the most steps, images or seconds a flag may ask for
LARGEST_FLOAT = 3.4028234663852886e38  # float32's largest finite value: torch holds no larger rate or scale
LARGEST_SEED = 2 ** 63 - 1  # torch.manual_seed's largest
MOST_WORKERS = 256
# DDP holds its bucket size in bytes as a 64-bit integer, which 1e30 MB overflows deep in its
# Reducer; a TiB bucket already holds any model whole.
LARGEST_BUCKET_MB = 2 ** 20
EXPLAIN_STEPS = 5  # steps --explain profiles per mode
NUMERICS_EVERY = 50  # --numerics samples every this many steps, and the last
DEFAULT_WARMUP = 10  # steps left out of the timings; a run of fewer than twice as many warms up for half
DEFAULT_LOSS_SCALE = 128.0  # fp16-master's static loss scale
OUTPUT_FLAGS = ("json", "csv", "plot", "tensorboard", "jsonl", "trace_dir", "checkpoint")


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
# Every numeric setting's range, checked by RunConfig.check (and by main.py's parser, for its flags).
RANGES = {
    "lr": POSITIVE, "steps": COUNT, "epochs": POSITIVE, "batch_size": COUNT, "dropout": FRACTION,
    "seed": Range(int, 0, LARGEST_SEED, "an integer from 0 to 2**63-1"), "momentum": POSITIVE_OR_ZERO,
    "weight_decay": POSITIVE_OR_ZERO, "label_smoothing": FRACTION, "warmup_lr_steps": COUNT_OR_ZERO,
    "clip_grad": POSITIVE, "accum_steps": COUNT, "eval_every": POSITIVE, "seeds": COUNT,
    "accuracy_margin": POSITIVE_OR_ZERO, "target_accuracy": POSITIVE, "repeats": COUNT, "loss_scale": POSITIVE,
    "workers": Range(int, 0, MOST_WORKERS, f"from 0 to {MOST_WORKERS}"), "warmup": COUNT_OR_ZERO,
    "explain_steps": COUNT, "numerics_every": COUNT, "log_every": COUNT, "dist_timeout": COUNT,
    "checkpoint_every": COUNT_OR_ZERO,
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


def default_data_dir() -> str:
    return os.environ.get("CIFAR10_DIR", "./data")


def default_workers() -> int:
    return min(8, os.cpu_count() or 1)


@dataclass(frozen=True)
class RunConfig:
    """Field names are main.py's argument names, so the JSON results' `config` lists them;
    utils/flags.py describes each flag."""
    # training
    lr: Optional[float] = None  # set by with_recipe(): --lr, or the default recipe's
    steps: Optional[int] = None  # set by build(): --steps, --epochs worth of batches, or DEFAULT_STEPS
    epochs: Optional[float] = None
    batch_size: int = 128
    model: str = "resnet50"
    stem: Optional[str] = None  # set by build(): --stem, or families.default_stem(image_size)
    dropout: Optional[float] = None
    seed: int = 0
    optimizer: Optional[str] = None  # set by with_recipe(): --optimizer, or the model family's
    recipe: Optional[str] = None  # set by with_recipe(): the family whose defaults filled the unset flags
    momentum: Optional[float] = None  # set by with_recipe(): SGD's (--momentum, or 0.9); None with AdamW
    weight_decay: Optional[float] = None  # set by with_recipe(): --weight-decay, or the optimizer's
    nesterov: bool = False
    label_smoothing: Optional[float] = None  # set by with_recipe(): --label-smoothing, or the family's
    lr_schedule: str = "cosine"
    warmup_lr_steps: Optional[int] = None  # set by with_recipe(): --warmup-lr-steps, or 5% of the steps
    clip_grad: Optional[float] = None
    optimizer_impl: str = "fused"  # where this torch and device have it; else foreach, noted in env.degraded
    accum_steps: int = 1
    on_nan: str = "stop"
    no_eval: bool = False
    # does accuracy hold?
    eval_every: Optional[float] = None
    seeds: int = 1
    accuracy_margin: float = DEFAULT_MARGIN_POINTS
    target_accuracy: Optional[float] = None
    stop_at_target: bool = False
    list_models: bool = False
    check_flags: bool = False
    # precision
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
    baseline: Optional[str] = None  # set by build(): --baseline, or BASELINES["default"]
    repeats: int = 1
    loss_scale: Optional[float] = None  # set by build(): --loss-scale, or DEFAULT_LOSS_SCALE
    # data
    data: str = "auto"
    data_dir: str = field(default_factory=default_data_dir)
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
    warmup: Optional[int] = None  # set with the steps: --warmup, or DEFAULT_WARMUP (half of a shorter run)
    json: Optional[str] = None
    csv: Optional[str] = None
    plot: Optional[str] = None
    tensorboard: Optional[str] = None
    jsonl: Optional[str] = None
    wide: bool = False
    no_progress: bool = False
    log_every: Optional[int] = None
    explain: bool = False  # also set by --explain-steps and --trace-dir
    explain_steps: Optional[int] = None  # EXPLAIN_STEPS unless given
    trace_dir: Optional[str] = None
    numerics: bool = False  # also set by --numerics-every
    numerics_every: Optional[int] = None  # NUMERICS_EVERY unless given
    max_batch: bool = False
    # distributed
    dist_timeout: int = 600
    grad_comm: str = "fp32"
    bucket_mb: Optional[float] = None  # None: DDP's own (setup_keys.DDP_BUCKET_MB)
    # checkpoints
    checkpoint: Optional[str] = None
    checkpoint_every: int = 0
    resume: bool = False

    @classmethod
    def from_args(cls, namespace: argparse.Namespace) -> RunConfig:
        """The config for main.py's parsed arguments."""
        return cls.build(**vars(namespace))

    @classmethod
    def build(cls, **values: Any) -> RunConfig:
        """A validated config: defaults for what is not given, every cross-flag rule checked,
        and the steps fixed unless --epochs must wait for the dataset's size."""
        config = cls(**values)
        # The flags that tune a measurement ask for it: --explain-steps and --trace-dir imply
        # --explain, --numerics-every implies --numerics (never silently ignored).
        config = replace(config, explain=config.explain or config.explain_steps is not None or bool(config.trace_dir),
                         numerics=config.numerics or config.numerics_every is not None,
                         explain_steps=config.explain_steps or EXPLAIN_STEPS,
                         numerics_every=config.numerics_every or NUMERICS_EVERY)
        config.check()
        config = replace(config, loss_scale=config.loss_scale or DEFAULT_LOSS_SCALE,
                         baseline=config.baseline or BASELINES["default"],
                         stem=config.stem or families.default_stem(config.image_size))
        if config.epochs is None:
            config = config.with_steps(config.steps or DEFAULT_STEPS)
        return config

    def with_steps(self, steps: int) -> RunConfig:
        """The config for `steps` steps, checked, its default warm-up set (and shrunk to half of a
        short run, so that `-n 5` times 3 steps instead of being refused)."""
        warmup = self.warmup if self.warmup is not None else min(DEFAULT_WARMUP, steps // 2)
        config = replace(self, steps=steps, warmup=warmup)
        config.check_steps()
        return config

    def short_run_note(self) -> Optional[str]:
        """A sentence when the warm-up is half of a short run: the timings rest on few steps."""
        if self.steps < 2 * DEFAULT_WARMUP and self.warmup == self.steps // 2:
            return (f"the warm-up is {self.warmup} of the {self.steps} steps (the default is {DEFAULT_WARMUP}, at most "
                    f"half of a run), so the timings rest on {self.steps - self.warmup} steps; run more steps for "
                    "steadier figures.")
        return None

    def check(self) -> None:
        self.check_ranges()
        modes = self.precision_modes  # refuses unknown, empty or repeated --modes
        names = [mode.name for mode in modes]
        if self.baseline is not None and self.baseline not in names:
            raise UserError(f"--baseline {self.baseline} is not among the modes this run trains ({', '.join(names)}); "
                            f"add it to --modes or choose one of them.")
        self.check_model_flags()
        empty = [name for name in OUTPUT_FLAGS if getattr(self, name) == ""]
        if empty:
            flag = "--" + empty[0].replace("_", "-")
            raise UserError(f"{flag} needs a path, and got an empty one; give a path or leave out {flag}.")
        if self.loss_scale is not None and not any(mode.master_weights for mode in modes):
            raise UserError("--loss-scale sets the static loss scale of fp16-master, which this run does not use "
                            f"({', '.join(mode.name for mode in modes)} scale dynamically or not at all); drop "
                            "--loss-scale or add fp16-master to --modes.")
        if self.fp8_emulate and not any(mode.float8 for mode in modes):
            raise UserError("--fp8-emulate applies to the fp8 modes, which this run does not use; add fp8 or "
                            "fp8-rowwise to --modes, or drop --fp8-emulate.")
        float8 = [mode.name for mode in modes if mode.float8]
        if float8 and not self.gpu and not self.fp8_emulate:  # a flags rule, so that --check-flags refuses it too
            raise UserError(f"mode {float8[0]} {FP8_NEEDS_A_GPU}")
        if sum((self.fp16, self.bf16, self.amp)) > 1:
            raise UserError("--fp16, --bf16 and --amp exclude each other; choose one (--amp --amp-dtype bfloat16 "
                            "is --bf16).")
        self.check_precision_flags()
        if (self.compare or self.modes) and (self.fp16 or self.bf16 or self.amp or self.tf32 or self.loss_scaling):
            raise UserError("--compare runs the modes listed in --modes; drop --fp16/--bf16/--amp/--tf32/-s and "
                            "name the modes instead, e.g. --modes fp32,amp-fp16,amp-bf16.")
        if self.grad_comm not in GRAD_COMM:
            raise UserError(f"--grad-comm is one of {', '.join(GRAD_COMM)}; got {self.grad_comm}.")
        if self.steps and self.epochs:
            raise UserError("give either --steps/-n or --epochs, not both.")
        if self.seed + self.seeds - 1 > LARGEST_SEED:
            raise UserError(f"--seed {self.seed} with --seeds {self.seeds} runs seeds up to {self.seed + self.seeds - 1}, "
                            f"beyond the largest seed {LARGEST_SEED} (2**63-1); lower --seed or --seeds.")
        self.check_optimizer_flags()
        if self.resume and not self.checkpoint:
            raise UserError("--resume needs --checkpoint PATH, the checkpoint to continue from.")
        if self.max_batch and not self.gpu:
            raise UserError("--max-batch measures how large a batch fits in GPU memory: add -p/--gpu on a GPU node.")
        self.check_accuracy_flags()
        if self.checkpoint and (len(modes) > 1 or self.repeats > 1 or self.seeds > 1):
            raise UserError("--checkpoint works with one precision mode, one seed and no --repeats; run each mode "
                            "and seed as a job of its own and merge the results with python -m utils.report.")

    def check_model_flags(self) -> None:
        """The model takes the image size, and --stem changes it (or is the size's default, as recorded)."""
        refusal = families.size_refusal(self.model, self.image_size)
        if refusal:
            raise UserError(refusal)
        default_stem = families.default_stem(self.image_size)
        if self.stem not in (None, default_stem) and not families.uses_resnet_stem(self.model):
            raise UserError(f"--stem {self.stem} changes the first conv and max-pool of ResNet-family models, and "
                            f"{self.model} has no such stem: it would be recorded but change nothing; drop --stem.")

    def check_ranges(self) -> None:
        """Every numeric setting within its range, as main.py's parser checks its flags; here for
        configs built in code (benchmarks, tests) too."""
        for name, allowed in RANGES.items():
            value = getattr(self, name)
            if value is not None and not allowed.accepts(value):
                raise UserError(f"--{name.replace('_', '-')} must be {allowed.wording}, got {value!r}.")

    def check_precision_flags(self) -> None:
        """A precision flag that the chosen mode would not use is refused, never silently dropped."""
        if self.amp_dtype is not None and not self.amp:
            raise UserError(f"--amp-dtype sets the dtype of --amp, which is not given; add --amp (--amp --amp-dtype "
                            f"{self.amp_dtype}) or drop --amp-dtype.")
        if self.tf32 and (self.fp16 or self.bf16 or self.amp):
            raise UserError("--tf32 is the FP32 mode with TF32 tensor cores, and --fp16/--bf16/--amp choose an autocast "
                            "mode instead; drop one, or compare them with --modes tf32,amp-fp16,amp-bf16.")

    @property
    def accuracy_flags(self) -> List[str]:
        """The flags given that need test-set evaluations."""
        return [flag for flag, value in (("--eval-every", self.eval_every), ("--target-accuracy", self.target_accuracy),
                                         ("--stop-at-target", self.stop_at_target)) if value]

    def check_optimizer_flags(self) -> None:
        adamw = (self.optimizer or families.recipe_of(self.model).optimizer) == "adamw"
        if adamw and (self.momentum is not None or self.nesterov):
            flag = "--momentum" if self.momentum is not None else "--nesterov"
            raise UserError(f"{flag} sets SGD's momentum, and {self.model} trains with AdamW here; drop {flag} or "
                            "add --optimizer sgd.")
        if self.nesterov and self.momentum == 0:
            raise UserError("--nesterov needs a non-zero --momentum.")

    def check_accuracy_flags(self) -> None:
        asked = self.accuracy_flags
        if self.no_eval and asked:
            raise UserError(f"--no-eval skips the evaluations that {asked[0]} needs; drop one of them.")
        if self.target_accuracy is not None and not 0 < self.target_accuracy <= 1:
            raise UserError(f"--target-accuracy is a fraction of the test images in (0, 1], e.g. 0.9 for 90%; got "
                            f"{self.target_accuracy:g}.")
        if self.stop_at_target and self.target_accuracy is None:
            raise UserError("--stop-at-target needs --target-accuracy A, the accuracy to stop at.")
        if self.target_accuracy is not None and not self.eval_every:
            raise UserError("--target-accuracy needs --eval-every E (epochs) to see when the target is reached.")
        if self.data == "synthetic" and asked:
            raise UserError(no_test_images(asked[0]))

    def check_steps(self) -> None:
        if self.compile and self.warmup == 0:
            raise UserError("--compile needs --warmup 1 or more (and at least 2 steps): the first step compiles, and "
                            "it must stay out of the step statistics.")
        if self.warmup >= self.steps:
            raise UserError(f"--warmup ({self.warmup}) must be smaller than the {self.steps} steps to run so that "
                            "some steps are timed; lower --warmup or raise --steps.")
        if self.warmup_lr_steps is not None and self.warmup_lr_steps >= self.steps:
            raise UserError(f"--warmup-lr-steps ({self.warmup_lr_steps}) must be smaller than the {self.steps} "
                            "steps to run.")

    def check_world(self, ranks: int) -> None:
        """Refuse the settings of gradient communication in a job of one process, which has none."""
        given = ([f"--grad-comm {self.grad_comm}"] if self.grad_comm != "fp32" else []) + \
            ([f"--bucket-mb {self.bucket_mb:g}"] if self.bucket_mb else [])
        if ranks == 1 and given:
            raise UserError(f"{' and '.join(given)} {'set' if len(given) > 1 else 'sets'} how DDP sends gradients "
                            "between processes, and this run is a single process; launch it on 2 or more ranks "
                            "(torchrun, mpirun) or drop the flag.")

    def for_dataset(self, train_images: int, ranks: int) -> RunConfig:
        """The config checked against the dataset's size; with --epochs, its steps set."""
        if self.batch_size * ranks > train_images:
            raise UserError(f"a batch of {self.batch_size} images{f' on each of {ranks} ranks' if ranks > 1 else ''} "
                            f"is more than the {train_images} training images hold; lower --batch-size/-b.")
        config = self
        if self.epochs is not None:
            steps = math.ceil(self.epochs * self.steps_per_epoch(train_images, ranks))
            if steps > LARGEST_COUNT:
                raise UserError(f"--epochs {self.epochs:g} is {steps} steps, more than the {LARGEST_COUNT} a run can "
                                "count; lower --epochs.")
            config = self.with_steps(max(1, steps))
        every = config.eval_every_steps(train_images, ranks)
        if every is not None and every > config.steps:
            raise UserError(f"--eval-every {self.eval_every:g} epochs is {every} steps, more than the {config.steps} "
                            "of the run; lower --eval-every (fractions of an epoch are allowed).")
        return config

    def steps_per_epoch(self, train_images: int, ranks: int) -> float:
        """Optimizer steps in one epoch of `train_images` (a fraction with --accum-steps)."""
        from utils.data.loaders import batches_per_epoch

        return batches_per_epoch(self.loader, train_images, self.batch_size, ranks) / self.accum_steps

    def eval_every_steps(self, train_images: int, ranks: int) -> Optional[int]:
        """--eval-every in steps (at least one), or None."""
        if not self.eval_every:
            return None
        return max(1, round(self.eval_every * self.steps_per_epoch(train_images, ranks)))

    def with_recipe(self, batch_norm: bool, world_size: int) -> RunConfig:
        """The config with the model family's recipe (models/families.py) where the flags left a
        setting unset: `batch_norm` says whether the model has batch norms; the lr scales with
        the global batch."""
        recipe_name = families.family_of(self.model).recipe
        recipe = families.RECIPES[recipe_name]
        optimizer = self.optimizer or recipe.optimizer
        defaults = families.OPTIMIZER_DEFAULTS[optimizer]
        lr = self.lr
        if lr is None:
            lr = defaults.lr(self.global_batch_size(world_size), batch_norm)
        warmup = self.warmup_lr_steps
        if warmup is None:  # one-cycle ramps up by itself (30% of the steps)
            warmup = 0 if self.lr_schedule == "onecycle" else round(WARMUP_LR_SHARE * self.steps)
        return replace(self, lr=lr, warmup_lr_steps=warmup, optimizer=optimizer, recipe=recipe_name,
                       momentum=defaults.momentum if self.momentum is None else self.momentum,
                       weight_decay=defaults.weight_decay if self.weight_decay is None else self.weight_decay,
                       label_smoothing=recipe.label_smoothing if self.label_smoothing is None else self.label_smoothing)

    @property
    def precision_modes(self) -> List[Mode]:
        """The precision modes to run, in order."""
        from utils.training import modes

        if self.modes is not None:
            return modes.parse_modes(self.modes)
        if self.compare:
            return [modes.MODES[name] for name in (modes.DEFAULT_COMPARE if self.gpu else modes.DEFAULT_COMPARE_CPU)]
        if self.amp:  # dynamic loss scaling for float16, none needed for bfloat16
            return [modes.MODES["amp-bf16" if self.amp_dtype == "bfloat16" else "amp-fp16"]]  # float16 by default
        return [modes.mode_from_flags(fp16=self.fp16, bf16=self.bf16, loss_scaling=self.loss_scaling, tf32=self.tf32)]

    @property
    def effective_batch_size(self) -> int:
        """Images per optimizer step in one process."""
        return self.batch_size * self.accum_steps

    def global_batch_size(self, world_size: int) -> int:
        """Images per optimizer step across all processes."""
        return self.effective_batch_size * world_size

    def warnings(self) -> List[str]:
        """Flags that are accepted but have no effect, as sentences to print once."""
        if not self.loss_scaling:
            return []
        if self.bf16 or (self.amp and self.amp_dtype == "bfloat16"):
            return [f"-s/--loss_scaling is ignored with {'--bf16' if self.bf16 else '--amp --amp-dtype bfloat16'}: "
                    "bfloat16 has FP32's exponent range, so gradients do not underflow and need no loss scaling."]
        if self.amp:
            return ["-s/--loss_scaling adds nothing to --amp, which scales float16's loss already."]
        if not self.fp16:
            return ["-s/--loss_scaling is ignored without --fp16: FP32 gradients need no loss scaling."]
        return []

    def to_dict(self) -> Dict[str, Any]:
        return asdict(self)


def no_test_images(flag: str) -> str:
    """Why `flag` cannot be served by a data set without test images (synthetic data)."""
    return (f"{flag} measures test accuracy, and synthetic data has no test images; use CIFAR-10 (--data cifar10) "
            f"or drop {flag}.")


def defaults() -> Dict[str, Any]:
    """{argument name: default}, for main.py's parser: one definition of every default."""
    return {f.name: f.default_factory() if f.default_factory is not MISSING else f.default for f in fields(RunConfig)}
