"""FLOPs per training step, and TFLOP/s and MFU against the dense peak of known GPUs."""
import pytest

from models import factory
from utils import modes
from utils.measure import flops


def test_flops_are_counted_per_step_and_scale_with_batch():
    model = factory.build_model("resnet18", "cifar")
    per_8, per_16 = flops.training_flops_per_step(model, 8), flops.training_flops_per_step(model, 16)
    assert per_16 == 2 * per_8
    assert 3.0e9 < per_8 / 8 < 3.7e9  # about 3x the 1.1 GFLOP forward pass of a CIFAR resnet18


def test_a_convnets_flops_grow_with_the_images_area_but_for_its_head():
    """resnet18 with the ImageNet stem halves 32 and 64 evenly down to layer4 (1x1 and 2x2), so
    every convolution does 4x the work at 64; the head (512 -> 10 after the pool, 3 matmuls of
    2 x 512 x 10 FLOPs an image in training) does the same at both."""
    model, batch = factory.build_model("resnet18", "imagenet", image_size=64), 4
    head = 3 * 2 * 512 * 10 * batch
    at_32, at_64 = (flops.training_flops_per_step(model, batch, (3, size, size)) for size in (32, 64))
    assert at_64 - head == 4 * (at_32 - head)


@pytest.mark.parametrize("name, mode, peak", [
    ("NVIDIA A100-SXM4-40GB", "amp-fp16", 312.0), ("NVIDIA A100-SXM4-40GB", "fp32", 19.5),
    ("NVIDIA A100-SXM4-40GB", "tf32", 156.0), ("NVIDIA H100 80GB HBM3", "amp-bf16", 989.4),
    ("NVIDIA H200", "fp16-master", 989.4), ("Tesla V100-SXM2-32GB", "amp-fp16", 125.0),
    ("Tesla V100-SXM2-32GB", "amp-bf16", None), ("NVIDIA GeForce GTX 1080", "fp32", None),
    ("NVIDIA A100 80GB PCIe", "amp-bf16", 312.0), ("Tesla V100-PCIE-16GB", "fp32", 14.0),
    ("NVIDIA H100 PCIe", "tf32", 378.0),
    # near names of other products: no MFU rather than a wrong one
    ("NVIDIA H200 NVL", "amp-bf16", None), ("NVIDIA RTX A1000", "fp32", None), ("NVIDIA GH200 480GB", "fp32", None),
])
def test_mfu_uses_the_dense_peak_of_known_gpus(name, mode, peak):
    figures = flops.utilisation(1e12, 10.0, name, modes.MODES[mode], on_gpu=True)
    assert figures["tflops"] == pytest.approx(100.0)
    assert figures["peak_tflops"] == peak
    if peak:
        assert figures["mfu_pct"] == pytest.approx(100.0 * 100.0 / peak)
    else:
        assert figures["mfu_pct"] is None and figures["mfu_note"]
