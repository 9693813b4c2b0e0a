"""ampbench: how much faster and smaller is mixed-precision training than FP32, and does accuracy hold?

    python main.py -n 200 -p --fp16 -s --model resnet50

Only argument parsing lives here, so that `-h` answers at once; torch is imported after it.
"""
import argparse
import os
import sys


def positive_int(text):
    value = int(text)
    if value <= 0:
        raise argparse.ArgumentTypeError(f"must be a positive integer, got {text}")
    return value


def non_negative_int(text):
    value = int(text)
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be zero or a positive integer, got {text}")
    return value


def positive_float(text):
    value = float(text)
    if not value > 0 or value == float("inf"):
        raise argparse.ArgumentTypeError(f"must be a positive number, got {text}")
    return value


def build_parser():
    parser = argparse.ArgumentParser(
        prog="main.py",
        description="Benchmark FP32 against automatic mixed precision (FP16/BF16) training "
        "of a torchvision model on CIFAR-10: step times, throughput, memory and accuracy.",
        epilog="Example: python main.py -n 200 -p --fp16 -s --model resnet50",
    )
    train = parser.add_argument_group("training")
    train.add_argument("--lr", type=positive_float, default=0.1, help="learning rate (default 0.1)")
    train.add_argument("--steps", "-n", type=positive_int, default=200,
                       help="optimizer steps to run (default 200; the 2022 ThetaGPU tutorial counted epochs)")
    train.add_argument("--batch-size", "-b", type=positive_int, default=128, help="batch size (default 128)")
    train.add_argument("--model", "-m", default="resnet50",
                       help="torchvision classification model (default resnet50; see --list-models)")
    train.add_argument("--stem", choices=["cifar", "imagenet"], default="cifar",
                       help="cifar: 3x3 stride-1 first conv and no max-pool for ResNet-family models "
                       "(default); imagenet: torchvision's layout unchanged")
    train.add_argument("--seed", type=int, default=0, help="seed for weights, data order and augmentation")
    train.add_argument("--no-eval", action="store_true", help="skip the test-set accuracy pass")
    train.add_argument("--list-models", action="store_true", help="print every usable model name and exit")

    precision = parser.add_argument_group("precision")
    precision.add_argument("--gpu", "-p", action="store_true", help="train on CUDA (default: CPU)")
    precision.add_argument("--fp16", action="store_true", help="autocast to float16")
    precision.add_argument("--bf16", action="store_true", help="autocast to bfloat16 (no loss scaling needed)")
    precision.add_argument("--loss_scaling", "-s", action="store_true",
                           help="dynamic loss scaling with torch.amp.GradScaler (for --fp16)")
    precision.add_argument("--tf32", action="store_true",
                           help="allow TF32 tensor cores in FP32 matmuls and convolutions (off by default, "
                           "so that FP32 means FP32)")
    precision.add_argument("--compare", action="store_true",
                           help="run several precision modes back to back from the same weights and batches "
                           "(default modes: fp32,amp-fp16)")
    precision.add_argument("--modes", metavar="LIST",
                           help="comma list for --compare from fp32, tf32, amp-fp16, amp-fp16-noscale, "
                           "amp-bf16, fp16-master (implies --compare)")
    precision.add_argument("--repeats", type=positive_int, default=1,
                           help="run the whole set of modes R times, in alternating order (default 1)")
    precision.add_argument("--loss-scale", type=positive_float, default=128.0,
                           help="static loss scale of the fp16-master mode (default 128)")

    data = parser.add_argument_group("data")
    data.add_argument("--data", choices=["auto", "cifar10", "synthetic"], default="auto",
                      help="auto (default): CIFAR-10 if a verified copy is present, else synthetic with a warning")
    data.add_argument("--data-dir", default=os.environ.get("CIFAR10_DIR", "./data"),
                      help="folder holding cifar-10-batches-py, or that folder itself "
                      "(default $CIFAR10_DIR, else ./data)")
    data.add_argument("--download", action="store_true", help="allow downloading the official archive")
    data.add_argument("--allow-unverified", action="store_true",
                      help="use a CIFAR-10 copy whose md5 sums differ from the official ones")

    measure = parser.add_argument_group("measurement and output")
    measure.add_argument("--warmup", type=non_negative_int, default=10,
                         help="steps excluded from timing statistics (default 10)")
    measure.add_argument("--json", metavar="PATH", help="write the results as one JSON document")
    measure.add_argument("--csv", metavar="PATH", help="append one row per mode to a CSV file (header once)")
    measure.add_argument("--plot", metavar="PATH.png",
                         help="draw step-time distributions and speedups (needs matplotlib)")
    measure.add_argument("--no-progress", action="store_true", help="no progress bar")
    return parser


def main(argv=None):
    args = build_parser().parse_args(argv)
    from utils.errors import UserError

    try:
        from utils.bench import run

        return run(args)
    except UserError as error:
        print(f"main.py: error: {error}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
