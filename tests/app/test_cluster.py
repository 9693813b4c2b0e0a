"""DDP through torchrun and mpirun (gloo on the CPU)."""
import json
import os
import shutil
import socket
import subprocess
import sys
import time

import pytest

from conftest import ROOT, run_cli

# No BatchNorm and, with --dropout 0, no dropout: two processes of 8 images then compute
# exactly what one process of 16 does, up to the order of floating-point sums.
EXACT = ["--model", "squeezenet1_1", "--dropout", "0", "-n", "8", "--warmup", "2", "--lr", "0.02", "--no-progress"]
LOSS_TOLERANCE = 1e-5  # relative, per step; seen here: about 1e-7


def needs(tool):
    """Launchers come from Debian's openmpi-bin, which .ci/run installs: in CI a missing one fails."""
    if shutil.which(tool) is None:
        if os.environ.get("CI"):
            pytest.fail(f"{tool} is missing: .ci/run must install it")
        pytest.skip(f"{tool} is not installed (apt-get install openmpi-bin)")


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return str(s.getsockname()[1])


def launch(launcher, script, *args, timeout=300):
    env = {**os.environ, "MASTER_PORT": free_port(), "OMP_NUM_THREADS": "1"}
    if launcher == "torchrun":
        command = [sys.executable, "-m", "torch.distributed.run", "--nproc_per_node=2", script]
    else:
        needs("mpirun")
        command = ["mpirun", "--allow-run-as-root", "--oversubscribe", "-n", "2", "-x", "MASTER_PORT",
                   "-x", "OMP_NUM_THREADS", sys.executable, script]
    return subprocess.run(command + [str(a) for a in args], cwd=ROOT, capture_output=True, text=True,
                          timeout=timeout, env=env)


@pytest.fixture(scope="module")
def single_process(tmp_path_factory, subset_path=None):
    from conftest import SUBSET
    out = tmp_path_factory.mktemp("single") / "r.json"
    result = run_cli(*EXACT, "-b", "16", "--data-dir", SUBSET, "--allow-unverified", "--json", out)
    assert result.returncode == 0, result.stderr
    return json.loads(out.read_text())["runs"][0]


@pytest.mark.compat
@pytest.mark.parametrize("launcher", ["torchrun", "mpirun"])
def test_two_process_run_matches_one_process_with_the_same_global_batch(launcher, tmp_path, subset, single_process):
    result = launch(launcher, "main.py", *EXACT, "-b", "8", "--data-dir", subset, "--allow-unverified",
                    "--json", tmp_path / "r.json")
    assert result.returncode == 0, result.stderr
    assert os.listdir(tmp_path) == ["r.json"], "rank 0 alone writes results"
    assert result.stdout.count("results written to") == 1 and result.stdout.count("median ms") == 1
    assert result.stderr.count("although its md5 sums are not the official ones") == 1
    document = json.loads((tmp_path / "r.json").read_text())
    env, run = document["env"], document["runs"][0]
    assert (env["world_size"], env["launcher"], env["backend"], env["global_batch_size"]) == (2, launcher, "gloo", 16)
    assert (run["world_size"], run["batch_size"], run["global_batch_size"]) == (2, 8, 16)
    assert "per process x 2 processes" in result.stdout
    assert run["images_per_sec"] == pytest.approx(16 * 1000 / run["step_time_ms"]["median"])
    for ddp, one in zip(run["loss_curve"], single_process["loss_curve"]):
        assert ddp == pytest.approx(one, rel=LOSS_TOLERANCE)
    assert run["test_accuracy"] == single_process["test_accuracy"]  # the ranks' shards add up to the test set


@pytest.mark.long
@pytest.mark.parametrize("launcher", ["torchrun", "mpirun"])
def test_a_failing_rank_ends_the_job_quickly_with_its_error(launcher):
    started = time.perf_counter()
    result = launch(launcher, "tests/failing_rank.py", "--model", "squeezenet1_1", "-b", "8", "-n", "50",
                    "--warmup", "2", "--data", "synthetic", "--no-progress", "--dist-timeout", "30", timeout=200)
    elapsed = time.perf_counter() - started
    assert result.returncode != 0
    assert "injected failure on rank 1" in result.stdout + result.stderr
    assert elapsed < 90, f"the job took {elapsed:.0f}s to end"


def test_torchrun_with_the_classic_loader_and_a_checkpoint(tmp_path, subset):
    """DistributedSampler path, rank-0 checkpoint, and resume on every rank."""
    common = ["--model", "squeezenet1_1", "-b", "8", "--warmup", "1", "--no-progress", "--data-dir", subset,
              "--allow-unverified", "--loader", "torchvision", "--workers", "1", "--no-eval",
              "--checkpoint", tmp_path / "c.pt"]
    first = launch("torchrun", "main.py", *common, "-n", "4")
    assert first.returncode == 0, first.stderr
    second = launch("torchrun", "main.py", *common, "-n", "6", "--resume", "--json", tmp_path / "r.json")
    assert second.returncode == 0, second.stderr
    run = json.loads((tmp_path / "r.json").read_text())["runs"][0]
    assert run["resumed_from_step"] == 4 and run["completed_steps"] == 6 and run["world_size"] == 2
