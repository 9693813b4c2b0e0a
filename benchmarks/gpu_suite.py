"""GPU evidence in one command: run ampbench's whole GPU check and regenerate README's Results.

    python benchmarks/gpu_suite.py --data-dir DIR          # on a GPU: every section
    python benchmarks/gpu_suite.py --data-dir DIR --budget 10      # what fits in 10 minutes, most wanted first
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

Steps run in priority order (suite/plan.py), README's headline first. With --budget MINUTES each
step's time is estimated before it starts (suite/estimate.py) and only a step that fits in what
is left of the budget starts; the others wait, in order, and the next --budget run into the same
folder (the same device and date) runs what waited and the steps that never ran there (added by
newer code, or skipped before), in priority order. A budget that fits no step is refused (exit 2)
with the least that would. `--only` plans some sections alone and keeps the other sections'
saved steps (and their waiting ones). README's Results merge every suite saved for each device
under the results root, of any date and commit, and say which rows older code measured
(suite/history.py). The suite's wing, one module per job, is benchmarks/suite/.
"""
from __future__ import annotations

import argparse
import datetime
import json
import math
import sys
import time
from pathlib import Path
from typing import Optional

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "results"
sys.path.insert(0, str(ROOT))
from benchmarks.suite import ledger  # noqa: E402 (the checkout's root, above)
from benchmarks.suite.device import NoDevice, device_facts, folder_name, software  # noqa: E402
from benchmarks.suite.estimate import Estimator  # noqa: E402
from benchmarks.suite.history import CHANGES, BadResults  # noqa: E402
from benchmarks.suite.plan import MODES, SECTIONS, TRANSFORMER_MODES, Plan, Planner, available_flags, planned_steps  # noqa: E402
from benchmarks.suite.render import render_coverage, render_readme  # noqa: E402
from utils import provenance  # noqa: E402


def run_suite(options: argparse.Namespace, started: float) -> int:
    say = ledger.announcer(started)
    commit = options.commit or provenance.commit()[0]
    if commit is None:
        raise SuiteRefusal("no commit names the code that runs: this copy has no .git to ask; give --commit with "
                           "what `git rev-parse HEAD` prints in the checkout it was copied from.")
    plan = Plan(options.quick)
    try:
        label, refused = device_facts(options.quick, MODES + TRANSFORMER_MODES)
    except NoDevice as error:
        raise SuiteRefusal(str(error)) from None
    device_folder = Path(options.results_root) / folder_name(label)
    today = device_folder / datetime.date.today().isoformat()
    planner = Planner(today, options.data_dir, plan, [mode for mode in MODES if mode not in refused],
                      available_flags(), [mode for mode in TRANSFORMER_MODES if mode not in refused], say)
    sections = options.only or list(SECTIONS)
    for mode, reason in refused.items():
        planner.skip(f"mode {mode}", reason)
    planned = planned_steps(planner, sections)
    machine = software()
    out, why = ledger.choose_folder(device_folder, today.name, planned, machine, bool(options.budget))
    if why:
        say(why)
    planned = [step.moved(today, out) for step in planned]
    earlier = json.loads((out / "suite.json").read_text()) if (out / "suite.json").exists() else {}
    pending, kept, carried = ledger.this_pass_steps(planned, earlier, sections, bool(options.budget))
    estimator = Estimator(device_folder, label, plan.quick, lambda: planner.data)
    refusal = ledger.refuse(pending, estimator, options.budget, started)
    if refusal:
        raise SuiteRefusal(refusal)
    out.mkdir(parents=True, exist_ok=True)
    summary = {"device": label, "quick": plan.quick, "date": earlier.get("date", out.name), "commit": commit,
               "changes_in_code": list(dict.fromkeys(change.commit for change in CHANGES)),
               "data_flags": planner.data_flags, "models": plan.models, "batch": plan.batch, "steps": plan.steps,
               "repeats": plan.repeats}
    books = ledger.Ledger(out / "suite.json", summary, earlier, kept, options.budget, carried, machine)
    runner = ledger.Runner(out, planner.records, say, commit)
    ledger.spend(runner, pending, estimator, options.budget * 60 if options.budget else math.inf, books, started)
    return finish(out, runner, books, options.readme, started)


def finish(out: Path, runner: ledger.Runner, books: ledger.Ledger, readme: Optional[str], started: float) -> int:
    """Say what ran and what waits, in order; render README; exit 1 if a step failed."""
    print(f"suite finished in {(time.perf_counter() - started) / 60:.1f} min; results in {out}")
    print("ran, in order: " + (", ".join(f"{entry['step']} ({entry['elapsed_s']:.0f} s, estimated "
                                         f"{entry['estimate_s']:.0f} s)" for entry in books.this_pass["ran"])
                               or "nothing"))
    if books.this_pass["waiting"]:
        print("waiting for the next budget, in order: " + ", ".join(
            f"{entry['step']} (estimated {entry['estimate_s']:.0f} s)" for entry in books.this_pass["waiting"])
              + f"; the next --budget run into {out} runs them")
    failed = [step["name"] for step in runner.records if step.get("rc") not in (None, 0, 143)]
    if readme:
        render(out, Path(readme))
        print(f"README section regenerated in {readme}")
    if failed:
        print(f"failed steps: {', '.join(failed)}", file=sys.stderr)
        return 1
    return 0


def render(out: Path, readme: Path) -> None:
    """The run page of `out` and README's Results; and, for this checkout's own results/, the table
    of what has run on a GPU in docs/benchmarks.md (a results root elsewhere, as a test's, has none)."""
    render_readme(out, readme)
    if out.resolve().parent.parent == RESULTS:
        render_coverage(RESULTS, ROOT / "docs" / "benchmarks.md")


class SuiteRefusal(Exception):
    """What the suite cannot do as asked, in one sentence: it exits 2 having changed nothing."""


def commit_argument(text: str) -> str:
    if not provenance.is_commit(text):
        raise argparse.ArgumentTypeError(f"takes a commit as `git rev-parse HEAD` prints it (7 to 40 lower-case hex "
                                         f"digits, -dirty allowed), not {text!r}")
    return text


def budget_minutes(text: str) -> float:
    minutes = float(text)
    if not math.isfinite(minutes) or minutes <= 0:
        raise argparse.ArgumentTypeError(f"--budget takes a positive number of minutes, not {text}")
    return minutes


def main() -> int:
    started = time.perf_counter()
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="CPU, tiny step counts: check that the suite works")
    parser.add_argument("--data-dir", help="CIFAR-10 folder passed to every run (with --allow-unverified)")
    parser.add_argument("--results-root", default=str(RESULTS), help="where results/<device>/<date>/ goes")
    parser.add_argument("--readme", default=str(ROOT / "README.md"), help="README whose Results section to regenerate")
    parser.add_argument("--commit", type=commit_argument, help="the commit of the code that runs, when the copy on "
                        "the machine has no (or a stale) .git: every step's results record it instead of git describe")
    parser.add_argument("--render", metavar="RESULTS_DIR", help="only regenerate README's section from saved results")
    parser.add_argument("--only", metavar="SECTION", action="append", choices=list(SECTIONS),
                        help="run this section alone (repeatable), keeping the other sections' saved steps: "
                        f"{', '.join(SECTIONS)}")
    parser.add_argument("--budget", metavar="MINUTES", type=budget_minutes,
                        help="start only the steps whose estimated time fits in what is left of MINUTES, in "
                        "priority order; the rest wait for the next --budget run into the same folder")
    options = parser.parse_args()
    try:
        if options.render:
            render(Path(options.render).resolve(), Path(options.readme))
            print(f"README section regenerated in {options.readme} from {options.render}")
            return 0
        return run_suite(options, started)
    except (SuiteRefusal, BadResults) as error:
        print(f"gpu_suite.py: error: {error}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
