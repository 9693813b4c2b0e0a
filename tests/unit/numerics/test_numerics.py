"""--numerics: the gradient census (why FP16 needs loss scaling), the memory of a step, the
loss scale over time, and float16's limits."""
import json

import pytest
import torch
from torch import nn

from conftest import run_cli
from models import factory
from utils import launch
from utils.config import RunConfig
from utils.data.dataset import synthetic
from utils.modes import MODES
from utils.numerics.census import Census
from utils.numerics.fp16 import FLOAT16, FP16_MAX, FP16_MIN_NORMAL, FP16_MIN_SUBNORMAL
from utils.results.compare import scale_drops, scaler_skips
from utils.training.step import MicroBatches, train_step
from utils.training.trainer import build_trainer

CPU = torch.device("cpu")


def trainer_for(model_name, mode, stem="cifar", batch=8):
    torch.manual_seed(0)
    model = factory.build_model(model_name, stem, None, batch)
    config = RunConfig.build(steps=10, warmup=1, batch_size=batch, no_progress=True)
    return build_trainer(model, MODES[mode], synthetic(CPU, seed=0), config.plan(True, 1),
                         config.training, config.precision, config.data, config.speed, config.distributed, CPU,
                         launch.World())


class TinyLoss(nn.Module):
    """Cross-entropy times 1e-6: gradients far below float16's normal range."""

    def forward(self, logits, labels):
        return nn.functional.cross_entropy(logits, labels) * 1e-6


def census_of(mode, model_name="squeezenet1_1", stem="cifar", criterion=None, train_first=False):
    trainer = trainer_for(model_name, mode, stem)
    if criterion is not None:
        trainer.criterion = criterion
    if train_first:  # the optimizer's state exists from the first step on
        train_step(trainer.step_model, MicroBatches(next(trainer.loader), trainer.loader, 1), trainer.criterion,
                   trainer.optimizer, trainer.scaler, trainer.mode, CPU)
    images, labels = next(trainer.loader)
    before = {name: value.clone() for name, value in trainer.model.state_dict().items()}
    census = Census(MODES[mode], CPU, steps=10, every=50)
    assert census.wants(10) and not census.wants(7)
    census.take(trainer, images, labels, 10)
    after = trainer.model.state_dict()
    assert all(torch.equal(before[name], after[name]) for name in before)  # batch-norm statistics restored
    assert all(param.grad is None for param in trainer.model.parameters())
    return dict(census.result(), memory=census.footprint)


def test_float16s_limits_are_numpys():
    assert (FP16_MAX, FP16_MIN_NORMAL, FP16_MIN_SUBNORMAL) == (65504.0, 2.0 ** -14, 2.0 ** -24)
    assert FP16_MIN_NORMAL * float(FLOAT16.eps) == FP16_MIN_SUBNORMAL  # the subnormal before numpy 1.22 names it
    assert (FP16_MAX, FP16_MIN_NORMAL) == (torch.finfo(torch.float16).max, torch.finfo(torch.float16).tiny)


def test_tiny_gradients_flush_to_zero_without_a_scale_and_not_with_gradscalers():
    fp16 = census_of("amp-fp16", criterion=TinyLoss())
    unscaled, scaled = fp16["passes"]["unscaled"], fp16["passes"]["scaled"]
    assert scaled["scale"] == 65536.0  # GradScaler's scale before its first step
    assert unscaled["flushed_share"] > 0.05, unscaled["flushed_share"]
    assert scaled["flushed_share"] < 0.01 * unscaled["flushed_share"], (scaled, unscaled)
    assert unscaled["worst_layer"] in unscaled["layers"]
    fp32 = census_of("fp32", criterion=TinyLoss())
    assert list(fp32["passes"]) == ["unscaled"] and fp32["passes"]["unscaled"]["flushed_share"] == 0.0
    assert fp32["passes"]["unscaled"]["relative_error"] == 0.0  # the same computation as the reference
    assert sum(fp32["histogram"]["counts"]) + fp32["histogram"]["zeros"] == fp32["passes"]["unscaled"]["elements"]


def test_bfloat16_halves_the_activations_and_keeps_fp32_weights():
    footprints = {mode: census_of(mode, "resnet18", "imagenet", train_first=True)["memory"]
                  for mode in ("fp32", "amp-bf16")}
    fp32, bf16 = footprints["fp32"], footprints["amp-bf16"]
    for key in ("parameters_bytes", "gradients_bytes", "optimizer_bytes"):
        assert fp32[key] == bf16[key] > 0, key
    assert set(fp32["activations_by_dtype"]) <= {"float32", "int64"} and fp32["weight_copies_bytes"] == 0
    float_bytes = {mode: sum(size for dtype, size in footprint["activations_by_dtype"].items() if dtype != "int64")
                   for mode, footprint in footprints.items()}
    assert bf16["activations_by_dtype"]["bfloat16"] > 0.9 * float_bytes["amp-bf16"]
    assert 0.45 < float_bytes["amp-bf16"] / float_bytes["fp32"] < 0.6, float_bytes
    assert bf16["weight_copies_bytes"] == pytest.approx(bf16["parameters_bytes"] / 2, rel=0.01)


def test_scale_drops_count_each_fall_from_gradscalers_start():
    assert scale_drops({"mode": "amp-fp16", "loss_scale_curve": [32768.0, 32768.0, 16384.0, 32768.0]}) == 2
    assert scale_drops({"mode": "fp16-master", "loss_scale_curve": [128.0, 128.0]}) == 0
    # the figure's crosses are these steps: none for a static scale below GradScaler's start
    assert scaler_skips({"mode": "amp-fp16", "loss_scale_curve": [32768.0, 32768.0, 16384.0, 32768.0]}) == [1, 3]
    assert scaler_skips({"mode": "fp16-master", "loss_scale_curve": [128.0, 128.0]}) == []
    assert scale_drops({"mode": "fp32", "loss_scale_curve": None}) is None


@pytest.mark.whole_runs
def test_numerics_from_the_command_line(tmp_path):
    """The done-when modes on a small model: the census lines, the memory block, the loss-scale
    drops equal to the skipped steps, the step times left alone, and the figure's panels."""
    out, picture = tmp_path / "n.json", tmp_path / "n.png"
    result = run_cli("-m", "squeezenet1_1", "-b", "8", "-n", "6", "--warmup", "1", "--no-progress", "--data",
                     "synthetic", "--modes", "fp32,amp-fp16-noscale,amp-fp16,amp-bf16", "--numerics",
                     "--numerics-every", "3", "--allow-slow-fp16", "--json", out, "--plot", picture)
    assert result.returncode == 0, result.stderr
    text = " ".join(result.stdout.split())
    assert "Gradient census (--numerics; sampled at step 3, 6)" in text
    assert "amp-fp16-noscale: without loss scaling" in text and "with the scale at 65536:" in text
    assert "amp-bf16: bfloat16 has FP32's range" in text and "fp32: FP32 is the reference" in text
    assert "Where the memory of a step goes" in text and "weight copies" in text
    document = json.loads(out.read_text())
    for run in document["runs"]:
        assert run["numerics"]["sampled_steps"] == [3, 6] and run["memory"]["parameters_bytes"] > 0
        assert run["timed_steps"] == 5  # the samples are pauses, not steps
    fp16 = document["comparison"]["amp-fp16"]
    assert fp16["scale_drops"] == fp16["skipped_steps"] >= 1
    from matplotlib import image
    assert image.imread(str(picture)).shape[0] == 1980  # four rows: loss scale, histogram and memory added

