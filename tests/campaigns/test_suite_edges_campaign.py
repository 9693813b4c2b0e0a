"""The GPU suite (benchmarks/gpu_suite.py) at its edges, as a hostile user or a batch system meets
it: a results root with another user's unreadable folder or a hand-forged suite.json, a pass
refused for its budget in a folder whose suite.json is damaged, relative paths given from another
working directory. Each case ends in one sentence and exit 2, or in success with nothing lost and
what was left out said."""
import contextlib
import datetime
import io
import json
import os
import shutil
import subprocess
import sys

import pytest

from benchmarks import gpu_suite
from benchmarks.suite import history
from conftest import ROOT, SUBSET, alive_after, command_line
from utils import console

RESULTS = ROOT / "results"
H200 = "NVIDIA-H200/2026-11-26"  # the folder each case renders
H100 = "NVIDIA-H100-80GB-HBM3/2026-11-26"  # another device's, beside it
README = "# ampbench\n\n## Results\n\nafter\n"
GPU_SUITE = [sys.executable, str(ROOT / "benchmarks" / "gpu_suite.py")]


@pytest.fixture(autouse=True)
def warned_afresh(monkeypatch):
    """Each case sees its own warnings: history says each damaged file once per command."""
    monkeypatch.setattr(history, "WARNED", set())


def suite_main(monkeypatch, *args):
    """`python benchmarks/gpu_suite.py ARGS` in this process: (exit status, stdout, stderr)."""
    monkeypatch.setattr(sys, "argv", ["gpu_suite.py", *map(str, args)])
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        status = console.run("gpu_suite.py", gpu_suite.main)
    return status, out.getvalue(), err.getvalue()


def results_root(tmp_path):
    """A copy of the committed results of two devices, and a README to render into."""
    root = tmp_path / "results"
    for folder in (H200, H100):
        shutil.copytree(RESULTS / folder, root / folder)
    (tmp_path / "README.md").write_text(README)
    return root


def forge(path, change):
    record = json.loads(path.read_text())
    change(record["passes"][0])
    path.write_text(json.dumps(record))


FORGED_PASSES = {  # what a hand-edited pass holds, and the words that name the field
    "elapsed-null": (lambda entry: entry.update(elapsed_s=None), "a pass's elapsed_s is null, not its seconds"),
    "elapsed-text": (lambda entry: entry.update(elapsed_s="2 min"), 'a pass\'s elapsed_s is "2 min", not its seconds'),
    "no-ran": (lambda entry: entry.pop("ran"), "a pass has no ran"),
    "no-waiting": (lambda entry: entry.pop("waiting"), "a pass has no waiting"),
    "no-elapsed-nor-budget": (lambda entry: [entry.pop("elapsed_s"), entry.pop("budget_min")],
                              "a pass has no elapsed_s, budget_min"),
    "budget-text": (lambda entry: entry.update(budget_min="ten"), 'a pass\'s budget_min is "ten", not its minutes'),
    "ran-a-dict": (lambda entry: entry.update(ran={}), "a pass's ran is not a list of steps"),
}


@pytest.mark.parametrize("forged", list(FORGED_PASSES))
def test_render_refuses_a_folder_whose_pass_is_forged_naming_the_file_and_field(forged, tmp_path, monkeypatch):
    root = results_root(tmp_path)
    change, words = FORGED_PASSES[forged]
    forge(root / H200 / "suite.json", change)
    before = (tmp_path / "README.md").read_text()
    status, out, err = suite_main(monkeypatch, "--render", root / H200, "--readme", tmp_path / "README.md")
    assert status == 2 and err.startswith("gpu_suite.py: error: --render ") and err.count("\n") == 1, err
    assert str(root / H200) in err and words in err and "Traceback" not in err, err
    assert (tmp_path / "README.md").read_text() == before


@pytest.mark.parametrize("forged", list(FORGED_PASSES))
def test_another_devices_forged_pass_is_left_out_with_one_warning_and_the_rest_rendered(forged, tmp_path,
                                                                                       monkeypatch):
    root = results_root(tmp_path)
    change, words = FORGED_PASSES[forged]
    forge(root / H100 / "suite.json", change)
    status, out, err = suite_main(monkeypatch, "--render", root / H200, "--readme", tmp_path / "README.md")
    assert status == 0, err
    assert err.startswith(f"gpu_suite.py: warning: {root / H100 / 'suite.json'}: ") and err.count("\n") == 1, err
    assert words in err and err.endswith("; that folder is left out.\n"), err
    section = (tmp_path / "README.md").read_text()
    assert "**NVIDIA H200**" in section and "**NVIDIA H100 80GB HBM3**" not in section


def without_read_permission():
    """The command prefix under which a chmod 000 folder cannot be read: none for a user, and for
    root a process without the capabilities that let root read anything (util-linux's setpriv)."""
    if os.geteuid() != 0:
        return []
    prefix = ["setpriv", "--inh-caps=-dac_override,-dac_read_search",
              "--bounding-set=-dac_override,-dac_read_search"]
    if shutil.which("setpriv") is None:
        pytest.skip("running as root without setpriv: root reads a chmod 000 folder")
    return prefix


@pytest.mark.parametrize("locked", ["device", "date"])
def test_render_leaves_out_another_devices_unreadable_folder_saying_so(locked, tmp_path):
    prefix = without_read_permission()
    root = results_root(tmp_path)
    folder = root / (H100.split("/")[0] if locked == "device" else H100)
    folder.chmod(0)
    try:
        probe = subprocess.run([*prefix, "ls", str(folder)], capture_output=True)
        if probe.returncode == 0:
            pytest.skip("this process reads a chmod 000 folder (a file system that ignores permissions)")
        done = subprocess.run([*prefix, *GPU_SUITE, "--render", str(root / H200), "--readme",
                               str(tmp_path / "README.md")], capture_output=True, text=True, timeout=600)
    finally:
        folder.chmod(0o755)
    assert done.returncode == 0, done.stderr
    reason = "its results are left out" if locked == "device" else "that folder is left out"
    assert done.stderr == f"gpu_suite.py: warning: {folder}: it cannot be read (Permission denied); {reason}.\n"
    section = (tmp_path / "README.md").read_text()
    assert "**NVIDIA H200**" in section and "**NVIDIA H100 80GB HBM3**" not in section


def todays_folder(tmp_path, monkeypatch):
    """Today's folder of this machine's device under tmp_path/results, made by a pass that runs no step."""
    (tmp_path / "README.md").write_text(README)
    common = ["--quick", "--only", "recipes", "--results-root", tmp_path / "results", "--readme",
              tmp_path / "README.md"]  # recipes: skipped on a CPU, so the pass runs no step
    assert suite_main(monkeypatch, *common)[0] == 0
    (today,) = (tmp_path / "results").glob(f"*/{datetime.date.today().isoformat()}")
    return today


@pytest.mark.parametrize("content", ["{", "[]", '{"device": "CPU", "passes": [{"waiting": "loaders"}]}', ""])
def test_a_pass_refused_for_its_budget_puts_a_damaged_suite_json_back(content, tmp_path, monkeypatch):
    today = todays_folder(tmp_path, monkeypatch)
    (today / "suite.json").write_text(content)
    before = {path.name: path.read_bytes() for path in today.iterdir()}
    status, out, err = suite_main(monkeypatch, "--quick", "--budget", "0.01", "--results-root", tmp_path / "results",
                                  "--readme", tmp_path / "README.md")
    assert status == 2 and err.startswith("gpu_suite.py: error: --budget 0.01 fits no step") and \
        err.count("\n") == 1, err
    assert {path.name: path.read_bytes() for path in today.iterdir()} == before  # nothing moved, nothing lost


def test_relative_results_root_and_data_dir_are_the_users_working_directorys(tmp_path, monkeypatch):
    """The steps run from the checkout: relative paths given elsewhere still mean the user's."""
    (tmp_path / "cifar-here").mkdir()
    os.symlink(SUBSET, tmp_path / "cifar-here" / "cifar-10-batches-py")
    (tmp_path / "README.md").write_text(README)
    monkeypatch.chdir(tmp_path)
    status, out, err = suite_main(monkeypatch, "--quick", "--only", "scripts", "--results-root", "res",
                                  "--data-dir", "cifar-here", "--readme", "README.md")
    assert status == 0, out + err
    (record,) = (tmp_path / "res").glob("*/*/suite.json")
    (loaders,) = [step for step in json.loads(record.read_text())["steps_run"] if step["name"] == "loaders"]
    assert loaders["rc"] == 0 and f"--data-dir {tmp_path / 'cifar-here'}" in loaders["command"], loaders
    assert not (ROOT / "res").exists() and not (ROOT / "cifar-here").exists()


def unix_socket(path):
    import socket

    listener = socket.socket(socket.AF_UNIX)
    listener.bind(str(path))
    return listener


REFUSED_ARGUMENTS = {  # (what the case makes in tmp_path, the arguments, the words of the one line)
    "readme-a-fifo": (lambda tmp: os.mkfifo(tmp / "fifo.md"), ["--readme", "{tmp}/fifo.md"],
                      "fifo.md is a FIFO, not a file; give the README"),
    "readme-a-socket": (lambda tmp: unix_socket(tmp / "socket.md"), ["--readme", "{tmp}/socket.md"],
                        "socket.md is a socket, not a file; give the README"),
    "commit-of-10000-characters": (None, ["--commit", "a" * 10000], "not '" + "a" * 37 + "...' ("),
    "commit-of-10000-escapes": (None, ["--commit", "\x1b[2J" * 2500], "not '" + "\\x1b[2J" * 9 + "\\x1b...' ("),
}


@pytest.mark.parametrize("case", list(REFUSED_ARGUMENTS))
def test_a_refused_argument_is_said_in_one_short_line_naming_what_it_is(case, tmp_path, monkeypatch):
    make, arguments, words = REFUSED_ARGUMENTS[case]
    kept = make(tmp_path) if make else None  # a socket stays a socket while its listener is open
    (tmp_path / "README.md").write_text(README)
    before = sorted(tmp_path.iterdir())
    try:
        status, out, err = suite_main(monkeypatch, "--quick", "--results-root", tmp_path / "results", "--readme",
                                      tmp_path / "README.md", *(part.format(tmp=tmp_path) for part in arguments))
    finally:
        if kept is not None:
            kept.close()
    assert status == 2 and err.startswith("gpu_suite.py: error: ") and err.count("\n") == 1, err
    assert words in err and len(err) < 300, err
    assert sorted(tmp_path.iterdir()) == before


@pytest.mark.parametrize("late", [["by-hand/notes.txt"],
                                  ["advise/phases/compare.json", "a.log", "b.csv", "c.png"]])
def test_files_written_after_the_last_pass_saved_its_books_are_said_on_the_next_pass(late, tmp_path, monkeypatch):
    """What a step that outlived its suite wrote is named in one line, and the pass goes on."""
    today = todays_folder(tmp_path, monkeypatch)
    saved = (today / "suite.json").stat().st_mtime
    for name in [*late, "on-time.json", "README.md", "lease.log"]:  # the run page and a lease's log come after
        (today / name).parent.mkdir(parents=True, exist_ok=True)
        (today / name).write_text("{}")
        later = saved + (1 if name == "on-time.json" else 60)
        os.utime(today / name, (later, later))
    status, out, err = suite_main(monkeypatch, "--quick", "--only", "recipes", "--results-root", tmp_path / "results",
                                  "--readme", tmp_path / "README.md")
    assert status == 0 and err.count("\n") == 1, err
    assert err.startswith(f"gpu_suite.py: warning: {today} holds {len(late)} file") and "after its last pass" in err
    named = sorted(late)[:3]
    assert all(name in err for name in named) and not any(name in err for name in ("on-time", "README", "lease")), err
    assert ("and 1 more" in err) == (len(late) == 4)


def descendants(pid):
    """Every process below `pid`, by /proc."""
    from utils.children import processes

    below, found = {pid}, True
    while found:
        found = {child for child, parent, group in processes() if parent in below and child not in below}
        below |= found
    return below - {pid}


@pytest.mark.gpu_suite
def test_sigkill_of_the_suite_mid_step_leaves_no_process_of_the_step_within_five_seconds(tmp_path):
    import time

    (tmp_path / "README.md").write_text(README)
    suite = subprocess.Popen([*GPU_SUITE, "--quick", "--only", "headline", "--results-root", str(tmp_path / "results"),
                              "--readme", str(tmp_path / "README.md")], stdout=subprocess.DEVNULL,
                             stderr=subprocess.DEVNULL, start_new_session=True)
    results = str(tmp_path / "results").encode()
    try:
        deadline, step = time.monotonic() + 120, set()
        while not step and time.monotonic() < deadline:  # a step's main.py writing into the results, not a probe
            below = descendants(suite.pid)
            step = below if any(results in command_line(pid) for pid in below) else set()
            time.sleep(0.05)
        assert step, "a step runs"
    finally:
        suite.kill()
        suite.wait()
    assert not alive_after(step, 5)


WITHOUT_TORCH = ("import runpy, sys; sys.modules['torch'] = sys.modules['torchvision'] = None; "
                 "sys.argv = sys.argv[1:]; runpy.{how}(sys.argv[0], run_name='__main__')")
# the same, with the FLOPs table the suite reads replaced by the file given first
WITHOUT_TORCH_TABLE = ("import pathlib, sys; from benchmarks.suite import estimate; "
                       "estimate.FLOPS_TABLE = pathlib.Path(sys.argv.pop(1)); " + WITHOUT_TORCH)
SUITE = str(ROOT / "benchmarks" / "gpu_suite.py")
NO_TORCH_CASES = {  # (run_path or run_module, the program and its arguments, exit status, words of its output)
    "suite-help": ("run_path", [SUITE, "-h"], 0, "usage: gpu_suite.py"),
    "suite-plan": ("run_path", [SUITE, "--plan", "--results-root", str(RESULTS)], 0,
                   "the pass would run, in order (no budget):"),
    "suite-pass": ("run_path", [SUITE, "--quick", "--results-root", "results", "--readme", "README.md"], 2,
                   "gpu_suite.py: error: this Python cannot import torch"),
    "installed-suite-help": ("run_module", ["benchmarks.gpu_suite", "-h"], 0, "usage: "),
    "fp8-predict-help": ("run_module", ["utils.explain.fp8_predict", "-h"], 0, "usage: "),
    "fp8-predict-model": ("run_module", ["utils.explain.fp8_predict", "-m", "resnet50"], 2,
                          "fp8_predict: error: torch is not installed in this Python: pip install -r "
                          "requirements.txt (or run inside a PyTorch container)."),
    "overhead-run": ("run_path", [str(ROOT / "benchmarks" / "overhead.py"), "--steps", "1", "--rounds", "1"], 2,
                     "overhead.py: error: torch is not installed in this Python: pip install -r requirements.txt"),
}


def without_torch(how, argv, cwd, code=WITHOUT_TORCH):
    """`argv` run where `import torch` and `import torchvision` fail, as in a Python without them."""
    return subprocess.run([sys.executable, "-c", code.format(how=how), *argv], capture_output=True, text=True,
                          cwd=cwd, timeout=300)


@pytest.mark.parametrize("case", list(NO_TORCH_CASES))
def test_help_and_the_plan_need_no_torch_and_a_pass_without_it_says_so(case, tmp_path):
    how, argv, status, words = NO_TORCH_CASES[case]
    (tmp_path / "README.md").write_text(README)
    done = without_torch(how, argv, tmp_path)
    output = done.stdout + done.stderr
    assert done.returncode == status and words in output and "Traceback" not in output, output
    assert status == 0 or done.stderr.count("\n") == 1, output
    assert sorted(path.name for path in tmp_path.iterdir()) == ["README.md"]  # nothing written


def plan_lines(output):
    """--plan's lines, the seconds the planning took aside (they differ from run to run)."""
    return [line.split(" (a budget of")[0] for line in output.splitlines()]


@pytest.mark.parametrize("flags", [[], *(pytest.param(flags, marks=pytest.mark.whole_runs)
                                         for flags in (["--budget", "8"], ["--only", "transformers"]))])
def test_the_plan_without_torch_is_the_plan_with_it(flags, tmp_path):
    """Each saved device's steps, order, estimates (FLOPs read from benchmarks/suite/flops.json) and
    reasons, as a Python with torch plans them."""
    argv = [SUITE, "--plan", "--results-root", str(RESULTS), *flags]
    bare = without_torch("run_path", argv, tmp_path)
    full = subprocess.run([sys.executable, *argv], capture_output=True, text=True, cwd=tmp_path, timeout=300)
    assert bare.returncode == full.returncode == 0, bare.stderr + full.stderr
    assert bare.stderr == full.stderr == "" and "FLOPs" in bare.stdout
    assert plan_lines(bare.stdout) == plan_lines(full.stdout)


def test_a_model_the_flops_table_lacks_is_said_without_torch_in_one_sentence(tmp_path):
    table = json.loads((ROOT / "benchmarks" / "suite" / "flops.json").read_text())
    table["models"] = [entry for entry in table["models"] if entry["model"] != "resnet50"]
    (tmp_path / "flops.json").write_text(json.dumps(table))
    done = without_torch("run_path", [str(tmp_path / "flops.json"), SUITE, "--plan", "--results-root", str(RESULTS)],
                         tmp_path, WITHOUT_TORCH_TABLE)
    assert done.returncode == 2 and done.stdout == "" and "Traceback" not in done.stderr, done.stderr
    assert done.stderr == (
        "gpu_suite.py: error: step native-synthetic cannot be estimated on NVIDIA H100 80GB HBM3: resnet50 with "
        f"the imagenet stem at 224x224 is not in {tmp_path / 'flops.json'}, and counting its FLOPs takes torch; torch "
        "is not installed in this Python: pip install -r requirements.txt (or run inside a PyTorch container).\n")


def test_a_checkout_never_installed_says_how_to_install_it_in_one_sentence(tmp_path):
    """No ampbench importable (no install, no PYTHONPATH; -S: no site-packages, as a bare Python)."""
    environment = {name: value for name, value in os.environ.items() if name != "PYTHONPATH"}
    done = subprocess.run([sys.executable, "-S", SUITE, "-h"], capture_output=True, text=True, cwd=tmp_path,
                          env=environment, timeout=60)
    assert done.returncode == 2 and done.stdout == "", done.stderr
    assert done.stderr == (f"gpu_suite.py: error: ampbench is not installed in this Python ({sys.executable}); run "
                           f"`pip install -e .` in {ROOT}, then this command again.\n")


@pytest.mark.parametrize("content", ["{}", '{"schema": "ampbench.result/7"}', '{"passes": []}'])
@pytest.mark.parametrize("step", ["headline-resnet18", "headline-vit"])
def test_a_step_file_without_runs_is_left_out_with_one_warning_and_the_rest_rendered(step, content, tmp_path,
                                                                                    monkeypatch):
    root = results_root(tmp_path)
    (root / H200 / f"{step}.json").write_text(content)
    status, out, err = suite_main(monkeypatch, "--render", root / H200, "--readme", tmp_path / "README.md")
    assert status == 0 and "Traceback" not in err, err
    said = "it holds no runs, which a step's results do; it is left out.\n"
    assert err == f"gpu_suite.py: warning: {root / H200 / step}.json: {said}", err
    assert "**NVIDIA H200**" in (tmp_path / "README.md").read_text()
