"""Which planned steps are due on a device, and why: what a pass runs, in priority order, before
anything that is current. A step is due where its newest figures on the device (of any of its
dated folders) are missing, or were measured by code older than a change that moves them
(history.CHANGES), or with fewer repeats than the plan now asks, or without a field this code
records: the busy share, both FP32 baselines, an interval, an energy figure from windows long
enough. Each reason is a phrase a plan prints beside the step."""
from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence, Tuple

from benchmarks.suite.history import SavedSuite, load
from benchmarks.suite.plan import Command, Step
from utils import modes
from utils.config import input_shape_of
from utils.results.compare import MIN_RUNS

GOOD_RCS = (0, 143)  # a step that ended as planned (143: the resume check's SIGTERM)
BASELINES = modes.fp32_modes()  # the two FP32s README's speedups are against


@dataclass(frozen=True)
class Newest:
    """A step's newest measurement on a device: the suite that ran it and its results file as
    this code reads it (history.load: its comparison computed again), None for a step that
    writes none (the overhead benchmark's log)."""
    suite: SavedSuite
    document: Optional[Dict[str, Any]]


def newest(step: Step, suites: Sequence[SavedSuite]) -> Optional[Newest]:
    """Where `step` last ran to its end on the device (`suites` newest first): the first suite
    whose record has every one of its processes ended as planned."""
    for suite in suites:
        ended = {entry["name"] for entry in suite.record.get("steps_run", []) if entry.get("rc") in GOOD_RCS}
        if all(process in ended for process in step.processes):
            return Newest(suite, load(suite.folder, step.name))
    return None


def figures_of(step: Step) -> Tuple[str, ...]:
    """The kinds of figure `step` measures, in history.Change's words: read from its main.py runs'
    configs (as main.py builds them) and its studies' programs."""
    kinds: List[str] = []
    for command in step.commands:
        run = command.run
        if run is None:
            kinds += ["overhead"] if command.study is not None and command.study.script == "overhead.py" else []
            continue
        settings = run.config()
        kinds.append("memory")
        if settings.data.data == "synthetic" and large_synthetic(settings.data.image_size):
            kinds.append("synthetic-memory")
        if "amp-fp16" in [mode.name for mode in settings.precision.modes]:
            kinds.append("amp-fp16")
        if settings.precision.gpu:
            kinds += ["busy", "energy"]
    return tuple(dict.fromkeys(kinds))


def large_synthetic(image_size: int) -> bool:
    """Whether synthetic images of this side are so large that their fewest count outweighs
    CIFAR-10's bytes, the most one synthetic data set holds now (112 pixels and up)."""
    from utils.data.sizes import FEWEST_SYNTHETIC_IMAGES, SYNTHETIC_BYTES

    return FEWEST_SYNTHETIC_IMAGES * math.prod(input_shape_of(image_size)) > SYNTHETIC_BYTES


def mode_names(command: Command) -> List[str]:
    """The modes a main.py command trains, in order; none for a study's."""
    return [mode.name for mode in command.run.config().precision.modes] if command.run else []


def planned_repeats(step: Step) -> int:
    """The runs per mode a step's main.py commands ask for (--repeats), 1 without one."""
    return max((command.run.config().precision.repeats for command in step.commands if command.run), default=1)


def reasons(step: Step, suites: Sequence[SavedSuite], energy_window: bool) -> List[str]:
    """Why `step` is due on the device whose suites are `suites` (newest first); [] where its
    newest figures are current. `energy_window`: the plan times each of the step's modes for the
    window an energy figure needs (the headline's convnets on a GPU)."""
    found = newest(step, suites)
    if found is None:
        return ["never ran on this device"]
    moved: Dict[str, List[str]] = {}  # each change's commit: the kinds of figure it moves that the step shows
    for change in found.suite.older_than(figures_of(step), step.name):
        moved.setdefault(change.commit[:7], []).extend(kind for kind in change.moves if kind in figures_of(step))
    why = [f"measured by code older than `{commit}` ({', '.join(kinds)})" for commit, kinds in moved.items()]
    document = found.document
    if document is None or "runs" not in document:
        return why
    wanted = planned_repeats(step)
    repeats = document["config"].get("repeats") or 1
    if repeats < wanted:
        why.append(f"{repeats} of {wanted} repeats")
    gpu_runs = [run for run in document["runs"] if str(run.get("device", "")).startswith("cuda")]
    if gpu_runs and not any(run.get("gpu_busy") for run in gpu_runs) and any(
            fixable_busy(run.get("gpu_busy_unavailable")) for run in gpu_runs):
        why.append("no busy share")
    planned_modes = mode_names(step.commands[0])
    missing = [mode for mode in BASELINES if mode in planned_modes and mode not in document["comparison"]]
    if missing:
        why.append(f"no {' or '.join(missing)} baseline")
    if wanted >= MIN_RUNS and not any(row.speedup_ci95 for row in document["comparison"].values()):
        why.append("no interval")
    if energy_window and gpu_runs and not any(
            run.get("energy") and not run["energy"].get("window_too_short") for run in gpu_runs):
        why.append("energy window too short")
    return why


def fixable_busy(reason: Optional[str]) -> bool:
    """Whether a run without a busy share lacks it for a reason this code and the lent-GPU
    recipe remove: recorded before the share was measured, or without nvidia-ml-py."""
    from utils.measure.nvml_meter import NO_MODULE
    from utils.results.upgrade import BUSY_NOT_YET_MEASURED

    return reason in (BUSY_NOT_YET_MEASURED, NO_MODULE)


def due_steps(planned: Sequence[Step], device_folder: Path, energy_steps: Sequence[str],
              quick: bool = False) -> Dict[str, List[str]]:
    """{step: why it is due} for each of `planned` that is due on the device of `device_folder`,
    in the planned order; `energy_steps` are the steps timed for the energy window."""
    from benchmarks.suite.history import saved_suites

    suites = [suite for suite in saved_suites(device_folder) if bool(suite.record.get("quick")) == quick]
    due = {}
    for step in planned:
        why = reasons(step, suites, step.name in energy_steps)
        if why:
            due[step.name] = why
    return due


def due_on(device_folder: Path) -> Dict[str, List[str]]:
    """What a GPU pass by this code would find due on the device of `device_folder`, in priority
    order: planned as a pass with every mode and CIFAR-10 given (the lent-GPU recipe carries
    torchao and the subset)."""
    from benchmarks.suite.device import DataFacts
    from benchmarks.suite.plan import (
        MODES,
        SECTIONS,
        TRANSFORMER_MODES,
        Plan,
        Planner,
        available_flags,
        planned_steps,
        window_runs,
    )

    planner = Planner(device_folder, None, Plan(False), MODES, available_flags(), TRANSFORMER_MODES,
                      lambda line: None, DataFacts(None, 0, 0))
    return due_steps(planned_steps(planner, list(SECTIONS)), device_folder, list(window_runs(planner)))
