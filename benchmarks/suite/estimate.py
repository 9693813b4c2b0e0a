"""How long a step of the GPU suite will take, estimated before it starts: what --budget spends by.

A step's training runs are read from its own commands, so a step is described once: a main.py
command's from the typed run it renders (main_run.MainRun, through RunConfig), a study's from the
typed run it renders (study_run.StudyRun: the options its parser would give).
Its estimate is, by the first of these that applies:

1. measured: the newest time the same step (its processes, by name, with the same commands, the
   paths they write to and read from aside) took on this device with the same plan (--quick or
   not), from the suite.json of any results/<device>/<date>/ folder, this run's own included (it
   is saved after every step);
2. --quick, on a CPU: the seconds the step takes on a 2-core machine like CI's, as its description
   says (plan.STEPS' quick_s: a CPU's time at these tiny sizes is start-up and per-operation
   overhead, which FLOPs do not predict);
3. on a GPU: its processes' start-up (START_S) and, for each training run a process makes, its
   time by utils/measure/estimate.py (which main.py --advise's plan spends by too):
   * the same model, stem, mode, batch, layout, compilation and image size measured in a saved
     result file of this device: its median step for every step, and for the first run of its
     mode in its process the extra its first step took (cuDNN's autotuning, compilation);
   * else its FLOPs at its image size (utils/measure/flops.py: a training step's, and for each
     test image evaluated a third of one image's step; the FP8 sweep's blocks by fp8_sweep.py)
     at UTILISATION of the GPU's dense peak for the mode's arithmetic, plus FIRST_RUN_S for the
     first run of each mode and COMPILE_S for a compiled one; a run on the node's CPU at
     CPU_GFLOPS_PER_CORE per core.

Work that is not training (the loader benchmark's timing of the input pipelines) is counted in
the start-up only, until the step has been measured once; `main.py --advise` is counted at the
--budget it is given, which it stops within.
"""
from __future__ import annotations

import argparse
import functools
import json
import math
import os
import shlex
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

from benchmarks import fp8_sweep
from benchmarks.suite.device import DataFacts
from benchmarks.suite.history import saved_suites, upgraded
from benchmarks.suite.plan import ROOT, Command, Plan, Step
from models.families import DEFAULT_IMAGE_SIZE
from utils.config import DEFAULT_BUDGET_MINUTES, LARGEST_COUNT, RunConfig, mode_steps_of
from utils.errors import not_installed
from utils.measure.estimate import (
    START_S,
    MeasuredRun,
    Run,
    RunKey,
    document_runs,
    rate,
    run_seconds,
    training_runs,
)
from utils.measure.nvml_meter import MIN_ENERGY_WINDOW_S

# one image's training FLOPs of every model the suite's plans train, counted by torch: generate_flops.py writes it
FLOPS_TABLE = Path(__file__).with_name("flops.json")
GOOD_RCS = (0, 143)  # a step's time counts when it ended as planned (143: the resume check's SIGTERM)
# The headline's timed steps of each mode: the energy window and a tenth, at the mode's fastest run's median step
# measured on the device; a run whose steps ran faster still would fall short, and its step is due again
WINDOW_MARGIN = 1.1


def main_py_runs(config: RunConfig, data: Callable[[], DataFacts]) -> List[Run]:
    """The runs of one main.py process, from its config; the data's size is asked for only where
    --epochs or an evaluation needs it."""
    steps = config.training.steps
    if steps is None:  # --epochs: the dataset's size settles the steps
        steps = config.plan(batch_norm=True, world_size=1, train_images=data().train_images).steps
    evaluations = 0
    if not config.training.no_eval:  # the evaluations on its cadence, and a last one at the end where it falls between
        every = config.eval_every_steps(data().train_images, 1) if config.accuracy.eval_every else None
        evaluations = -(-steps // every) if every else 1
    measurement = config.measurement
    profiled = measurement.explain_steps + 1 if measurement.explain else 0  # with torch.profiler's warm-up step
    own = {mode: count + profiled for mode, count in mode_steps_of(config.precision.mode_steps).items()}
    return training_runs(config.training.model, config.training.stem, [mode.name for mode in config.modes],
                         config.training.batch_size, steps + profiled, config.precision.repeats * config.accuracy.seeds,
                         config.speed.channels_last, config.speed.compile, evaluations, not config.precision.gpu,
                         config.data.image_size, own)


def advice_budget_s(command: Command) -> Optional[float]:
    """The seconds an --advise command is given (its --budget, or the adviser's default), within
    which it stops; None for any other command."""
    if command.run is None:
        return None
    config = command.run.config()
    return 60.0 * (config.advice.budget or DEFAULT_BUDGET_MINUTES) if config.advice.advise else None


def overhead_runs(options: argparse.Namespace) -> List[Run]:
    """benchmarks/overhead.py: every round of each mode runs ampbench's loop and the bare one, and
    on a GPU ampbench's without its GPU meter too."""
    loops = 3 if options.gpu else 2
    return [Run(options.model, "cifar", mode, options.batch_size, options.warmup + options.timed_steps,
                first=loop == 0, on_cpu=not options.gpu)
            for mode in options.modes for loop in range(loops * options.rounds)]


def loader_runs(options: argparse.Namespace) -> List[Run]:
    """benchmarks/loader.py: with -p, an AMP run of each of its models beside the pipelines' timing."""
    from benchmarks import loader

    if not options.gpu:
        return []
    return [Run(model, "cifar", "amp-fp16", options.batch_size, loader.AMP_STEPS, channels_last=True)
            for model in loader.AMP_MODELS]


def sweep_runs(options: argparse.Namespace) -> List[Run]:
    """benchmarks/fp8_sweep.py: each width's blocks in the baseline and both fp8 recipes."""
    return [run for width in options.widths for run in training_runs(
        fp8_sweep.block_name(width), "cifar", [fp8_sweep.BASELINE, *fp8_sweep.FP8_MODES], options.batch_size,
        options.warmup + options.timed_steps, on_cpu=not options.gpu)]


# How the runs of each study's process are read from its options
STUDY_RUNS: Dict[str, Callable[[argparse.Namespace], List[Run]]] = {
    "overhead.py": overhead_runs, "loader.py": loader_runs, "fp8_sweep.py": sweep_runs}


def runs_of(command: Command, data: Callable[[], DataFacts]) -> List[Run]:
    """The training runs `command` makes: a main.py run's from its config, a study's from its
    options; none for a process the suite knows only by its words."""
    if command.run is not None:
        return main_py_runs(command.run.config(), data)
    if command.study is not None:
        return STUDY_RUNS[command.study.script](command.study.options())
    return []


@dataclass(frozen=True)
class Estimate:
    seconds: float
    source: str  # "measured on DATE", "known --quick time", "runs measured", "FLOPs"


class Estimator:
    """Estimates for one device, from what its results folders hold; refresh() after each step.
    `data` says what the runs train on, asked only when a run evaluates or counts epochs."""

    def __init__(self, device_folder: Path, device_name: str, quick: bool, data: Callable[[], DataFacts]) -> None:
        self.device_folder, self.device_name, self.quick, self.data = device_folder, device_name, quick, data
        self.refresh()

    def refresh(self) -> None:
        """Read the saved step times and runs again (this run has saved another step)."""
        self.suites = [suite for suite in saved_suites(self.device_folder)
                       if bool(suite.record.get("quick")) == self.quick]
        self.runs = measured_runs([suite.folder for suite in self.suites])

    def estimate(self, step: Step) -> Estimate:
        processes = step.processes
        planned = {command.name: command_words(command.argv) for command in step.commands}
        for suite in self.suites:  # newest first
            times = {entry["name"]: entry["elapsed_s"] for entry in suite.record.get("steps_run", [])
                     if entry.get("rc") in GOOD_RCS and "elapsed_s" in entry
                     and command_words(shlex.split(str(entry.get("command", "")).split("  (")[0]))
                     == planned.get(entry["name"])}
            if all(process in times for process in processes):
                return Estimate(sum(times[process] for process in processes), f"measured on {suite.date}")
        if self.quick and step.quick_s is not None:
            return Estimate(float(step.quick_s), "known --quick time")
        budgets = [advice_budget_s(command) for command in step.commands]
        if any(budget is not None for budget in budgets):  # the adviser spends what it is given, and stops
            return Estimate(START_S * len(processes) + sum(budget or 0.0 for budget in budgets), "its --budget")
        runs = [run for command in step.commands for run in runs_of(command, self.data)]
        seconds = START_S * len(processes) + sum(self.run_seconds(run) for run in runs)
        return Estimate(seconds, "runs measured" if runs and all(run.key in self.runs for run in runs) else "FLOPs")

    def fastest_step_s(self, run: Run) -> Tuple[float, bool]:
        """(one training step of `run`'s setting in seconds, the fastest run's median where this
        device measured it, else by its FLOPs; whether this device measured it)."""
        saved = self.runs.get(run.key)
        if saved is not None:
            return saved.fastest_s, True
        return train_flops(run.model, run.stem, run.batch, run.image_size) / self.rate(run), False

    def run_seconds(self, run: Run) -> float:
        evaluation = 0.0
        if run.evaluations:  # an evaluated image: a forward, a third of a training step's FLOPs
            image_flops = train_flops(run.model, run.stem, 1, run.image_size)
            evaluation = run.evaluations * self.data().test_images * image_flops / 3 / self.rate(run)
        saved = self.runs.get(run.key)
        step_s = None if saved else train_flops(run.model, run.stem, run.batch, run.image_size) / self.rate(run)
        return run_seconds(run, saved, step_s, evaluation)

    def rate(self, run: Run) -> float:
        """FLOPs per second of `run`'s training steps."""
        return rate(run.mode, self.device_name, run.on_cpu, os.cpu_count() or 1)


@dataclass(frozen=True)
class Window:
    """A headline step's steps per mode (-n, and --mode-steps for the modes that need fewer): each
    mode's timed steps last the energy window and a tenth by its own step, its fastest run's median
    measured on this device or by its FLOPs (`step_s`; `measured` says which)."""
    steps: Dict[str, int]
    step_s: Dict[str, float]
    measured: Dict[str, bool]

    def settings(self) -> Dict[str, Any]:
        """steps (the most any mode needs) and mode_steps for each mode that needs fewer."""
        most = max(self.steps.values())
        fewer = [f"{mode}={steps}" for mode, steps in self.steps.items() if steps < most]
        return {"steps": most, **({"mode_steps": ",".join(fewer)} if fewer else {})}

    def describe(self, warmup: int) -> str:
        by_flops = [mode for mode, measured in self.measured.items() if not measured]
        source = ("measured on this device" if not by_flops else "from its FLOPs" if len(by_flops) == len(self.steps)
                  else f"measured on this device, {', '.join(by_flops)}'s from its FLOPs")
        return (f"each mode timed for its own window, at least {WINDOW_MARGIN * MIN_ENERGY_WINDOW_S:g} s (the energy "
                f"window and a tenth) after {warmup} warm-up steps: "
                + ", ".join(f"{mode} {steps} steps of {1000 * self.step_s[mode]:.1f} ms"
                            for mode, steps in self.steps.items()) + f", each step {source}")


def window_steps(estimator: Estimator, plan: Plan, runs: Sequence[Run]) -> Window:
    """The steps of each of `runs`' modes (one run of each, as the headline step runs it) on a
    GPU: at least the plan's steps, and enough that the mode's fastest run times WINDOW_MARGIN x
    MIN_ENERGY_WINDOW_S after the warm-up, and not a step more: a lease's minutes are few."""
    steps, seconds, measured = {}, {}, {}
    for run in runs:
        seconds[run.mode], measured[run.mode] = estimator.fastest_step_s(run)
        timed = math.ceil(WINDOW_MARGIN * MIN_ENERGY_WINDOW_S / seconds[run.mode])
        steps[run.mode] = min(max(plan.steps, plan.warmup + timed), LARGEST_COUNT)
    return Window(steps, seconds, measured)


# The flags the studies spelled their own way before they took main.py's names, by program: a step
# saved with one is the step planned with the name it has now.
EARLIER_STUDY_FLAGS = {"overhead.py": {"--mode": "--modes", "--warmup": "--timing-warmup"},
                       "fp8_sweep.py": {"--batch": "--batch-size", "--warmup": "--timing-warmup"}}


def command_words(argv: Sequence[str]) -> Tuple[str, ...]:
    """A command's words from its program on (the interpreter that ran it aside), each path as its
    file's name, the data folder as DATA and a study's earlier flag as its flag now: two commands
    with the same words are the same step, whichever machine, checkout, results folder and version
    of the study ran them."""
    words = [word.replace(str(ROOT) + "/", "") for word in argv]
    start = next((index for index, word in enumerate(words) if word.endswith(".py")), len(words))
    earlier = EARLIER_STUDY_FLAGS.get(os.path.basename(words[start]), {}) if start < len(words) else {}
    kept = []
    for index in range(start, len(words)):
        word = earlier.get(words[index], words[index])
        kept.append("DATA" if index and words[index - 1] == "--data-dir" else word.rsplit("/", 1)[-1])
    return tuple(kept)


class Uncounted(Exception):
    """FLOPs that FLOPS_TABLE lacks and this Python cannot count: it has no torch (or torchvision)."""


def train_flops(model: str, stem: str, batch: int, image_size: int = DEFAULT_IMAGE_SIZE) -> int:
    """A training step's FLOPs: a batch's images at FLOPS_TABLE's count of one image, read
    without torch (--plan prints without it); counted by counted_flops where the table lacks it."""
    image = image_flops().get((model, stem, image_size))
    if image is not None:
        return image * batch
    try:
        return counted_flops(model, stem, batch, image_size)
    except ModuleNotFoundError as error:
        if error.name not in ("torch", "torchvision"):
            raise
        raise Uncounted(f"{model} with the {stem} stem at {image_size}x{image_size} is not in "
                        f"{FLOPS_TABLE}, and counting its FLOPs takes {error.name}; "
                        + not_installed(error.name)) from None


@functools.lru_cache(maxsize=None)
def image_flops() -> Dict[Tuple[str, str, int], int]:
    """FLOPS_TABLE: {(model, stem, image size): one image's training FLOPs}."""
    table = json.loads(FLOPS_TABLE.read_text())
    return {(entry["model"], entry["stem"], entry["image_size"]): entry["image_flops"] for entry in table["models"]}


@functools.lru_cache(maxsize=None)
def counted_flops(model: str, stem: str, batch: int, image_size: int = DEFAULT_IMAGE_SIZE) -> int:
    """A training step's FLOPs, counted by torch once per model, stem, batch and image size; a
    model named like fp8_sweep.block_name's is the FP8 sweep's blocks."""
    from models import factory
    from utils.config import input_shape_of
    from utils.measure import flops

    if model.startswith(fp8_sweep.BLOCKS):
        return fp8_sweep.step_flops(model, batch)
    return flops.training_flops_per_step(factory.build_model(model, stem, image_size=image_size), batch,
                                         input_shape_of(image_size))


def measured_runs(folders: Sequence[Path]) -> Dict[RunKey, MeasuredRun]:
    """Each run setting's newest measurement in the result files of `folders` (newest folder first)."""
    found: Dict[RunKey, MeasuredRun] = {}
    for folder in folders:
        for path in sorted(folder.glob("*.json")):
            document = upgraded(folder, path.stem)
            if document is not None and "runs" in document:
                for key, measured in document_runs(document).items():
                    found.setdefault(key, measured)
    return found
