"""Do --explain, --numerics and --eval-every change the timed steps? They should not:
--explain profiles steps after the timed ones, and --numerics and --eval-every examine or
evaluate in pauses left out of the step times. Times, in one process and interleaved, the same
mode run by utils.app.run_mode (the code main.py runs) without and with the flag, and prints the
median step time of each, their ratio with its 95% bootstrap interval over the rounds, and
whether they agree within noise (the interval holds 1.0); each mode of --modes in turn.

    python benchmarks/diagnostics_overhead.py      # --explain; CPU, resnet18 (ImageNet stem), batch 32, fp32
    python benchmarks/diagnostics_overhead.py --flag numerics --numerics-every 4
    python benchmarks/diagnostics_overhead.py --flag eval-every --eval-every 0.02   # the CIFAR-10 subset
    python benchmarks/diagnostics_overhead.py -p --modes amp-fp16,amp-bf16 --model resnet50 -b 256
"""
import argparse
import os
import statistics
import sys

from utils import console  # no torch
from utils.config import COUNT, add_flag, flag_type, mode_names
from utils.modes import MODES

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

SUBSET = os.path.join(os.path.dirname(ROOT), "shared", "data", "cifar10-subset", "cifar-10-batches-py")


def build_parser() -> console.Parser:
    parser = console.Parser("diagnostics_overhead.py", prog="python benchmarks/diagnostics_overhead.py",
                            description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_flag(parser, "gpu")
    add_flag(parser, "model", default="resnet18", help="torchvision classification model (default %(default)s)")
    add_flag(parser, "stem", default="imagenet", help="the ResNet family's first conv and max-pool: main.py's --stem "
             "(default %(default)s)")
    add_flag(parser, "batch_size", default=32)
    add_flag(parser, "modes", type=mode_names, default="fp32", help=f"the precision modes to time, a comma list "
             f"from {', '.join(MODES)}: each mode's rounds in turn (default %(default)s)")
    add_flag(parser, "steps", default=12, help="steps per run, warm-up included (default %(default)s)")
    add_flag(parser, "warmup", default=2, help="steps of each run left out of its step times (default %(default)s)")
    parser.add_argument("--rounds", type=flag_type(COUNT), default=5,
                        help="runs of each kind, alternating which goes first")
    parser.add_argument("--flag", choices=["explain", "numerics", "eval-every"], default="explain")
    add_flag(parser, "numerics_every", default=50, help="steps between samples with --flag numerics "
             "(default %(default)s)")
    add_flag(parser, "eval_every", default=0.02, help="epochs between evaluations with --flag eval-every "
             "(default %(default)s)")
    add_flag(parser, "data_dir", default=SUBSET, help="CIFAR-10 for --flag eval-every (default: the subset)")
    return parser


def main():
    options = build_parser().parse_args()

    import functools

    import torch

    from models import factory
    from utils import modes
    from utils.app import run_mode
    from utils.config import RunConfig
    from utils.data import dataset
    from utils.data.dataset import synthetic
    from utils.results.compare import bootstrap_ratio
    from utils.training.context import RunContext
    from utils.training.start import pick_device, seeded_model

    device = pick_device(options.gpu, cudnn_benchmark=True)
    evaluating = options.flag == "eval-every"  # needs test images: the real data
    common = {"model": options.model, "stem": options.stem, "steps": options.steps, "warmup": options.warmup,
              "batch_size": options.batch_size, "no_progress": True, "no_eval": not evaluating, "data": "cifar10",
              "data_dir": options.data_dir, "download": False, "allow_unverified": True}
    plain = RunConfig.build(**common)
    flagged = RunConfig.build(**common, **({"eval_every": options.eval_every} if evaluating else
                                          {"numerics_every": options.numerics_every} if options.flag == "numerics"
                                          else {"explain": True}))
    data = dataset.load(plain.data, device, 0)[0] if evaluating else synthetic(device, seed=0)
    model = seeded_model(plain.training, plain.data)
    plan = flagged.plan(factory.has_batch_norm(model), 1, len(data.train_images))
    name = torch.cuda.get_device_name() if options.gpu else "CPU"
    for mode in (modes.MODES[each] for each in options.modes):
        runs = {kind: functools.partial(run_mode, model, mode, data, config, plan, RunContext(device))
                for kind, config in (("without", plain), ("with", flagged))}
        medians = interleaved_medians(runs, options)
        print(f"{options.model} (stem {options.stem}), batch {options.batch_size}, {mode.name}, {name}, "
              f"{options.rounds} rounds x {options.steps - options.warmup} timed steps")
        for kind, values in medians.items():
            print(f"{kind:>7} --{options.flag}: median step {statistics.median(values):.2f} ms "
                  f"(rounds: {', '.join(f'{value:.1f}' for value in values)})")
        ratio = statistics.median(medians["with"]) / statistics.median(medians["without"])
        low, high = bootstrap_ratio(medians["with"], medians["without"])
        verdict = "agree within noise" if low <= 1.0 <= high else "DIFFER"
        print(f"step time ratio with/without --{options.flag}: {ratio:.3f} [95% CI {low:.3f}, {high:.3f}]: {verdict}",
              flush=True)

def interleaved_medians(runs, options):
    """Each round runs the mode without and with the flag (`runs`: each kind's run_mode, as main.py
    runs it), alternating which goes first (to cancel drift); returns their median step times,
    and checks that the flag did its work."""
    shows = {"explain": lambda result: result.profile is not None,
             "numerics": lambda result: result.numerics is not None,
             "eval-every": lambda result: len(result.accuracy_curve) > 1}[options.flag]
    medians = {"without": [], "with": []}
    for round_ in range(options.rounds):
        for kind in ("without", "with") if round_ % 2 == 0 else ("with", "without"):
            result = runs[kind]().record
            assert shows(result) == (kind == "with")
            medians[kind].append(result.step_time_ms["median"])
    return medians


if __name__ == "__main__":
    sys.exit(console.run("diagnostics_overhead.py", main))
