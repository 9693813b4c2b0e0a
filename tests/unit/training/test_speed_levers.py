"""The speed levers: the classic loader as reference, channels_last, torch.compile, cuDNN autotuning."""
import json

import pytest
import torch

from conftest import assert_user_error, run_cli, run_main
from models import factory
from utils import compat, modes
from utils.app import run_mode
from utils.config import RunConfig, batches_per_epoch
from utils.data import cifar10
from utils.data.dataset import Data
from utils.data.loaders import DeviceLoader, TorchvisionLoader
from utils.training.context import RunContext

CPU = torch.device("cpu")


@pytest.fixture(scope="module")
def dataset():
    from conftest import SUBSET
    return cifar10.load(SUBSET, allow_unverified=True)


def planned(**overrides):
    """(a small run's config, its plan)."""
    config = RunConfig.build(**{"steps": 3, "warmup": 1, "batch_size": 8, "lr": 0.01, "no_progress": True,
                                "no_eval": True, "workers": 0, **overrides})
    return config, config.plan(True, 1)


def test_both_loaders_give_the_same_kind_of_batches(dataset):
    device_batch = next(DeviceLoader(dataset.train_images, dataset.train_labels, batch_size=512, device=CPU, seed=0))
    classic_batch = next(TorchvisionLoader(dataset.train_images, dataset.train_labels, batch_size=512, device=CPU,
                                           seed=0, workers=0))
    for (images, labels) in (device_batch, classic_batch):
        assert images.shape == (512, 3, 32, 32) and images.dtype == torch.float32
        assert labels.shape == (512,) and labels.dtype == torch.int64
    # same normalisation: per-channel statistics of two random 512-image batches agree closely
    assert torch.allclose(device_batch[0].mean(dim=(0, 2, 3)), classic_batch[0].mean(dim=(0, 2, 3)), atol=0.1)
    assert torch.allclose(device_batch[0].std(dim=(0, 2, 3)), classic_batch[0].std(dim=(0, 2, 3)), atol=0.1)
    # zero padding maps to the same value in both: (0 - mean) / std
    assert torch.isclose(device_batch[0].min(), classic_batch[0].min(), atol=1e-5)


def test_torchvision_loader_is_endless_and_seeded():
    images = torch.randint(0, 256, (20, 3, 32, 32), dtype=torch.uint8)
    labels = torch.arange(20)
    loader = TorchvisionLoader(images, labels, batch_size=8, device=CPU, seed=1, workers=0)
    seen = [next(loader)[1] for _ in range(5)]  # 2 full batches per epoch: this crosses 2 epochs
    assert loader.epoch == 3 and all(len(batch) == 8 for batch in seen)
    again = TorchvisionLoader(images, labels, batch_size=8, device=CPU, seed=1, workers=0)
    assert torch.equal(next(again)[1], seen[0])


def test_batches_per_epoch_matches_both_loaders_and_counts_ranks():
    images, labels = torch.randint(0, 256, (100, 3, 32, 32), dtype=torch.uint8), torch.arange(100)
    assert len(DeviceLoader(images, labels, batch_size=8, device=CPU, seed=0)) == \
        batches_per_epoch("device", 100, 8, 1) == 13
    assert len(DeviceLoader(images, labels, batch_size=8, device=CPU, seed=0, shard=(1, 2))) == \
        batches_per_epoch("device", 100, 8, 2) == 7
    for ranks in (1, 2):
        loader = TorchvisionLoader(images, labels, batch_size=8, device=CPU, seed=0, workers=0, shard=(0, ranks))
        assert len(loader) == batches_per_epoch("torchvision", 100, 8, ranks) == (12 if ranks == 1 else 6)


def test_epochs_count_global_batches_across_ranks():
    config = RunConfig.build(epochs=1, batch_size=8, warmup=1)
    assert config.training.steps is None  # until the dataset's size is known
    assert config.plan(True, world_size=2, train_images=100).steps == 7


def test_channels_last_reaches_the_model_and_its_inputs():
    seen = []
    model = factory.build_model("resnet18", "imagenet")
    model.register_forward_pre_hook(lambda module, inputs: seen.append(
        (inputs[0].is_contiguous(memory_format=torch.channels_last),
         module.conv1.weight.is_contiguous(memory_format=torch.channels_last))))
    images, labels = torch.randint(0, 256, (64, 3, 32, 32), dtype=torch.uint8), torch.randint(0, 10, (64,))
    data = Data("synthetic", images, labels, None, None, {})
    for loader in ("device", "torchvision"):
        seen.clear()
        result = run_mode(model, modes.MODES["fp32"], data, *planned(channels_last=True, loader=loader),
                          RunContext(CPU)).record
        assert seen and all(inputs and weights for inputs, weights in seen), loader
        assert result.channels_last and result.loader == loader


@pytest.mark.long  # compiling takes 11 s of the main suite's 6 minutes
def test_compile_runs_and_reports_compile_time_apart(tmp_path):
    out = tmp_path / "r.json"
    result = run_cli("--model", "squeezenet1_1", "-b", "4", "-n", "3", "--warmup", "1", "--data", "synthetic",
                     "--compile", "--no-progress", "--json", out, timeout=600)
    assert result.returncode == 0, result.stderr
    document = json.loads(out.read_text())
    (run,) = document["runs"]
    assert run["compiled"] and run["compile_mode"] == "default" and document["config"]["compile"]
    assert run["compile_time_s"] > 0 and run["compile_time_s"] == run["first_step_s"]
    assert len(run["step_times_ms"]) == 2  # the compiling step is not among them
    assert max(run["step_times_ms"]) < 1000 * run["compile_time_s"]


def test_compile_needs_a_warmup_step():
    assert_user_error(run_main("--compile", "--warmup", "0", "--data", "synthetic"), "--compile needs --warmup 1")


def test_torchvision_loader_from_the_cli(tmp_path, subset):
    out = tmp_path / "r.json"
    result = run_main("--model", "squeezenet1_1", "-b", "16", "-n", "4", "--warmup", "1", "--data-dir", subset,
                      "--allow-unverified", "--loader", "torchvision", "--workers", "2", "--no-progress",
                      "--json", out)
    assert result.returncode == 0, result.stderr
    document = json.loads(out.read_text())
    assert document["runs"][0]["loader"] == "torchvision" and document["config"]["workers"] == 2
    assert document["runs"][0]["data_time_ms"]["median"] > 0


@pytest.mark.long
@pytest.mark.skipif(not compat.has_compile(), reason="torch.compile arrived in torch 2.0")
@pytest.mark.parametrize("mode", ["fp32", "amp-fp16", "amp-bf16", "fp16-master"])
def test_compile_traces_each_mode_once_with_the_fused_optimizer_and_its_scaler(mode):
    """The compiled model with channels_last, the fused SGD and the mode's scaler: one graph,
    compiled at the first step and never again (no recompile per step)."""
    from torch import nn
    from torch._dynamo.utils import counters

    from utils.data.dataset import synthetic

    torch._dynamo.reset()
    counters.clear()
    torch.manual_seed(0)
    model = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.BatchNorm2d(8), nn.ReLU(), nn.AdaptiveAvgPool2d(1),
                          nn.Flatten(), nn.Linear(8, 10))
    run = run_mode(model, modes.MODES[mode], synthetic(CPU, seed=0),
                   *planned(steps=8, warmup=2, compile=True, channels_last=True), RunContext(CPU))
    result, outcome = run.record, run.outcome
    assert result.compiled and result.timed_steps == 6 and outcome.completed_steps == 8
    assert counters["frames"]["total"] == counters["frames"]["ok"] == 1, dict(counters["frames"])
    assert counters["stats"]["unique_graphs"] == 1
