"""`python main.py --advise`: the preflight and the plan printed before anything trains, then each
phase as a main.py process of its own (the user's flags passed through, its results written as
--json), started only when its estimate fits in what is left of the budget and stopped with
SIGTERM at the deadline (main.py ends after the current step and writes what it measured), then
the advice decided from the saved results alone, as `--advise --from` decides it again.

The clock, the phase runner and the preflight are parameters, so that a fake clock and runner
prove the budget without training (tests/unit/advice).
"""
from __future__ import annotations

import dataclasses
import functools
import math
import os
import signal
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Dict, List, Optional, Tuple

from utils import children, config, launch
from utils import clock as utc
from utils.advice import commands, decide, document, frameworks, levers, plan
from utils.advice.decision import primary_index
from utils.advice.report import report
from utils.errors import UserError
from utils.measure.estimate import document_runs
from utils.modes import BASELINES
from utils.results import files
from utils.results.merge import load_result, merge, parsed
from utils.settings import CommandLine

if TYPE_CHECKING:
    from utils.advice.preflight import Preflight
    from utils.config import Accuracy, Advice, DataSettings, Precision, Speed, Training
    from utils.stop import StopRequest

MAIN = str(Path(__file__).resolve().parents[2] / "main.py")
GRACE_S = 30.0  # after SIGTERM, the least time a phase's process gets to end its step and write
RESULTS = "results.json"
TRACES = "traces"  # the comparison's profiler traces, in the advice folder
CIFAR_TRAIN_IMAGES = 50000  # what --epochs counts before the data is read


@dataclass(frozen=True)
class Outcome:
    """How a phase's process ended: its results file (None when it wrote none), exit status, the
    last sentence it said on an error, and its seconds."""
    results: Optional[str]
    returncode: int
    said: str
    elapsed_s: float


Clock = Callable[[], float]
Runner = Callable[[plan.Phase, List[str], float], Outcome]  # (phase, main.py's arguments, deadline)


def process_runner(folder: str, stop: StopRequest, clock: Clock = time.monotonic) -> Runner:
    """A Runner that starts main.py as utils/children.py starts every child (a session of its own,
    dying with this process), its output in logs/PHASE.log, and sends it SIGTERM at the deadline or
    at a stop signal (SIGKILL to its tree if it has not ended after GRACE_S or twice its slowest
    step's estimate)."""
    def run(phase: plan.Phase, argv: List[str], deadline: float) -> Outcome:
        log = os.path.join(folder, "logs", file_name(phase.name) + ".log")
        grace = max(GRACE_S, 2 * phase.estimate_s / max(phase.steps * phase.repeats, 1))
        with open(log, "w") as output:
            returncode, elapsed = children.run([sys.executable, MAIN, *argv], output, deadline,
                                               lambda: stop.requested, grace, clock)
        results = os.path.join(folder, "phases", file_name(phase.name) + ".json")
        return Outcome(results if os.path.isfile(results) else None, returncode, last_error(log), elapsed)

    return run


def file_name(phase: str) -> str:
    return phase.replace(" ", "-")


def last_error(log: str) -> str:
    """The sentence of the last `main.py: error:` line of a phase's log, or its last line."""
    with open(log, errors="replace") as text:
        lines = [line.strip() for line in text if line.strip()]
    errors = [line.split("error: ", 1)[1] for line in lines if line.startswith("main.py: error: ")]
    return (errors or lines or ["it printed nothing"])[-1]


@dataclass
class State:
    """What the session knows as it goes: the estimates (refined by each phase), the leading
    modes, the documents measured, the phases not run and why."""
    preflight: Preflight
    estimates: plan.Estimates
    capabilities: plan.Capabilities
    documents: List[Dict[str, Any]]
    not_run: Dict[str, Dict[str, Any]]
    cut_short: Dict[str, str] = dataclasses.field(default_factory=dict)  # phase: what stopped it before its last step
    leading: Optional[Tuple[str, ...]] = None
    compare: Optional[plan.Phase] = None
    ran: List[str] = dataclasses.field(default_factory=list)  # the phases started, in order
    train_images: int = CIFAR_TRAIN_IMAGES


def accuracy_steps(training: Training, data: DataSettings, train_images: int) -> int:
    """The user's run length in steps: the accuracy check's (the steps of --epochs by the data's size)."""
    if training.steps is not None:
        return training.steps
    assert training.epochs is not None  # RunConfig sets one of them
    return max(1, math.ceil(training.epochs * config.steps_per_epoch(training, data, train_images, 1)))


def phase_now(name: str, state: State, training: Training, data: DataSettings, left_s: float) -> Optional[plan.Phase]:
    """Phase `name` as it would run now, estimated with what has been measured; None where it
    does not apply (the accuracy check of fp32 itself, or of data without test images)."""
    if name == "compare":
        return plan.compare_phase(state.capabilities, state.estimates, left_s)
    if name in plan.REMEASURES:
        assert state.compare is not None  # a re-measure follows the comparison
        tied = tied_pair(state.documents)
        return plan.remeasure_phase(name, tied, state.compare, state.estimates) if tied else None
    leading = state.leading or plan.leading_by_estimate(state.capabilities, state.estimates)
    if name == "accuracy":
        if leading[0] == "fp32" or state.capabilities.accuracy is not None:
            return None
        return plan.accuracy_phase(leading[0], accuracy_steps(training, data, state.train_images), state.estimates)
    assert state.compare is not None  # a lever and a larger batch are tried after the comparison
    if name == plan.LARGER_BATCH:  # only where the device's memory is known, as plan.plan has it
        if state.capabilities.memory_bytes is None:
            return None
        return plan.batch_phase(leading[0], state.compare, state.estimates)
    if name in levers.LOADER and not input_bound(state, leading[0]):
        return None  # the loader keeps up, or the data was held in memory: the advice says which
    settings = dict(state.capabilities.levers)[name]
    return plan.lever_phase(name, settings, leading, state.compare, state.estimates)


def input_bound(state: State, lead: str) -> bool:
    """Whether the comparison found the loader bounding `lead` (its feed, measured on streamed data)."""
    merged = merge(state.documents)
    fed = merged[primary_index(merged)]["comparison"][lead].feed
    return bool(fed and fed["bound"] == "input")


def phase_argv(phase: plan.Phase, arguments: CommandLine, folder: str) -> List[str]:
    """main.py's arguments for `phase`; the comparison writes its profiler traces into TRACES."""
    results = os.path.join(folder, "phases", file_name(phase.name) + ".json")
    traces = commands.words(trace_dir=os.path.join(folder, TRACES)) if phase.kind == "compare" else []
    return commands.phase_command(commands.with_settings(arguments, phase.settings), [*phase.flags(), *traces],
                                  phase.kind == "accuracy", results)


def kept_traces(folder: str, documents: List[Dict[str, Any]]) -> Dict[str, str]:
    """{mode: its first repeat's profiler trace, relative to `folder`} of the comparison's runs
    (utils/app.py's layout: TRACES/MODEL-RUN/rank0.pt.trace.json), where the file was written."""
    config = documents[0]["config"]
    found = {}
    for run in documents[0]["runs"]:
        label = run["mode"] + (f"-repeat{run['repeat']}" if (config.get("repeats") or 1) > 1 else "")
        path = os.path.join(TRACES, f"{config['model']}-{label}", "rank0.pt.trace.json")
        if run["mode"] not in found and os.path.isfile(os.path.join(folder, path)):
            found[run["mode"]] = path
    return found


def learned_from(state: State, outcome: Outcome, phase: plan.Phase, documents: List[Dict[str, Any]]) -> None:
    """Refine the estimates with what a phase measured: each mode's step and first step (from the
    comparison, whose runs are the plain ones), a process's start, the data's size."""
    if phase.kind != "compare" or not documents:
        return
    document = documents[0]
    measured = {key[2]: found for key, found in document_runs(document).items()}
    walls = sum(run.get("wall_time_s") or 0.0 for run in document["runs"])
    data = document["data"]
    test_images = data.get("test_images") or 0
    fp32 = measured.get("fp32") or next(iter(measured.values()), None)
    evaluation = test_images * fp32.median_s / state.estimates.batch / 3 if fp32 else state.estimates.evaluation_s
    state.estimates = dataclasses.replace(state.estimates, measured=measured, evaluation_s=evaluation,
                                          start_s=max(outcome.elapsed_s - walls, 0.0))
    state.train_images = data.get("train_images") or state.train_images
    state.capabilities = dataclasses.replace(state.capabilities, accuracy=None if test_images and data["name"] !=
                                             "synthetic" else f"the runs' data ({data['name']}) has no test images")


def run_phases(training: Training, data: DataSettings, arguments: CommandLine, state: State, runner: Runner,
               clock: Clock, deadline: float, folder: str, stop: StopRequest) -> None:
    """Each phase in order, when its estimate fits in what is left, its command the user's,
    `arguments`, with the phase's own flags; the leading modes decided after the comparison."""
    names = ["compare", *plan.REMEASURES, *[lever for lever, _ in state.capabilities.levers], plan.LARGER_BATCH,
             "accuracy"]
    for name in names:
        if stop.requested and state.compare is None:  # nothing measured: no later phase can be estimated
            break
        left = deadline - clock()
        phase = phase_now(name, state, training, data, left)
        if phase is None:
            continue
        if stop.requested:
            state.not_run[name] = {"why": f"stopped by {stop.signal_name}", "estimate_s": phase.estimate_s}
            continue
        why = no_room(state) if phase.kind == "batch" else None
        if why is not None:
            state.not_run[name] = {"why": why, "estimate_s": phase.estimate_s}
            continue
        if phase.estimate_s > left:
            state.not_run[name] = {"why": plan.budget_note(phase.estimate_s, left), "estimate_s": phase.estimate_s}
            continue
        say(f"{name}: {', '.join(phase.modes)}, about {plan.minutes(phase.estimate_s)} of the "
            f"{plan.minutes(left)} left")
        outcome = runner(phase, phase_argv(phase, arguments, folder), deadline)
        state.ran.append(name)
        documents = load_result(outcome.results) if outcome.results else []
        if not documents:
            if stop.requested:  # the stop signal ended its process before it wrote a result
                state.not_run[name] = {"why": f"stopped by {stop.signal_name} before it wrote a result",
                                       "estimate_s": phase.estimate_s}
                continue
            if name == "compare":
                raise UserError(f"the comparison's run failed: {outcome.said}")
            state.not_run[name] = {"why": f"its run failed: {outcome.said}", "estimate_s": phase.estimate_s}
            continue
        if any(document.get("incomplete") for document in documents):
            stopped = f"{stop.signal_name} stopped it" if stop.requested else "the deadline stopped it"
            state.cut_short[name] = stopped + " before its last step"
        state.documents += documents
        learned_from(state, outcome, phase, documents)
        if phase.kind in ("compare", "re-measure"):
            state.compare = state.compare or phase
            state.leading = leading_modes(state.documents)


def leading_modes(documents: List[Dict[str, Any]]) -> Tuple[str, ...]:
    """The modes the comparison leads with: the one it advises, then those tied with it."""
    recommendation = decide.decide(documents, decide.Context(RESULTS), 0.0)["lean"]
    mode = recommendation["mode"]
    return (mode, *[other for other in recommendation["tied"] if other != mode])[:plan.LEADING]


def no_room(state: State) -> Optional[str]:
    """Why the leading mode's larger batch is not timed: the comparison's peak at the user's batch,
    BATCH_FACTOR times over, would not fit ROOM of the device's memory."""
    capacity = state.capabilities.memory_bytes
    assert capacity is not None and state.leading is not None  # phase_now planned it: both are known
    lead = state.leading[0]
    merged = merge(state.documents)
    needs = plan.BATCH_FACTOR * merged[primary_index(merged)]["comparison"][lead].peak_memory_bytes
    if needs <= plan.ROOM * capacity:
        return None
    return (f"{lead} at {plan.BATCH_FACTOR} times the batch needs about {needs / 2 ** 30:.1f} GiB by the comparison's "
            f"peak, more than {100 * plan.ROOM:.0f}% of the {capacity / 2 ** 30:.1f} GiB here")


def tied_pair(documents: List[Dict[str, Any]]) -> Optional[Tuple[str, str]]:
    """The comparison's fastest mode and its runner-up where their interval holds 1 (or there
    is none) and re-measuring can settle it: the timings are steady (unsteady ones would not
    settle with more of the same) and the two have fewer than MOST_PAIRS paired repeats."""
    decided = decide.decide(documents, decide.Context(RESULTS), 0.0)
    lean = decided["lean"]
    if decided["unsteady"] or lean["decision"] not in ("tie", "undecided"):
        return None
    fastest, runner_up = lean["tied"][0], lean["runner_up"]
    merged = max((found for found in merge(documents, runner_up) if {fastest, runner_up} <= set(found["comparison"])),
                 key=lambda found: len(found["runs"]))
    pairs = len(merged["comparison"][fastest].repeat_speedups or [])
    return (fastest, runner_up) if pairs < plan.MOST_PAIRS else None


def say(line: str) -> None:
    print(f"main.py --advise: {line}", flush=True)


def advice_folder(advice: Advice, training: Training, data: DataSettings) -> str:
    """--advice-dir, or advice/MODEL-UTC TIME: proven writable, never in the data's folder,
    created when the first phase starts."""
    folder = advice.advice_dir
    if folder is None:
        started = utc.now_utc().replace(":", "").replace("+0000", "Z")
        folder = os.path.join("advice", f"{training.model}-{started}")
    from utils.results import run_outputs

    prove_writable(folder, (*WRITTEN, RESULTS), FOLDERS)
    data_at, called = run_outputs.data_folder(data)
    run_outputs.refuse_in_data_folder("--advice-dir", folder, os.path.realpath(folder), data_at, called)
    return folder


WRITTEN = ("advice.json", "report.txt")  # what every --advise writes in --advice-dir; a live one, RESULTS too
FOLDERS = ("phases", "logs", TRACES)  # and the folders a live one writes into


def prove_writable(folder: str, names: Tuple[str, ...], folders: Tuple[str, ...] = ()) -> None:
    """Refuse, before anything is measured or decided, an --advice-dir that cannot take the
    files `names` and the folders `folders` (a FIFO or a file under one's name among them)."""
    from utils.fileio import ensure_folder_writable, ensure_writable, kind_of

    ensure_folder_writable(folder, "--advice-dir")
    for name in names:
        ensure_writable(os.path.join(folder, name), "--advice-dir")
    for name in folders:
        path = os.path.join(folder, name)
        if os.path.lexists(path) and not os.path.isdir(path):
            kind = "a file" if os.path.isfile(path) else kind_of(path) if os.path.exists(path) else "a broken link"
            raise UserError(f"--advice-dir {folder} holds {name}, which is {kind}, where --advise writes a folder of "
                            "that name; remove it, or give another --advice-dir.")


def plan_lines(training: Training, data: DataSettings, budget: float, preflight: Preflight, phases: List[plan.Phase],
               left_s: float) -> List[str]:
    """What the preflight found and the plan, printed before anything trains."""
    facts, capabilities = preflight.facts, preflight.capabilities
    threads = facts["threads"]
    where = f"{facts['device_name']} ({facts['device']}" + \
        (f", {threads} torch thread{'s' if threads > 1 else ''})" if threads else ")")
    lines = [f"{training.model}, batch {training.batch_size}, {data.image_size}x"
             f"{data.image_size} images, on {where}: {facts['parameters'] / 1e6:.1f} M parameters, "
             f"{facts['train_flops_per_step'] / 1e9:.1f} GFLOP a training step",
             "  modes timed: " + ", ".join(capabilities.modes)]
    lines += [f"  not timed: {mode}: {why}" for mode, why in capabilities.not_timed.items()]
    for mode, found in facts["fp8"].items():
        lines += [f"  FP8 predicted for {mode}, layer by layer: " + ", ".join(
            f"{layer['layer']} {layer['speedup']:.2f}x" for layer in found.get("layers") or [])]
    lines += [f"  lever not tried: {lever}: {why}" for lever, why in capabilities.no_levers.items()]
    run, not_run = plan.fitting(phases, left_s)
    lines.append(f"plan for {budget:g} minute{'' if budget == 1 else 's'} (estimated from FLOPs until a phase has "
                 "measured the steps; each phase is estimated again before it starts):")
    for phase in phases:
        runs = f"{phase.repeats} {'seeds' if phase.kind == 'accuracy' else 'repeats'} of {phase.steps} steps"
        lines.append(f"  {phase.name:<16}{', '.join(phase.modes):<22}{runs:<26}about {plan.minutes(phase.estimate_s)}"
                     + ("" if phase in run else f"  (does not fit: {not_run[phase.name]})")
                     + ("  (only where the loader bounds the lead)" if phase.name in levers.LOADER else ""))
    again = plan.remeasure_phase(plan.REMEASURES[0], plan.leading_by_estimate(capabilities, preflight.estimates),
                                 phases[0], preflight.estimates)
    lines.append(f"  and, only where the two leading modes tie after the comparison, up to {len(plan.REMEASURES)} "
                 f"re-measures of them, {again.repeats} repeats of {again.steps} steps each, about "
                 f"{plan.minutes(again.estimate_s)} each, before the levers")
    return lines


def refuse_short_budget(budget: float, compare: plan.Phase, left_s: float, spent_s: float) -> None:
    if compare.estimate_s <= left_s:
        return
    needed = math.ceil((compare.estimate_s + spent_s) / 60 * 10) / 10
    raise UserError(f"--budget {budget:g} is less than one comparison needs here: "
                    f"{', '.join(compare.modes)}, {compare.repeats} repeats of {compare.steps} steps, about "
                    f"{plan.minutes(compare.estimate_s)} after the preflight's {spent_s:.0f} s; give --budget "
                    f"{needed:g} or more.")


def advise(training: Training, data: DataSettings, accuracy: Accuracy, precision: Precision, speed: Speed,
           advice: Advice, arguments: CommandLine, stop: StopRequest, clock: Clock = time.monotonic,
           runner: Optional[Runner] = None, flight: Optional[Callable[[], Preflight]] = None,
           check_only: bool = False) -> int:
    """--advise: preflight, plan, each phase that fits, then the advice; returns its exit status.
    It reads the model and batch (`training`), the data, the verdict's margin (`accuracy`), its
    budget and folder (`advice`) and the user's command (`arguments`), which every phase and the
    advised command pass on; the preflight (`flight`, a fake one in tests) the device's settings
    in `precision` and `speed` too. With `check_only` it ends after the plan, having refused
    what it would refuse, measuring and writing nothing."""
    started = clock()
    deadline = started + advice.budget_minutes * 60
    if launch.detect().distributed:
        raise UserError("--advise runs as one process and starts its own runs: launch it without torchrun, mpirun "
                        "or srun.")
    folder = advice_folder(advice, training, data)
    if flight is None:
        from utils.advice.preflight import preflight

        flight = functools.partial(preflight, training, data, precision, speed, arguments)
    found = within_budget(flight, advice.budget_minutes, deadline - clock())
    state = State(found, found.estimates, found.capabilities, [], {})
    phases = plan.plan(found.capabilities, found.estimates, deadline - clock(),
                       accuracy_steps(training, data, CIFAR_TRAIN_IMAGES))
    for line in plan_lines(training, data, advice.budget_minutes, found, phases, deadline - clock()):
        say(line)
    refuse_short_budget(advice.budget_minutes, phases[0], deadline - clock(), clock() - started)
    if check_only:  # --check-flags: what a batch job checks before it queues; nothing measured, nothing written
        say(f"the flags, {folder} and --budget {advice.budget_minutes:g} check out: nothing was measured or written")
        return 0
    for sub in FOLDERS[:2]:  # main.py makes the traces' own with --trace-dir
        os.makedirs(os.path.join(folder, sub), exist_ok=True)
    run_phases(training, data, arguments, state, runner or process_runner(folder, stop, clock), clock, deadline,
               folder, stop)
    if not state.documents:  # a stop signal before the comparison ran: nothing to decide from
        if not stop.requested:
            raise UserError(f"no phase measured anything; their logs are in {folder}/logs.")
        say(f"{stop.signal_name} arrived before the comparison ran: nothing was measured, so nothing is advised.")
        return 128 + (stop.signal_number or signal.SIGTERM)
    files.write_json(os.path.join(folder, RESULTS), state.documents)
    documents = load_result(os.path.join(folder, RESULTS))
    context = session_context(training, data, arguments, state, folder)
    decided = advice_document(documents, context, state, {"minutes": advice.budget_minutes,
                                                          "spent_s": clock() - started}, phases, arguments, accuracy)
    return finish(decided, folder, stop)


class BudgetSpent(BaseException):
    """The budget ran out during the preflight; not an Exception, which the user's code may catch."""


def within_budget(flight: Callable[[], Preflight], budget_minutes: float, seconds: float) -> Preflight:
    """The preflight, ended with a sentence where it outlasts the `seconds` the budget leaves (a
    factory that never returns); SIGALRM interrupts it, where this platform has it."""
    def spent(number: int, frame: Any) -> None:
        raise BudgetSpent()

    if not hasattr(signal, "setitimer") or threading.current_thread() is not threading.main_thread():
        return flight()
    previous = signal.signal(signal.SIGALRM, spent)
    signal.setitimer(signal.ITIMER_REAL, max(seconds, 0.001))
    try:
        return flight()
    except BudgetSpent:
        raise UserError(f"--budget {budget_minutes:g} ran out before the preflight ended (building the "
                        "model and counting its FLOPs took longer); give a larger --budget, or check that the model "
                        "builds at all: main.py --check-flags with the same flags.") from None
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def session_context(training: Training, data: DataSettings, arguments: CommandLine, state: State,
                    folder: str) -> decide.Context:
    """What the decider cites beyond the results: the modes not timed, FP8's predictions, the
    phases not run, and the accuracy check's plan (seeds, minutes and the lines that run it,
    the user's command, `arguments`, with the check's flags)."""
    leading = state.leading or plan.leading_by_estimate(state.capabilities, state.estimates)
    not_run = dict(state.not_run)
    if "accuracy" not in not_run and state.capabilities.accuracy is not None:
        not_run["accuracy"] = {"why": state.capabilities.accuracy, "estimate_s": None}
    context = decide.Context(RESULTS, dict(state.capabilities.not_timed), dict(state.preflight.predictions), not_run,
                             live=True, cut_short=dict(state.cut_short),
                             traces=kept_traces(folder, state.documents) if state.documents else {})
    if leading[0] == BASELINES["default"]:  # fp32 leads: no accuracy to check against itself
        return context
    steps = accuracy_steps(training, data, state.train_images)
    check = plan.accuracy_phase(leading[0], steps, state.estimates)
    context.accuracy_check = {"seeds": check.repeats, "estimate_s": check.estimate_s,
                              "lines": commands.accuracy_lines(arguments, leading[0], check.repeats, steps)}
    return context


def advice_document(documents: List[Dict[str, Any]], context: decide.Context, state: Optional[State],
                    budget: Optional[Dict[str, float]], phases: List[plan.Phase],
                    arguments: Optional[CommandLine] = None, accuracy: Optional[Accuracy] = None) -> Dict[str, Any]:
    """advice.json: the decision of `documents`, its status, the command that trains as advised
    (the user's, `arguments`, with the advised mode and levers, after a live session; from the
    results' config without one: --from), or, while there is no advice yet, the lines that
    measure again."""
    decided = decide.decide(documents, context, decided_margin(accuracy, documents))
    recommendation, lean = decided["recommendation"], decided["lean"]
    on_gpu = not decided["on_cpu"]
    if recommendation is not None:
        command = advised(arguments, decided["config"], on_gpu, recommendation)
        environment = commands.import_environment(arguments) if arguments is not None else {}
        recommendation = dict(recommendation, command=command, environment=environment,
                              nsys=commands.nsys_line(command, environment) if on_gpu else None,
                              frameworks=frameworks.lines(recommendation["mode"], recommendation["settings"],
                                                          "cuda" if on_gpu else "cpu"))
    verdict = decided["accuracy_verdict"]
    if recommendation is not None and context.accuracy_check is None and lean["mode"] != BASELINES["default"]:
        # --from a results file: the check on the machine it reads, from the results' config, on
        # CIFAR-10 where the runs had synthetic images, which have no test set
        record = {key: value for key, value in decided["config"].items() if key != "data" or value != "synthetic"}
        here = commands.from_results_command(record, on_gpu, "fp32", {})
        context.accuracy_check = {"seeds": plan.SEEDS, "estimate_s": None, "lines": {"here": commands.shell_line(
            [*here, *commands.words(modes=f"fp32,{lean['mode']}", seeds=plan.SEEDS, json="accuracy.json")])}}
    complete = not context.not_run and not context.cut_short and verdict in (None, "holds")
    status = document.status_of(advised=recommendation is not None, unsteady=bool(decided["unsteady"]),
                                on_cpu=decided["on_cpu"], complete=complete, live=context.live)
    ran = set(state.ran) if state is not None else set()
    return {"schema": document.SCHEMA, "status": status, "exit_code": document.STATUSES[status],
            "recommendation": recommendation, "lean": lean["mode"], "unsteady": decided["unsteady"],
            "measure_again": None if recommendation is not None else measure_again(arguments, decided, budget),
            "claims": decided["claims"], "evidence": decided["evidence"], "rejected": decided["rejected"],
            "not_run": context.not_run, "cut_short": context.cut_short, "traces": context.traces,
            "accuracy_check": context.accuracy_check,
            "accuracy_verdict": verdict, "results": context.results, "budget": budget,
            "preflight": state.preflight.facts if state else None,
            "plan": [{"name": phase.name, "modes": list(phase.modes), "estimate_s": phase.estimate_s,
                      "runs": phase.name in ran} for phase in phases],
            "setup": decided["setup"], "arguments": dict(arguments) if arguments is not None else None,
            "written_utc": utc.now_utc()}


def advised(arguments: Optional[CommandLine], record: Dict[str, Any], on_gpu: bool,
            recommendation: Dict[str, Any]) -> List[str]:
    """The command that trains as advised: the user's own flags after a live session, else the
    results' config's (--from)."""
    if arguments is not None:
        return commands.advised_command(arguments, recommendation["mode"], recommendation["settings"])
    return commands.from_results_command(record, on_gpu, recommendation["mode"], recommendation["settings"])


def measure_again(arguments: Optional[CommandLine], decided: Dict[str, Any],
                  budget: Optional[Dict[str, float]]) -> Dict[str, str]:
    """{where: one shell line} that measures again where there is no advice yet: the same
    --advise (the user's own flags after a live session, the results' config's after --from),
    with a budget at least the one spent, alone on this machine, and as a batch job on a node of
    its own (slurm, pbs) where the job scripts can carry the flags."""
    minutes = max(float((budget or {}).get("minutes") or 0), config.DEFAULT_BUDGET_MINUTES)
    given = arguments if arguments is not None else \
        commands.results_arguments(decided["config"], not decided["on_cpu"])
    argv = ["python", "main.py", *commands.words(advise=True), *commands.user_options(given),
            *commands.words(budget=f"{minutes:g}")]
    lines = {"here": commands.shell_line(argv, commands.import_environment(given))}
    lines.update(commands.advise_job_lines(given, minutes) or {})
    return lines


def decided_margin(accuracy: Optional[Accuracy], documents: List[Dict[str, Any]]) -> float:
    if accuracy is not None:
        return accuracy.margin_points
    return documents[0]["config"].get("accuracy_margin") or 0.5


def finish(advice: Dict[str, Any], folder: Optional[str], stop: StopRequest) -> int:
    """Write advice.json and report.txt into `folder` (None: write nothing), print the report,
    return the status's exit code (128 + the signal's number after a stop signal)."""
    text = report(advice)
    if folder is not None:
        document.write(os.path.join(folder, "advice.json"), advice, text)
    print(text)
    if folder is not None:
        print(f"written to {folder}: report.txt, advice.json, {RESULTS} (the runs' results) and logs/")
    if stop.requested:
        return 128 + (stop.signal_number or signal.SIGTERM)
    return int(advice["exit_code"])


def from_results(advice: Advice, stop: StopRequest) -> int:
    """--advise --from: the advice a results file (or an advice.json's results) gives, decided
    again without training; written only where --advice-dir is given."""
    path = advice.from_results
    assert path is not None  # main.py calls this with --from
    if not path:
        raise UserError("--from needs a results file or an advice.json, and got an empty path; give the file.")
    folder = advice.advice_dir
    if folder is not None:
        prove_writable(folder, WRITTEN)
    content = parsed(path)
    arguments = None
    if document.is_advice(content):
        earlier = document.load(path)
        results = os.path.join(os.path.dirname(path), earlier["results"])
        # a live run's advice keeps the user's own flags, as they typed them: its commands are built from them
        if earlier["arguments"] is not None:
            arguments = commands.saved_arguments(earlier["arguments"], path)
        context = decide.Context(earlier["results"], (earlier["preflight"] or {}).get("not_timed", {}),
                                 {mode: found for mode, found in ((earlier["preflight"] or {}).get("fp8") or {}).items()
                                  if found.get("speedup") is not None},
                                 earlier["not_run"], checked_accuracy(earlier, arguments),
                                 live=earlier["budget"] is not None, cut_short=earlier["cut_short"],
                                 traces=earlier["traces"])
    else:
        earlier, results = None, path
        context = decide.Context(path)
        if any(document["data"]["name"] == "synthetic" for document in load_result(path)):
            context.not_run["accuracy"] = {"why": "these runs trained on synthetic data, which has no test images",
                                           "estimate_s": None}
    if folder is not None:
        context.results = os.path.relpath(results, folder)
    documents = load_result(results)
    decided = advice_document(documents, context, None, earlier["budget"] if earlier else None, [], arguments)
    if earlier is not None:
        decided.update(preflight=earlier["preflight"], plan=earlier["plan"], arguments=earlier["arguments"])
    return finish(decided, folder, stop)


def checked_accuracy(earlier: Dict[str, Any], arguments: Optional[CommandLine]) -> Optional[Dict[str, Any]]:
    """An advice.json's accuracy check, its lines built again from its arguments (checked), so
    that a line edited into the file is never printed as ampbench's; without arguments, none."""
    check = earlier["accuracy_check"]
    if check is None or arguments is None:
        return None
    lead = earlier["lean"] if earlier["lean"] != BASELINES["default"] else None
    # None: the data's size settles the steps
    steps = arguments["steps"] or (config.DEFAULT_STEPS if arguments["epochs"] is None else None)
    return dict(check, lines=commands.accuracy_lines(arguments, lead, check["seeds"], steps) if lead else {})
