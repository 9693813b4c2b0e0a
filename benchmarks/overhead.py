"""Does ampbench's measuring machinery cost throughput? Times, in one process and interleaved:

  (a) ampbench: utils.app.run_mode, the code main.py runs (loader with on-device
      augmentation, step timer, loss recording, skip counting), and
  (b) bare: a loop written like PyTorch's AMP recipe over pre-made batches on the device,

with the same model, batch, precision and data. Prints both medians and the ratio last
(ampbench throughput / bare throughput; target >= 0.97).

    python benchmarks/overhead.py                       # CPU, resnet18, batch 64, fp32
    python benchmarks/overhead.py -p --mode amp-fp16    # GPU
"""
import argparse
import copy
import os
import statistics
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def bare_loop(initial_model, batches, mode, lr, device):
    """PyTorch's AMP recipe, nothing else; returns seconds for len(batches) steps."""
    import torch
    from torch import nn

    model = copy.deepcopy(initial_model).to(device)
    optimizer = torch.optim.SGD(model.parameters(), lr=lr, momentum=0.9, weight_decay=5e-4)
    scaler = torch.amp.GradScaler(device.type, enabled=mode.loss_scaling)
    criterion = nn.CrossEntropyLoss()
    dtype = mode.autocast_dtype or torch.float32
    if device.type == "cuda":
        torch.cuda.synchronize()
    started = time.perf_counter()
    for images, labels in batches:
        with torch.amp.autocast(device.type, dtype=dtype, enabled=mode.autocast_dtype is not None):
            loss = criterion(model(images), labels)
        scaler.scale(loss).backward()
        scaler.step(optimizer)
        scaler.update()
        optimizer.zero_grad(set_to_none=True)
    if device.type == "cuda":
        torch.cuda.synchronize()
    return time.perf_counter() - started


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("-p", "--gpu", action="store_true")
    parser.add_argument("--model", default="resnet18")
    parser.add_argument("-b", "--batch-size", type=int, default=64)
    parser.add_argument("--mode", default="fp32")
    parser.add_argument("--steps", type=int, default=5, help="steps per timed block")
    parser.add_argument("--rounds", type=int, default=7, help="blocks of each kind; the first is warm-up")
    options = parser.parse_args()

    import torch

    import models
    from utils.app import run_mode
    from utils.config import RunConfig
    from utils.data.dataset import synthetic
    from utils.data.loaders import DeviceLoader
    from utils.training import precision

    device = torch.device("cuda" if options.gpu else "cpu")
    if options.gpu:
        torch.backends.cudnn.benchmark = True
    mode = precision.MODES[options.mode]
    precision.set_tf32(mode.tf32)
    torch.manual_seed(0)
    model = models.build_model(options.model)
    data = synthetic(device, seed=0)
    loader = DeviceLoader(data.train_images, data.train_labels, options.batch_size, device, seed=0)
    batches = [next(loader) for _ in range(options.steps)]
    config = RunConfig.build(steps=options.steps, warmup=0, batch_size=options.batch_size, lr=0.01,
                             no_progress=True, no_eval=True)

    ours, bare = [], []
    for round_ in range(options.rounds):
        order = ["ours", "bare"] if round_ % 2 == 0 else ["bare", "ours"]
        for which in order:
            if which == "ours":
                seconds = run_mode(model, mode, data, config, device)[0].wall_time_s
                (ours if round_ else []).append(seconds / options.steps)
            else:
                seconds = bare_loop(model, batches, mode, config.lr, device)
                (bare if round_ else []).append(seconds / options.steps)
    name = torch.cuda.get_device_name() if options.gpu else "CPU"
    print(f"{options.model}, batch {options.batch_size}, {mode.name}, {name}, "
          f"{options.rounds - 1} rounds x {options.steps} steps")
    ours_ms, bare_ms = 1000 * statistics.median(ours), 1000 * statistics.median(bare)
    print(f"bare AMP-recipe loop: median {bare_ms:.2f} ms/step, {options.batch_size * 1000 / bare_ms:.1f} img/s")
    print(f"ampbench run_mode:    median {ours_ms:.2f} ms/step, {options.batch_size * 1000 / ours_ms:.1f} img/s")
    print(f"throughput ratio ampbench/bare: {bare_ms / ours_ms:.3f}")


if __name__ == "__main__":
    main()
