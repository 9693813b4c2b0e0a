"""ampbench runs from torch 1.11 (NGC 22.01) to the newest. These tests run under every
torch that .ci/run's compatibility stage installs (marked `compat`); the degraded paths that an
old torch takes are also forced here under the newest, by patching utils.compat."""
import json
import os
import pickle
import subprocess
import sys

import pytest
import torch
from torch import nn

from conftest import ROOT, assert_user_error, run_cli
from models import factory
from utils import compat
from utils.errors import UserError
from utils.measure import flops
from utils.modes import MODES
from utils.training import checkpoint, precision
from utils.training.step import fused_optimizer_works, make_optimizer

pytestmark = pytest.mark.compat
TORCH = compat.torch_release()
TINY = ["--model", "squeezenet1_1", "-b", "4", "-n", "2", "--warmup", "1", "--lr", "0.01", "--no-eval",
        "--data", "synthetic", "--no-progress", "--allow-slow-fp16"]
# What the CPU can run, by torch release: float16 autocast, a CPU GradScaler and float16
# convolutions all arrived by 2.3; tf32 is a GPU mode.
RUNS_ON_CPU = {"fp32", "amp-bf16"} | ({"amp-fp16", "amp-fp16-noscale", "fp16-master"} if TORCH >= (2, 3) else set())
REFUSED_ON_CPU = {"tf32"} | ({"amp-fp16", "amp-fp16-noscale", "fp16-master"} if TORCH < (2, 0) else set())


def run_patched(patch, *args):
    """main.py with utils.compat or utils.training.precision patched first (`patch` is Python)."""
    code = (f"import sys, runpy; {patch}; "
            f"sys.argv = ['main.py'] + {[str(a) for a in args]!r}; runpy.run_path('main.py', run_name='__main__')")
    return subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=300)


@pytest.mark.parametrize("name", sorted(MODES))
def test_every_mode_runs_or_is_refused_in_one_sentence(name, tmp_path):
    result = run_cli(*TINY, "--modes", name, "--json", tmp_path / "r.json")
    if name in REFUSED_ON_CPU or (name not in RUNS_ON_CPU and result.returncode == 2):
        assert_user_error(result, f"mode {name}")
        return
    assert result.returncode == 0, result.stderr
    assert "Traceback" not in result.stderr, result.stderr
    assert "DeprecationWarning" not in result.stderr and "FutureWarning" not in result.stderr, result.stderr
    (run,) = json.loads((tmp_path / "r.json").read_text())["runs"]
    assert run["mode"] == name
    assert (run["final_loss_scale"] is not None) == MODES[name].scaled


def test_compare_writes_json_and_csv_and_records_its_degraded_paths(tmp_path):
    result = run_cli(*TINY, "--modes", "fp32,amp-bf16", "--json", tmp_path / "r.json", "--csv", tmp_path / "r.csv")
    assert result.returncode == 0, result.stderr
    document = json.loads((tmp_path / "r.json").read_text())
    assert list(document["comparison"]) == ["fp32", "amp-bf16"]
    assert len((tmp_path / "r.csv").read_text().splitlines()) == 3
    assert document["env"]["torch"] == torch.__version__
    expected = ({"flops"} if TORCH < (2, 1) else set()) | (set() if fused_optimizer_works("cpu") else {"optimizer"})
    assert set(document["env"]["degraded"]) == expected


FLOP_MODELS = ["resnet18", "resnet50", "resnext50_32x4d", "mobilenet_v2", "vgg11", "densenet121"]


@pytest.mark.skipif(not compat.has_flop_counter(), reason="torch.utils.flop_counter arrived in torch 2.1")
@pytest.mark.parametrize("name", FLOP_MODELS)
def test_layer_flop_count_agrees_with_the_flop_counter(name):
    model = factory.build_model(name)
    counted, by_layers = flops.training_flops_per_step(model, 32), flops.layer_flops_per_step(model, 32)
    assert by_layers == pytest.approx(counted, rel=0.01)


def test_a_grouped_convolution_counts_its_weight_gradient_once():
    """torch's FlopCounterMode counts it `groups` times over; ampbench's count does not."""
    model = nn.Sequential(nn.Conv2d(3, 64, 3, padding=1), nn.Conv2d(64, 64, 3, padding=1, groups=64))
    forward = 2 * 32 * 32 * (64 * 3 * 9 + 64 * 1 * 9)  # per image
    backward = 2 * 32 * 32 * 64 * 3 * 9 + 2 * (2 * 32 * 32 * 64 * 9)  # no input gradient for the images
    assert flops.training_flops_per_step(model, 1) == forward + backward
    assert flops.layer_flops_per_step(model, 1) == forward + backward


def test_without_the_flop_counter_the_count_is_by_layers_and_recorded(monkeypatch):
    monkeypatch.setattr(compat, "has_flop_counter", lambda: False)
    monkeypatch.setattr(compat, "_degraded", {})
    model = factory.build_model("resnet18")
    assert flops.training_flops_per_step(model, 8) == flops.layer_flops_per_step(model, 8)
    assert "torch.utils.flop_counter" in compat.degraded()["flops"]


def test_without_fused_sgd_the_foreach_sgd_runs_and_is_recorded(monkeypatch):
    monkeypatch.setattr(compat, "has_fused_sgd", lambda: False)
    monkeypatch.setattr(compat, "_degraded", {})
    optimizer, impl = make_optimizer([nn.Parameter(torch.ones(3))], lr=0.1)
    assert impl == "foreach" and not optimizer.defaults.get("fused")
    assert "foreach SGD ran" in compat.degraded()["optimizer"]


def test_checkpoints_are_read_without_running_code_before_weights_only(tmp_path, monkeypatch):
    monkeypatch.setattr(compat, "has_weights_only_load", lambda: False)
    monkeypatch.setattr(compat, "_degraded", {})
    model = factory.build_model("squeezenet1_1")
    state = {"format": checkpoint.FORMAT, "model": model.state_dict(), "step": 3,
             "optimizer": make_optimizer(list(model.parameters()), lr=0.1)[0].state_dict(),
             "rng": {"torch": torch.get_rng_state()}, "stats": {"step_ms": [1.5], "note": None}}
    checkpoint.save(tmp_path / "c.pt", state, model)
    read = checkpoint.read(tmp_path / "c.pt", torch.device("cpu"))  # the reader alone: a partial state
    assert read["step"] == 3 and all(torch.equal(read["model"][k], v) for k, v in model.state_dict().items())
    assert "checkpoint" in compat.degraded()

    class Exploit:
        def __reduce__(self):
            return os.system, (f"touch {tmp_path / 'pwned'}",)

    torch.save({"format": checkpoint.FORMAT, "x": Exploit()}, tmp_path / "evil.pt")
    with pytest.raises(UserError, match="not a readable ampbench checkpoint"):
        checkpoint.load(tmp_path / "evil.pt", torch.device("cpu"))
    assert not (tmp_path / "pwned").exists()
    with pytest.raises(pickle.UnpicklingError):
        checkpoint.read(tmp_path / "evil.pt", torch.device("cpu"))


def test_models_are_listed_without_torchvisions_registry(monkeypatch):
    registry = factory.model_names()
    monkeypatch.setattr(compat, "has_model_registry", lambda: False)
    listed = factory.model_names()
    assert {"resnet18", "resnet50", "vgg11", "mobilenet_v2"} <= set(listed)
    assert set(registry) <= set(listed), "no model is lost (newer torchvision also lists its registry helpers)"
    assert factory.build_model("resnet18").fc.out_features == 10


def test_a_torch_older_than_the_minimum_exits_2_naming_both():
    result = run_patched("import torch; torch.__version__ = '1.10.2'", *TINY)
    assert_user_error(result, "torch 1.10.2 is too old", "torch 1.11 or newer")


def test_compile_before_torch_2_exits_2():
    result = run_patched("import utils.compat as c; c.has_compile = lambda: False", *TINY, "--compile")
    assert_user_error(result, "--compile needs torch 2.0")


def test_fp16_autocast_that_the_cpu_lacks_exits_2():
    patch = "import utils.training.precision as p; p.cpu_autocasts_to_half = lambda: False"
    assert_user_error(run_patched(patch, *TINY, "--fp16"), "mode amp-fp16-noscale needs float16 autocast")


def test_the_cpu_probe_matches_what_autocast_does():
    supported = precision.cpu_autocasts_to_half()
    if TORCH >= (2, 3):
        assert supported
    elif TORCH < (2, 0):
        assert not supported


@pytest.mark.parametrize("release", ["(1, 11)", "(2, 3)"])
def test_fp8_before_torch_2_11_exits_2_naming_the_release(release):
    patch = f"import utils.compat as c; c.torch_release = lambda: {release}"
    result = run_patched(patch, *TINY, "--model", "vit_t4", "--modes", "fp8", "--fp8-emulate")
    assert_user_error(result, "mode fp8 needs torch 2.11 or newer for torchao's float8 training", "use amp-bf16")
