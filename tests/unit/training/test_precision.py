import copy

import pytest
import torch
from torch import nn

from models import factory
from utils import modes
from utils.measure.envinfo import tf32_flags
from utils.training import precision
from utils.training.step import make_optimizer, train_step

CPU = torch.device("cpu")


@pytest.mark.parametrize("name, dtype", [("amp-fp16", torch.float16), ("amp-bf16", torch.bfloat16),
                                         ("fp32", torch.float32)])
def test_autocast_runs_conv_and_linear_in_the_low_dtype_and_loss_in_fp32(name, dtype):
    mode = modes.MODES[name]
    conv, linear = nn.Conv2d(3, 4, 3), nn.Linear(4, 10)
    with precision.autocast(mode, CPU):
        features = conv(torch.randn(2, 3, 8, 8))
        logits = linear(features.mean(dim=(2, 3)))
        loss = nn.functional.cross_entropy(logits.float(), torch.tensor([1, 2]))
    assert features.dtype == dtype and logits.dtype == dtype
    assert loss.dtype == torch.float32


def test_fp32_switches_tf32_off_explicitly():
    precision.set_tf32(True)
    assert tf32_flags() == {"matmul": True, "cudnn_conv": True}
    precision.set_tf32(False)
    assert tf32_flags() == {"matmul": False, "cudnn_conv": False}
    # every TF32 getter stays usable (torch 2.9's fp32_precision setters break the legacy ones,
    # and Inductor's max-autotune reads them)
    assert torch.get_float32_matmul_precision() == "highest"
    assert torch.backends.cudnn.allow_tf32 is False and torch.backends.cuda.matmul.allow_tf32 is False


class InfGradient(nn.Module):
    """A linear model whose gradient becomes inf when asked."""
    def __init__(self):
        super().__init__()
        self.linear = nn.Linear(4, 10)
        self.poison = False

    def forward(self, x):
        out = self.linear(x)
        if self.poison:
            out = out + 0 * self.linear.weight.sum() * torch.tensor(float("inf"))
        return out


@pytest.mark.parametrize("impl", ["fused", "foreach"])
def test_grad_scaler_skips_the_step_when_a_gradient_is_inf(impl):
    mode = modes.MODES["amp-fp16"]
    model = InfGradient()
    params, scaler = precision.prepare_model(model, mode, CPU, 128)
    optimizer, _ = make_optimizer(params, lr=0.1, impl=impl)
    x, y = torch.randn(8, 4), torch.randint(0, 10, (8,))
    before = model.linear.weight.detach().clone()
    train_step(model, [(x, y)], nn.CrossEntropyLoss(), optimizer, scaler, mode, CPU)
    assert not torch.equal(model.linear.weight, before)
    before = model.linear.weight.detach().clone()
    scale = scaler.get_scale()
    model.poison = True
    train_step(model, [(x, y)], nn.CrossEntropyLoss(), optimizer, scaler, mode, CPU)
    assert torch.equal(model.linear.weight, before), "the poisoned step must be skipped"
    assert scaler.get_scale() == scale / 2


def test_fp32_step_changes_weights():
    mode = modes.MODES["fp32"]
    model = nn.Linear(4, 10)
    params, scaler = precision.prepare_model(model, mode, CPU, 128)
    optimizer, _ = make_optimizer(params, lr=0.1)
    before = model.weight.detach().clone()
    loss = train_step(model, [(torch.randn(8, 4), torch.randint(0, 10, (8,)))], nn.CrossEntropyLoss(), optimizer,
                      scaler, mode, CPU)
    assert not torch.equal(model.weight, before) and not loss.requires_grad


def test_fp16_master_keeps_fp32_masters_and_batchnorm_and_updates_weights():
    mode = modes.MODES["fp16-master"]
    model = factory.build_model("resnet18", "imagenet")
    params, scaler = precision.prepare_model(model, mode, torch.device("cpu"), 128)
    assert model.conv1.weight.dtype == torch.float16 and model.fc.weight.dtype == torch.float16
    assert model.bn1.weight.dtype == torch.float32 and model.bn1.running_mean.dtype == torch.float32
    assert all(p.dtype == torch.float32 for p in params)
    optimizer, _ = make_optimizer(params, lr=0.1)
    before = model.conv1.weight.detach().clone()
    master_before = params[0].detach().clone()
    x, y = torch.randn(4, 3, 32, 32), torch.randint(0, 10, (4,))
    loss = train_step(model, [(x, y)], nn.CrossEntropyLoss(), optimizer, scaler, mode, torch.device("cpu"))
    assert loss.dtype == torch.float32
    assert not torch.equal(model.conv1.weight, before) and not torch.equal(params[0], master_before)
    assert torch.equal(model.conv1.weight, params[0].half())
    assert model.conv1.weight.grad is None  # gradients moved onto the masters


def test_fp16_master_skips_a_step_whose_gradients_overflow():
    mode = modes.MODES["fp16-master"]
    model = nn.Sequential(nn.Linear(4, 10))
    params, scaler = precision.prepare_model(model, mode, torch.device("cpu"), 1e30)  # overflows FP16 at once
    optimizer, _ = make_optimizer(params, lr=0.1)
    before = copy.deepcopy(params[0].detach())
    train_step(model, [(torch.randn(2, 4), torch.tensor([1, 2]))], nn.CrossEntropyLoss(), optimizer, scaler, mode,
               torch.device("cpu"))
    assert torch.equal(params[0], before)


def test_every_mode_row_says_what_the_adviser_and_the_comparisons_know_of_it():
    """A mode is one row: its rank for the adviser's ties (each its own), where it runs at speed,
    whether the adviser weighs it and why it never advises it; the lists are derived from them."""
    from utils import modes

    ranks = [mode.rank for mode in modes.MODES.values()]
    assert len(set(ranks)) == len(ranks) and modes.MODES["fp32"].rank == min(ranks)
    assert all(mode.at_speed_on and set(mode.at_speed_on) <= {"cuda", "cpu"} for mode in modes.MODES.values())
    assert modes.weighed_on("cpu") == ("fp32", "amp-bf16")
    assert modes.weighed_on("cuda") == ("fp32", "tf32", "amp-fp16", "amp-bf16", "fp8", "fp8-rowwise")
    assert all(not mode.weighed for mode in modes.MODES.values() if mode.never_advised)
    assert modes.listed(["fp8", "fp8-rowwise"]) == "fp8 or fp8-rowwise"
    with pytest.raises(TypeError):  # a row without its adviser rank and devices is refused where it is written
        modes.Mode("fp99", None, False, False, "a mode of tomorrow", "#000000")
    with pytest.raises(TypeError):  # and one without the suite's sections that time it
        modes.Mode("fp99", None, False, False, "a mode of tomorrow", "#000000", 8, modes.GPU)


def test_the_suite_times_each_mode_in_the_sections_its_row_names(monkeypatch):
    """A new mode is one row: the GPU suite's sections read their modes from the rows' timed_in,
    in the rows' order, and the FP8 row's baseline (amp-bf16) comes first."""
    from utils import modes

    assert all(set(mode.timed_in) <= set(modes.SUITE_SECTIONS) for mode in modes.MODES.values())
    assert modes.timed_in(modes.FP8_ROW)[0] == modes.BASELINES["fp8"]
    assert modes.fp32_modes() == ("fp32", "tf32")
    toy = modes.Mode("fp99", "bfloat16", False, False, "a mode of tomorrow", "#000000", 8, modes.GPU,
                     (modes.TRANSFORMERS,))
    monkeypatch.setitem(modes.MODES, "fp99", toy)
    assert modes.timed_in(modes.TRANSFORMERS)[-1] == "fp99" and "fp99" not in modes.timed_in(modes.HEADLINE)
