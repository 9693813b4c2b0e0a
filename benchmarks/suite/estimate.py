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
   * else that setting measured by another GPU's saved result file beside a mode this device
     measured in the same setting (scaled_runs): its steps times this device's over that file's in
     the modes both measured (eager FP8's step, which its FLOPs understate);
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
import statistics
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

from benchmarks import fp8_sweep
from benchmarks.suite.device import DataFacts
from benchmarks.suite.history import SavedSuite, saved_suites, upgraded
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
THIS_DEVICE, BY_FLOPS = "this device", "FLOPs"  # where a run's step time comes from, beside another GPU's name


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
    source: str  # "measured on DATE", "known --quick time", "runs measured", "runs scaled from DEVICE", "FLOPs"


class Estimator:
    """Estimates for one device, from what its results folders hold (and the folders of `others`,
    other GPUs, where it lacks a setting); refresh() after each step. `data` says what the runs
    train on, asked only when a run evaluates or counts epochs."""

    def __init__(self, device_folder: Path, device_name: str, quick: bool, data: Callable[[], DataFacts],
                 others: Sequence[Path] = ()) -> None:
        self.device_folder, self.device_name, self.quick, self.data = device_folder, device_name, quick, data
        self.others = [folder for folder in others if folder != device_folder]
        self.refresh()

    def refresh(self) -> None:
        """Read the saved step times and runs again (this run has saved another step)."""
        self.suites = self.suites_of(self.device_folder)
        self.runs = measured_runs(suite_documents(self.suites))
        self.scaled = scaled_runs(self.runs, suite_documents([suite for folder in self.others
                                                              for suite in self.suites_of(folder)]))

    def suites_of(self, device_folder: Path) -> List[SavedSuite]:
        """A device's suites of this plan (--quick or not), newest first."""
        return [suite for suite in saved_suites(device_folder) if bool(suite.record.get("quick")) == self.quick]

    def saved(self, run: Run) -> Optional[MeasuredRun]:
        """`run`'s setting as this device measured it, else as scaled from another GPU's."""
        return self.runs.get(run.key) or (self.scaled[run.key].run if run.key in self.scaled else None)

    def source(self, run: Run) -> str:
        """Where `run`'s step time comes from: "this device", another GPU's name, or "FLOPs"."""
        if run.key in self.runs:
            return THIS_DEVICE
        return self.scaled[run.key].device if run.key in self.scaled else BY_FLOPS

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
        sources = {self.source(run) for run in runs}
        if not runs or BY_FLOPS in sources:
            return Estimate(seconds, "FLOPs")
        scaled = sorted(sources - {THIS_DEVICE})  # a margin learned from measured steps leaves these out
        return Estimate(seconds, f"runs scaled from {' and '.join(scaled)}'s" if scaled else "runs measured")

    def fastest_step_s(self, run: Run) -> Tuple[float, str]:
        """(one training step of `run`'s setting in seconds, the fastest run's median where this
        device measured it or another GPU's scaled, else by its FLOPs; where it comes from, as source())."""
        saved = self.saved(run)
        if saved is not None:
            return saved.fastest_s, self.source(run)
        return train_flops(run.model, run.stem, run.batch, run.image_size) / self.rate(run), BY_FLOPS

    def run_seconds(self, run: Run) -> float:
        evaluation = 0.0
        if run.evaluations:  # an evaluated image: a forward, a third of a training step's FLOPs
            image_flops = train_flops(run.model, run.stem, 1, run.image_size)
            evaluation = run.evaluations * self.data().test_images * image_flops / 3 / self.rate(run)
        saved = self.saved(run)
        step_s = None if saved else train_flops(run.model, run.stem, run.batch, run.image_size) / self.rate(run)
        return run_seconds(run, saved, step_s, evaluation)

    def rate(self, run: Run) -> float:
        """FLOPs per second of `run`'s training steps."""
        return rate(run.mode, self.device_name, run.on_cpu, os.cpu_count() or 1)


@dataclass(frozen=True)
class Window:
    """A headline step's steps per mode (-n, and --mode-steps for the modes that need fewer): each
    mode's timed steps last the energy window and a tenth by its own step, its fastest run's median
    measured on this device, scaled from another GPU's or by its FLOPs (`step_s`; `source` says
    which, as Estimator.source)."""
    steps: Dict[str, int]
    step_s: Dict[str, float]
    source: Dict[str, str]

    def settings(self) -> Dict[str, Any]:
        """steps (the most any mode needs) and mode_steps for each mode that needs fewer."""
        most = max(self.steps.values())
        fewer = [f"{mode}={steps}" for mode, steps in self.steps.items() if steps < most]
        return {"steps": most, **({"mode_steps": ",".join(fewer)} if fewer else {})}

    def describe(self, warmup: int) -> str:
        said = {THIS_DEVICE: "measured on this device", BY_FLOPS: "from its FLOPs"}
        groups: Dict[str, List[str]] = {}
        for mode, source in self.source.items():
            groups.setdefault(said.get(source, f"scaled from {source}'s runs"), []).append(mode)
        here = said[THIS_DEVICE]  # the modes measured here first, then each other source's
        source = ", ".join(list(groups) if len(groups) == 1 else [here] * (here in groups) + [
            f"{', '.join(modes)}'s {how}" for how, modes in groups.items() if how != here])
        return (f"each mode timed for its own window, at least {WINDOW_MARGIN * MIN_ENERGY_WINDOW_S:g} s (the energy "
                f"window and a tenth) after {warmup} warm-up steps: "
                + ", ".join(f"{mode} {steps} steps of {1000 * self.step_s[mode]:.1f} ms"
                            for mode, steps in self.steps.items()) + f", each step {source}")


def window_steps(estimator: Estimator, plan: Plan, runs: Sequence[Run]) -> Window:
    """The steps of each of `runs`' modes (one run of each, as the headline step runs it) on a
    GPU: at least the plan's steps, and enough that the mode's fastest run times WINDOW_MARGIN x
    MIN_ENERGY_WINDOW_S after the warm-up, and not a step more: a lease's minutes are few."""
    steps, seconds, source = {}, {}, {}
    for run in runs:
        seconds[run.mode], source[run.mode] = estimator.fastest_step_s(run)
        timed = math.ceil(WINDOW_MARGIN * MIN_ENERGY_WINDOW_S / seconds[run.mode])
        steps[run.mode] = min(max(plan.steps, plan.warmup + timed), LARGEST_COUNT)
    return Window(steps, seconds, source)


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


@dataclass(frozen=True)
class ScaledRun:
    run: MeasuredRun  # another GPU's measurement, scaled to this device
    device: str  # that GPU's name


def suite_documents(suites: Sequence[SavedSuite]) -> List[Tuple[str, Dict[RunKey, MeasuredRun]]]:
    """Each result document of `suites` (newest first), as (its device's name, its runs by setting)."""
    found = []
    for suite in suites:
        for path in sorted(suite.folder.glob("*.json")):
            document = upgraded(suite.folder, path.stem)
            if document is not None and "runs" in document:
                found.append((str(suite.record.get("device") or suite.folder.parent.name), document_runs(document)))
    return found


def scaled_runs(here: Dict[RunKey, MeasuredRun],
                documents: Sequence[Tuple[str, Dict[RunKey, MeasuredRun]]]) -> Dict[RunKey, ScaledRun]:
    """Each setting `here` lacks, from the first of another GPU's `documents` that measured it in
    the same process as modes `here` measured in the same setting: that document's steps times
    this device's over that document's in those shared modes (the geometric mean of their ratios),
    its first step's extra as it was. A mode's cost beside others measured with it carries from
    one GPU to a similar one far better than its FLOPs do where the step is not bound by its
    arithmetic (eager FP8's, by its casts and scales)."""
    found: Dict[RunKey, ScaledRun] = {}
    for device, runs in documents:
        for key, measured in runs.items():
            shared = [other for other in runs if other in here and other[:2] + other[3:] == key[:2] + key[3:]]
            if key in here or key in found or not shared:
                continue
            median, fastest = (math.exp(statistics.mean(
                math.log(getattr(here[other], field) / getattr(runs[other], field)) for other in shared))
                for field in ("median_s", "fastest_s"))
            found[key] = ScaledRun(MeasuredRun(measured.median_s * median, measured.first_extra_s,
                                               measured.fastest_s * fastest), device)
    return found


def measured_runs(documents: Sequence[Tuple[str, Dict[RunKey, MeasuredRun]]]) -> Dict[RunKey, MeasuredRun]:
    """Each run setting's first measurement in `documents` (newest first)."""
    found: Dict[RunKey, MeasuredRun] = {}
    for _, runs in documents:
        for key, measured in runs.items():
            found.setdefault(key, measured)
    return found
