"""The GPU spec table: each card's dense peak TFLOP/s by arithmetic and its memory bandwidth,
from NVIDIA's datasheets, read by MFU (flops.py) and the FP8 roofline prediction
(utils/explain/fp8_predict.py) alike. No torch: the prediction's command line imports it first."""
from __future__ import annotations

from typing import TYPE_CHECKING, Dict, List, NamedTuple, Optional

if TYPE_CHECKING:
    from torch import nn


class GpuSpec(NamedTuple):
    called: str  # the card in words, as a sentence names it
    tflops: Dict[str, float]  # dense (non-sparse) peak TFLOP/s by arithmetic: fp32, tf32, fp16, bf16, fp8
    memory_tb_s: float  # memory bandwidth, TB/s


# H100 SXM5: NVIDIA H100 Tensor Core GPU datasheet, SXM column, the sparse figures halved
# (TF32 989, BF16/FP16 1,979, FP8 3,958 with sparsity); 3.35 TB/s of HBM3.
H100_SXM_TFLOPS = {"fp32": 67.0, "tf32": 494.7, "fp16": 989.4, "bf16": 989.4, "fp8": 1978.9}
# A100: NVIDIA A100 Tensor Core GPU datasheet (TF32 156, BF16/FP16 312 dense; no FP8).
A100_TFLOPS = {"fp32": 19.5, "tf32": 156.0, "fp16": 312.0, "bf16": 312.0}
SPECS = {
    "h100-sxm": GpuSpec("an H100 SXM", H100_SXM_TFLOPS, 3.35),
    # H100 PCIe datasheet column: TF32 756, BF16 1,513, FP8 3,026 with sparsity; 2.0 TB/s of HBM2e
    "h100-pcie": GpuSpec("an H100 PCIe", {"fp32": 51.0, "tf32": 378.0, "fp16": 756.0, "bf16": 756.0, "fp8": 1513.0},
                         2.0),
    # H200 datasheet, SXM column: the H100 SXM's tensor cores with 4.8 TB/s of HBM3e
    "h200": GpuSpec("an H200", H100_SXM_TFLOPS, 4.8),
    # L40S datasheet: TF32 366, BF16/FP16 733, FP8 1,466 with sparsity; 864 GB/s of GDDR6
    "l40s": GpuSpec("an L40S", {"fp32": 91.6, "tf32": 183.0, "fp16": 362.05, "bf16": 362.05, "fp8": 733.0}, 0.864),
    # HGX B200 datasheet, per GPU: TF32 2.2, BF16/FP16 4.5, FP8 9 PFLOPS with sparsity; 8 TB/s of HBM3e
    "b200": GpuSpec("a B200", {"fp32": 75.0, "tf32": 1100.0, "fp16": 2250.0, "bf16": 2250.0, "fp8": 4500.0}, 8.0),
    # A100 datasheet: 1,555 GB/s (40GB HBM2), 2,039 GB/s (80GB SXM), 1,935 GB/s (80GB PCIe)
    "a100-40gb": GpuSpec("an A100 40GB", A100_TFLOPS, 1.555),
    "a100-sxm-80gb": GpuSpec("an A100 SXM 80GB", A100_TFLOPS, 2.039),
    "a100-pcie-80gb": GpuSpec("an A100 PCIe 80GB", A100_TFLOPS, 1.935),
    # V100 datasheet: Tensor Performance 125 (SXM2) and 112 (PCIe) TFLOPS; 900 GB/s of HBM2
    "v100-sxm2": GpuSpec("a V100 SXM2", {"fp32": 15.7, "fp16": 125.0}, 0.9),
    "v100-pcie": GpuSpec("a V100 PCIe", {"fp32": 14.0, "fp16": 112.0}, 0.9),
}
# Exact torch.cuda.get_device_name() strings: a near name is another product (an H200 NVL is not
# an H200 SXM, an RTX A1000 no A100), so any other name gets no figures rather than wrong ones.
DEVICE_NAMES = {
    "NVIDIA H100 80GB HBM3": "h100-sxm",
    "NVIDIA H100 PCIe": "h100-pcie",
    "NVIDIA H200": "h200",
    "NVIDIA L40S": "l40s",
    "NVIDIA B200": "b200",
    "NVIDIA A100-SXM4-40GB": "a100-40gb",
    "NVIDIA A100-PCIE-40GB": "a100-40gb",
    "NVIDIA A100-SXM4-80GB": "a100-sxm-80gb",
    "NVIDIA A100 80GB PCIe": "a100-pcie-80gb",
    "Tesla V100-SXM2-16GB": "v100-sxm2",
    "Tesla V100-SXM2-32GB": "v100-sxm2",
    "Tesla V100-PCIE-16GB": "v100-pcie",
    "Tesla V100-PCIE-32GB": "v100-pcie",
}


def key_of(device_name: str) -> Optional[str]:
    """The SPECS key of a torch.cuda.get_device_name() string, or None for a card not in the table."""
    return DEVICE_NAMES.get(device_name)


def peaks_of(device_name: str) -> Optional[Dict[str, float]]:
    """The dense peak TFLOP/s by arithmetic of a card by its device name, or None."""
    key = key_of(device_name)
    return None if key is None else SPECS[key].tflops


# The spec table's arithmetic keys by the dtype of a mode's matmuls (Mode.compute_dtype)
ARITHMETIC = {"float32": "fp32", "tf32": "tf32", "float16": "fp16", "bfloat16": "bf16", "float8": "fp8"}


def lowest_peak(arithmetic: str) -> float:
    """The lowest dense peak TFLOP/s of `arithmetic` among the cards in the table: what a card
    without figures is assumed to reach, so that an estimate errs long."""
    return min(spec.tflops[arithmetic] for spec in SPECS.values() if arithmetic in spec.tflops)


TENSOR_CORE_MULTIPLE = 8  # FP16/BF16 tensor cores want channels, features and batch in multiples of 8


def unaligned_layers(model: nn.Module, batch_size: int) -> List[str]:
    """Convolutions and linear layers whose channels or features, and the batch, when it is not
    a multiple of TENSOR_CORE_MULTIPLE."""
    from torch import nn

    names = [] if batch_size % TENSOR_CORE_MULTIPLE == 0 else [f"the batch ({batch_size})"]
    for name, module in model.named_modules():
        if isinstance(module, nn.Conv2d):
            sizes = (module.in_channels // module.groups, module.out_channels)
        elif isinstance(module, nn.Linear):
            sizes = (module.in_features, module.out_features)
        else:
            continue
        if any(size % TENSOR_CORE_MULTIPLE for size in sizes):
            names.append(f"{name} ({sizes[0]}->{sizes[1]})")
    return names
