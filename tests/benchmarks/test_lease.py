"""benchmarks/lease.py: one lent GPU, one command. End to end on the CPU with the made-up H200
(made_up_lease.py, in the suite's own process): the extras installed offline from carried wheels,
the whole H200 headline planned within the recipe's budget, and one archive in a stand-in $OUT
that, unpacked beside another checkout, renders the same README as the lease did."""
import json
import os
import shutil
import signal
import subprocess
import sys
import tarfile
import time
import types

import made_up_lease
import pytest

from benchmarks import lease
from benchmarks.suite import history, slices
from benchmarks.suite.render import BEGIN, END
from conftest import ROOT, SUBSET
from tests.cluster.test_bundle import fake_wheel
from utils import console

RESULTS = ROOT / "results"


def requirements(name):
    return [line.split(";")[0].strip() for line in (ROOT / name).read_text().splitlines()
            if line.strip() and not line.startswith("#")]


def lease_main(monkeypatch, *args):
    """`python3 benchmarks/lease.py ARGS` in this process, its clock standing at the lease's start
    (this CPU's seconds are not the lent machine's), the suite it starts a child with the made-up
    H200: (exit status, stdout, stderr)."""
    monkeypatch.setattr(lease, "time", types.SimpleNamespace(monotonic=lambda: 1000.0, time=time.time,
                                                             sleep=time.sleep))
    monkeypatch.setattr(sys, "argv", ["lease.py", *map(str, args)])
    captured = []
    monkeypatch.setattr(lease, "say", captured.append)
    result = subprocess.CompletedProcess([], console.run(lease.NAME, lease.main))
    return result.returncode, captured


def lent_machine(tmp_path):
    """The lent machine's copy of the checkout (its results and README) and the carried .devdata:
    the extras' wheels (made up) and the CIFAR-10 subset: (the copy, .devdata)."""
    device = tmp_path / "device"
    shutil.copytree(RESULTS, device / "results")
    shutil.copy(ROOT / "README.md", device / "README.md")
    devdata = tmp_path / "devdata"
    (devdata / "wheels").mkdir(parents=True)
    for name in lease.EXTRAS:
        for requirement in requirements(name):
            fake_wheel(devdata / "wheels", requirement)
    os.symlink(SUBSET, devdata / "cifar-10-batches-py")
    return device, devdata


def rendered_here(tmp_path, archive):
    """README's section as this checkout renders it once the archive is unpacked beside it."""
    here = tmp_path / "here"  # this checkout, as it was before the lease
    shutil.copytree(RESULTS, here / "results")
    shutil.copy(ROOT / "README.md", here / "README.md")
    with tarfile.open(archive) as tar:
        assert all(name.startswith("results/NVIDIA-H200/2026-11-26/") for name in tar.getnames())
        tar.extractall(here)
    history.WARNED.clear()
    rendered = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "gpu_suite.py"), "--render",
                               here / "results" / "NVIDIA-H200" / "2026-11-26", "--readme", here / "README.md"],
                              cwd=ROOT, capture_output=True, text=True, timeout=300,
                              env={**os.environ, "PYTHONPATH": os.environ["PYTHONPATH"].split(os.pathsep, 1)[1]})
    assert rendered.returncode == 0, rendered.stderr
    return section(here / "README.md")


def section(readme):
    text = readme.read_text()
    return text[text.index(BEGIN):text.index(END)]


@pytest.mark.gpu_suite
def test_the_lease_runs_end_to_end_and_its_archive_renders_the_same_readme(tmp_path, monkeypatch, capfd):
    device, devdata = lent_machine(tmp_path)
    monkeypatch.setenv("PYTHONPATH", made_up_lease.hook(tmp_path / "hook"))
    status, said = lease_main(monkeypatch, "--commit", "c" * 40, "--out", tmp_path / "out", "--devdata", devdata,
                              "--results-root", device / "results", "--readme", device / "README.md")
    out, err = capfd.readouterr()
    assert status == 0, "\n".join(said) + out + err
    assert said[0] == f"installed {', '.join(lease.EXTRAS)} from {devdata / 'wheels'}"
    overrun, history_said = slices.committed_overrun(RESULTS)
    budget = (10 * 60 - slices.RESERVE_S - overrun) / 60
    assert said[1] == (f"{history_said}; the suite gets --budget {budget:.2f} and is stopped {slices.RESERVE_S:g} s "
                       "before the 10-minute lease ends")
    assert f"--budget {budget:.2f} --commit {'c' * 40}" in said[2] and f"--data-dir {devdata}" in said[2]
    # the whole H200 headline, planned within the recipe's budget: both convnets and the FP8 row, 3 repeats each
    assert out.split("the pass would run, in order (", 1)[1].startswith(f"a budget of {budget:.2f} min")
    for number, step in enumerate(("headline-resnet50", "headline-resnet18", "headline-vit"), 1):
        assert f"  {number}. {step}: about " in out, out
    folder = device / "results" / "NVIDIA-H200" / "2026-11-26"
    record = json.loads((folder / "suite.json").read_text())
    headline = ["headline-resnet50", "headline-resnet18", "headline-vit"]
    assert [entry["step"] for entry in record["passes"][-1]["ran"]][:3] == headline
    assert all(json.loads((folder / f"{step}.json").read_text())["config"]["repeats"] == 3 for step in headline)
    assert "suite finished in" in (folder / "lease.log").read_text()
    (archive,) = (tmp_path / "out").iterdir()
    assert archive.name == "ampbench-lease-NVIDIA-H200-2026-11-26.tar.gz"
    assert said[-1].startswith(f"packed {folder} into {archive} (")
    assert rendered_here(tmp_path, archive) == section(device / "README.md")
    assert "| resnet50 | 32 | " in section(device / "README.md") and "3 x " in section(device / "README.md")


def test_the_stop_ends_the_suite_with_sigusr1_and_waits_for_it(tmp_path):
    """At the lease's stop the suite gets SIGUSR1, as a scheduler's warning, and ends its step,
    renders and exits 138; its output went to ours and to the log."""
    trap = ("import signal, sys, time\n"
            "signal.signal(signal.SIGUSR1, lambda number, frame: (print('stopped', flush=True), sys.exit(138)))\n"
            "print('started', flush=True)\n"
            "time.sleep(120)\n")
    with open(tmp_path / "log", "w+") as log:
        status, stopped = lease.run_suite([sys.executable, "-c", trap], dict(os.environ), log, time.monotonic() + 2,
                                          time.monotonic() + 60)
        log.seek(0)
        assert (status, stopped, log.read()) == (128 + signal.SIGUSR1, True, "started\nstopped\n")


@pytest.mark.parametrize("args, phrase", [
    (["--commit", "c" * 40], "no folder to pack into: give --out"),
    (["--out", "{tmp}", "--commit", "not-a-commit"], "no commit names the code that runs"),
    (["--out", "{tmp}", "--commit", "c" * 40, "--minutes", "0.5"], "argument --minutes: takes the lease's minutes"),
])
def test_a_lease_that_cannot_run_is_refused_in_one_line(args, phrase, tmp_path, monkeypatch, capsys):
    monkeypatch.delenv("OUT", raising=False)
    monkeypatch.setattr(sys, "argv", ["lease.py", *[arg.format(tmp=tmp_path) for arg in args]])
    assert console.run(lease.NAME, lease.main) == 2
    err = capsys.readouterr().err
    assert err.startswith("lease.py: error: ") and phrase in err and err.count("\n") == 1, err


def test_the_margin_is_the_largest_overrun_of_a_step_estimated_from_measurements():
    """In the committed passes: headline-resnet50 on the H100 ran 77.3 s against 56.8 s from its
    runs measured, the most of any step estimated from measurements (the FLOPs ones ran up to 2.93x)."""
    overrun, said = slices.committed_overrun(RESULTS)
    steps = [entry for path in RESULTS.glob("*/*/suite.json") for entry_of_pass in json.loads(path.read_text())
             .get("passes", []) for entry in entry_of_pass["ran"]]
    measured = [entry for entry in steps if entry["estimate_from"].startswith(slices.MEASURED)]
    assert overrun == max(entry["elapsed_s"] - entry["estimate_s"] for entry in measured) > 0
    assert said.startswith("committed passes ran steps 0.53x to 2.93x their estimates")
