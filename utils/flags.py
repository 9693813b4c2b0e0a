"""Every flag of main.py, described once: its names, its -h group, its argparse settings, its
-h help and, where docs/flags.md says more, the page's text. main.py builds its parser from
FLAGS and docs/generate_flags.py writes docs/flags.md from them.

A flag whose setting has a range in utils.config.RANGES parses through it, so the ranges are
not repeated here. No torch: main.py imports this module and still answers -h at once.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Dict, Optional, Tuple

from models.families import BASE_BATCH, CIFAR_STEM_UP_TO, OPTIMIZER_DEFAULTS, RECIPES, STEMS
from utils import (
    config,
    modes,  # the mode table, without torch
)
from utils.setup_keys import DDP_BUCKET_MB, GRAD_COMM

TRAINING = "training"
ACCURACY = "does accuracy hold?"
PRECISION = "precision"
DATA = "data"
SPEED = "speed levers"
MEASUREMENT = "measurement and output"
DISTRIBUTED = "distributed (launch with torchrun or mpirun; -b is per process)"
CHECKPOINTS = "checkpoints"
ADVICE = "which precision should I train with?"


@dataclass(frozen=True)
class Flag:
    """One flag. `help` and `doc` are written as argparse help is (%(default)s, %%); `doc` is
    docs/flags.md's text where the page says more than -h, with `{help}` standing for `help`."""
    names: Tuple[str, ...]
    group: str
    help: str
    doc: Optional[str] = None
    action: Optional[str] = None
    choices: Optional[Tuple[str, ...]] = None
    metavar: Optional[str] = None
    dest: Optional[str] = None

    @property
    def setting(self) -> str:
        """The RunConfig field the flag sets: argparse's dest."""
        return self.dest or self.names[0].lstrip("-").replace("-", "_")

    def argparse_settings(self) -> Dict[str, Any]:
        """The add_argument keywords this flag gives, besides its help and type."""
        settings = {"action": self.action, "choices": self.choices, "metavar": self.metavar, "dest": self.dest}
        return {name: value for name, value in settings.items() if value is not None}


SGD, ADAMW = OPTIMIZER_DEFAULTS["sgd"], OPTIMIZER_DEFAULTS["adamw"]
WORKERS = ("DataLoader worker processes for --loader torchvision, and the processes that decode --data imagefolder "
           "(default: min(8, CPUs)")
PRECISION_MODES_LINK = "[Precision modes](modes.md#precision-modes)"
COMPARING_LINK = "[Comparing precisions](modes.md#comparing-precisions---compare)"
LONG_RUNS_LINK = "[Long runs](long-runs-and-clusters.md#long-runs)"

# In -h's order: the usage line lists them so, each group in the order of its first flag.
FLAGS = (
    Flag(("--lr",), TRAINING,
         f"peak learning rate (default: SGD {SGD.base_lr} x global batch / {BASE_BATCH}, "
         f"{SGD.base_lr_without_batch_norm} x global batch / {BASE_BATCH} for models "
         f"without batch norm; AdamW {ADAMW.base_lr:g} x sqrt(global batch / {BASE_BATCH}))",
         doc="{help}; see [the default recipe](#the-default-recipe)"),
    Flag(("--optimizer",), TRAINING,
         "sgd or adamw (default: the model family's recipe: adamw for vision transformers and --model-factory "
         "models, sgd for the rest)",
         doc="{help}; `--momentum` and `--nesterov` are SGD's and refused with AdamW",
         choices=tuple(OPTIMIZER_DEFAULTS)),
    Flag(("--steps", "-n"), TRAINING,
         f"optimizer steps to run (default {config.DEFAULT_STEPS}; the ThetaGPU AMP tutorial counted epochs with -n)"),
    Flag(("--epochs",), TRAINING, "train this many epochs instead of --steps (fractions allowed)",
         doc="{help}; see " + LONG_RUNS_LINK),
    Flag(("--batch-size", "-b"), TRAINING, "batch size (default %(default)s)"),
    Flag(("--model", "-m"), TRAINING, "torchvision classification model (default %(default)s; see --list-models)"),
    Flag(("--model-factory",), TRAINING,
         "train your own model: MODULE:FUNCTION, a function or class importable from the working directory or "
         "PYTHONPATH that returns a torch.nn.Module classifier (instead of -m; called with num_classes=, "
         "image_size= and dropout= where it takes them)",
         doc="{help}; see [Your own model and data](data-and-models.md#your-own-model-and-data)",
         metavar="MODULE:FUNCTION"),
    Flag(("--stem",), TRAINING,
         "cifar: 3x3 stride-1 first conv and no max-pool for ResNet-family models; "
         "imagenet: torchvision's layout unchanged (default: cifar up to --image-size "
         f"{CIFAR_STEM_UP_TO}, imagenet above, where the ImageNet stem's quarter resolution leaves layer4 "
         "feature maps of 3x3 and more)",
         doc="{help}; see [Models](data-and-models.md#models)", choices=STEMS),
    Flag(("--dropout",), TRAINING, "dropout probability for models that have one (default: the model's own)",
         metavar="P"),
    Flag(("--seed",), TRAINING, "seed for weights, data order and augmentation", doc="{help} (default %(default)s)"),
    Flag(("--momentum",), TRAINING, f"SGD momentum (default {SGD.momentum}; not for AdamW)"),
    Flag(("--weight-decay",), TRAINING,
         f"weight decay (default: SGD {SGD.weight_decay:g}, "
         f"AdamW {ADAMW.weight_decay:g}, "
         "which spares biases, norms, the class token and the position embedding)"),
    Flag(("--nesterov",), TRAINING, "Nesterov momentum", action="store_true"),
    Flag(("--label-smoothing",), TRAINING,
         f"label smoothing (default: {RECIPES['convnet'].label_smoothing:g} for convnets and --model-factory "
         f"models, {RECIPES['transformer'].label_smoothing:g} for vision transformers)"),
    Flag(("--lr-schedule",), TRAINING, "learning-rate schedule over the run (default %(default)s)",
         choices=("constant", "cosine", "onecycle")),
    Flag(("--lr-warmup-steps",), TRAINING,
         "linear learning-rate warm-up steps (default: 5%% of the steps; one-cycle ramps up by itself)",
         metavar="N", dest="warmup_lr_steps"),
    Flag(("--clip-grad",), TRAINING, "clip the gradient norm (of the unscaled gradients) to NORM",
         metavar="NORM"),
    Flag(("--optimizer-impl",), TRAINING,
         "SGD or AdamW implementation: fused (GradScaler's inf check and skip stay on the device; foreach where "
         "torch has no fused one) or foreach (the classic recipe: one host sync per scaled step) "
         "(default %(default)s)",
         doc="{help}; see " + PRECISION_MODES_LINK, choices=("fused", "foreach")),
    Flag(("--accum-steps",), TRAINING,
         "accumulate gradients over K micro-batches of --batch-size per optimizer step",
         doc="{help}; see " + LONG_RUNS_LINK, metavar="K"),
    Flag(("--on-nan",), TRAINING,
         "without a loss scaler, a non-finite loss stops the run or skips the step (default %(default)s)",
         choices=("stop", "skip")),
    Flag(("--no-eval",), TRAINING, "skip the test-set accuracy pass", action="store_true"),
    Flag(("--eval-every",), ACCURACY,
         "also evaluate the test set every E epochs during training (fractions allowed); "
         "the evaluations are timed apart from the steps",
         doc="{help}; see [Does accuracy hold?](accuracy.md)", metavar="E"),
    Flag(("--seeds",), ACCURACY,
         "run every mode with seeds --seed .. --seed+K-1, paired: for one seed every mode "
         "starts from the same weights and batches (default %(default)s)",
         doc="{help}; the last seed must be at most `2**63-1`", metavar="K"),
    Flag(("--accuracy-margin",), ACCURACY,
         "the accuracy verdict's margin: a mode holds when the 95%% interval of its paired "
         "difference from the baseline lies within +-POINTS (default %(default)s)",
         doc="{help}; POINTS are percentage points (the JSON's accuracies are fractions); the baseline is "
         "`--baseline`, fp32 unless told", metavar="POINTS"),
    Flag(("--target-accuracy",), ACCURACY,
         "report the training time, steps and epochs to reach test accuracy A (a fraction, "
         "e.g. 0.9), per mode and against fp32; needs --eval-every", metavar="A"),
    Flag(("--stop-at-target",), ACCURACY, "end each run at the first evaluation that reaches --target-accuracy",
         doc="{help} (after the warm-up: one in it ends the run at the first timed step)", action="store_true"),
    Flag(("--list-models",), TRAINING, "print every usable model name and exit",
         doc="{help}: the models that take the run's --image-size (stdout), and those left out, with why "
         "(stderr)",
         action="store_true"),
    Flag(("--check-flags",), TRAINING,
         "make the checks a run makes before its first step, but for its data and a checkpoint, then exit 0 "
         "without training",
         doc="make the checks a run makes before its first step, by the run's own code, but for reading its data or "
         "a checkpoint: every flag and the rules between them (before torch is imported, so a bad flag is refused "
         "in a tenth of a second), then this torch, the device and the modes on it, every output, an image folder's "
         "class folders (listed, no image read), the model (a torchvision one built without its weights on torch 2.1 "
         "and up: an unknown name, a size it does not take, a `--dropout` it lacks, a batch too small for its batch "
         "norms; a `--model-factory` one built whole and checked with one forward) and the layers fp8 converts in "
         "it; then exit 0 (or 2 with "
         "the refusal's sentence), having written nothing and said no warning (the run says them), in about the "
         "time torch takes to import (4 to 5 s on a 2-core CPU): what the job scripts and the scaling study run "
         "before any stage. Under a launcher's variables (torchrun's `WORLD_SIZE` and `RANK`, mpirun's, srun's) "
         "it checks them as that rank would, so `--grad-comm` and `--bucket-mb` are refused in one process",
         action="store_true"),
    Flag(("--gpu", "-p"), PRECISION, "train on CUDA (default: CPU)", action="store_true"),
    Flag(("--allow-slow-fp16",), PRECISION,
         "run float16 modes on a CPU without fast float16 arithmetic (avx512_fp16, amx_fp16), "
         "where they are refused: they take many times longer than fp32",
         doc="{help}; see " + PRECISION_MODES_LINK, action="store_true"),
    Flag(("--fp8-emulate",), PRECISION,
         "run the fp8 modes with FP8 computed in software, on the CPU or any GPU: checks "
         "that they train; emulated times are not FP8 speed",
         doc="{help}; see [Transformers and FP8](transformers-and-fp8.md)", action="store_true"),
    Flag(("--compare",), PRECISION,
         "run several precision modes back to back from the same weights and batches "
         f"(default modes: {','.join(modes.DEFAULT_COMPARE)} with -p, "
         f"{','.join(modes.DEFAULT_COMPARE_CPU)} on the CPU)",
         doc="{help}; on the CPU the default leaves float16 out, as it is slow there; see " + COMPARING_LINK,
         action="store_true"),
    Flag(("--modes",), PRECISION,
         f"the precision modes to train, a comma list from {', '.join(modes.MODES)}: one mode trains alone, "
         "several are compared as --compare compares them (default fp32)",
         doc="{help}; see " + PRECISION_MODES_LINK, metavar="LIST"),
    Flag(("--baseline",), PRECISION,
         "the mode the speedups, memory ratios, accuracy differences and verdicts compare with "
         f"(default {modes.BASELINES['default']}; when given, one of the modes run)",
         doc="{help}: one that is not exits 2 before training; the intervals compare with it too, `--explain`'s "
         "categories stay against fp32; recorded as `config.precision.baseline`", metavar="MODE"),
    Flag(("--repeats",), PRECISION,
         "run the whole set of modes R times, in alternating order (default %(default)s)"),
    Flag(("--loss-scale",), PRECISION,
         f"static loss scale of the fp16-master mode (default {config.DEFAULT_LOSS_SCALE:g})",
         doc="{help}; refused for runs without `fp16-master`, where it would do nothing"),
    Flag(("--data",), DATA,
         "auto: CIFAR-10 if a verified copy is present or can be downloaded (10 s connection "
         "timeout), else synthetic with a warning; imagefolder: your own images in --data-dir, a folder per class "
         "(default %(default)s)",
         doc="{help}; see [Your own model and data](data-and-models.md#your-own-model-and-data)",
         choices=("auto", "cifar10", "synthetic", "imagefolder")),
    Flag(("--data-dir",), DATA,
         "folder holding cifar-10-batches-py, or that folder itself; with --data imagefolder, the image folder "
         "(DIR/CLASS/IMAGE, or DIR/train/CLASS/IMAGE beside DIR/val or DIR/test) "
         "(default $CIFAR10_DIR, else ./data)"),
    Flag(("--num-classes",), DATA,
         "the classes the model outputs and the labels take (default: the data's: 10 for CIFAR-10 and "
         "synthetic images, an image folder's class folders, which a different count is refused against)",
         metavar="N"),
    Flag(("--no-download",), DATA,
         "never try the network: without a copy on disk, --data auto uses synthetic data",
         action="store_false", dest="download"),
    Flag(("--allow-unverified",), DATA, "use a CIFAR-10 copy whose md5 sums differ from the official ones",
         doc="{help} (e.g. the test subset)", action="store_true"),
    Flag(("--image-size",), DATA,
         "train and test at N x N images: CIFAR-10 upsampled (bilinear) on the device after augmentation, "
         "synthetic images made at N; models, FLOPs and --max-batch follow (default %(default)s)",
         doc="{help}; see [Image sizes](data-and-models.md#image-sizes)", metavar="N"),
    Flag(("--loader",), DATA,
         "device: dataset on the training device, whole-batch augmentation; torchvision: the "
         "classic per-image DataLoader path (default %(default)s)",
         doc="{help}; see [Feeding the GPU](data-and-models.md#feeding-the-gpu-loaders-and-speed-levers)",
         choices=("device", "torchvision")),
    Flag(("--workers",), DATA,
         WORKERS + " = %(default)s)", doc=WORKERS + ")"),  # the page leaves out this machine's count
    Flag(("--channels-last",), SPEED,
         "model and inputs in channels_last memory format (tensor cores for convolutions)", action="store_true"),
    Flag(("--compile",), SPEED, "torch.compile the model; compile time is reported apart from step times",
         action="store_true"),
    Flag(("--compile-mode",), SPEED, "torch.compile mode (default %(default)s)",
         choices=("default", "reduce-overhead", "max-autotune", "max-autotune-no-cudagraphs")),
    Flag(("--no-cudnn-benchmark",), SPEED, "turn off cuDNN autotuning (on by default on CUDA)",
         action="store_true"),
    Flag(("--timing-warmup",), MEASUREMENT,
         f"steps excluded from timing statistics (default {config.DEFAULT_TIMING_WARMUP}, at most half of the run)",
         doc="{help}; a run shorter than twice the default warms up for half of its steps and says so",
         metavar="N", dest="warmup"),
    Flag(("--json",), MEASUREMENT, "write the results as one JSON document",
         doc="{help} (folders created, written atomically)", metavar="PATH"),
    Flag(("--csv",), MEASUREMENT, "append one row per mode to a CSV file (header once)", metavar="PATH"),
    Flag(("--plot",), MEASUREMENT,
         "draw step-time distributions and speedups as .png, .pdf or .svg (needs matplotlib)",
         doc="{help}; the figure also shows the speedups' intervals, memory and accuracy; matplotlib must be 3.5 or "
         "newer",
         metavar="PATH.png"),
    Flag(("--tensorboard",), MEASUREMENT,
         "write TensorBoard logs under DIR while training: each run's loss, lr, loss scale and "
         "accuracy at the log's cadence, then its step ms, img/s and hparams (needs tensorboard)",
         doc="{help}; see " + COMPARING_LINK, metavar="DIR"),
    Flag(("--jsonl",), MEASUREMENT,
         "append one JSON line per phase, per log interval and per run to PATH while training "
         "(what a killed run leaves)",
         doc="{help}; each evaluation gets a line too; see " + COMPARING_LINK, metavar="PATH"),
    Flag(("--explain",), MEASUREMENT,
         "after each mode's timed steps, profile a few more (torch.profiler) and report where "
         "the step time goes by category, against fp32, with a diagnosis",
         doc="{help}; see [Why is it (not) faster?](explain.md)", action="store_true"),
    Flag(("--explain-steps",), MEASUREMENT,
         f"steps --explain profiles per mode, besides one warm-up (default {config.EXPLAIN_STEPS}; implies --explain)",
         metavar="N"),
    Flag(("--trace-dir",), MEASUREMENT,
         "write each mode's profiled steps as a Chrome/Perfetto trace under DIR, to open in "
         "ui.perfetto.dev or TensorBoard (implies --explain)", metavar="DIR"),
    Flag(("--numerics",), MEASUREMENT,
         "on sampled steps, compare each layer's low-precision gradients with an FP32 backward "
         "of the same batch (underflow, subnormals, overflow: why FP16 needs loss scaling) and "
         "measure where the step's memory goes",
         doc="{help}; see [Why loss scaling?](numerics-and-memory.md#why-loss-scaling---numerics)",
         action="store_true"),
    Flag(("--numerics-every",), MEASUREMENT,
         f"--numerics samples every N steps and the last (default {config.NUMERICS_EVERY}; "
         "implies --numerics); the samples are left out of the step times", metavar="N"),
    Flag(("--max-batch",), MEASUREMENT,
         "CUDA: after each mode's run, find the largest batch it trains in this GPU's memory "
         "(doubling, then bisection)", action="store_true"),
    Flag(("--wide",), MEASUREMENT, "print the results as one wide table instead of blocks that fit 80 columns",
         action="store_true"),
    Flag(("--no-progress",), MEASUREMENT, "no progress bar and no progress lines", action="store_true"),
    Flag(("--log-every",), MEASUREMENT,
         "when stderr is not a terminal (batch jobs), a progress line every N steps (default: about every 30 s)",
         metavar="N"),
    Flag(("--dist-timeout",), DISTRIBUTED,
         "seconds the rendezvous and each collective may wait for the other ranks before the "
         "job fails (default %(default)s)", metavar="S"),
    Flag(("--grad-comm",), DISTRIBUTED,
         "the dtype DDP all-reduces gradients in: fp32 (default), or fp16/bf16 through PyTorch's "
         "compression hooks (half the bytes; the optimizer still steps in FP32)",
         doc="{help}; the hooks are `fp16_compress_hook` and `bf16_compress_hook`; refused in a single process "
         "and where the backend cannot all-reduce the dtype; see "
         "[Gradient communication](long-runs-and-clusters.md#gradient-communication---grad-comm---bucket-mb)",
         choices=tuple(GRAD_COMM)),
    Flag(("--bucket-mb",), DISTRIBUTED,
         f"DDP's gradient bucket size in MB (bucket_cap_mb; default DDP's own, {DDP_BUCKET_MB:g})",
         doc="{help}; refused in a single process", metavar="MB"),
    Flag(("--checkpoint",), CHECKPOINTS,
         "save a checkpoint here at the end, when stopped, and every --checkpoint-every steps",
         doc="{help}; see " + LONG_RUNS_LINK, metavar="PATH"),
    Flag(("--checkpoint-every",), CHECKPOINTS, "also save every K steps (default 0: only at the end and when stopped)",
         metavar="K"),
    Flag(("--resume",), CHECKPOINTS, "continue from --checkpoint", action="store_true"),
    Flag(("--advise",), ADVICE,
         "measure this model, batch and data on this machine within --budget and say which precision mode and "
         "speed levers to train with, each sentence with its evidence; the model and data flags are passed to "
         "every run it makes",
         doc="{help}; writes a report, advice.json and the results it rests on into --advice-dir; see "
         "[Which precision should I train with?](advice.md)", action="store_true"),
    Flag(("--budget",), ADVICE,
         f"the wall time --advise may spend, in minutes (default {config.DEFAULT_BUDGET_MINUTES:g}); refused "
         "below what one comparison of two modes needs here", metavar="MINUTES"),
    Flag(("--from",), ADVICE,
         "with --advise: decide from saved results instead of training: a --json file, the list "
         "python -m utils.report --json writes, or an advice.json", metavar="RESULTS.json", dest="from_results"),
    Flag(("--advice-dir",), ADVICE,
         "where --advise writes report.txt, advice.json, results.json and each run's log "
         "(default: advice/MODEL-UTC TIME)", metavar="DIR"),
)
