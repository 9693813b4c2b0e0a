"""--grad-comm and --bucket-mb: refused where they cannot act, recorded as they ran. The
2-process runs themselves are in tests/cluster/test_cluster.py."""
import pytest

from conftest import assert_user_error, run_main
from utils.config import RunConfig
from utils.errors import UserError
from utils.setup_keys import DDP_BUCKET_MB, communication
from utils.training import distributed


@pytest.mark.parametrize("flags, sentence", [
    (["--grad-comm", "bf16"], "--grad-comm bf16 sets how DDP sends gradients between processes, and this run is a "
                              "single process; launch it on 2 or more ranks (torchrun, mpirun) or drop the flag."),
    (["--grad-comm", "fp16", "--bucket-mb", "50"], "--grad-comm fp16 and --bucket-mb 50 set how DDP sends"),
    (["--bucket-mb", "0.5"], "--bucket-mb 0.5 sets how DDP sends gradients"),
])
def test_communication_flags_in_one_process_are_refused(flags, sentence):
    assert_user_error(run_main("--data", "synthetic", "-n", "2", *flags), sentence)


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
