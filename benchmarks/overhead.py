"""Does ampbench's measuring machinery cost throughput? Times, in one process and interleaved:

  (a) ampbench: utils.app.run_mode, the code main.py runs (its trainer, loop, step timer, loss
      and loss-scale records, stop and divergence checks), and
  (b) bare: PyTorch's AMP recipe written out by hand doing the same work: the same model copy,
      the same device loader and augmentation with the same seed, the same SGD implementation,
      LR schedule, loss scaler and loss,

so that the difference is what ampbench adds per step and nothing else. Each round runs both
(alternating which goes first) and times their steps after the same warm-up; the ratio is
ampbench's throughput over the bare loop's: the median over the rounds of each round's ratio
(paired, so that a machine that slows down for a while slows both sides of a round), with a
95% bootstrap interval over the rounds. Target: >= 0.98.

On a GPU each round also runs (c) ampbench without its GPU meter (RunContext.read_gpu: no NVML,
no sampler thread beside the training), and a second ratio, (a)'s throughput over (c)'s, is the
meter's own cost on the step (the energy counter's reads and the busy share's samples), with its
interval and a word on what the meter read. Target: the interval holds 1.0.

    python benchmarks/overhead.py                            # CPU, resnet18, batch 64, fp32
    python benchmarks/overhead.py --modes amp-bf16
    python benchmarks/overhead.py -p --modes fp32,amp-fp16   # GPU: each mode's rounds in turn
"""
import argparse
import copy
import statistics
import sys
import time

from utils import console  # no torch
from utils.config import COUNT, RANGES, add_flag, flag_type, mode_names
from utils.modes import MODES


def bare_loop(initial_model, data, mode, training, precision_settings, data_settings, speed, plan, device):
    """The AMP recipe by hand over the same batches, with the run's settings; returns seconds per timed step."""
    import torch
    from torch import nn

    from utils.data.loaders import make_train_loader
    from utils.training import precision
    from utils.training.step import advance, make_optimizer, make_scheduler, no_decay_flags

    precision.set_tf32(mode.tf32)
    model = copy.deepcopy(initial_model).to(device)
    params, scaler = precision.prepare_model(model, mode, device, precision_settings.loss_scale)
    recipe = plan.recipe
    optimizer, _ = make_optimizer(params, lr=recipe.lr, momentum=recipe.momentum, weight_decay=recipe.weight_decay,
                                  nesterov=training.nesterov, impl=training.optimizer_impl, kind=recipe.optimizer,
                                  no_decay=no_decay_flags(model, training.model))
    scheduler = make_scheduler(optimizer, training.lr_schedule, plan.steps, recipe.lr_warmup_steps)
    loader = make_train_loader(data_settings.loader, data.train_images, data.train_labels,
                               batch_size=training.batch_size, device=device, seed=training.seed,
                               workers=data_settings.workers, channels_last=speed.channels_last)
    criterion = nn.CrossEntropyLoss(label_smoothing=recipe.label_smoothing)
    started = None
    for step in range(plan.steps):
        if step == plan.timing_warmup:
            if device.type == "cuda":
                torch.cuda.synchronize()
            started = time.perf_counter()
        images, labels = next(loader)
        with precision.autocast(mode, device):
            loss = criterion(model(images).float(), labels)
        scaler.scale(loss).backward()
        scaler.step(optimizer)
        scaler.update()
        optimizer.zero_grad(set_to_none=True)
        advance(scheduler)
    if device.type == "cuda":
        torch.cuda.synchronize()
    return (time.perf_counter() - started) / (plan.steps - plan.timing_warmup)


def seconds_per_step(record):
    """(seconds per timed step of a run_mode record, from its own step timer; why its GPU meter
    read no busy share, or None)."""
    return sum(record.step_times_ms) / 1000.0 / len(record.step_times_ms), record.gpu_busy_unavailable


def paired_ratio(numerators, denominators):
    """(the median of the rounds' ratios, its 95% bootstrap interval over the rounds)."""
    import numpy as np

    ratios = np.array(numerators) / np.array(denominators)  # per round: paired
    resampled = np.median(ratios[np.random.default_rng(0).integers(0, len(ratios), (2000, len(ratios)))], axis=1)
    low, high = np.percentile(resampled, [2.5, 97.5])
    return float(np.median(ratios)), float(low), float(high)


def meter_line(times, read):
    """The GPU meter's cost: ampbench's throughput with it over without, and what it read."""
    ratio, low, high = paired_ratio(times["unmetered"], times["ampbench"])
    verdict = "holds 1.0" if low <= 1.0 <= high else "MISSES 1.0"
    what = ("it read the energy counter and the busy share's samples" if read is None or read.startswith("too few")
            else f"it read no busy share: {read}")
    return (f"GPU meter ratio with/without: {ratio:.3f} [95% CI {low:.3f}, {high:.3f}] over {len(times['ampbench'])} "
            f"paired rounds (target: the interval holds 1.0; it {verdict}); {what}")


def build_parser():
    """The script's flags; the GPU suite reads its estimate of a run from them."""
    parser = console.Parser("overhead.py", prog="python benchmarks/overhead.py", description=__doc__,
                            formatter_class=argparse.RawDescriptionHelpFormatter)
    add_flag(parser, "gpu")
    add_flag(parser, "model", default="resnet18", help="torchvision classification model (default %(default)s)")
    add_flag(parser, "batch_size", default=64)
    add_flag(parser, "modes", type=mode_names, default="fp32", help=f"the precision modes to time, a comma list "
             f"from {', '.join(MODES)}: each mode's rounds in turn (default %(default)s)")
    add_flag(parser, "optimizer_impl")
    # timed steps, after the warm-up: not main.py's --steps/-n, which counts the warm-up too
    parser.add_argument("--steps", dest="timed_steps", type=flag_type(RANGES["steps"]), default=8,
                        help="timed steps per run (default %(default)s)")
    add_flag(parser, "warmup", default=2, help="untimed steps at the start of each run (default %(default)s)")
    parser.add_argument("--rounds", type=flag_type(COUNT), default=9, help="runs of each kind, interleaved")
    return parser


def main():
    options = build_parser().parse_args()

    import torch

    from models import factory
    from utils import modes
    from utils.config import RunConfig
    from utils.data.dataset import synthetic
    from utils.training.start import pick_device, seeded_model

    device = pick_device(options.gpu, cudnn_benchmark=True)
    data = synthetic(device, seed=0)
    config = RunConfig.build(model=options.model, steps=options.warmup + options.timed_steps, warmup=options.warmup,
                             batch_size=options.batch_size, no_progress=True, no_eval=True,
                             optimizer_impl=options.optimizer_impl, gpu=options.gpu)
    model = seeded_model(config.training, config.data)
    plan = config.plan(factory.has_batch_norm(model), 1)
    name = torch.cuda.get_device_name() if options.gpu else "CPU"
    for mode in (modes.MODES[each] for each in options.modes):
        times, read = interleaved_times(model, data, mode, config, plan, device, options.rounds)
        print(f"{options.model}, batch {options.batch_size}, {mode.name}, {options.optimizer_impl} "
              f"{plan.recipe.optimizer}, {name}, {options.rounds} rounds x {options.timed_steps} timed steps "
              f"({options.warmup} warm-up)")
        for which in ("bare", "ampbench"):
            ms = 1000 * statistics.median(times[which])
            spread = 100 * (max(times[which]) - min(times[which])) / statistics.median(times[which])
            print(f"{which:>8}: median {ms:.2f} ms/step ({options.batch_size * 1000 / ms:.1f} img/s), "
                  f"rounds spread {spread:.0f}%")
        ratio, low, high = paired_ratio(times["bare"], times["ampbench"])
        print(f"throughput ratio ampbench/bare: {ratio:.3f} [95% CI {low:.3f}, {high:.3f}] over "
              f"{options.rounds} paired rounds (target >= 0.98)")
        print(meter_line(times, read) if "unmetered" in times else
              "GPU meter ratio: none on the CPU (no GPU to read); -p measures the meter's cost", flush=True)


def interleaved_times(model, data, mode, config, plan, device, rounds):
    """({kind: seconds per timed step of each round}, why the metered runs read no busy share, or
    None): each round runs ampbench's loop and the bare one, and on a GPU ampbench's without its
    meter, each kind going first in turn."""
    from utils.app import run_mode
    from utils.training.context import RunContext

    # the GPU meter's cost is measured on a GPU; a CPU run has no meter to turn off
    kinds = ["ampbench", "bare", "unmetered"] if device.type == "cuda" else ["ampbench", "bare"]
    times = {which: [] for which in kinds}
    read = None
    for round_ in range(rounds):
        for which in kinds[round_ % len(kinds):] + kinds[:round_ % len(kinds)]:
            if which == "bare":
                times[which].append(bare_loop(model, data, mode, config.training, config.precision, config.data,
                                              config.speed, plan, device))
                continue
            run = run_mode(model, mode, data, config, plan, RunContext(device, read_gpu=which == "ampbench"))
            seconds, why = seconds_per_step(run.record)
            times[which].append(seconds)
            read = why if which == "ampbench" else read
    return times, read

if __name__ == "__main__":
    sys.exit(console.run("overhead.py", main))
