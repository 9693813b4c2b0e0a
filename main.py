"""ampbench: how much faster and smaller is mixed-precision training than FP32, and does accuracy hold?

    python main.py -n 200 -p --fp16 -s --model resnet50

Only argument parsing lives here, so that `-h` answers at once; torch is imported after it.
"""
import argparse
import difflib
import sys

from utils import config
from utils.setup_keys import DDP_BUCKET_MB, GRAD_COMM
from utils.training import modes  # the mode table, without torch


def in_range(name):
    """argparse's type for the flag of setting `name`: its range from utils.config, refused at
    parsing with the flag named (a non-number gets argparse's own "invalid int value")."""
    allowed = config.RANGES[name]

    def parse(text):
        value = allowed.kind(text)
        if not allowed.holds(value):
            raise argparse.ArgumentTypeError(f"must be {allowed.wording}, got {text}")
        return value

    parse.__name__ = allowed.kind.__name__
    return parse


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
    train.add_argument("--lr", type=in_range("lr"),
                       help=f"peak learning rate (default: SGD {config.BASE_LR} x global batch / {config.BASE_BATCH}, "
                       f"{config.BASE_LR_WITHOUT_BATCH_NORM} x global batch / {config.BASE_BATCH} for models "
                       f"without batch norm; AdamW {config.BASE_LR_ADAMW:g} x sqrt(global batch / {config.BASE_BATCH}))")
    train.add_argument("--optimizer", choices=list(config.OPTIMIZER_DEFAULTS),
                       help="sgd or adamw (default: the model family's recipe: adamw for vision transformers, sgd "
                       "for the rest)")
    train.add_argument("--steps", "-n", type=in_range("steps"),
                       help=f"optimizer steps to run (default {config.DEFAULT_STEPS}; the ThetaGPU AMP tutorial "
                       "counted epochs with -n)")
    train.add_argument("--epochs", type=in_range("epochs"),
                       help="train this many epochs instead of --steps (fractions allowed)")
    train.add_argument("--batch-size", "-b", type=in_range("batch_size"), help="batch size (default %(default)s)")
    train.add_argument("--model", "-m",
                       help="torchvision classification model (default %(default)s; see --list-models)")
    train.add_argument("--stem", choices=["cifar", "imagenet"],
                       help="cifar: 3x3 stride-1 first conv and no max-pool for ResNet-family models; "
                       "imagenet: torchvision's layout unchanged (default %(default)s)")
    train.add_argument("--dropout", type=in_range("dropout"), metavar="P",
                       help="dropout probability for models that have one (default: the model's own)")
    train.add_argument("--seed", type=in_range("seed"), help="seed for weights, data order and augmentation")
    train.add_argument("--momentum", type=in_range("momentum"),
                       help=f"SGD momentum (default {config.OPTIMIZER_DEFAULTS['sgd'][0]}; not for AdamW)")
    train.add_argument("--weight-decay", type=in_range("weight_decay"), help="weight decay (default: SGD "
                       f"{config.OPTIMIZER_DEFAULTS['sgd'][1]:g}, AdamW {config.OPTIMIZER_DEFAULTS['adamw'][1]:g}, "
                       "which spares biases, norms, the class token and the position embedding)")
    train.add_argument("--nesterov", action="store_true", help="Nesterov momentum")
    train.add_argument("--label-smoothing", type=in_range("label_smoothing"), help="label smoothing (default: "
                       f"{config.RECIPES['convnet'][1]:g} for convnets, {config.RECIPES['transformer'][1]:g} for "
                       "vision transformers)")
    train.add_argument("--lr-schedule", choices=["constant", "cosine", "onecycle"],
                       help="learning-rate schedule over the run (default %(default)s)")
    train.add_argument("--warmup-lr-steps", type=in_range("warmup_lr_steps"),
                       help="linear learning-rate warm-up steps (default: 5%% of the steps; one-cycle ramps up by "
                       "itself)")
    train.add_argument("--clip-grad", type=in_range("clip_grad"), metavar="NORM",
                       help="clip the gradient norm (of the unscaled gradients) to NORM")
    train.add_argument("--optimizer-impl", choices=["fused", "foreach"],
                       help="SGD or AdamW implementation: fused (GradScaler's inf check and skip stay on the "
                       "device; foreach where torch has no fused one) or foreach (the classic recipe: one host sync "
                       "per scaled step) (default %(default)s)")
    train.add_argument("--accum-steps", type=in_range("accum_steps"), metavar="K",
                       help="accumulate gradients over K micro-batches of --batch-size per optimizer step")
    train.add_argument("--on-nan", choices=["stop", "skip"],
                       help="without a loss scaler, a non-finite loss stops the run or skips the step (default %(default)s)")
    train.add_argument("--no-eval", action="store_true", help="skip the test-set accuracy pass")
    accuracy = parser.add_argument_group("does accuracy hold?")
    accuracy.add_argument("--eval-every", type=in_range("eval_every"), metavar="E",
                          help="also evaluate the test set every E epochs during training (fractions allowed); "
                          "the evaluations are timed apart from the steps")
    accuracy.add_argument("--seeds", type=in_range("seeds"), metavar="K",
                          help="run every mode with seeds --seed .. --seed+K-1, paired: for one seed every mode "
                          "starts from the same weights and batches (default %(default)s)")
    accuracy.add_argument("--accuracy-margin", type=in_range("accuracy_margin"), metavar="POINTS",
                          help="the accuracy verdict's margin: a mode holds when the 95%% interval of its paired "
                          "difference from the baseline lies within +-POINTS (default %(default)s)")
    accuracy.add_argument("--target-accuracy", type=in_range("target_accuracy"), metavar="A",
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
                           help="the autocast dtype of --amp (default float16; bfloat16 is --bf16)")
    precision.add_argument("--allow-slow-fp16", action="store_true",
                           help="run float16 modes on a CPU without fast float16 arithmetic (avx512_fp16, amx_fp16), "
                           "where they are refused: they take many times longer than fp32")
    precision.add_argument("--fp8-emulate", action="store_true",
                           help="run the fp8 modes with FP8 computed in software, on the CPU or any GPU: checks "
                           "that they train; emulated times are not FP8 speed")
    precision.add_argument("--tf32", action="store_true",
                           help="allow TF32 tensor cores in FP32 matmuls and convolutions (off by default, "
                           "so that FP32 means FP32)")
    precision.add_argument("--compare", action="store_true",
                           help="run several precision modes back to back from the same weights and batches "
                           f"(default modes: {','.join(modes.DEFAULT_COMPARE)} with -p, "
                           f"{','.join(modes.DEFAULT_COMPARE_CPU)} on the CPU)")
    precision.add_argument("--modes", metavar="LIST",
                           help=f"comma list for --compare from {', '.join(modes.MODES)} (implies --compare)")
    precision.add_argument("--baseline", metavar="MODE",
                           help="the mode the speedups, memory ratios, accuracy differences and verdicts compare with "
                           f"(default {modes.DEFAULT_BASELINE}; when given, one of the modes run)")
    precision.add_argument("--repeats", type=in_range("repeats"),
                           help="run the whole set of modes R times, in alternating order (default %(default)s)")
    precision.add_argument("--loss-scale", type=in_range("loss_scale"),
                           help=f"static loss scale of the fp16-master mode (default {config.DEFAULT_LOSS_SCALE:g})")

    data = parser.add_argument_group("data")
    data.add_argument("--data", choices=["auto", "cifar10", "synthetic"],
                      help="auto: CIFAR-10 if a verified copy is present or can be downloaded (10 s connection "
                      "timeout), else synthetic with a warning (default %(default)s)")
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
                      help="device: dataset on the training device, whole-batch augmentation; torchvision: the "
                      "classic per-image DataLoader path (default %(default)s)")
    data.add_argument("--workers", type=in_range("workers"),
                      help="DataLoader worker processes for --loader torchvision (default: min(8, CPUs) = %(default)s)")

    speed = parser.add_argument_group("speed levers")
    speed.add_argument("--channels-last", action="store_true",
                       help="model and inputs in channels_last memory format (tensor cores for convolutions)")
    speed.add_argument("--compile", action="store_true",
                       help="torch.compile the model; compile time is reported apart from step times")
    speed.add_argument("--compile-mode",
                       choices=["default", "reduce-overhead", "max-autotune", "max-autotune-no-cudagraphs"],
                       help="torch.compile mode (default %(default)s)")
    speed.add_argument("--no-cudnn-benchmark", action="store_true",
                       help="turn off cuDNN autotuning (on by default on CUDA)")

    measure = parser.add_argument_group("measurement and output")
    measure.add_argument("--warmup", type=in_range("warmup"),
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
    measure.add_argument("--explain-steps", type=in_range("explain_steps"), metavar="N",
                         help=f"steps --explain profiles per mode, besides one warm-up (default "
                         f"{config.EXPLAIN_STEPS}; implies --explain)")
    measure.add_argument("--trace-dir", metavar="DIR",
                         help="write each mode's profiled steps as a Chrome/Perfetto trace under DIR, to open in "
                         "ui.perfetto.dev or TensorBoard (implies --explain)")
    measure.add_argument("--numerics", action="store_true",
                         help="on sampled steps, compare each layer's low-precision gradients with an FP32 backward "
                         "of the same batch (underflow, subnormals, overflow: why FP16 needs loss scaling) and "
                         "measure where the step's memory goes")
    measure.add_argument("--numerics-every", type=in_range("numerics_every"), metavar="N",
                         help=f"--numerics samples every N steps and the last (default {config.NUMERICS_EVERY}; "
                         "implies --numerics); the samples are left out of the step times")
    measure.add_argument("--max-batch", action="store_true",
                         help="CUDA: after each mode's run, find the largest batch it trains in this GPU's memory "
                         "(doubling, then bisection)")
    measure.add_argument("--wide", action="store_true", help="print the results as one wide table instead of "
                         "blocks that fit 80 columns")
    measure.add_argument("--no-progress", action="store_true", help="no progress bar and no progress lines")
    measure.add_argument("--log-every", type=in_range("log_every"), metavar="N",
                         help="when stderr is not a terminal (batch jobs), a progress line every N steps "
                         "(default: about every 30 s)")

    cluster = parser.add_argument_group("distributed (launch with torchrun or mpirun; -b is per process)")
    cluster.add_argument("--dist-timeout", type=in_range("dist_timeout"), metavar="S",
                         help="seconds the rendezvous and each collective may wait for the other ranks before the "
                         "job fails (default %(default)s)")
    cluster.add_argument("--grad-comm", choices=list(GRAD_COMM),
                         help="the dtype DDP all-reduces gradients in: fp32 (default), or fp16/bf16 through PyTorch's "
                         "compression hooks (half the bytes; the optimizer still steps in FP32)")
    cluster.add_argument("--bucket-mb", type=in_range("bucket_mb"), metavar="MB",
                         help=f"DDP's gradient bucket size in MB (bucket_cap_mb; default DDP's own, {DDP_BUCKET_MB:g})")

    long_runs = parser.add_argument_group("checkpoints")
    long_runs.add_argument("--checkpoint", metavar="PATH",
                           help="save a checkpoint here at the end, when stopped, and every --checkpoint-every steps")
    long_runs.add_argument("--checkpoint-every", type=in_range("checkpoint_every"), metavar="K",
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
