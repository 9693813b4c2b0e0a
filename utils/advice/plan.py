"""The planner of --advise: what this device can run (Capabilities), how long each run will take
(Estimates, by utils/measure/estimate.py) and the budget give the phases to run, each with its
estimated seconds. Plain functions of plain data, no torch: preflight.py fills the inputs, and
the session re-plans each phase with the step times measured so far before it starts.

The phases, in the order they run: the comparison of every mode this device runs at speed
(alternating, MIN_RUNS repeats, with --explain's profile after the timed steps); where its two
leading modes tie (their interval holds 1), re-measures of just those two, REMEASURE_REPEATS more
alternating repeats at a time, until the interval excludes 1 or they have MOST_PAIRS; then each
speed lever that applies, one at a time, on the leading modes; then, where the leading mode's
memory leaves room, the larger batch (BATCH_FACTOR times the user's) in that mode; then the
accuracy check, the leading mode against fp32 over paired seeds at the user's own length.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional, Sequence, Tuple

from utils import config
from utils.measure.estimate import MeasuredRun, run_seconds, training_runs
from utils.measure.nvml_meter import MIN_ENERGY_WINDOW_S
from utils.results.compare import MIN_RUNS

MIN_TIMED = 3  # timed steps a run needs at least: the median of three
MOST_TIMED = {"cuda": 200, "cpu": 20}  # and at most: beyond these a longer comparison adds little
WARMUP = {"cuda": 10, "cpu": 2}  # steps left out of the timing: cuDNN's autotuning on a GPU, allocation on a CPU
EXPLAIN_STEPS = {"cuda": 3, "cpu": 1}  # steps --explain profiles per run, after the timed ones
COMPARE_SHARE = 0.5  # of the budget left, what the comparison may take beyond its least
SEEDS = 3  # the accuracy check's seeds: the fewest whose interval says more than its width
SPELLED = {"steps": "-n"}  # how a phase types a flag where not by its first name
LEADING = 2  # the modes the levers are tried on: the advised one and the next tied with it
REMEASURE_REPEATS = 2  # a re-measure's alternating repeats: A B B A, so that drift cancels within it too
MOST_PAIRS = 7  # the leading modes' paired repeats beyond which a tie is called a tie
REMEASURES = ("re-measure", "re-measure again")  # (MOST_PAIRS - MIN_RUNS) / REMEASURE_REPEATS, named without digits
assert len(REMEASURES) == (MOST_PAIRS - MIN_RUNS) // REMEASURE_REPEATS
LARGER_BATCH = "larger batch"  # the phase that times the leading mode at BATCH_FACTOR times the user's batch
BATCH_FACTOR = 2
ROOM = 0.9  # of the device's memory a larger batch may take, estimated from the comparison's peak


@dataclass(frozen=True)
class Capabilities:
    """What this device and install run, found without timed steps (preflight.py)."""
    device: str  # "cuda" or "cpu"
    device_name: str  # torch.cuda.get_device_name(), or the CPU's model
    modes: Tuple[str, ...]  # the modes to time, fp32 first
    not_timed: Dict[str, str]  # mode: why it is not timed (refused here, slow here, FP8 predicted slower)
    levers: Tuple[Tuple[str, Dict[str, Any]], ...]  # (lever, the settings its phase runs with), in order
    no_levers: Dict[str, str]  # lever: why it is not tried
    accuracy: Optional[str] = None  # why the accuracy check cannot run here (no test images), or None
    memory_bytes: Optional[int] = None  # what a larger batch may fill: the GPU's memory, or the host's available


@dataclass(frozen=True)
class Estimates:
    """What a run's seconds are estimated from: the setting's FLOPs before anything ran, and the
    step times measured since (`measured`, by mode)."""
    model: str
    stem: str
    batch: int
    image_size: int
    on_cpu: bool
    start_s: float  # a main.py process's start to its first step
    flops_step_s: Dict[str, float]  # one training step of each mode, by its FLOPs
    compile_s: float
    evaluation_s: float  # one pass over the test images
    measured: Dict[str, MeasuredRun] = field(default_factory=dict)

    def step_s(self, mode: str) -> float:
        measured = self.measured.get(mode)
        return measured.median_s if measured else self.flops_step_s[mode]


@dataclass(frozen=True)
class Phase:
    """One main.py process of the advice: `repeats` runs of each of `modes` (seeds, for the
    accuracy check), `steps` each, the first `warmup` untimed; `settings` the lever it tries."""
    name: str  # "compare", a re-measure, a lever of levers.LEVERS, LARGER_BATCH or "accuracy"
    modes: Tuple[str, ...]
    steps: int
    warmup: int
    repeats: int
    explain_steps: int = 0
    settings: Dict[str, Any] = field(default_factory=dict)  # what it changes: a lever's settings, or the batch
    estimate_s: float = 0.0

    @property
    def kind(self) -> str:
        if self.name in REMEASURES:
            return "re-measure"
        if self.name == LARGER_BATCH:
            return "batch"
        return self.name if self.name in ("compare", "accuracy") else "lever"

    @property
    def compiled(self) -> bool:
        return bool(self.settings.get("compile"))

    def flags(self) -> List[str]:
        """main.py's flags that make this phase (its lever's settings apart: commands.py), rendered
        from its settings as main.py reads them back."""
        settings: Dict[str, Any] = {"modes": ",".join(self.modes)}
        if self.kind == "accuracy":
            settings["seeds"] = self.repeats
        else:
            explain = {"explain": True, "explain_steps": self.explain_steps} if self.explain_steps else {}
            settings.update(repeats=self.repeats, steps=self.steps, warmup=self.warmup, no_eval=True, **explain)
        return [word for key, value in settings.items() for word in config.flag_words(key, value, SPELLED.get(key))]


def seconds(phase: Phase, estimates: Estimates) -> float:
    """`phase`'s estimated seconds: a process's start, and each run by utils/measure/estimate.py,
    measured where its mode ran before (a compiled run has its compile time on top)."""
    profiled = phase.explain_steps + 1 if phase.explain_steps else 0  # with the profiler's warm-up step
    evaluations = 1 if phase.kind == "accuracy" else 0
    batch = phase.settings.get("batch_size", estimates.batch)
    runs = training_runs(estimates.model, estimates.stem, phase.modes, batch, phase.steps + profiled,
                         phase.repeats, bool(phase.settings.get("channels_last")), phase.compiled, evaluations,
                         estimates.on_cpu, estimates.image_size)
    scale = batch / estimates.batch  # a larger batch's step: at most proportionally longer, never measured yet
    return estimates.start_s + sum(
        run_seconds(run, None if run.compiled or scale != 1 else estimates.measured.get(run.mode),
                    scale * estimates.step_s(run.mode), run.evaluations * estimates.evaluation_s, estimates.compile_s)
        for run in runs)


def estimated(phase: Phase, estimates: Estimates) -> Phase:
    return Phase(phase.name, phase.modes, phase.steps, phase.warmup, phase.repeats, phase.explain_steps,
                 phase.settings, seconds(phase, estimates))


def compare_phase(capabilities: Capabilities, estimates: Estimates, left_s: float) -> Phase:
    """The comparison: every mode, MIN_RUNS repeats, with the most timed steps (up to the device's
    MOST_TIMED, and on a GPU no more than the energy meter's window needs) that keep it within
    COMPARE_SHARE of `left_s`; at the least MIN_TIMED, whatever it costs (the caller refuses a
    budget that this does not fit)."""
    device = capabilities.device
    warmup, explain = WARMUP[device], EXPLAIN_STEPS[device]
    most = MOST_TIMED[device]
    if device == "cuda":  # long enough for an energy figure, where the fastest mode's steps allow
        fastest = min(estimates.step_s(mode) for mode in capabilities.modes)
        most = min(most, max(MIN_TIMED, math.ceil(MIN_ENERGY_WINDOW_S / fastest)))
    best = estimated(Phase("compare", capabilities.modes, warmup + MIN_TIMED, warmup, MIN_RUNS, explain), estimates)
    for timed in range(MIN_TIMED + 1, most + 1):
        longer = estimated(Phase("compare", capabilities.modes, warmup + timed, warmup, MIN_RUNS, explain), estimates)
        if longer.estimate_s > COMPARE_SHARE * left_s:
            break
        best = longer
    return best


def lever_phase(lever: str, settings: Dict[str, Any], leading: Sequence[str], compare: Phase,
                estimates: Estimates) -> Phase:
    """`lever` on the leading modes, with the comparison's length and repeats: its runs and the
    comparison's of the same modes are what its interval compares."""
    return estimated(Phase(lever, tuple(leading[:LEADING]), compare.steps, compare.warmup, MIN_RUNS,
                           settings=settings), estimates)


def remeasure_phase(name: str, modes: Sequence[str], compare: Phase, estimates: Estimates) -> Phase:
    """REMEASURE_REPEATS more alternating repeats of the two tied leading `modes`, with the
    comparison's length, so that their runs pool with the comparison's; no profile."""
    return estimated(Phase(name, tuple(modes), compare.steps, compare.warmup, REMEASURE_REPEATS), estimates)


def batch_phase(lead: str, compare: Phase, estimates: Estimates) -> Phase:
    """The leading mode at BATCH_FACTOR times the user's batch, with the comparison's length and
    repeats: whether a larger batch trains more images a second (a host-limited step's lever)."""
    return estimated(Phase(LARGER_BATCH, (lead,), compare.steps, compare.warmup, MIN_RUNS,
                           settings={"batch_size": BATCH_FACTOR * estimates.batch}), estimates)


def accuracy_phase(lead: str, steps: int, estimates: Estimates) -> Phase:
    """The leading mode against fp32 over SEEDS paired seeds, each run `steps` long (the user's
    run) and evaluated at its end."""
    return estimated(Phase("accuracy", ("fp32", lead), steps, min(WARMUP["cuda"], steps // 2), SEEDS), estimates)


def leading_by_estimate(capabilities: Capabilities, estimates: Estimates) -> Tuple[str, ...]:
    """The modes expected to lead before any ran: the fastest by estimate, fp32 last among equals."""
    ranked = sorted(capabilities.modes, key=lambda mode: (estimates.step_s(mode), mode == "fp32"))
    return tuple(ranked[:LEADING])


def plan(capabilities: Capabilities, estimates: Estimates, left_s: float, accuracy_steps: int,
         leading: Optional[Sequence[str]] = None) -> List[Phase]:
    """Every phase the advice wants, in order, each estimated: the comparison, the levers on the
    `leading` modes (by estimate until the comparison has ranked them), the larger batch (where the
    device's memory is known), the accuracy check (none when the lead is fp32 itself, or the data
    has no test images)."""
    compare = compare_phase(capabilities, estimates, left_s)
    leading = tuple(leading or leading_by_estimate(capabilities, estimates))
    phases = [compare] + [lever_phase(lever, settings, leading, compare, estimates)
                          for lever, settings in capabilities.levers]
    if capabilities.memory_bytes is not None:  # whether it fits is known once the comparison measured a peak
        phases.append(batch_phase(leading[0], compare, estimates))
    if leading[0] != "fp32" and capabilities.accuracy is None:
        phases.append(accuracy_phase(leading[0], accuracy_steps, estimates))
    return phases


def fitting(phases: Sequence[Phase], left_s: float) -> Tuple[List[Phase], Dict[str, str]]:
    """(the phases that fit in `left_s` one after another, in order, a phase that does not fit
    skipped for the next; {phase: why not} for the rest)."""
    run, not_run = [], {}
    for phase in phases:
        if phase.estimate_s <= left_s:
            run.append(phase)
            left_s -= phase.estimate_s
        else:
            not_run[phase.name] = budget_note(phase.estimate_s, left_s)
    return run, not_run


def budget_note(needs_s: float, left_s: float) -> str:
    return f"needs about {minutes(needs_s)}, and {minutes(max(left_s, 0.0))} of the budget was left"


def minutes(seconds_: float) -> str:
    """"40 s" below two minutes, else "3.5 min"."""
    return f"{seconds_:.0f} s" if seconds_ < 120 else f"{seconds_ / 60:.1f} min"
