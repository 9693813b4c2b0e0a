"""ampbench: how much faster and smaller is mixed-precision training than FP32, and does accuracy hold?

    python main.py -n 200 -p --fp16 -s --model resnet50

Only argument parsing lives here, so that `-h` answers at once; torch is imported after it.
"""
import argparse
import difflib
import sys

from utils import config
from utils.training import modes  # the mode table, without torch


# Numbers beyond what torch's int64 counters and float32 tensors hold are refused here, with
# the limit, instead of failing deep inside torch.
LARGEST_COUNT = config.LARGEST_COUNT
LARGEST_FLOAT = 3.4028234663852886e38  # float32's largest finite value
LARGEST_SEED = 2 ** 63 - 1
MOST_WORKERS = 256


def integer(text, low, high, wording):
    value = int(text)
    if not low <= value <= high:
        raise argparse.ArgumentTypeError(f"must be {wording}, got {text}")
    return value


def positive_int(text):
    return integer(text, 1, LARGEST_COUNT, f"a positive integer up to {LARGEST_COUNT}")


def non_negative_int(text):
    return integer(text, 0, LARGEST_COUNT, f"zero or a positive integer up to {LARGEST_COUNT}")


def seed(text):
    return integer(text, 0, LARGEST_SEED, "an integer from 0 to 2**63-1")


def worker_count(text):
    return integer(text, 0, MOST_WORKERS, f"from 0 to {MOST_WORKERS}")


def non_negative_float(text):
    value = float(text)
    if not 0 <= value <= LARGEST_FLOAT:
        raise argparse.ArgumentTypeError(f"must be zero or a positive number up to {LARGEST_FLOAT:.4g}, got {text}")
    return value


def fraction(text):
    value = float(text)
    if not 0 <= value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 0 and below 1, got {text}")
    return value


def positive_float(text):
    value = float(text)
    if not 0 < value <= LARGEST_FLOAT:
        raise argparse.ArgumentTypeError(f"must be a positive number up to {LARGEST_FLOAT:.4g}, got {text}")
    return value


class Parser(argparse.ArgumentParser):
    """argparse that names the closest flag when one is mistyped (--loss-scaling, --channels_last),
    under a one-line usage instead of the whole flag list."""

    def error(self, message):
        if message.startswith("unrecognized arguments:"):
            known = [flag for action in self._actions for flag in action.option_strings]
            typed = [word.split("=")[0] for word in message.split(":", 1)[1].split() if word.startswith("-")]
            close = [match for word in typed for match in
                     difflib.get_close_matches(word.replace("_", "-"), known, n=1, cutoff=0.7)
                     + difflib.get_close_matches(word, known, n=1, cutoff=0.7)]
            if close:
                message += f"; did you mean {' or '.join(dict.fromkeys(close))}?"
        self.exit(2, f"usage: {self.prog} [flags] (python {self.prog} -h lists them)\n{self.prog}: error: {message}\n")


def build_parser():
    parser = Parser(
        prog="main.py",
        description="Benchmark FP32 against automatic mixed precision (FP16/BF16) training "
        "of a torchvision model on CIFAR-10: step times, throughput, memory and accuracy.",
        epilog="Example: python main.py -n 200 -p --fp16 -s --model resnet50",
    )
    train = parser.add_argument_group("training")
    train.add_argument("--lr", type=positive_float,
                       help=f"peak learning rate (default: {config.BASE_LR} x global batch / {config.BASE_BATCH}, "
                       f"{config.BASE_LR_WITHOUT_BATCH_NORM} x global batch / {config.BASE_BATCH} for models "
                       "without batch norm)")
    train.add_argument("--steps", "-n", type=positive_int,
                       help=f"optimizer steps to run (default {config.DEFAULT_STEPS}; the ThetaGPU AMP tutorial "
                       "counted epochs with -n)")
    train.add_argument("--epochs", type=positive_float,
                       help="train this many epochs instead of --steps (fractions allowed)")
    train.add_argument("--batch-size", "-b", type=positive_int, help="batch size (default %(default)s)")
    train.add_argument("--model", "-m",
                       help="torchvision classification model (default resnet50; see --list-models)")
    train.add_argument("--stem", choices=["cifar", "imagenet"],
                       help="cifar: 3x3 stride-1 first conv and no max-pool for ResNet-family models "
                       "(default); imagenet: torchvision's layout unchanged")
    train.add_argument("--dropout", type=fraction, metavar="P",
                       help="dropout probability for models that have one (default: the model's own)")
    train.add_argument("--seed", type=seed, help="seed for weights, data order and augmentation")
    train.add_argument("--momentum", type=non_negative_float, help="SGD momentum (default %(default)s)")
    train.add_argument("--weight-decay", type=non_negative_float, help="weight decay (default %(default)s)")
    train.add_argument("--nesterov", action="store_true", help="Nesterov momentum")
    train.add_argument("--label-smoothing", type=fraction, help="label smoothing (default %(default)s)")
    train.add_argument("--lr-schedule", choices=["constant", "cosine", "onecycle"],
                       help="learning-rate schedule over the run (default %(default)s)")
    train.add_argument("--warmup-lr-steps", type=non_negative_int,
                       help="linear learning-rate warm-up steps (default: 5%% of the steps; one-cycle ramps up by "
                       "itself)")
    train.add_argument("--clip-grad", type=positive_float, metavar="NORM",
                       help="clip the gradient norm (of the unscaled gradients) to NORM")
    train.add_argument("--optimizer-impl", choices=["fused", "foreach"],
                       help="SGD implementation: fused (default where torch has it: GradScaler's inf check and "
                       "skip stay on the device) or foreach (the classic recipe: one host sync per scaled step)")
    train.add_argument("--accum-steps", type=positive_int, metavar="K",
                       help="accumulate gradients over K micro-batches of --batch-size per optimizer step")
    train.add_argument("--on-nan", choices=["stop", "skip"],
                       help="without a loss scaler, a non-finite loss stops the run (default) or skips the step")
    train.add_argument("--no-eval", action="store_true", help="skip the test-set accuracy pass")
    accuracy = parser.add_argument_group("does accuracy hold?")
    accuracy.add_argument("--eval-every", type=positive_float, metavar="E",
                          help="also evaluate the test set every E epochs during training (fractions allowed); "
                          "the evaluations are timed apart from the steps")
    accuracy.add_argument("--seeds", type=positive_int, metavar="K",
                          help="run every mode with seeds --seed .. --seed+K-1, paired: for one seed every mode "
                          "starts from the same weights and batches (default %(default)s)")
    accuracy.add_argument("--accuracy-margin", type=non_negative_float, metavar="POINTS",
                          help="the accuracy verdict's margin: a mode holds when the 95%% interval of its paired "
                          "difference from fp32 lies within +-POINTS (default %(default)s)")
    accuracy.add_argument("--target-accuracy", type=positive_float, metavar="A",
                          help="report the training time, steps and epochs to reach test accuracy A (a fraction, "
                          "e.g. 0.9), per mode and against fp32; needs --eval-every")
    accuracy.add_argument("--stop-at-target", action="store_true",
                          help="end each run at the first evaluation that reaches --target-accuracy")
    train.add_argument("--list-models", action="store_true", help="print every usable model name and exit")
    train.add_argument("--check-flags", action="store_true",
                       help="check every flag and their combinations, then exit 0 without importing torch or training")

    precision = parser.add_argument_group("precision")
    precision.add_argument("--gpu", "-p", action="store_true", help="train on CUDA (default: CPU)")
    precision.add_argument("--fp16", action="store_true", help="autocast to float16")
    precision.add_argument("--bf16", action="store_true", help="autocast to bfloat16 (no loss scaling needed)")
    precision.add_argument("--loss_scaling", "-s", action="store_true",
                           help="dynamic loss scaling with torch.amp.GradScaler (for --fp16)")
    precision.add_argument("--amp", action="store_true",
                           help="timm's and NVIDIA's spelling: autocast to --amp-dtype, with dynamic loss scaling "
                           "for float16 (--amp alone is --fp16 -s)")
    precision.add_argument("--amp-dtype", choices=["float16", "bfloat16"],
                           help="the autocast dtype of --amp (default %(default)s; bfloat16 is --bf16)")
    precision.add_argument("--allow-slow-fp16", action="store_true",
                           help="run float16 modes on a CPU without fast float16 arithmetic (avx512_fp16, amx_fp16), "
                           "where they are refused: they take many times longer than fp32")
    precision.add_argument("--tf32", action="store_true",
                           help="allow TF32 tensor cores in FP32 matmuls and convolutions (off by default, "
                           "so that FP32 means FP32)")
    precision.add_argument("--compare", action="store_true",
                           help="run several precision modes back to back from the same weights and batches "
                           f"(default modes: {','.join(modes.DEFAULT_COMPARE)} with -p, "
                           f"{','.join(modes.DEFAULT_COMPARE_CPU)} on the CPU)")
    precision.add_argument("--modes", metavar="LIST",
                           help=f"comma list for --compare from {', '.join(modes.MODES)} (implies --compare)")
    precision.add_argument("--repeats", type=positive_int,
                           help="run the whole set of modes R times, in alternating order (default %(default)s)")
    precision.add_argument("--loss-scale", type=positive_float,
                           help=f"static loss scale of the fp16-master mode (default {config.DEFAULT_LOSS_SCALE:g})")

    data = parser.add_argument_group("data")
    data.add_argument("--data", choices=["auto", "cifar10", "synthetic"],
                      help="auto (default): CIFAR-10 if a verified copy is present or can be downloaded "
                      "(10 s connection timeout), else synthetic with a warning")
    data.add_argument("--data-dir",
                      help="folder holding cifar-10-batches-py, or that folder itself "
                      "(default $CIFAR10_DIR, else ./data)")
    data.add_argument("--download", action="store_true",
                      help="fetch the official archive when no copy is there (the default; kept for old scripts)")
    data.add_argument("--no-download", dest="download", action="store_false",
                      help="never try the network: without a copy on disk, --data auto uses synthetic data")
    data.add_argument("--allow-unverified", action="store_true",
                      help="use a CIFAR-10 copy whose md5 sums differ from the official ones")
    data.add_argument("--loader", choices=["device", "torchvision"],
                      help="device (default): dataset on the training device, whole-batch augmentation; "
                      "torchvision: the classic per-image DataLoader path")
    data.add_argument("--workers", type=worker_count,
                      help="DataLoader worker processes for --loader torchvision (default: min(8, CPUs) = %(default)s)")

    speed = parser.add_argument_group("speed levers")
    speed.add_argument("--channels-last", action="store_true",
                       help="model and inputs in channels_last memory format (tensor cores for convolutions)")
    speed.add_argument("--compile", action="store_true",
                       help="torch.compile the model; compile time is reported apart from step times")
    speed.add_argument("--compile-mode",
                       choices=["default", "reduce-overhead", "max-autotune", "max-autotune-no-cudagraphs"],
                       help="torch.compile mode (default: default)")
    speed.add_argument("--no-cudnn-benchmark", action="store_true",
                       help="turn off cuDNN autotuning (on by default on CUDA)")

    measure = parser.add_argument_group("measurement and output")
    measure.add_argument("--warmup", type=non_negative_int,
                         help=f"steps excluded from timing statistics (default {config.DEFAULT_WARMUP}, at most half "
                         "of the run)")
    measure.add_argument("--json", metavar="PATH", help="write the results as one JSON document")
    measure.add_argument("--csv", metavar="PATH", help="append one row per mode to a CSV file (header once)")
    measure.add_argument("--plot", metavar="PATH.png",
                         help="draw step-time distributions and speedups as .png, .pdf or .svg (needs matplotlib)")
    measure.add_argument("--tensorboard", metavar="DIR",
                         help="write TensorBoard logs under DIR while training: each run's loss, lr, loss scale and "
                         "accuracy at the log's cadence, then its step ms, img/s and hparams (needs tensorboard)")
    measure.add_argument("--jsonl", metavar="PATH",
                         help="append one JSON line per phase, per log interval and per run to PATH while training "
                         "(what a killed run leaves)")
    measure.add_argument("--explain", action="store_true",
                         help="after each mode's timed steps, profile a few more (torch.profiler) and report where "
                         "the step time goes by category, against fp32, with a diagnosis")
    measure.add_argument("--explain-steps", type=positive_int, metavar="N",
                         help=f"steps --explain profiles per mode, besides one warm-up (default "
                         f"{config.EXPLAIN_STEPS}; implies --explain)")
    measure.add_argument("--trace-dir", metavar="DIR",
                         help="write each mode's profiled steps as a Chrome/Perfetto trace under DIR, to open in "
                         "ui.perfetto.dev or TensorBoard (implies --explain)")
    measure.add_argument("--numerics", action="store_true",
                         help="on sampled steps, compare each layer's low-precision gradients with an FP32 backward "
                         "of the same batch (underflow, subnormals, overflow: why FP16 needs loss scaling) and "
                         "measure where the step's memory goes")
    measure.add_argument("--numerics-every", type=positive_int, metavar="N",
                         help=f"--numerics samples every N steps and the last (default {config.NUMERICS_EVERY}; "
                         "implies --numerics); the samples are left out of the step times")
    measure.add_argument("--max-batch", action="store_true",
                         help="CUDA: after each mode's run, find the largest batch it trains in this GPU's memory "
                         "(doubling, then bisection)")
    measure.add_argument("--wide", action="store_true", help="print the results as one wide table instead of "
                         "blocks that fit 80 columns")
    measure.add_argument("--no-progress", action="store_true", help="no progress bar and no progress lines")
    measure.add_argument("--log-every", type=positive_int, metavar="N",
                         help="when stderr is not a terminal (batch jobs), a progress line every N steps "
                         "(default: about every 30 s)")

    cluster = parser.add_argument_group("distributed (launch with torchrun or mpirun; -b is per process)")
    cluster.add_argument("--dist-timeout", type=positive_int, metavar="S",
                         help="seconds the rendezvous and each collective may wait for the other ranks before the "
                         "job fails (default %(default)s)")

    long_runs = parser.add_argument_group("checkpoints")
    long_runs.add_argument("--checkpoint", metavar="PATH",
                           help="save a checkpoint here at the end, when stopped, and every --checkpoint-every steps")
    long_runs.add_argument("--checkpoint-every", type=non_negative_int, metavar="K",
                           help="also save every K steps (default 0: only at the end and when stopped)")
    long_runs.add_argument("--resume", action="store_true", help="continue from --checkpoint")
    parser.set_defaults(**config.defaults())
    return parser


def main(argv=None):
    args = build_parser().parse_args(argv)
    from utils.errors import RankLost, UserError, WriteFailed
    from utils.stop import StopRequest

    with StopRequest() as stop:  # a signal from here on stops the run cleanly, even during `import torch`
        try:
            run_config = config.RunConfig.from_args(args)  # refuses bad combinations before torch is imported
            if run_config.check_flags:
                return 0
            from utils import compat
            compat.check_versions()  # before importing code that needs the supported torch
            from utils.app import run

            return run(run_config, stop)
        except (UserError, WriteFailed, RankLost) as error:  # WriteFailed: after training, nothing to retry
            print(f"main.py: error: {error}", file=sys.stderr)
            return 2 if isinstance(error, UserError) else 1


if __name__ == "__main__":
    from utils import console

    console.protect()
    sys.exit(main())
