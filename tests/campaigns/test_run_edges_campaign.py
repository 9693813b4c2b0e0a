"""The generated campaign of hostile cases at a run's edges (families 1-4): results at
the end of a run, resumes that would change the question, flags that would be silently
ignored, and the live streams under a deleted file, a full disk or a file that does not end its
last line. Each case is a command run as a user runs it (main.main in this process, where a
signal or a deletion lands exactly where the case puts it; a process of its own where a
file-size limit stands for a full disk), then checked against the rule every case shares:

* no traceback, ever, and an exit status of 0, 1, 2 or 128 + a signal;
* a non-zero exit ends with one closing sentence;
* exit 2 refuses before any training: no output is written;
* exit 1 keeps every result measured: the --json asked for is there;
* exit 0 writes every output asked for;
* a --jsonl holds whole JSON lines only (a prefilled line the user left without its newline
  stays a line of its own);

and against what the case itself expects (its status and the words that say why).
`python -m pytest -m long tests/campaigns/test_run_edges_campaign.py` runs it; the cases are CASES."""
import errno
import json
import os
import shutil
import signal
import subprocess
import sys
from dataclasses import dataclass, field
from typing import Callable, List, Optional

import pytest
from campaign_runs import main_py, runs_of

from conftest import ROOT, SUBSET, run_main
from utils.modes import MODES
from utils.training import cpu_arithmetic

pytestmark = pytest.mark.long  # some seventy commands: the long stage keeps the main suite short

SYNTHETIC = ["--model", "squeezenet1_1", "-b", "4", "-n", "4", "--warmup", "1", "--no-progress", "--data", "synthetic"]
CIFAR = ["--model", "squeezenet1_1", "-b", "32", "--lr", "0.01", "--no-progress", "--data", "cifar10",
         "--data-dir", str(SUBSET), "--allow-unverified"]
EVERY_STEP = "0.0006"  # --eval-every in epochs of the subset at -b 32: one step
SIGNALS = {"SIGTERM": signal.SIGTERM, "SIGINT": signal.SIGINT, "SIGUSR1": signal.SIGUSR1}


@dataclass
class Case:
    name: str
    argv: List[str]  # {tmp} is the case's folder
    status: int  # the exit status the case expects
    phrase: str = ""  # words the closing sentence (or, at exit 0, stderr) must hold
    setup: Optional[Callable] = None  # setup(tmp, monkeypatch) before the command
    check: Optional[Callable] = None  # check(tmp, result) -> a list of problems
    file_size: Optional[int] = None  # run in a process of its own whose files cannot grow past this
    absent: List[str] = field(default_factory=list)  # words stderr must not hold (a false warning)


def at_step(number, action):
    """A setup that runs action(tmp) just before training step `number` of the process."""
    def setup(tmp, monkeypatch):
        from utils.training import loop
        original, calls = loop.train_step, []

        def train_step(*args, **kwargs):
            calls.append(1)
            if len(calls) == number:
                action(tmp)
            return original(*args, **kwargs)
        monkeypatch.setattr(loop, "train_step", train_step)
    return setup


def signal_in_evaluation(number, nth):
    """A setup that sends signal `number` in the middle of the process's `nth` evaluation."""
    def setup(tmp, monkeypatch):
        from utils.data import dataset
        original, passes = dataset.eval_batches, []

        def eval_batches(*args, **kwargs):
            passes.append(1)
            for index, batch in enumerate(original(*args, **kwargs)):
                if index == 1 and len(passes) == nth:
                    os.kill(os.getpid(), number)
                yield batch
        monkeypatch.setattr(dataset, "eval_batches", eval_batches)
    return setup


def board_fails(code):
    def setup(tmp, monkeypatch):
        from tensorboard.summary.writer import record_writer

        def full(self, data):
            raise OSError(code, os.strerror(code))
        monkeypatch.setattr(record_writer.RecordWriter, "write", full)
    return setup


def prefill(content):
    def setup(tmp, monkeypatch):
        (tmp / "r.jsonl").write_text(content)
    return setup


def immutable(name, content='{"event": "kept"}\n'):
    """A file nobody may write, root included (chattr +i; undone by the campaign afterwards)."""
    def setup(tmp, monkeypatch):
        path = tmp / name
        path.write_text(content)
        path.chmod(0o444)
        if os.geteuid() == 0 and subprocess.run(["chattr", "+i", str(path)], capture_output=True).returncode:
            pytest.skip("root on a file system without chattr +i: no file is read-only here")
    return setup


def run_is(**wanted):
    """A check that the results' first run has these values."""
    def check(tmp, result):
        run = runs_of(tmp / "r.json")[0]
        return [f"runs[0].{key} is {run.get(key)!r}, not {value!r}" for key, value in wanted.items()
                if run.get(key) != value]
    return check


def has_accuracy(tmp, result):
    run = runs_of(tmp / "r.json")[0]
    return [] if run["test_accuracy"] is not None and not run["incomplete"] else ["the test accuracy is lost"]


def timed(tmp, result):
    run = runs_of(tmp / "r.json")[0]
    return [] if run["timed_steps"] >= 1 else ["no step was timed"]


def resumed_twice(eval_every):
    """Cut the final evaluation with a signal, resume (exit 0 with the accuracy), resume again
    (exit 2: nothing left to do)."""
    def check(tmp, result):
        argv = [*CIFAR, "-n", "3", "--warmup", "1", "--checkpoint", str(tmp / "c.pt"), "--json", str(tmp / "r.json"),
                *(["--eval-every", eval_every] if eval_every else [])]
        again = run_main(*argv, "--resume")
        problems = [] if again.returncode == 0 else [f"the resume exits {again.returncode}: {again.stderr[-300:]}"]
        if not problems:
            problems += has_accuracy(tmp, again)
            if runs_of(tmp / "r.json")[0]["accuracy_curve"][-1]["step"] != 3:
                problems.append("the accuracy curve lacks its last step")
        last = run_main(*argv, "--resume")
        if last.returncode != 2 or "already reaches" not in last.stderr:
            problems.append(f"a resume of a complete checkpoint exits {last.returncode}")
        return problems
    return check


def family_1():
    """Results lost at the end of a run."""
    cases = []
    for warmup in ("2", "3"):
        for outputs in (["--csv", "{tmp}/r.csv"], ["--plot", "{tmp}/r.svg"], ["--csv", "{tmp}/r.csv", "--plot",
                                                                                  "{tmp}/r.svg"]):
            cases.append(Case(f"1-target-in-warmup{warmup}-{'+'.join(o[2:] for o in outputs[::2])}",
                              [*CIFAR, "-n", "8", "--warmup", warmup, "--eval-every", EVERY_STEP, "--target-accuracy",
                               "0.01", "--stop-at-target", "--json", "{tmp}/r.json", *outputs], 0, check=timed))
    cases.append(Case("1-target-after-warmup", [*CIFAR, "-n", "8", "--warmup", "1", "--eval-every", "0.02",
                                                "--target-accuracy", "0.01", "--stop-at-target", "--json",
                                                "{tmp}/r.json", "--csv", "{tmp}/r.csv"], 0, check=timed))
    for name, number in SIGNALS.items():  # 3 steps: the evaluations after steps 1, 2 (with a curve) and 3
        for every, nth, where in ((None, 1, "final"), (EVERY_STEP, 3, "final"), (EVERY_STEP, 1, "mid-run")):
            cases.append(Case(f"1-{name}-in-{where}-evaluation{'-curve' if every else ''}",
                              [*CIFAR, "-n", "3", "--warmup", "1", "--checkpoint", "{tmp}/c.pt", "--json",
                               "{tmp}/r.json", *(["--eval-every", every] if every else [])], 128 + number,
                              "resume with", setup=signal_in_evaluation(number, nth), check=resumed_twice(every)))
    for every in ("1", "2", "0"):
        cases.append(Case(f"1-disk-full-checkpoint-every-{every}",
                          [*SYNTHETIC, "--checkpoint", "{tmp}/c.pt", "--checkpoint-every", every, "--json",
                           "{tmp}/r.json"], 1, "checkpoint saves failed", file_size=200000))
    cases.append(Case("1-signal-in-warmup-with-csv", [*SYNTHETIC, "--warmup", "2", "--csv", "{tmp}/r.csv", "--json",
                                                      "{tmp}/r.json"], 128 + signal.SIGTERM, "",
                      setup=at_step(1, lambda tmp: os.kill(os.getpid(), signal.SIGTERM)),
                      check=lambda tmp, result: ([] if "--csv" in result.stderr
                                                 else ["the unwritten --csv is not named"])))
    return cases


RESUME_CHANGES = [["--seed", "7"], ["--eval-every", "0.0012"], ["--dropout", "0.2"], ["--channels-last"],
                  ["--on-nan", "skip"], ["--optimizer-impl", "foreach"], ["--target-accuracy", "0.5"],
                  ["--target-accuracy", "0.01", "--stop-at-target"], ["--no-cudnn-benchmark"],
                  ["--label-smoothing", "0.1"], ["--momentum", "0.5"], ["--lr-schedule", "constant"]]
RESUME_ALLOWED = [["--accuracy-margin", "2"], ["--log-every", "1"], ["--warmup", "2"]]


def first_run(tmp, monkeypatch):
    argv = [*CIFAR, "-n", "2", "--warmup", "1", "--checkpoint", str(tmp / "c.pt"), "--eval-every", EVERY_STEP]
    assert run_main(*argv).returncode == 0


def family_2():
    """Resumes that silently change the question, and seeds beyond --seed's range."""
    base = [*CIFAR, "-n", "4", "--warmup", "1", "--checkpoint", "{tmp}/c.pt", "--eval-every", EVERY_STEP, "--resume",
            "--json", "{tmp}/r.json"]
    cases = [Case(f"2-resume-changes{'-'.join(change)}", [*base, *change], 2, f"holds a run with {change[0]}",
                  setup=first_run) for change in RESUME_CHANGES]
    cases += [Case(f"2-resume-keeps-answer{change[0]}", [*base, *change], 0, setup=first_run,
                   check=run_is(completed_steps=4, resumed_from_step=2)) for change in RESUME_ALLOWED]
    largest = 2 ** 63 - 1
    for seed, seeds in ((largest, 2), (largest - 1, 3), (largest - 5, 7)):
        cases.append(Case(f"2-seeds-past-the-range-{seed}-{seeds}", [*SYNTHETIC, "--seed", str(seed), "--seeds",
                                                                     str(seeds)], 2, "beyond the largest seed"))
    cases.append(Case("2-seeds-up-to-the-largest", [*SYNTHETIC, "-n", "2", "--seed", str(largest - 1), "--seeds", "2",
                                                    "--json", "{tmp}/r.json"], 0,
                      check=lambda tmp, result: [] if [r["seed"] for r in runs_of(tmp / "r.json")]
                      == [largest - 1, largest] else ["the seeds recorded are not the ones asked"]))
    return cases


def family_3():
    """Flags that would be silently ignored, and warnings that must be true."""
    refused = [(["--amp-dtype", "bfloat16"], "--amp-dtype"), (["--amp-dtype", "float16"], "--amp-dtype"),
               (["--amp-dtype", "float16", "--bf16"], "--amp-dtype"),
               (["--amp-dtype", "bfloat16", "--fp16"], "--amp-dtype"),
               (["--tf32", "--bf16"], "--tf32"), (["--tf32", "--fp16", "-s"], "--tf32"),
               (["--tf32", "--amp"], "--tf32"),
               (["--eval-every", "1"], "no test images"), (["--eval-every", "1", "--target-accuracy", "0.5"],
                                                           "no test images"),
               (["--eval-every", "1", "--target-accuracy", "0.5", "--stop-at-target"], "no test images")]
    cases = [Case(f"3-refused{'-'.join(flags)}", [*SYNTHETIC, *flags, "--json", "{tmp}/r.json"], 2, phrase)
             for flags, phrase in refused]
    auto = [*SYNTHETIC[:-2], "--data", "auto", "--data-dir", "{tmp}/nothing-here", "--no-download"]
    cases.append(Case("3-refused-eval-every-on-auto-synthetic", [*auto, "--eval-every", "1", "--json", "{tmp}/r.json"],
                      2, "no test images"))
    cases.append(Case("3-warning-amp-bfloat16-s", [*SYNTHETIC, "-n", "2", "--amp", "--amp-dtype", "bfloat16", "-s"], 0,
                      "bfloat16", absent=["without --fp16"]))
    cases.append(Case("3-warning-bf16-s", [*SYNTHETIC, "-n", "2", "--bf16", "-s"], 0, "bfloat16",
                      absent=["without --fp16"]))
    cases.append(Case("3-warning-fp32-s", [*SYNTHETIC, "-n", "2", "-s"], 0, "FP32 gradients need no loss scaling"))
    # float16 on a CPU without fast float16 is refused, truthfully; one with avx512_fp16 runs it, saying -s adds nothing
    slow = cpu_arithmetic.slow_on_this_cpu(MODES["amp-fp16"])
    cases.append(Case("3-amp-with-s", [*SYNTHETIC, "-n", "2", "--amp", "-s", "--json", "{tmp}/r.json"],
                      2 if slow else 0, "" if slow else "-s/--loss_scaling adds nothing to --amp",
                      absent=["without --fp16"]))
    return cases


def remove(name):
    def action(tmp):
        target = tmp / name
        shutil.rmtree(target) if target.is_dir() else target.unlink()
    return action


def replace_jsonl(tmp):
    os.rename(tmp / "r.jsonl", tmp / "r.jsonl.old")
    (tmp / "r.jsonl").write_text("")


def jsonl_ends_with_run(tmp, result):
    lines = (tmp / "r.jsonl").read_text().splitlines()
    return [] if lines and json.loads(lines[-1])["event"] == "run" else ["the stream lacks its last lines"]


def family_4():
    """Streams: --jsonl and --tensorboard."""
    stream = [*SYNTHETIC, "--log-every", "1", "--json", "{tmp}/r.json", "--jsonl", "{tmp}/r.jsonl"]
    cases = [Case(f"4-jsonl-prefilled-{label}", stream, 0, setup=prefill(content), check=jsonl_ends_with_run)
             for label, content in (("no-newline", '{"event": "earlier"}'), ("empty", ""), ("newline", "\n"),
                                    ("half-line", '{"event": "cut'), ("whole-line", '{"event": "earlier"}\n'))]
    for number in (1, 3):
        cases.append(Case(f"4-jsonl-deleted-at-step-{number}", stream, 1, "deleted during the run",
                          setup=at_step(number, remove("r.jsonl")), check=jsonl_ends_with_run))
    cases.append(Case("4-jsonl-replaced-at-step-2", stream, 1, "deleted during the run",
                      setup=at_step(2, replace_jsonl), check=jsonl_ends_with_run))
    pad = '{"event": "earlier", "pad": "' + "x" * 300000 + '"}\n'
    for margin in (0, 60, 700):
        cases.append(Case(f"4-jsonl-full-disk-margin-{margin}", stream, 1, "could not append to --jsonl",
                          setup=prefill(pad), file_size=len(pad) + margin))
    cases.append(Case("4-jsonl-read-only", stream, 2, "--jsonl", setup=immutable("r.jsonl")))
    board = [*SYNTHETIC, "--modes", "fp32,amp-bf16", "--log-every", "1", "--json", "{tmp}/r.json",
             "--tensorboard", "{tmp}/tb"]
    for number in (1, 3, 6):
        cases.append(Case(f"4-tensorboard-removed-at-step-{number}", board, 1, "--tensorboard",
                          setup=at_step(number, remove("tb")), check=lambda tmp, result: [] if len(
                              runs_of(tmp / "r.json")) == 2 else ["a run's results are lost"]))
    for code in (errno.ENOSPC, errno.EDQUOT):
        cases.append(Case(f"4-tensorboard-{errno.errorcode[code]}", board, 1, "--tensorboard", setup=board_fails(code)))
    return cases


CASES = family_1() + family_2() + family_3() + family_4()


def rule_problems(case, tmp, result, prefilled):
    """Where the run breaks the rule every case shares."""
    status, err, problems = result.returncode, result.stderr, []
    if "Traceback" in err:
        problems.append("a traceback")
    if status not in (0, 1, 2) and status - 128 not in list(SIGNALS.values()):
        problems.append(f"exit status {status}")
    closing = (err.strip().splitlines() or [""])[-1]
    if status and not (closing.startswith("main.py: ") and (closing.endswith(".") or "resume with: " in closing)):
        problems.append(f"no closing sentence: {closing[-200:]!r}")
    asked = {flag: tmp / name for flag, name in (("--json", "r.json"), ("--csv", "r.csv"), ("--plot", "r.svg"))
             if flag in case.argv}
    if status == 2 and (tmp / "r.json").exists():
        problems.append("a refused run wrote --json")
    if status == 1 and "--json" in asked and not asked["--json"].exists():
        problems.append("the results were lost")
    if status == 0:
        problems += [f"{flag} was not written" for flag, path in asked.items() if not path.exists()]
    jsonl = tmp / "r.jsonl"
    if jsonl.exists() and status != 2:
        text = jsonl.read_text()
        lines = text.splitlines()[len((prefilled or "").splitlines()):]  # the user's own lines are theirs
        kept = (prefilled or "") + ("\n" if prefilled and not prefilled.endswith("\n") else "")
        if not text.startswith(kept):
            problems.append("--jsonl's earlier content was changed, or an event glued onto its last line")
        if text and not text.endswith("\n"):
            problems.append("--jsonl ends with half a line")
        for line in lines:
            try:
                json.loads(line)
            except ValueError:
                problems.append(f"--jsonl holds a line that is not JSON: {line[:80]!r}")
                break
    return problems


@pytest.mark.parametrize("case", CASES, ids=[case.name for case in CASES])
def test_edge_case(case, tmp_path, monkeypatch):
    tmp = tmp_path
    argv = [arg.replace("{tmp}", str(tmp)) for arg in case.argv]
    monkeypatch.setattr(sys, "argv", ["main.py", *argv])  # the resume line repeats the command
    try:
        if case.setup:
            case.setup(tmp, monkeypatch)
        prefilled = (tmp / "r.jsonl").read_text() if (tmp / "r.jsonl").exists() else None
        result = main_py(ROOT, argv, file_size=case.file_size) if case.file_size else run_main(*argv)
        problems = rule_problems(case, tmp, result, prefilled)
        if result.returncode != case.status:
            problems.append(f"exit {result.returncode}, expected {case.status}")
        closing = (result.stderr.strip().splitlines() or [""])[-1]
        if case.phrase and case.phrase not in (closing if case.status else result.stderr):
            problems.append(f"the words {case.phrase!r} are missing from {closing[-300:]!r}")
        problems += [f"stderr says {words!r}" for words in case.absent if words in result.stderr]
        if not problems and case.check:
            problems += case.check(tmp, result)
    finally:
        if os.geteuid() == 0:
            subprocess.run(["chattr", "-R", "-i", str(tmp)], capture_output=True)
    assert not problems, f"{case.name}: {'; '.join(problems)}\n{result.stderr[-1500:]}"
