"""A stranger's clone: no ../shared beside it and $AMPBENCH_SUBSET naming an empty folder. README's
test command must pass there on the stand-in that tests/conftest.py makes; this runs a slice of
the suite that holds each kind of test that once failed without the subset (a training run on
CIFAR-10, a refused resume, the loaders, the job scripts' refusals, the GPU suite's plan) in a
copy of the checkout whose parent holds nothing else."""
import os
import re
import shutil
import subprocess
import sys

import pytest

import cifar10_standin
from conftest import ROOT

SLICE = [
    "tests/unit/data/test_cifar10_and_loaders.py",
    "tests/cli/test_accuracy_holds.py::test_bad_accuracy_flags_are_refused_in_one_sentence",
    "tests/cli/test_edges.py::test_a_resume_refuses_a_setting_that_changes_the_answer",
    "tests/cluster/test_job_script_inputs.py::test_more_nodes_than_the_job_has_are_refused_before_any_stage",
    "tests/benchmarks/test_gpu_suite_budget.py"
    "::test_the_plan_runs_its_steps_in_the_order_of_their_descriptions_the_headline_first",
]
REAL_IMAGES_ONLY = "needs real CIFAR-10 images"


def copy_of_the_checkout(target):
    """The files git tracks or would track (what a clone holds, and what is not committed yet)."""
    listed = subprocess.run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"], cwd=ROOT,
                            capture_output=True, check=True).stdout.decode().split("\0")
    for name in filter(None, listed):
        source = ROOT / name
        if source.is_file():
            (target / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, target / name)


@pytest.mark.whole_runs
def test_a_clone_without_the_subset_passes_on_the_stand_in(tmp_path):
    clone, empty = tmp_path / "ampbench", tmp_path / "empty"
    empty.mkdir()
    copy_of_the_checkout(clone)
    assert not (clone.parent / "shared").exists()
    env = {**os.environ, "AMPBENCH_SUBSET": str(empty)}
    result = subprocess.run([sys.executable, "-m", "pytest", "-rs", "-p", "no:cacheprovider", *SLICE], cwd=clone,
                            env=env, capture_output=True, text=True, timeout=900)
    output = result.stdout + result.stderr
    assert result.returncode == 0, output[-4000:]
    assert "CIFAR-10: a generated stand-in" in output
    assert not re.search(r"\b(failed|error|errors)\b", output.splitlines()[-1]), output[-2000:]
    skips = [line for line in output.splitlines() if line.startswith("SKIPPED")]
    assert len(skips) == 1 and REAL_IMAGES_ONLY in skips[0], skips  # the official labels' order, only
    assert not any(empty.iterdir()), "the stand-in is made in a folder of its own, never in the one named"


def test_the_stand_in_is_the_same_bytes_on_every_machine(tmp_path):
    for name in ("a", "b"):
        cifar10_standin.write(tmp_path / name)
    for batch in [name for name, _ in cifar10_standin.BATCHES] + ["batches.meta"]:
        assert (tmp_path / "a" / batch).read_bytes() == (tmp_path / "b" / batch).read_bytes(), batch
