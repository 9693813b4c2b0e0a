"""benchmarks/gpu_suite.py as a batch job: inside a short GPU allocation that ends with a signal,
every path is proven before any step, a damaged saved file costs only itself, one suite at a time
writes a results folder, and a stop signal ends the step in flight with all its processes."""
import contextlib
import datetime
import io
import json
import os
import shutil
import signal
import subprocess
import sys
import textwrap
import time

import pytest

from benchmarks import gpu_suite
from benchmarks.suite import history, ledger, render
from conftest import ROOT, SUBSET
from utils import console
from utils.errors import UserError

H100 = ROOT / "results" / "NVIDIA-H100-80GB-HBM3" / "2026-11-26"
README = "# ampbench\n\n## Results\n\nafter\n"
PAIR = f"{render.BEGIN}\nold\n{render.END}\n"


@pytest.fixture(autouse=True)
def warned_afresh(monkeypatch):
    """Each test sees its own warnings: history says each damaged file once per command."""
    monkeypatch.setattr(history, "WARNED", set())


def suite_main(monkeypatch, *args):
    """`python benchmarks/gpu_suite.py ARGS` in this process (its torch already imported):
    (exit status, stdout, stderr)."""
    monkeypatch.setattr(sys, "argv", ["gpu_suite.py", *map(str, args)])
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        status = console.run("gpu_suite.py", gpu_suite.main)
    return status, out.getvalue(), err.getvalue()


def files_under(folder):
    return sorted(str(path.relative_to(folder)) for path in folder.rglob("*"))


def immutable(path):
    """A file or folder nobody may write, root included (chattr +i where the tests run as root)."""
    if os.geteuid() == 0:
        if subprocess.run(["chattr", "+i", str(path)], capture_output=True).returncode:
            pytest.skip("running as root on a file system without chattr +i: nothing is read-only here")
    else:
        path.chmod(0o555 if path.is_dir() else 0o444)


def mutable(path):
    if os.geteuid() == 0:
        subprocess.run(["chattr", "-i", str(path)], capture_output=True)


BAD_PATHS = {
    "results-root-empty": (["--results-root", ""], "--results-root needs a path, and got an empty one"),
    "results-root-a-file": (["--results-root", "{tmp}/README.md"], "is not a folder"),
    "results-root-under-a-file": (["--results-root", "{tmp}/README.md/results"], "is not a folder); choose"),
    "results-root-read-only": (["--results-root", "{tmp}/locked/results"], "cannot write --results-root"),
    "readme-empty": (["--readme", ""], "--readme needs a file, and got an empty one"),
    "readme-missing": (["--readme", "{tmp}/missing.md"], "missing.md is missing"),
    "readme-a-folder": (["--readme", "{tmp}"], "is a folder"),
    "readme-read-only": (["--readme", "{tmp}/locked.md"], "cannot append to --readme"),
    "readme-without-a-place": (["--readme", "{tmp}/plain.md"], "has neither the gpu-suite markers nor a '## Results'"),
    "readme-markers-reversed": (["--readme", "{tmp}/reversed.md"], "1 gpu-suite begin and 1 end markers, the end one"),
    "readme-markers-duplicated": (["--readme", "{tmp}/twice.md"], "2 gpu-suite begin and 2 end markers"),
    "render-empty": (["--render", ""], "--render needs a results folder, and got an empty one"),
    "render-missing": (["--render", "{tmp}/missing"], "missing is missing"),
    "render-without-suite-json": (["--render", "{tmp}"], "holds no suite.json"),
    "no-cuda-without-quick": (["--only", "recipes"], "no CUDA device is visible; run --quick"),
    "budget-that-fits-no-step": (["--quick", "--budget", "0.01"], "--budget 0.01 fits no step"),
    "parser": (["--quick", "--only", "nothing"], "argument --only: invalid choice"),
}


@pytest.mark.parametrize("case", BAD_PATHS)
def test_every_unusable_path_is_refused_in_one_line_before_anything_is_written(case, tmp_path, monkeypatch):
    if case == "no-cuda-without-quick":
        import torch

        if torch.cuda.is_available():
            pytest.skip("this machine has CUDA")
    arguments, phrase = BAD_PATHS[case]
    (tmp_path / "README.md").write_text(README)
    (tmp_path / "plain.md").write_text("# ampbench\n\nno heading for results\n")
    (tmp_path / "reversed.md").write_text(f"## Results\n\n{render.END}\nmid\n{render.BEGIN}\n")
    (tmp_path / "twice.md").write_text(f"## Results\n\n{PAIR}\n{PAIR}")
    (tmp_path / "locked.md").write_text(README)
    (tmp_path / "locked").mkdir()
    defaults = {"--results-root": str(tmp_path / "results"), "--readme": str(tmp_path / "README.md")}
    given = [argument.format(tmp=tmp_path) for argument in arguments]
    for flag, value in defaults.items():
        if flag not in given and not (flag == "--results-root" and "--render" in given):
            given += [flag, value]
    if "--render" not in given and "--only" not in given:
        given += ["--only", "scripts", "--data-dir", str(SUBSET)]
    before = {path: path.read_bytes() for path in tmp_path.rglob("*") if path.is_file()}
    for name in ("locked.md", "locked"):
        immutable(tmp_path / name)
    try:
        status, out, err = suite_main(monkeypatch, *given)
    finally:
        for name in ("locked.md", "locked"):
            mutable(tmp_path / name)
    assert status == 2 and err.startswith("gpu_suite.py: error: ") and err.count("\n") == 1, err
    assert phrase in err and "Traceback" not in err, err
    assert {path: path.read_bytes() for path in tmp_path.rglob("*") if path.is_file()} == before
    assert not (tmp_path / "results").exists() and not any((tmp_path / "locked").iterdir())


@pytest.mark.parametrize("text, span", [
    (f"# x\n\n## Results\n\n{PAIR}after\n", True),
    ("# x\n\n## Results\n\nafter\n", False),
])
def test_the_section_goes_between_its_one_pair_of_markers_or_under_the_results_heading(text, span, tmp_path):
    found = render.section_span(text, tmp_path / "README.md")
    assert (found == (text.index(render.BEGIN), text.index(render.END) + len(render.END))) if span else found is None


def test_a_begin_marker_whose_note_was_edited_still_counts_so_no_second_pair_is_added(tmp_path):
    text = f"## Results\n\n{render.BEGIN_TAG}: edited -->\nold\n{render.END}\n{PAIR}"
    with pytest.raises(UserError, match="2 gpu-suite begin and 2 end markers"):
        render.section_span(text, tmp_path / "README.md")


def test_a_damaged_step_file_is_left_out_with_one_warning_and_readme_still_renders(tmp_path, monkeypatch):
    folder = tmp_path / "results" / H100.parent.name / H100.name
    shutil.copytree(H100, folder)
    (folder / "headline-resnet18.json").write_text('{"runs": [')  # a copy cut short
    (folder / "resnet18.json").write_text("[]")
    (tmp_path / "README.md").write_text(README)
    status, out, err = suite_main(monkeypatch, "--render", folder, "--readme", tmp_path / "README.md")
    assert status == 0, err
    lines = err.splitlines()
    assert len(lines) == 2 and all(line.startswith("gpu_suite.py: warning: ") for line in lines), err
    assert f"{folder / 'headline-resnet18.json'}: it cannot be read as JSON" in err
    assert f"{folder / 'resnet18.json'}: it holds a JSON list, not an object; it is left out." in err
    section = (tmp_path / "README.md").read_text()
    assert render.BEGIN in section and "| resnet50 | 32 |" in section  # the other rows are kept


# What main.py writes of a run that a signal stopped before its first timed step: no figure.
UNMEASURED = ("step_time_ms", "step_times_ms", "compute_time_ms", "data_time_ms", "images_per_sec", "first_step_s",
              "compile_time_s", "final_loss", "test_accuracy", "tflops", "mfu_pct", "resumed_from_step")


def stopped_before_its_first_timed_step(path):
    document = json.loads(path.read_text())
    document["incomplete"] = True
    for run in document["runs"]:
        run.update(dict.fromkeys(UNMEASURED), step_times_ms=[], incomplete=True, stopped_by="SIGTERM",
                   completed_steps=0)  # as main.py writes a run stopped before its first timed step
    path.write_text(json.dumps(document))


def test_steps_stopped_before_their_first_timed_step_render_saying_so(tmp_path, monkeypatch):
    folder = tmp_path / "results" / "NVIDIA-H100-80GB-HBM3" / "2026-11-22"
    shutil.copytree(ROOT / "results" / "NVIDIA-H100-80GB-HBM3" / "2026-11-22", folder)
    for step in ("compile", "torchrun-1", "resume", "classic-fp16"):
        stopped_before_its_first_timed_step(folder / f"{step}.json")
    (tmp_path / "README.md").write_text(README)
    status, out, err = suite_main(monkeypatch, "--render", folder, "--readme", tmp_path / "README.md")
    assert status == 0 and "Traceback" not in err, err
    page = (folder / "README.md").read_text()
    assert "* `--compile` (resnet50, amp-bf16): no timed step (stopped by SIGTERM after 0 of 50 steps)." in page
    assert "resnet18): median 14.96 ms against no timed step (stopped by SIGTERM after 0 of 50 steps) (" in page
    assert ("* Checkpoint, SIGTERM and resume (amp-fp16): the resumed run stopped by SIGTERM after 0 of 40 steps, "
            "so its weights are not final and are not compared.") in page
    assert ("| amp-fp16 | cuda | no timed step (stopped by SIGTERM after 0 of 200 steps) | - |") in page  # not 0 img/s


@pytest.mark.parametrize("content", ["{", '{"steps_run": 5}', '"a string"'])
def test_a_damaged_suite_json_of_another_day_is_left_out_with_one_warning(content, tmp_path, capsys):
    device = tmp_path / "CPU"
    for day in ("2026-11-01", "2026-11-02"):
        (device / day).mkdir(parents=True)
    (device / "2026-11-01" / "suite.json").write_text(json.dumps({"device": "CPU", "steps_run": []}))
    (device / "2026-11-02" / "suite.json").write_text(content)
    for _ in range(2):
        assert [suite.folder.name for suite in history.saved_suites(device)] == ["2026-11-01"]
    err = capsys.readouterr().err
    assert err.count("warning") == 1 and str(device / "2026-11-02" / "suite.json") in err, err


@pytest.mark.parametrize("content", ["{", "[]", '{"device": "CPU", "passes": [{"waiting": "loaders"}]}'])
def test_a_damaged_suite_json_in_todays_folder_is_set_aside_and_the_pass_plans_anew(content, tmp_path, monkeypatch):
    (tmp_path / "README.md").write_text(README)
    common = ["--quick", "--only", "recipes", "--results-root", tmp_path / "results", "--readme",
              tmp_path / "README.md"]  # recipes: skipped on a CPU, so the pass runs no step
    assert suite_main(monkeypatch, *common)[0] == 0
    (today,) = (tmp_path / "results").glob(f"*/{datetime.date.today().isoformat()}")
    (today / "suite.json").write_text(content)
    status, out, err = suite_main(monkeypatch, *common)
    assert status == 0, err
    (aside,) = today.glob("suite.json.unreadable-*")
    assert aside.read_text() == content  # kept, never lost
    assert err == (f"gpu_suite.py: warning: {today / 'suite.json'}: {history.suite_record(aside, True)[1]}; moved it "
                   f"to {aside.name} beside it, and this pass plans the folder anew.\n")
    record = json.loads((today / "suite.json").read_text())
    assert len(record["passes"]) == 1 and record["steps_run"][-1]["name"] == "recipes"


def test_a_section_named_twice_runs_once(tmp_path, monkeypatch):
    (tmp_path / "README.md").write_text(README)
    status, out, err = suite_main(monkeypatch, "--quick", "--only", "recipes", "--only", "recipes", "--results-root",
                                  tmp_path / "results", "--readme", tmp_path / "README.md")
    assert status == 0, err
    (suite,) = (tmp_path / "results").glob("*/*/suite.json")
    assert [step["name"] for step in json.loads(suite.read_text())["steps_run"] if step["section"] == "recipes"] \
        == ["recipes"]


# A step that hangs, as a stuck GPU run would, with a process of its own in its group: Python's own
# sitecustomize hook (a real user's too), on PYTHONPATH, in the loader benchmark's processes only.
HANG = textwrap.dedent("""
    import os, signal, subprocess, time
    if any(part.endswith(b"loader.py") for part in open("/proc/self/cmdline", "rb").read().split(b"\\0")):
        if os.environ.get("HANG_IGNORES_SIGTERM"):
            signal.signal(signal.SIGTERM, signal.SIG_IGN)
        child = subprocess.Popen(["sleep", "600"])
        with open(os.environ["HANG_PIDS"] + ".tmp", "w") as f:
            f.write(f"{os.getpid()} {child.pid}")
        os.replace(os.environ["HANG_PIDS"] + ".tmp", os.environ["HANG_PIDS"])
        while True:
            time.sleep(1)
""")


def hanging_suite(tmp_path, **env):
    """A quick pass of the scripts section whose one step (loaders) hangs; (process, pids file)."""
    (tmp_path / "hook").mkdir(exist_ok=True)
    (tmp_path / "hook" / "sitecustomize.py").write_text(HANG)
    (tmp_path / "README.md").write_text(README)
    pids = tmp_path / "pids"
    suite = subprocess.Popen([sys.executable, str(ROOT / "benchmarks" / "gpu_suite.py"), "--quick", "--only",
                              "scripts", "--data-dir", str(SUBSET), "--results-root", str(tmp_path / "results"),
                              "--readme", str(tmp_path / "README.md")], cwd=ROOT, stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True,
                             env={**os.environ, "HANG_PIDS": str(pids), **env,  # the hook, then this checkout
                                  "PYTHONPATH": os.pathsep.join([str(tmp_path / "hook"), os.environ["PYTHONPATH"]])})
    deadline = time.monotonic() + 240
    while not pids.exists():
        assert suite.poll() is None and time.monotonic() < deadline, suite.communicate()
        time.sleep(0.1)
    return suite, [int(pid) for pid in pids.read_text().split()]


def alive(pid):
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(") ", 1)[1][0] != "Z"  # a zombie has ended
    except FileNotFoundError:
        return False


@pytest.mark.long
@pytest.mark.parametrize("signals, ignores", [
    ([signal.SIGTERM], False), ([signal.SIGUSR1], False),
    ([signal.SIGINT, signal.SIGINT], True),  # a second signal does not wait for the grace
])
def test_a_stop_signal_ends_the_step_in_flight_with_its_group_and_the_step_waits(signals, ignores, tmp_path):
    suite, pids = hanging_suite(tmp_path, **({"HANG_IGNORES_SIGTERM": "1"} if ignores else {}))
    try:
        started = time.monotonic()
        for number in signals:
            suite.send_signal(number)
            time.sleep(0.3)
        while any(alive(pid) for pid in pids) and time.monotonic() - started < 60:
            time.sleep(0.05)
        took = time.monotonic() - started  # the step's end: well within the grace, where it is cut short
        out, err = suite.communicate(timeout=60)
    finally:
        for pid in pids:
            if alive(pid):
                os.kill(pid, signal.SIGKILL)
    assert [pid for pid in pids if alive(pid)] == []  # the step's process and the one it started
    assert suite.returncode == 128 + signals[0], err
    assert err.splitlines()[-1] == (f"gpu_suite.py: stopped by {signal.Signals(signals[0]).name}, which ended step "
                                    "loaders; it waits for the next pass."), err
    assert took < ledger.GRACE_S / 2 and "Traceback" not in err
    (out_folder,) = (tmp_path / "results").glob("*/*")
    record = json.loads((out_folder / "suite.json").read_text())
    assert [entry["step"] for entry in record["passes"][-1]["waiting"]] == ["loaders"]
    assert record["passes"][-1]["ran"] == [] and "loaders" not in [step["name"] for step in record["steps_run"]]
    assert (out_folder / "interrupted" / "loaders.log").exists() and not (out_folder / "loaders.log").exists()
    assert (out_folder / "README.md").exists() and "`loaders`" in (out_folder / "README.md").read_text()
    assert "gpu-suite:begin" in (tmp_path / "README.md").read_text()



def test_an_interrupted_step_moves_aside_what_it_wrote_but_the_csv_every_step_appends_to(tmp_path):
    from pathlib import Path

    from benchmarks.suite.main_run import main_run
    from benchmarks.suite.plan import Command, Step
    from utils.fileio import lock_path

    csv, earlier = tmp_path / "all.csv", tmp_path / "native.json"
    lock = Path(lock_path(str(csv)))
    for path in (csv, lock, earlier):
        path.write_text("earlier steps'\n")
    before = ledger.folder_state(tmp_path)
    csv.write_text("earlier steps'\nthis step's row\n")
    (tmp_path / "headline.json").write_text("{")  # half written
    (tmp_path / "headline.log").write_text("step 3")
    run = main_run(gpu=True, model="resnet18", json=tmp_path / "headline.json", csv=csv)
    ledger.set_aside(tmp_path, before, Step("headline", "headline", (Command("headline", run),)))
    assert sorted(path.name for path in (tmp_path / "interrupted").iterdir()) == ["headline.json", "headline.log"]
    assert csv.read_text().endswith("this step's row\n") and lock.exists() and earlier.exists()

@pytest.mark.long
def test_a_second_suite_into_the_same_folder_is_refused_while_the_first_runs_and_no_pass_is_lost(tmp_path):
    suite, pids = hanging_suite(tmp_path)
    second = [sys.executable, str(ROOT / "benchmarks" / "gpu_suite.py"), "--quick", "--only", "recipes",
              "--results-root", str(tmp_path / "results"), "--readme", str(tmp_path / "README.md")]
    try:
        refused = subprocess.run(second, cwd=ROOT, capture_output=True, text=True, timeout=300)
        suite.send_signal(signal.SIGTERM)
        suite.communicate(timeout=60)
    finally:
        for pid in pids:
            if alive(pid):
                os.kill(pid, signal.SIGKILL)
    (device,) = (tmp_path / "results").glob("*")
    assert refused.returncode == 2 and refused.stderr == (
        f"gpu_suite.py: error: another gpu_suite.py is writing into {device}; wait for it to finish, or give "
        "another --results-root.\n"), refused.stderr
    assert suite.returncode == 143
    after = subprocess.run(second, cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert after.returncode == 0, after.stderr
    (record,) = device.glob("*/suite.json")
    assert len(json.loads(record.read_text())["passes"]) == 2  # the interrupted pass and the later one


# A step's torchrun, standing in: it starts its "rank" in a session of its own, as torchrun does,
# writes the rank's pid, then exits leaving the rank running (as a killed torchrun does), or
# hangs until the step's timeout ends it.
TORCHRUN = ("import os, subprocess, sys, time\n"
            "rank = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(600)'], start_new_session=True)\n"
            "open(sys.argv[1] + '.tmp', 'w').write(str(rank.pid))\n"
            "os.replace(sys.argv[1] + '.tmp', sys.argv[1])\n"
            "time.sleep(float(sys.argv[2]))\n")
# The suite's runner, as gpu_suite.py runs a step, in a process of its own (it adopts orphans).
RUNNER = ("import sys\n"
          "from pathlib import Path\n"
          "from benchmarks.suite import ledger, plan\n"
          "from tests.benchmarks.words import Words\n"
          "from utils.children import adopt_orphans\n"
          "adopt_orphans()\n"
          "out = Path(sys.argv[1])\n"
          "words = (sys.executable, '-c', sys.argv[2], str(out / 'rank'), sys.argv[3])\n"
          "command = plan.Command('torchrun', Words(words), timeout=3)\n"
          "print(ledger.Runner(out, [], lambda line: None, '0' * 40, ledger.Stop()).run('scripts', command))\n")


@pytest.mark.parametrize("ends, rc", [("timeout", "timeout"), ("exit", "0")])
def test_a_step_leaves_no_rank_of_its_torchrun_running_however_it_ends(ends, rc, tmp_path):
    """torchrun starts each rank in a session of its own, out of the step's process group, and a
    rank outlives a torchrun that is killed: neither may leave it training after its step."""
    from utils.children import alive

    result = subprocess.run([sys.executable, "-c", RUNNER, str(tmp_path), TORCHRUN,
                             "600" if ends == "timeout" else "0.5"], cwd=ROOT, capture_output=True, text=True,
                            timeout=120, env={**os.environ, "PYTHONPATH": str(ROOT)})
    rank = int((tmp_path / "rank").read_text())
    try:
        assert result.returncode == 0 and result.stdout.split() == [rc], result.stderr
        assert not alive(rank)
    finally:
        if alive(rank):
            os.kill(rank, signal.SIGKILL)
