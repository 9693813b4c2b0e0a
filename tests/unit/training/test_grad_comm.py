"""--grad-comm and --bucket-mb: refused where they cannot act, recorded as they ran. The
2-process runs themselves are in tests/cluster/test_cluster.py."""
import pytest

from conftest import assert_user_error, run_main
from utils.config import RunConfig
from utils.errors import UserError
from utils.grad_comm import DDP_BUCKET_MB, communication
from utils.training import distributed


@pytest.mark.parametrize("flags, sentence", [
    (["--grad-comm", "bf16"], "--grad-comm bf16 sets how DDP sends gradients between processes, and this run is a "
                              "single process; launch it on 2 or more ranks (torchrun, mpirun) or drop the flag."),
    (["--grad-comm", "fp16", "--bucket-mb", "50"], "--grad-comm fp16 and --bucket-mb 50 set how DDP sends"),
    (["--bucket-mb", "0.5"], "--bucket-mb 0.5 sets how DDP sends gradients"),
])
def test_communication_flags_in_one_process_are_refused(flags, sentence):
    assert_user_error(run_main("--data", "synthetic", "-n", "2", *flags), sentence)


@pytest.mark.parametrize("value", ["1e30", "1048577", "inf", "nan"])
def test_a_bucket_larger_than_ddp_can_hold_is_refused_at_parsing(value):
    result = run_main("--bucket-mb", value, "--check-flags")
    assert_user_error(result, f"argument --bucket-mb: must be a positive number of MB up to 1048576 (1 TiB), got "
                              f"{value}")


def test_the_default_communication_is_accepted_in_one_process():
    RunConfig.build(grad_comm="fp32").check_world(1)
    RunConfig.build(grad_comm="bf16", bucket_mb=5.0).check_world(2)
    with pytest.raises(UserError, match="--grad-comm is one of fp32, fp16, bf16; got int8"):
        RunConfig.build(grad_comm="int8")


def test_the_recorded_communication_of_one_process_of_a_job_and_of_an_older_file():
    assert communication("fp32", None, 1) == {"grad_comm": None, "bucket_mb": None}
    assert communication("bf16", 4.0, 8) == {"grad_comm": "bf16", "bucket_mb": 4.0}
    assert communication(None, None, 2) == {"grad_comm": "fp32", "bucket_mb": DDP_BUCKET_MB}  # before --grad-comm


def test_a_backend_without_the_dtype_is_refused_in_one_sentence(monkeypatch):
    def all_reduce(tensor):
        raise RuntimeError(f"Unsupported data type for all_reduce: {tensor.dtype}")

    monkeypatch.setattr(distributed.dist, "all_reduce", all_reduce)
    monkeypatch.setattr(distributed.dist, "get_backend", lambda: "gloo")
    with pytest.raises(UserError, match=r"^the gloo backend of torch .* cannot all-reduce torch.bfloat16 tensors, "
                                        r"so --grad-comm bf16 cannot run here; use --grad-comm fp32"):
        distributed.check_grad_comm("bf16", "cpu")
    distributed.check_grad_comm("fp32", "cpu")  # nothing to try: DDP's own all-reduce


def test_a_peer_lost_during_the_trial_is_not_called_a_missing_dtype(monkeypatch):
    def all_reduce(tensor):
        raise RuntimeError("[gloo] Connection closed by peer")

    monkeypatch.setattr(distributed.dist, "all_reduce", all_reduce)
    with pytest.raises(RuntimeError, match="Connection closed by peer"):
        distributed.check_grad_comm("fp16", "cpu")


@pytest.mark.long  # a 2-process gloo run: about 30 s on 2 cores
def test_the_largest_bucket_the_flag_allows_trains(tmp_path, subset):
    import json
    import os
    import socket
    import subprocess
    import sys

    from conftest import ROOT

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = str(probe.getsockname()[1])
    result = subprocess.run(
        [sys.executable, "-m", "torch.distributed.run", "--nproc_per_node=2", "main.py", "-m", "squeezenet1_1", "-b",
         "8", "-n", "3", "--warmup", "1", "--no-eval", "--modes", "fp32", "--bucket-mb", "1048576", "--grad-comm",
         "bf16", "--data-dir", str(subset), "--allow-unverified", "--json", str(tmp_path / "r.json")],
        cwd=ROOT, capture_output=True, text=True, timeout=600,
        env={**os.environ, "MASTER_PORT": port, "OMP_NUM_THREADS": "1"})
    assert result.returncode == 0, result.stderr[-3000:]
    run = json.loads((tmp_path / "r.json").read_text())["runs"][0]
    assert (run["bucket_mb"], run["grad_comm"], run["completed_steps"]) == (1048576.0, "bf16", 3)
