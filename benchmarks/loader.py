"""How fast does each input pipeline deliver augmented, normalised CIFAR-10 training batches?

  device:      ampbench's default: data on the training device, whole-batch crop/flip/normalise
  torchvision: the classic path: PIL transforms per image in DataLoader workers

Prints both rates and the ratio last (target on a 2-core CPU: device >= 10x torchvision).
With -p it also times AMP (float16) training steps of resnet50 and resnet18 and prints each
loader's share of the step time (target: device loader under 2%).

    python benchmarks/loader.py [--data-dir DIR] [-p]
"""
import argparse
import os
import statistics
import sys
import time

from utils import console  # no torch
from utils.config import COUNT, add_flag, flag_type

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# With -p, the AMP step these models take at the loader's batch (channels_last, the CIFAR stem), for
# the loader's share of it.
AMP_MODELS, AMP_STEPS = ("resnet50", "resnet18"), 60
SUBSET = os.path.join(os.path.dirname(ROOT), "shared", "data", "cifar10-subset", "cifar-10-batches-py")


def batches_per_second(loader, batches, device, rounds=5):
    """Median rate over `rounds` timed blocks of `batches` batches, after two warm-up batches."""
    import torch

    for _ in range(2):
        next(loader)
    rates = []
    for _ in range(rounds):
        if device.type == "cuda":
            torch.cuda.synchronize()
        started = time.perf_counter()
        for _ in range(batches):
            images, labels = next(loader)
        if device.type == "cuda":
            torch.cuda.synchronize()
        rates.append(batches / (time.perf_counter() - started))
    return statistics.median(rates)


def amp_step_ms(model_name, data, batch_size, device):
    from models import factory
    from utils import modes
    from utils.app import run_mode
    from utils.config import RunConfig
    from utils.training.context import RunContext

    config = RunConfig.build(steps=AMP_STEPS, batch_size=batch_size, lr=0.01, channels_last=True, no_progress=True,
                             no_eval=True)
    model = factory.build_model(model_name)
    plan = config.plan(factory.has_batch_norm(model), 1, len(data.train_images))
    result = run_mode(model, modes.MODES["amp-fp16"], data, config, plan, RunContext(device)).record
    return result.step_time_ms["median"]


def build_parser():
    """The script's flags; the GPU suite reads its estimate of a run from them."""
    parser = console.Parser("loader.py", prog="python benchmarks/loader.py", description=__doc__,
                            formatter_class=argparse.RawDescriptionHelpFormatter)
    add_flag(parser, "data_dir", default=os.environ.get("CIFAR10_DIR", SUBSET),
             help="folder holding cifar-10-batches-py, or that folder itself (default $CIFAR10_DIR, else the subset)")
    add_flag(parser, "gpu")
    add_flag(parser, "batch_size")
    add_flag(parser, "workers", default=2, help="the torchvision DataLoader's worker processes (default %(default)s)")
    parser.add_argument("--batches", type=flag_type(COUNT), default=20, help="batches per timed block")
    return parser


def main():
    options = build_parser().parse_args()

    import torch

    from utils.data import cifar10
    from utils.data.dataset import Data
    from utils.data.loaders import DeviceLoader, TorchvisionLoader

    device = torch.device("cuda" if options.gpu else "cpu")
    torch.backends.cudnn.benchmark = True
    dataset = cifar10.load(options.data_dir, allow_unverified=True)
    print(f"{len(dataset.train_images)} training images from {dataset.folder} "
          f"({'verified' if dataset.verified else 'unverified copy'}), batch {options.batch_size}, "
          f"{torch.cuda.get_device_name() if options.gpu else 'CPU'}")
    images, labels = dataset.train_images.to(device), dataset.train_labels.to(device)

    device_rate = batches_per_second(DeviceLoader(images, labels, batch_size=options.batch_size, device=device, seed=0),
                                     options.batches, device)
    classic = TorchvisionLoader(images, labels, batch_size=options.batch_size, device=device, seed=0,
                                workers=options.workers)
    classic_rate = batches_per_second(classic, options.batches, device)
    print(f"torchvision DataLoader ({options.workers} workers): {classic_rate * options.batch_size:10.0f} img/s")
    print(f"device loader:                        {device_rate * options.batch_size:10.0f} img/s")

    if options.gpu:
        data = Data("cifar10", images, labels, None, None, {})
        for name in AMP_MODELS:
            step_ms = amp_step_ms(name, data, options.batch_size, device)
            print(f"{name} amp-fp16 channels_last step {step_ms:.2f} ms: device loader share "
                  f"{100 * 1000 / device_rate / step_ms:.2f}%, torchvision loader share "
                  f"{100 * 1000 / classic_rate / step_ms:.1f}%")
    print(f"throughput ratio device/torchvision: {device_rate / classic_rate:.1f}")


if __name__ == "__main__":
    sys.exit(console.run("loader.py", main))
