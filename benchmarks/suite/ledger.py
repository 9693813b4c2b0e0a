"""Running a pass of the suite and keeping its books: suite.json, saved before the first step and
after every one (what ran, with its estimate and its time, what waits for the next budget, in
order), which earlier steps a pass continues, and the refusal of a budget that fits nothing."""
from __future__ import annotations

import datetime
import json
import math
import os
import shlex
import shutil
import signal
import stat
import time
from pathlib import Path
from types import FrameType
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

from benchmarks.suite.estimate import Estimate, Estimator
from benchmarks.suite.history import CHANGES, describe_software, saved_suites
from benchmarks.suite.plan import ROOT, Command, Step, resume_folder
from utils.children import Child
from utils.fileio import atomic_write, lock_path
from utils.provenance import COMMIT_VARIABLE, source_digest
from utils.stop import SIGNALS

Say = Callable[[str], None]
POLL_S = 0.05  # how often a running command is checked on: its end, its timeout, a stop signal
GRACE_S = 10.0  # between the SIGTERM that asks a stopped command's group to end and the SIGKILL that ends it


def announcer(started: float) -> Say:
    """print, each line after the seconds since the suite command started."""
    def say(line: str) -> None:
        print(f"[{time.perf_counter() - started:6.0f} s] {line}", flush=True)

    return say


def utc_now() -> str:
    return datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")


def last_waiting(record: Dict[str, Any]) -> List[Dict[str, Any]]:
    """What waited after a folder's last pass, in order."""
    return record["passes"][-1]["waiting"] if record.get("passes") else []


class Stop:
    """The stop signals of a pass (utils.stop.SIGNALS: a scheduler's SIGTERM or SIGUSR1 before
    its time limit, Ctrl-C, a closed terminal): the handler only counts them, and the pass acts
    between its polls, where nothing is half done. The first ends the step in flight and starts
    no other; a second cuts the step's grace short."""

    def __init__(self) -> None:
        self.numbers: List[int] = []
        self.previous: Dict[int, Any] = {}

    @property
    def number(self) -> Optional[int]:
        """The first signal's number, or None."""
        return self.numbers[0] if self.numbers else None

    def handler(self, number: int, frame: Optional[FrameType]) -> None:
        self.numbers.append(number)

    def install(self) -> None:
        for number in SIGNALS:
            self.previous[number] = signal.signal(number, self.handler)

    def restore(self) -> None:
        for number, previous in self.previous.items():
            signal.signal(number, previous)


class Interrupted(Exception):
    """A stop signal ended the step in flight (its processes are gone)."""


class Runner:
    """Runs the steps of one pass, each command's output in NAME.log, and keeps the record of each
    command (`records`, shared with the planner's skipped steps). Every command gets the pass's
    commit as $AMPBENCH_COMMIT, so that its results record the code that ran even where the
    checkout's .git is stale or missing. Each command runs in a process group of its own, and when
    it ends, stops or times out, its group and every process its members started (torchrun's ranks,
    in sessions of their own; data loaders) are killed, so that none outlives it."""

    def __init__(self, out: Path, records: List[Dict[str, Any]], say: Say, commit: str, stop: Stop) -> None:
        self.out, self.records, self.say, self.stop = out, records, say, stop
        self.environment = {**os.environ, COMMIT_VARIABLE: commit}

    def perform(self, step: Step) -> None:
        if step.execute == "resume":
            run_resume(self, step)
        else:
            for command in step.commands:
                self.run(step.section, command)

    def run(self, section: str, command: Command, stop_when: Optional[Path] = None) -> object:
        """Run one command to its end, its output in NAME.log; with `stop_when`, send it SIGTERM
        once that file exists (the resume check). Interrupted where a stop signal ended it."""
        started = time.perf_counter()
        with open(self.out / f"{command.name}.log", "w") as log:
            rc = self.wait(Child(command.argv, log, cwd=str(ROOT), env=self.environment), command.timeout, stop_when)
        self.record(section, command, rc, started,
                    "  (SIGTERM once the first checkpoint exists)" if stop_when else "")
        return rc

    def wait(self, child: Child, timeout: float, stop_when: Optional[Path]) -> object:
        """The command's exit status, or "timeout"; what it left running killed either way (its
        group, torchrun's ranks in sessions of their own, a rank whose torchrun died before it)."""
        deadline = time.monotonic() + timeout
        timed_out = False
        try:
            while not child.exited():
                if self.stop.number is not None:
                    self.end(child)
                    raise Interrupted
                if time.monotonic() > deadline:
                    self.end(child)
                    timed_out = True
                    break
                if stop_when is not None and stop_when.exists():
                    child.process.send_signal(signal.SIGTERM)
                    stop_when = None
                time.sleep(POLL_S)
        finally:
            rc = child.finish()
        return "timeout" if timed_out else rc

    def end(self, child: Child) -> None:
        """SIGTERM to the command's group, so that it saves what it can; SIGKILL after GRACE_S, or
        at once on another stop signal."""
        signals = len(self.stop.numbers)
        child.end(GRACE_S, lambda: len(self.stop.numbers) > max(signals, 1))

    def record(self, section: str, command: Command, rc: object, started: float, note: str = "") -> None:
        elapsed = time.perf_counter() - started
        self.records.append({"name": command.name, "section": section,
                             "command": shlex.join(command.argv).replace(str(ROOT) + "/", "") + note, "rc": rc,
                             "elapsed_s": round(elapsed, 1)})
        self.say(f"{command.name}: rc {rc}, {elapsed:.0f} s")


def run_resume(runner: Runner, step: Step) -> None:
    """The resume check: two uninterrupted runs, then a run stopped by SIGTERM once its first
    checkpoint exists, then its resumption; the final weights compared in resume-weights.json."""
    full_a, full_b, stopped, resumed = step.commands
    work = resume_folder()
    work.mkdir(parents=True, exist_ok=True)
    try:
        for command in (full_a, full_b):
            runner.run(step.section, command)
        runner.run(step.section, stopped, stop_when=work / "stopped.pt")
        runner.run(step.section, resumed)
        (runner.out / "resume-weights.json").write_text(json.dumps(compare_checkpoints(work), indent=2))
    finally:
        shutil.rmtree(work, ignore_errors=True)


def compare_checkpoints(work: Path) -> Dict[str, Dict[str, Any]]:
    import torch

    def weights(name: str) -> Dict[str, torch.Tensor]:
        return torch.load(work / f"{name}.pt", map_location="cpu", weights_only=True)["model"]

    def difference(a: Dict[str, torch.Tensor], b: Dict[str, torch.Tensor]) -> Dict[str, Any]:
        floats = [name for name in a if a[name].is_floating_point()]
        return {"bitwise_equal": all(torch.equal(a[name], b[name]) for name in a),
                "max_abs_diff": max(float((a[n].float() - b[n].float()).abs().max()) for n in floats),
                "max_abs_weight": max(float(a[n].float().abs().max()) for n in floats)}

    full_a = weights("full-a")
    return {"resumed_vs_uninterrupted": difference(full_a, weights("stopped")),
            "uninterrupted_vs_itself": difference(full_a, weights("full-b"))}


class Ledger:
    """suite.json as this command leaves it after every step: the earlier record of the folder,
    with this command's steps in place of the ones it reruns, and this pass: what ran (with the
    estimate and the time taken), what waits for the next budget, in order, and the changes of
    history.CHANGES its code holds. `planned`: each step the pass may start, with the estimate
    its plan printed, in order."""

    def __init__(self, path: Path, summary: Dict[str, Any], earlier: Dict[str, Any], kept: List[Dict[str, Any]],
                 budget: Optional[float], carried: List[Dict[str, Any]], software: Dict[str, Optional[str]],
                 planned: Dict[str, float]) -> None:
        self.path, self.kept, self.carried, self.planned = path, kept, carried, planned
        self.passes = earlier.get("passes", [])
        changes = list(dict.fromkeys(change.commit for change in CHANGES))
        # the folder's own list stays what its earlier passes, which recorded none of their own, ran with
        self.summary = dict(summary, changes_in_code=earlier.get("changes_in_code", changes))
        # the digest of the source files this pass runs: it proves the commit of the steps that write no result file
        self.this_pass: Dict[str, Any] = {"budget_min": budget, "started_utc": utc_now(), "commit": summary["commit"],
                                          "source_sha256": source_digest(), "software": software,
                                          "changes_in_code": changes, "elapsed_s": 0.0, "ran": [], "waiting": []}

    def still_waiting(self) -> List[Tuple[str, float]]:
        """(step, the plan's estimate) of each step this pass planned and did not run, in the plan's order."""
        ran = {entry["step"] for entry in self.this_pass["ran"]}
        return [(name, seconds) for name, seconds in self.planned.items() if name not in ran]

    def save(self, records: List[Dict[str, Any]], waiting: List[Dict[str, Any]], elapsed: float) -> None:
        names = {step["name"] for step in records}
        steps = [step for step in self.kept if step["name"] not in names] + records
        self.this_pass.update(elapsed_s=round(elapsed, 1), waiting=self.carried + waiting)
        record = dict(self.summary, elapsed_s=round(sum(step.get("elapsed_s", 0) for step in steps), 1),
                      steps_run=steps, passes=self.passes + [self.this_pass])
        atomic_write(str(self.path), lambda file: file.write((json.dumps(record, indent=2) + "\n").encode()))


def this_pass_steps(planned: List[Step], earlier: Dict[str, Any], sections: Sequence[str], budgeted: bool,
                    due: Dict[str, List[str]]) -> Tuple[List[Step], List[Dict[str, Any]], List[Dict[str, Any]]]:
    """(the steps this command may start, in order; the earlier step records it keeps; the earlier
    waiting steps of the sections it leaves alone). A budgeted command into a folder of earlier
    passes runs, in priority order, its sections' steps that are `due` on the device (due.py: never
    ran there, older code, fewer repeats, a missing field) and keeps every record but the device's
    refused modes, which each pass finds again; any other plans its sections anew, as does a
    budgeted command into a folder when nothing is due."""
    continuing = budgeted and bool(earlier.get("passes")) and any(step.name in due for step in planned)
    pending = [step for step in planned if step.name in due] if continuing else planned
    left_alone = ["modes"] if continuing else list(sections) + ["modes"]
    kept = [step for step in earlier.get("steps_run", []) if step.get("section") not in left_alone]
    return pending, kept, [entry for entry in last_waiting(earlier) if entry["section"] not in sections]


def choose_folder(device_folder: Path, today: str, due: Dict[str, List[str]], software: Dict[str, Optional[str]],
                  budgeted: bool) -> Tuple[Path, Optional[str]]:
    """(the folder this pass writes to, a sentence saying why, where it is not simply today's): a
    budgeted pass continues the device's newest folder of an earlier day while steps are `due` on
    the device and that folder's passes ran this machine's torch, CUDA and driver (so its rows stay
    comparable, each dated by its own pass); else it starts today's folder and says why."""
    todays = device_folder / today
    suites = saved_suites(device_folder)  # newest first
    if not budgeted or todays.is_dir() or not suites:
        return todays, None
    newest = suites[0]
    theirs = newest.software()  # BadResults where its passes disagree
    if not due:
        return todays, f"starting {todays}: nothing is due on this device, its newest figures are current"
    if theirs is not None and theirs != software:
        return todays, (f"starting {todays}: steps are due, but the passes of {newest.folder} ran "
                        f"{describe_software(theirs)} and this machine has {describe_software(software)}")
    return newest.folder, (f"continuing {newest.folder} (from {newest.date}): steps are due, and its passes ran "
                           f"this machine's {describe_software(software)}")


def refuse(pending: List[Step], estimates: Dict[str, Estimate], budget: Optional[float],
           started: float) -> Optional[str]:
    """Why `budget` minutes cannot start any of `pending`, with the least that can, by their
    `estimates`; None if one fits."""
    if not budget or not pending:
        return None
    spent = time.perf_counter() - started
    least = min(pending, key=lambda step: estimates[step.name].seconds)
    estimate = estimates[least.name]
    if estimate.seconds <= budget * 60 - spent:
        return None
    needed = math.ceil((spent + estimate.seconds) / 6) / 10  # minutes, rounded up to a tenth
    return (f"--budget {budget:g} fits no step; the least that fits is {needed:.1f} minutes, for {least.name} "
            f"(estimated {estimate.seconds:.0f} s, {estimate.source}).")


def spend(runner: Runner, pending: List[Step], estimator: Estimator, budget_s: float, ledger: Ledger,
          started: float) -> Optional[str]:
    """Start, in order, each step of `pending` whose estimate fits in what is left of `budget_s`
    (counted from the command's start, `started`), until none does or a stop signal came; save
    suite.json before and after each. Returns the name of the step a stop signal ended, if one
    did: it waits, as if it had not started (interrupted())."""
    def waiting() -> List[Dict[str, Any]]:
        return [{"step": step.name, "section": step.section, "estimate_s": round(estimator.estimate(step).seconds, 1)}
                for step in pending]

    ledger.save(runner.records, waiting(), time.perf_counter() - started)
    while runner.stop.number is None:
        left = budget_s - (time.perf_counter() - started)
        fits = ((step, estimator.estimate(step)) for step in pending)
        found: Optional[Tuple[Step, Estimate]] = next(
            ((step, estimate) for step, estimate in fits if estimate.seconds <= left), None)
        if found is None:
            return None
        step, estimate = found
        runner.say(f"{step.name}: estimated {estimate.seconds:.0f} s ({estimate.source})"
                   + ("" if math.isinf(left) else f", {left:.0f} s of the budget left"))
        step_started = time.perf_counter()
        records, files = len(runner.records), folder_state(runner.out)
        try:
            runner.perform(step)
        except Interrupted:
            del runner.records[records:]
            ledger.kept = [record for record in ledger.kept if record["name"] not in step.processes]
            set_aside(runner.out, files, step)
            ledger.save(runner.records, waiting(), time.perf_counter() - started)
            return step.name
        pending.remove(step)
        ledger.this_pass["ran"].append({"step": step.name, "section": step.section,
                                        "estimate_s": round(estimate.seconds, 1), "estimate_from": estimate.source,
                                        "elapsed_s": round(time.perf_counter() - step_started, 1)})
        ledger.save(runner.records, waiting(), time.perf_counter() - started)
        estimator.refresh()
    return None


FileState = Dict[str, Tuple[int, int, int]]


def folder_state(folder: Path) -> FileState:
    """Each file of `folder` (not of its subfolders) by name: its inode, size and modification time."""
    found = {}
    for path in folder.iterdir():
        status = path.lstat()
        if stat.S_ISREG(status.st_mode):
            found[path.name] = (status.st_ino, status.st_size, status.st_mtime_ns)
    return found


def set_aside(out: Path, before: FileState, step: Step) -> None:
    """Move what an interrupted `step` wrote into `out` (files new or changed since `before`) to
    out/interrupted/, so that no partial file reads as a result. A CSV the step appends to is left,
    with its lock: it holds every earlier step's rows, and each row names its run."""
    shared = set()
    for command in step.commands:
        csv = command.run.values().get("csv") if command.run else None
        if csv:
            shared |= {Path(csv).name, Path(lock_path(csv)).name}
    moved = [name for name, state in folder_state(out).items() if before.get(name) != state and name not in shared]
    if moved:
        (out / "interrupted").mkdir(exist_ok=True)
    for name in moved:
        os.replace(out / name, out / "interrupted" / name)
