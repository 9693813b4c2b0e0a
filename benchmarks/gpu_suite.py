"""GPU evidence in one command: run ampbench's whole GPU check and regenerate README's Results.

    python benchmarks/gpu_suite.py --data-dir DIR          # on a GPU: every section
    python benchmarks/gpu_suite.py --data-dir DIR --budget 10      # what fits in 10 minutes, most wanted first
    python benchmarks/gpu_suite.py --data-dir DIR --plan --budget 10   # what that would run, and why: no step runs
    python benchmarks/gpu_suite.py --data-dir DIR --only recipes   # one section
    python benchmarks/gpu_suite.py --quick                 # CPU, tiny step counts: checks the suite
    python benchmarks/gpu_suite.py --render results/GPU/DATE   # README's Results from saved results

Every step runs as a user would type it (main.py, torchrun, the benchmark scripts) in its own
process, and writes its JSON, CSV, PNG and log into results/<device>/<date>/ together with
suite.json (what ran, how long, what was skipped and why, what waits for the next budget),
saved before the first step and after every step. The README section between the gpu-suite
markers is then rendered from the saved files alone: nothing in it is written by hand.
Steps whose feature this version lacks (a flag missing from main.py -h), that the device
cannot run, or that need CIFAR-10 where the runs get synthetic data (no usable CIFAR-10 in
--data-dir or where main.py looks) are listed as skipped with the reason.

Steps run in priority order (suite/plan.py), README's headline first; on a GPU the headline times
each mode for its own window an energy figure needs (suite/estimate.py's window_steps).
With --budget MINUTES each step's time is estimated before it starts (suite/estimate.py) and only
a step that fits in what is left of the budget starts; the others wait, in order. A --budget pass
into a device's folder of earlier passes runs the steps due on the device (suite/due.py: never
ran there, measured by code older than a change that moves their figures, with fewer repeats than
planned, without the busy share, an FP32 baseline, an interval or an energy window long enough),
in priority order. Every pass first prints its plan: each step it would run, in order, with its
estimate and why it is due, and what would wait; --plan prints that alone and trains nothing (on
a machine without a GPU, for each device saved under --results-root). A budget that fits no step
is refused (exit 2) with the least that would. `--only` plans some sections alone and keeps the other sections'
saved steps (and their waiting ones). README's Results give each device under the results root a
verdict table of the newest figures of each model and size, of any date and commit (suite/verdict.py).
The suite's wing, one module per job, is benchmarks/suite/.

It runs as a batch job in an allocation that ends with a signal. Every path is proven before any
step: a results root, --readme or --render folder that cannot be used is refused in one line
(`gpu_suite.py: error: ...`, exit 2), as are a README whose gpu-suite markers are not one pair in
order and a budget that fits no step. A saved file it cannot read is left out with one warning
naming it; a damaged suite.json in today's folder is moved aside to suite.json.unreadable-<UTC
time>, and the pass plans the folder anew (a pass refused before its first step puts it back). One
suite at a time writes a device's folder: it holds the folder's lock for the whole pass, and a
second one is refused (exit 2) before any step; the kernel drops the lock with the process, so a
killed suite leaves none behind. SIGTERM, SIGINT, SIGHUP or SIGUSR1 end the step in flight: every
command runs in a process group of its own, which gets SIGTERM and, 10 s later (or at a second
signal), SIGKILL. That step waits for the next pass, its partial files moved to interrupted/; no
other step starts, suite.json and README are written, a line says which signal ended which step,
and the exit status is 128 + the signal's number.
"""
from __future__ import annotations

import argparse
import datetime
import math
import os
import signal
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Dict, List, Optional, Tuple, TypeVar

try:
    from benchmarks.suite import ledger
    from benchmarks.suite.device import NoDevice, device_facts, folder_name, software
    from benchmarks.suite.docblocks import render_pages
    from benchmarks.suite.due import due_steps
    from benchmarks.suite.estimate import Estimate, Estimator, Uncounted, Window, window_steps
    from benchmarks.suite.folders import (
        NAME,
        SuiteRefusal,
        results_folder,
        saved_run,
        unreadable_set_aside,
        writable_folder,
        written_after,
    )
    from benchmarks.suite.history import describe_software, device_folders, saved_suites, suite_record
    from benchmarks.suite.plan import (
        MODES,
        SECTIONS,
        TRANSFORMER_MODES,
        Plan,
        Planner,
        Step,
        available_flags,
        planned_steps,
        window_runs,
    )
    from benchmarks.suite.preview import plan_lines, waiting
    from benchmarks.suite.render import render_coverage, render_readme, usable_readme
    from benchmarks.suite.slices import minutes
    from utils import console, provenance
    from utils.children import adopt_orphans
    from utils.fileio import ensure_folder_writable
except ModuleNotFoundError as missing:  # run by its path from a checkout that was never installed
    if missing.name not in ("benchmarks", "utils"):
        raise
    print(f"gpu_suite.py: error: ampbench is not installed in this Python ({sys.executable}); run `pip install -e "
          f".` in {Path(__file__).resolve().parents[1]}, then this command again.", file=sys.stderr)
    sys.exit(2)

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "results"
T = TypeVar("T")


def run_suite(options: argparse.Namespace, started: float) -> int:
    """One pass: its paths proven, its steps planned, then run under the results folder's lock with
    the stop signals caught; 128 + the signal's number where one stopped it."""
    stop = ledger.Stop()
    stop.install()
    adopt_orphans()  # a rank whose torchrun dies is reparented here, so that its step's end still kills it
    try:
        return stoppable_suite(options, started, stop)
    finally:
        stop.restore()


def stoppable_suite(options: argparse.Namespace, started: float, stop: ledger.Stop) -> int:
    say = ledger.announcer(started)
    commit = options.commit or provenance.commit()[0]
    if commit is None:
        raise SuiteRefusal("no commit names the code that runs: this copy has no .git to ask; give --commit with "
                           "what `git rev-parse HEAD` prints in the checkout it was copied from.")
    if options.commit and provenance.tree_digest(commit) not in (None, provenance.source_digest()):
        print(f"{NAME}: warning: --commit {commit} is not the code here (these source files are not its tree): "
              "every row this pass measures will show it as claimed.", file=sys.stderr, flush=True)
    ensure_folder_writable(options.results_root, "--results-root")
    readme = readme_path(options.readme)
    plan = Plan(options.quick)
    try:
        label, refused = device_facts(options.quick, MODES + TRANSFORMER_MODES)
    except NoDevice as error:
        raise SuiteRefusal(str(error)) from None
    device_folder = Path(options.results_root) / folder_name(label)
    if stop.number is not None:  # the planning's seconds are not worth a pass that starts no step
        return stopped_before(stop.number)
    with results_folder(device_folder):
        out, runner, books, ended = run_pass(options, started, stop, commit, label, refused, plan, device_folder, say)
        status = finish(out, runner, books, readme, started)
    if stop.number is None:
        return status
    name = signal.Signals(stop.number).name
    print(f"{NAME}: stopped by {name}, " + (f"which ended step {ended}; it waits for the next pass." if ended else
                                            "between steps: no step started after it."), file=sys.stderr, flush=True)
    return 128 + stop.number


@dataclass
class PassPlan:
    """What a pass runs, planned before any step (and all that `--plan` prints): the folder it
    writes and why, its planned steps, which of them are due and why, the ones it may start in
    order, the earlier records it keeps and the earlier waiting steps it carries, its estimator
    and the headline's steps per model."""
    planner: Planner
    out: Path
    why: Optional[str]
    planned: List[Step]
    due: Dict[str, List[str]]
    pending: List[Step]
    kept: List[Dict[str, Any]]
    carried: List[Dict[str, Any]]
    estimator: Estimator
    estimates: Dict[str, Estimate]
    windows: Dict[str, Window]
    earlier: Dict[str, Any]


def plan_pass(options: argparse.Namespace, label: str, refused: Dict[str, str], plan: Plan, device_folder: Path,
              machine: Dict[str, Optional[str]], say: ledger.Say) -> PassPlan:
    """Plan a pass on `label` into the folder it continues or starts: no step runs, nothing is written."""
    today = device_folder / datetime.date.today().isoformat()
    planner = Planner(today, options.data_dir, plan, [mode for mode in MODES if mode not in refused],
                      available_flags(), [mode for mode in TRANSFORMER_MODES if mode not in refused], say)
    estimator = Estimator(device_folder, label, plan.quick, lambda: planner.data, device_folders(device_folder.parent))
    windows = {name: estimated(name, label, window_steps, estimator, plan, runs)
               for name, runs in window_runs(planner).items()}
    plan.window_settings = {name: window.settings() for name, window in windows.items()}
    sections = options.only or list(SECTIONS)
    for mode, reason in refused.items():
        planner.skip(f"mode {mode}", reason)
    planned = planned_steps(planner, sections)
    due = due_steps(planned, device_folder, list(windows), plan.quick)
    out, why = ledger.choose_folder(device_folder, today.name, due, machine, bool(options.budget))
    planned = [step.moved(today, out) for step in planned]
    earlier = suite_record(out / "suite.json")[0] or {}
    pending, kept, carried = ledger.this_pass_steps(planned, earlier, sections, bool(options.budget), due)
    estimates = {step.name: estimated(step.name, label, estimator.estimate, step) for step in pending}
    return PassPlan(planner, out, why, planned, due, pending, kept, carried, estimator, estimates, windows, earlier)


def estimated(name: str, label: str, estimate: Callable[..., T], *arguments: Any) -> T:
    """estimate(*arguments), or the refusal that says why step `name` cannot be estimated on `label`."""
    try:
        return estimate(*arguments)
    except Uncounted as error:
        raise SuiteRefusal(f"step {name} cannot be estimated on {label}: {error}") from None


def run_pass(options: argparse.Namespace, started: float, stop: ledger.Stop, commit: str, label: str,
             refused: Dict[str, str], plan: Plan, device_folder: Path,
             say: ledger.Say) -> Tuple[Path, ledger.Runner, ledger.Ledger, Optional[str]]:
    """Plan the pass into the folder it continues or starts, say the plan, refuse a budget that fits
    no step, then run what fits: (that folder, the runner and the books, the step a stop signal ended)."""
    machine = software()
    budget_s = options.budget * 60 if options.budget else math.inf
    with unreadable_set_aside(device_folder / datetime.date.today().isoformat() / "suite.json"):
        planned = plan_pass(options, label, refused, plan, device_folder, machine, say)
        if planned.why:
            say(planned.why)
        for line in plan_lines(planned.pending, planned.due, planned.estimates, budget_s,
                               time.perf_counter() - started, planned.windows, plan.warmup):
            say(line)
        refusal = ledger.refuse(planned.pending, planned.estimates, options.budget, started)
        if refusal:
            raise SuiteRefusal(refusal)
        writable_folder(planned.out)
    out, planner, estimator = planned.out, planned.planner, planned.estimator
    late = written_after(out)
    if late:
        print(late, file=sys.stderr, flush=True)
    summary = {"device": label, "quick": plan.quick, "date": planned.earlier.get("date", out.name), "commit": commit,
               "data_flags": planner.data_flags, "models": plan.models, "batch": plan.batch, "steps": plan.steps,
               "repeats": plan.repeats}
    books = ledger.Ledger(out / "suite.json", summary, planned.earlier, planned.kept, options.budget, planned.carried,
                          machine, {name: estimate.seconds for name, estimate in planned.estimates.items()})
    runner = ledger.Runner(out, planner.records, say, commit, stop)
    return out, runner, books, ledger.spend(runner, planned.pending, estimator, budget_s, books, started)


def show_plans(options: argparse.Namespace) -> int:
    """--plan: what a pass would run on this machine's GPU (or, --quick, its CPU), or, without one,
    on each device whose results are saved under the results root, assuming its newest folder's
    software and every mode; no step runs, nothing is written."""
    root = Path(options.results_root)
    try:
        label, refused = device_facts(options.quick, MODES + TRANSFORMER_MODES)
        targets = [(label, refused, root / folder_name(label), software(), "")]
    except NoDevice:
        targets = []
        for folder in sorted(path for path in root.iterdir() if path.is_dir()) if root.is_dir() else []:
            suites = saved_suites(folder)
            ran = suites[0].software() if suites else None
            if suites and ran:
                targets.append((suites[0].record["device"], {}, folder, ran, " (no GPU here: planned as a pass on "
                                f"{describe_software(ran)}, its newest folder's, that runs every mode)"))
        if not targets:
            raise SuiteRefusal(f"no CUDA device is visible, and {root} holds no device's results to plan a pass for; "
                               "run --plan on the GPU, or with --quick.") from None
    budget_s = options.budget * 60 if options.budget else math.inf
    for label, refused, folder, machine, assumed in targets:
        planning = time.perf_counter()  # a pass plans its own device alone
        plan = Plan(options.quick)
        planned = plan_pass(options, label, refused, plan, folder, machine, lambda line: None)
        print(f"{label}{assumed}: {planned.why or f'writes {planned.out}'}")
        print("\n".join(plan_lines(planned.pending, planned.due, planned.estimates, budget_s,
                                   time.perf_counter() - planning, planned.windows, plan.warmup)))
    return 0


def finish(out: Path, runner: ledger.Runner, books: ledger.Ledger, readme: Path, started: float) -> int:
    """Say what ran and what waits, in order; render README; exit 1 if a step failed."""
    print(f"suite finished in {(time.perf_counter() - started) / 60:.1f} min; results in {out}")
    print("ran, in order: " + (", ".join(f"{entry['step']} ({entry['elapsed_s']:.0f} s, estimated "
                                         f"{entry['estimate_s']:.0f} s)" for entry in books.this_pass["ran"])
                               or "nothing"))
    if books.still_waiting():
        print("waiting for the next budget, in the plan's order: " + ", ".join(
            waiting(name, seconds) for name, seconds in books.still_waiting())
              + f"; the next --budget run into {out} runs them")
    failed = [step["name"] for step in runner.records if step.get("rc") not in (None, 0, 143)]
    render(out, readme)
    print(f"README section regenerated in {readme}")
    if failed:
        print(f"failed steps: {', '.join(failed)}", file=sys.stderr)
        return 1
    return 0


def render(out: Path, readme: Path) -> None:
    """The run page of `out` and README's Results; and, for this checkout's own results/, the table
    of what has run on a GPU in docs/benchmarks.md and every GPU figure docs/ cites (its
    gpu-figures blocks: suite/docblocks.py); a results root elsewhere, as a test's, has none."""
    render_readme(out, readme)
    if out.resolve().parent.parent == RESULTS:
        render_coverage(RESULTS, ROOT / "docs" / "benchmarks.md")
        render_pages(RESULTS, sorted((ROOT / "docs").glob("*.md")))


def readme_path(text: str) -> Path:
    """--readme, proven before any step to take the section (render.usable_readme)."""
    if not text:
        raise SuiteRefusal("--readme needs a file, and got an empty one; give the README whose Results section the "
                           "suite regenerates.")
    usable_readme(Path(text))
    return Path(text)


def stopped_before(number: int) -> int:
    print(f"{NAME}: stopped by {signal.Signals(number).name} before any step; nothing was written.",
          file=sys.stderr, flush=True)
    return 128 + number


def commit_argument(text: str) -> str:
    if not provenance.is_commit(text):
        raise argparse.ArgumentTypeError(f"takes a commit as `git rev-parse HEAD` prints it (7 to 40 lower-case hex "
                                         f"digits, -dirty allowed), not {console.shortened(text)!r}")
    return text


def user_path(text: str) -> str:
    """A path as the user meant it: the steps run from the checkout, so a relative one is made
    absolute from the user's working directory now (an empty one is refused where it is used)."""
    return os.path.abspath(text) if text else text


def build_parser() -> argparse.ArgumentParser:
    parser = console.Parser(NAME, description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="CPU, tiny step counts: check that the suite works")
    parser.add_argument("--data-dir", type=user_path,
                        help="CIFAR-10 folder passed to every run (with --allow-unverified)")
    parser.add_argument("--results-root", type=user_path, default=str(RESULTS),
                        help="where results/<device>/<date>/ goes")
    parser.add_argument("--readme", type=user_path, default=str(ROOT / "README.md"),
                        help="README whose Results section to regenerate")
    parser.add_argument("--commit", type=commit_argument, help="the commit of the code that runs, when the copy on "
                        "the machine has no (or a stale) .git: every step's results record it instead of git describe, "
                        "beside the digest of the source files that ran, and README names it as proven only where "
                        "that digest is its tree")
    parser.add_argument("--render", metavar="RESULTS_DIR", type=user_path,
                        help="only regenerate README's section from saved results")
    parser.add_argument("--only", metavar="SECTION", action="append", choices=list(SECTIONS),
                        help="run this section alone (repeatable), keeping the other sections' saved steps: "
                        f"{', '.join(SECTIONS)}")
    parser.add_argument("--plan", action="store_true", help="print what a pass would run, in order, with each "
                        "step's estimate and why it is due, and what would wait; train nothing, write nothing (without "
                        "a GPU: for each device saved under --results-root)")
    parser.add_argument("--budget", metavar="MINUTES", type=minutes,
                        help="start only the steps whose estimated time fits in what is left of MINUTES, in "
                        "priority order; the rest wait for the next --budget run into the same folder")
    return parser


def main() -> int:
    started = time.perf_counter()
    options = build_parser().parse_args()
    if options.only:  # a section named twice runs once
        options.only = list(dict.fromkeys(options.only))
    if options.render is not None:
        out = saved_run(options.render)
        render(out, readme_path(options.readme))
        print(f"README section regenerated in {options.readme} from {options.render}")
        return 0
    if options.plan:
        return show_plans(options)
    return run_suite(options, started)


command = console.program(NAME, main)  # the installed `ampbench-suite`

if __name__ == "__main__":
    sys.exit(command())
