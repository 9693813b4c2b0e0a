"""The fp8 modes: torchao's float8 Linear layers, emulated on the CPU; the accounting of what runs
in FP8, counted by hand for the CIFAR ViTs; every refusal; checkpoints, --explain and merges."""
import json
import math
import os
import socket
import subprocess
import sys

import pytest
import torch
from torch import nn

from conftest import ROOT, assert_user_error, run_cli, run_main
from models import factory
from models.attention import swap_attention
from models.families import CIFAR_VITS
from utils import compat
from utils.errors import UserError
from utils.explain.categories import category_of
from utils.explain.diagnose import fp8_slower
from utils.modes import MODES
from utils.training import float8, precision

torchao = pytest.importorskip("torchao.float8", reason="torchao is optional: pip install -r requirements-fp8.txt")

VIT = ["--model", "vit_t4", "-b", "4", "--warmup", "1", "--data", "synthetic", "--no-progress", "--fp8-emulate"]
CPU = torch.device("cpu")


def hand_count(name, batch, classes=10, tokens=8 * 8 + 1):
    """(FP8 FLOPs, all matmul and convolution FLOPs) of a training step of the CIFAR ViT `name`,
    counted by hand. A Linear's step: its forward 2 x M x K x N, the gradients of its input and of
    its weight as much each; per block the QKV (d -> 3d), output (d -> d) and two MLP layers make
    72 d^2 T per image at MLP width 4d, all in FP8, and the attention's own matmuls 12 T^2 d."""
    width, layers, _, mlp = CIFAR_VITS[name]
    rows = batch * tokens
    linear_steps = [3 * 2 * rows * k * n for k, n in ((width, 3 * width), (width, width), (width, mlp), (mlp, width))]
    attention_step = 3 * 2 * (2 * batch * tokens * tokens * width)  # q.k and attention.v, forward and 2x backward
    patches_step = 2 * (2 * batch * 64 * width * 3 * 4 * 4)  # conv_proj: forward and weight gradient (images need none)
    head_step = 3 * 2 * batch * width * classes  # the class token alone reaches the head
    fp8 = layers * sum(linear_steps)
    return fp8, fp8 + layers * attention_step + patches_step + head_step


def test_the_vit_t4_accounting_is_what_a_hand_count_gives():
    batch, layers, rows, width, mlp = 16, 12, 16 * 65, 192, 768
    fp8, total = hand_count("vit_t4", batch)
    block = float8.accounting(factory.build_model("vit_t4"), batch, "vit_t4")

    assert (block["linear_layers"], block["converted_layers"]) == (layers * 4 + 1, layers * 4)
    assert block["fp8_flops_per_step"] == fp8
    assert block["flop_share"] == pytest.approx(fp8 / total, rel=1e-12)
    per_block = 72 * width ** 2 * 65 / (72 * width ** 2 * 65 + 12 * 65 ** 2 * width)
    assert round(per_block, 4) == 0.9466 and round(block["flop_share"], 4) == 0.9456
    assert block["matmul_shapes"] == [(rows, width, width), (rows, width, 3 * width), (rows, width, mlp),
                                      (rows, mlp, width)]
    assert block["left_out"] == [{"layer": "conv_proj", "why": float8.CONVOLUTION},
                                 {"layer": "heads.head", "why": float8.HEAD}]


@pytest.mark.parametrize("name, share", [("vit_s4", 0.9720), ("vit_b4", 0.9858), ("vit_l4", 0.9894)])
def test_the_wider_vits_accounting_is_what_a_hand_count_gives(name, share):
    """Built on the meta device: the count needs shapes alone (vit_l4 holds 300M weights)."""
    fp8, total = hand_count(name, 16)
    with torch.device("meta"):
        model = factory.build_model(name)
    block = float8.accounting(model, 16, name)
    assert block["fp8_flops_per_step"] == fp8 and block["flop_share"] == pytest.approx(fp8 / total, rel=1e-12)
    assert round(block["flop_share"], 4) == share


def test_every_linear_layer_but_the_head_converts():
    model = float8.convert(factory.build_model("vit_t4"), "tensorwise", emulate=True)
    converted = {name for name, module in model.named_modules() if type(module).__name__ == "Float8Linear"}
    assert len(converted) == 48
    assert {name.split(".", 3)[-1] for name in converted} == {"self_attention.qkv", "self_attention.out_proj",
                                                               "mlp.0", "mlp.3"}


def test_a_dimension_not_a_multiple_of_16_stays_in_bfloat16():
    model = nn.Sequential(nn.Flatten(), nn.Linear(3 * 32 * 32, 64), nn.Linear(64, 40), nn.Linear(40, 10))
    assert float8.left_out(model) == {"2": float8.UNALIGNED, "3": float8.HEAD}


@pytest.mark.parametrize("recipe", ["tensorwise", "rowwise"])
def test_emulated_fp8_trains_a_small_vit(recipe):
    torch.manual_seed(0)
    from torchvision.models.vision_transformer import VisionTransformer
    model = float8.convert(swap_attention(VisionTransformer(32, 4, num_layers=2, num_heads=4, hidden_dim=128,
                                                            mlp_dim=256, num_classes=10)), recipe, emulate=True)
    images, labels = torch.randn(8, 3, 32, 32), torch.randint(0, 10, (8,))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.02, momentum=0.9)  # 0.05 overshoots by step 6
    losses = []
    for _ in range(6):
        with torch.autocast("cpu", dtype=torch.bfloat16):
            loss = nn.functional.cross_entropy(model(images).float(), labels)
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()
        losses.append(loss.item())
    assert all(torch.isfinite(torch.tensor(losses))) and losses[-1] < losses[0], losses


@pytest.mark.long
@pytest.mark.skipif(not compat.has_compile(), reason="torch.compile arrived in torch 2.0")
@pytest.mark.parametrize("mode", ["amp-bf16", "fp8"])
def test_compile_traces_the_swapped_vit_once_in_each_mode(mode):
    """The swapped attention and torchao's float8 layers compile into one graph at the first
    step and never again (no recompile per step, no graph break)."""
    from torch._dynamo.utils import counters
    from torchvision.models.vision_transformer import VisionTransformer

    from utils.app import run_mode
    from utils.config import RunConfig
    from utils.data.dataset import synthetic
    from utils.training.context import RunContext

    torch._dynamo.reset()
    counters.clear()
    torch.manual_seed(0)
    model = swap_attention(VisionTransformer(32, 8, num_layers=2, num_heads=2, hidden_dim=64, mlp_dim=128,
                                             num_classes=10))
    config = RunConfig.build(model="vit_t4", modes="amp-bf16,fp8", fp8_emulate=True, steps=5, warmup=2,
                             batch_size=4, compile=True, no_progress=True, no_eval=True,
                             workers=0)
    run = run_mode(model, MODES[mode], synthetic(CPU, seed=0), config, config.plan(False, 1), RunContext(CPU))
    assert run.record.compiled and run.outcome.completed_steps == 5
    assert counters["frames"]["total"] == counters["frames"]["ok"] == 1, dict(counters["frames"])
    assert counters["stats"]["unique_graphs"] == 1


@pytest.mark.whole_runs
def test_the_cli_trains_fp8_through_the_one_step_and_prints_its_block(tmp_path):
    result = run_cli(*VIT, "-n", "3", "--modes", "amp-bf16,fp8", "--numerics", "--json", tmp_path / "r.json")
    assert result.returncode == 0, result.stderr
    assert "--fp8-emulate" in result.stderr and "NOT FP8 speed" in result.stderr
    assert "Enum subclass" not in result.stderr  # torchao's import says nothing a user can act on
    assert "48 of 49 Linear" in result.stdout.replace("\n  ", " ")
    assert "94.6% of the step's matmul FLOPs" in result.stdout.replace("\n  ", " ")
    runs = {run["mode"]: run for run in json.loads((tmp_path / "r.json").read_text())["runs"]}
    assert runs["amp-bf16"]["fp8"] is None
    block = runs["fp8"]["fp8"]
    assert (block["recipe"], block["emulated"], block["converted_layers"]) == ("tensorwise", True, 48)
    assert (block["prediction"]["gpu"], block["prediction"]["for"]) == ("h100-sxm", "emulated: an H100 SXM")
    assert 0 < block["prediction"]["speedup"] < 1 and block["prediction_note"] is None
    assert "fp8 predicted" in result.stdout and "roofline for emulated: an H100 SXM" in \
        result.stdout.replace("\n  ", " ")
    assert runs["fp8"]["initial_weights_sha256"] == runs["amp-bf16"]["initial_weights_sha256"]
    assert runs["fp8"]["numerics"]["dtype"] == "bfloat16"  # the census examines the step's bfloat16 part


@pytest.mark.long
def test_an_fp8_checkpoint_resumes(tmp_path):
    common = [*VIT, "--modes", "fp8-rowwise", "--checkpoint", tmp_path / "c.pt"]
    first = run_cli(*common, "-n", "2")
    assert first.returncode == 0, first.stderr
    second = run_cli(*common, "-n", "3", "--resume", "--json", tmp_path / "r.json")
    assert second.returncode == 0, second.stderr
    run = json.loads((tmp_path / "r.json").read_text())["runs"][0]
    assert (run["resumed_from_step"], run["completed_steps"], run["fp8"]["recipe"]) == (2, 3, "rowwise")


def test_the_cpu_without_fp8_emulate_is_refused():
    assert_user_error(run_main("--modes", "fp8", "--data", "synthetic", "-n", "2", "-m", "vit_t4"),
                      "needs a GPU with FP8 tensor cores", "--fp8-emulate")


def test_the_device_check_itself_refuses_fp8_on_the_cpu_without_emulation():
    """main.py refuses it among the flags; precision.check_supported, the one answer that the
    GPU suite asks directly, says the same, rather than asking CUDA for a capability."""
    with pytest.raises(UserError, match=r"mode fp8 needs a GPU with FP8 tensor cores \(-p\); on the CPU add"):
        precision.check_supported(MODES["fp8"], CPU)


def test_fp8_emulate_without_an_fp8_mode_is_refused():
    assert_user_error(run_main("--modes", "amp-bf16", "--fp8-emulate", "--data", "synthetic"),
                      "--fp8-emulate applies to the fp8 modes")


def test_a_convnet_is_refused_fp8():
    assert_user_error(run_main("--modes", "fp8", "--fp8-emulate", "--data", "synthetic", "-n", "2", "-b", "4",
                               "-m", "resnet18", "--no-progress"),
                      "model resnet18 has no nn.Linear layer that FP8 can run", "use amp-bf16")


@pytest.mark.parametrize("release", [(1, 11), (2, 3)])
def test_an_old_torch_is_refused_fp8_with_one_sentence(monkeypatch, release):
    monkeypatch.setattr(compat, "torch_release", lambda: release)
    with pytest.raises(UserError, match="mode fp8 needs torch 2.11 or newer for torchao's float8 training"):
        precision.check_supported(MODES["fp8"], CPU, fp8_emulate=True)


def test_a_missing_torchao_names_the_install_command(monkeypatch):
    monkeypatch.setitem(sys.modules, "torchao.float8", None)
    with pytest.raises(UserError, match="pip install --no-deps -r requirements-fp8.txt"):
        precision.check_supported(MODES["fp8"], CPU, fp8_emulate=True)


@pytest.mark.parametrize("capability, refused", [((8, 0), True), ((8, 9), False), ((9, 0), False)])
def test_a_gpu_below_compute_capability_8_9_is_refused(monkeypatch, capability, refused):
    monkeypatch.setattr(torch.cuda, "get_device_capability", lambda device=None: capability)
    if refused:
        with pytest.raises(UserError, match="needs FP8 tensor cores .compute capability 8.9.*this GPU has 8.0"):
            precision.check_supported(MODES["fp8"], torch.device("cuda"))
    else:
        precision.check_supported(MODES["fp8"], torch.device("cuda"))


def test_the_float8_work_is_a_category_of_its_own():
    assert category_of(["ProfilerStep#1", "matmul_with_hp_or_float8_args", "aten::abs"]) == "float8"
    assert category_of(["ProfilerStep#1", "_ToFloat8ConstrFunc", "aten::_to_copy"]) == "float8"
    assert category_of(["ProfilerStep#1", "matmul_with_hp_or_float8_args", "aten::mm"]) == "matmul"
    assert category_of(["ProfilerStep#1", "aten::_scaled_mm"]) == "matmul"
    assert category_of(["ProfilerStep#1", "aten::linear", "aten::_to_copy"]) == "cast"


def fp8_run(**changes):
    block = {"emulated": False, "matmul_shapes": [[16640, 384, 1536]], "flop_share": 0.7}
    return dict({"fp8": dict(block, **changes.pop("fp8", {})), "compiled": True}, **changes)


def test_an_fp8_slower_than_bf16_is_diagnosed_with_the_causes_its_run_shows():
    assert fp8_slower("fp8", fp8_run(), 10.0, 12.0) is None
    found = fp8_slower("fp8", fp8_run(compiled=False, fp8={"flop_share": 0.3}), 15.0, 12.0)
    assert found["rule"] == "fp8 slower than bf16" and found["at_stake_ms"] == pytest.approx(3.0)
    for cause in ("no --compile", "small (the largest is 16640 x 384 x 1536", "only 30% of the step"):
        assert cause in found["evidence"], found["evidence"]
    large = fp8_slower("fp8", fp8_run(fp8={"matmul_shapes": [[16384, 4096, 4096]]}), 15.0, 12.0)
    assert "small" not in large["evidence"] and "emulated" not in large["evidence"]


PREDICTED = {"gpu": "h100-sxm", "for": "this GPU: an H100 SXM", "compiled": True, "speedup": 0.9,
             "linear_speedup": 0.8, "bf16_ms": 10.0, "fp8_ms": 11.1}


def test_on_a_gpu_the_slower_fp8_is_read_against_its_prediction():
    """Far below the roofline's speedup: launches or missing fusion; near it: the shapes."""
    far = fp8_slower("fp8", fp8_run(compiled=False, fp8={"recipe": "rowwise", "prediction": PREDICTED}), 20.0, 12.0)
    assert "measured 0.60x amp-bf16's speed against the 0.90x the roofline predicts for this GPU: an H100 SXM: " \
           "far below it" in far["evidence"] and "run with --compile" in far["evidence"]
    near = fp8_slower("fp8", fp8_run(fp8={"recipe": "rowwise", "prediction": PREDICTED}), 13.0, 12.0)
    assert "near it, so the shapes themselves are too small for FP8 to pay; at 16640 rows the roofline has FP8 " \
           "pay from K = N = " in near["evidence"] and "small (the largest" not in near["evidence"]
    emulated = fp8_slower("fp8", fp8_run(fp8={"emulated": True, "recipe": "rowwise", "prediction": PREDICTED}),
                          13.0, 12.0)
    assert "roofline" not in emulated["evidence"]


def test_fp8_mode_table_entries():
    fp8, rowwise = MODES["fp8"], MODES["fp8-rowwise"]
    assert (fp8.compute_dtype, fp8.low_precision_dtype, fp8.float8) == ("float8", "bfloat16", "tensorwise")
    assert rowwise.float8 == "rowwise" and fp8.fp32_weights and not fp8.scaled
    assert len({mode.colour for mode in MODES.values()}) == len(MODES)


def test_the_mfu_peak_of_an_fp8_mode_is_that_of_its_flop_mix():
    from utils.measure import flops
    peak, why = flops.peak_tflops("NVIDIA H100 80GB HBM3", MODES["fp8"], 0.5)
    assert why is None and peak == pytest.approx(1 / (0.5 / 1978.9 + 0.5 / 989.4))
    assert flops.peak_tflops("NVIDIA A100-SXM4-80GB", MODES["fp8"], 0.5) == (
        None, "NVIDIA A100-SXM4-80GB has no fp8 tensor cores")


def test_emulated_and_real_fp8_never_pool():
    from utils.results.record import setup_of
    document = {"config": {"fp8_emulate": True}, "env": {"device": "cuda", "world_size": 1}, "data": {"name": "x"},
                "runs": []}
    emulated, real = setup_of(document), setup_of(dict(document, config={}))
    assert emulated != real and real["fp8_emulate"] is False


@pytest.mark.long
def test_a_two_process_gloo_run_trains_fp8_emulated(tmp_path):
    env = {**os.environ, "MASTER_PORT": free_port(), "OMP_NUM_THREADS": "1"}
    result = subprocess.run([sys.executable, "-m", "torch.distributed.run", "--nproc_per_node=2", "main.py", *VIT,
                             "-n", "3", "--modes", "fp8", "--json", str(tmp_path / "r.json")], cwd=ROOT,
                            capture_output=True, text=True, timeout=600, env=env)
    assert result.returncode == 0, result.stderr
    document = json.loads((tmp_path / "r.json").read_text())
    run = document["runs"][0]
    assert (document["env"]["world_size"], document["env"]["backend"], run["global_batch_size"]) == (2, "gloo", 8)
    assert run["fp8"]["converted_layers"] == 48 and all(map(math.isfinite, run["loss_curve"]))


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return str(s.getsockname()[1])


def test_a_garbled_fp8_block_in_a_result_file_is_named():
    from utils.results import validate
    block = {"recipe": "rowwise", "emulated": True, "linear_layers": 37, "converted_layers": 24, "flop_share": "x",
             "left_out": []}
    with pytest.raises(validate.Invalid, match=r"runs\[0\].fp8.flop_share is \"x\", not a number"):
        validate.FP8.check(block, "runs[0].fp8")


def fake_torchao(folder, version, init="", float8="", metadata=True):
    """A torchao package in `folder`: its __init__.py and float8/__init__.py hold `init` and
    `float8`, and its metadata says `version` (none without `metadata`)."""
    package = folder / "torchao"
    (package / "float8").mkdir(parents=True)
    (package / "__init__.py").write_text(f"__version__ = {version!r}\n{init}")
    (package / "float8" / "__init__.py").write_text(float8)
    if metadata:
        info = folder / f"torchao-{version}.dist-info"
        info.mkdir()
        (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: torchao\nVersion: {version}\n")
    return folder


@pytest.fixture
def installed_torchao(monkeypatch):
    """Put a fake torchao (fake_torchao's folder) first on the path, imported afresh; the real
    one comes back after the test."""
    import importlib

    real = {name: module for name, module in sys.modules.items() if name.split(".")[0] == "torchao"}

    def install(folder):
        for name in real:
            monkeypatch.delitem(sys.modules, name)
        monkeypatch.syspath_prepend(str(folder))
        importlib.invalidate_caches()

    yield install
    for name in [name for name in sys.modules if name.split(".")[0] == "torchao"]:
        del sys.modules[name]
    sys.modules.update(real)


API = ("import dataclasses\n@dataclasses.dataclass\nclass Float8LinearConfig:\n    emulate: bool = False\n"
       "    @classmethod\n    def from_recipe_name(cls, name):\n        return cls()\n"
       "def convert_to_float8_training(model, config=None, module_filter_fn=None):\n    return model\n")


@pytest.mark.parametrize("version, init, float8, sentence", [
    ("0.5.0", "", API, "mode fp8 needs torchao 0.18 or newer, and this is torchao 0.5.0: pip install --no-deps -r "
                       "requirements-fp8.txt (it leaves torch as it is)."),
    ("0.18.0", "raise OSError('libtorchao.so: undefined symbol: _ZN3c104cuda9SetDeviceEa')", API,
     "mode fp8 needs torchao's float8 training, and torchao 0.18.0 here cannot be imported beside torch "),
    ("0.18.0", "", "raise ImportError('cannot import name float8_linear')",
     "and torchao 0.18.0 here cannot be imported beside torch"),
    ("0.19.0", "", API.replace("from_recipe_name", "from_recipe"),
     "mode fp8 needs Float8LinearConfig.from_recipe_name of torchao's float8 training, which torchao 0.19.0 here "
     "lacks"),
    ("0.19.0", "", API.replace("emulate: bool = False", "scaling: str = 'x'"),
     "mode fp8 needs Float8LinearConfig's emulate setting of torchao's float8 training"),
    ("0.19.0", "", "", "mode fp8 needs torchao.float8.Float8LinearConfig of torchao's float8 training"),
])
def test_a_torchao_that_is_there_but_wrong_is_refused_with_one_sentence(version, init, float8, sentence, tmp_path,
                                                                          installed_torchao):
    installed_torchao(fake_torchao(tmp_path, version, init, float8))
    with pytest.raises(UserError) as refused:
        precision.check_supported(MODES["fp8"], CPU, fp8_emulate=True)
    assert sentence in str(refused.value) and "requirements-fp8.txt" in str(refused.value)
    assert "not installed" not in str(refused.value)


def test_a_torchao_without_the_float8_api_is_refused_before_any_mode_trains(tmp_path, subset):
    folder = fake_torchao(tmp_path, "0.17.0", float8="")
    result = run_cli("-m", "vit_t4", "--modes", "amp-bf16,fp8", "--fp8-emulate", "-n", "2", "-b", "8",
                     "--data-dir", str(subset), "--allow-unverified",
                     env={"PYTHONPATH": os.pathsep.join([str(folder), os.environ.get("PYTHONPATH", "")])})
    assert_user_error(result, "mode fp8 needs torchao 0.18 or newer, and this is torchao 0.17.0")
    assert "amp-bf16" not in result.stdout
