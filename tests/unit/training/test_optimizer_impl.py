"""The fused optimizer keeps every mode's timed step free of host syncs, and skips exactly the
steps the classic foreach recipe skips."""
import collections
import os

import pytest
import torch
from torch import nn

from utils import launch, modes
from utils.config import RunConfig
from utils.data.dataset import synthetic
from utils.training import loop, precision
from utils.training.context import RunContext
from utils.training.step import fused_optimizer_works
from utils.training.trainer import build_trainer

CPU = torch.device("cpu")
MODES_ON_CPU = ["fp32", "amp-fp16", "amp-fp16-noscale", "amp-bf16", "fp16-master"]
SYNC = "aten::_local_scalar_dense"  # what .item(), bool() and float() of a tensor run
needs_fused = pytest.mark.skipif(not fused_optimizer_works("cpu"), reason="this torch has no fused SGD on the CPU")


def tiny_model():
    torch.manual_seed(0)
    return nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.BatchNorm2d(8), nn.ReLU(), nn.AdaptiveAvgPool2d(1),
                         nn.Flatten(), nn.Linear(8, 10))


@pytest.fixture(scope="module")
def data():
    return synthetic(CPU, seed=0)


def train(data, mode, impl, steps, **settings):
    config = RunConfig.build(steps=steps, warmup=1, batch_size=8, no_progress=True, no_eval=True, modes=mode,
                             optimizer_impl=impl, **settings)
    trainer = build_trainer(tiny_model(), modes.MODES[mode], data, config.plan(True, 1),
                            config.training, config.precision, config.data, config.speed, config.distributed, CPU,
                            launch.World())
    return trainer, loop.train(trainer, config.training, config.accuracy, config.checkpoints, RunContext(CPU))


def syncs(data, mode, impl, steps):
    """How many host syncs a run of `steps` steps makes, the loop's own after its end included."""
    os.environ.setdefault("KINETO_LOG_LEVEL", "6")
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as profiler:
        train(data, mode, impl, steps)
    return collections.Counter(event.name for event in profiler.events())[SYNC]


@needs_fused
@pytest.mark.parametrize("mode", MODES_ON_CPU)
def test_no_timed_step_waits_for_the_host_with_the_fused_optimizer(data, mode):
    """Four more steps add no sync: whatever the loop reads after its end is read once."""
    assert syncs(data, mode, "fused", 8) == syncs(data, mode, "fused", 4)


@pytest.mark.parametrize("mode, per_step", [("fp32", 0), ("amp-bf16", 0), ("amp-fp16", 1), ("fp16-master", 1)])
def test_the_foreach_recipe_syncs_once_per_step_in_the_scaled_modes(data, mode, per_step):
    assert syncs(data, mode, "foreach", 8) - syncs(data, mode, "foreach", 4) == 4 * per_step


@needs_fused
@pytest.mark.parametrize("mode, settings", [
    ("amp-fp16", {}),  # GradScaler starts at 2^24: float16 gradients overflow until it has halved enough
    ("fp16-master", {"loss_scale": 2.0 ** 40}),  # every step overflows: all are skipped
])
def test_forced_overflows_skip_the_same_steps_in_both_implementations(data, mode, settings, monkeypatch):
    """The LR schedule counts skipped steps like the others in both, so the curves agree too."""
    monkeypatch.setattr(modes, "INITIAL_LOSS_SCALE", 2.0 ** 24)
    monkeypatch.setattr(precision, "INITIAL_LOSS_SCALE", 2.0 ** 24)
    runs = {impl: train(data, mode, impl, 12, lr=0.05, **settings) for impl in ("fused", "foreach")}
    (fused, fused_outcome), (foreach, foreach_outcome) = runs["fused"], runs["foreach"]
    assert fused.optimizer_impl == "fused" and foreach.optimizer_impl == "foreach"
    assert fused_outcome.skipped_steps == foreach_outcome.skipped_steps > 0
    assert fused_outcome.stats.loss_scales == foreach_outcome.stats.loss_scales
    assert fused_outcome.stats.lrs == foreach_outcome.stats.lrs
    assert fused_outcome.stats.losses == pytest.approx(foreach_outcome.stats.losses, rel=1e-3)
    if mode == "fp16-master":  # every step skipped on the device: the masters never moved
        assert fused_outcome.skipped_steps == 12
        start = [param.detach().half().float() for param in tiny_model().parameters()]
        assert all(torch.equal(master, first) for master, first in zip(fused.params, start))


@needs_fused
def test_a_skipped_first_step_leaves_the_fused_momentum_clean():
    """torch's fused SGD fills its momentum buffers in the kernel that a skipped first step never
    runs; ampbench's starts them at zero, so the next step equals the foreach SGD's."""
    from utils.training.step import make_optimizer

    weights = {}
    for impl in ("fused", "foreach"):
        torch.manual_seed(0)
        weight = nn.Parameter(torch.randn(64))
        optimizer, _ = make_optimizer([weight], lr=0.1, impl=impl)
        scaler = torch.amp.GradScaler("cpu", init_scale=2.0 ** 16)
        for factor in (float("inf"), 1.0):
            scaler.scale((weight * weight).sum() * factor).backward()
            scaler.step(optimizer)
            scaler.update()
            optimizer.zero_grad(set_to_none=True)
        weights[impl] = weight.detach()
    assert torch.isfinite(weights["fused"]).all()
    assert torch.allclose(weights["fused"], weights["foreach"], rtol=1e-6, atol=0)


@needs_fused
def test_a_restored_state_without_some_momentum_buffers_still_steps_fused():
    """A checkpoint may hold None for a buffer (the foreach SGD before its first step); fused SGD
    refuses a mix of buffers and none, so restoring starts the missing ones at zero."""
    from utils.training.step import make_optimizer, start_momentum

    weights = [nn.Parameter(torch.ones(3)), nn.Parameter(torch.ones(2))]
    optimizer, _ = make_optimizer(weights, lr=0.1)
    state = optimizer.state_dict()
    state["state"][0]["momentum_buffer"] = None
    optimizer.load_state_dict(state)
    start_momentum(optimizer)
    for weight in weights:
        weight.grad = torch.ones_like(weight)
    optimizer.step()
    assert all(torch.isfinite(weight).all() and not torch.equal(weight, torch.ones_like(weight)) for weight in weights)
