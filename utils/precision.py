"""Precision modes: what autocast, GradScaler and the TF32 switches do in each.

Every mode runs the same training step (utils/train.py); a mode only chooses the autocast
dtype and whether it is enabled, whether GradScaler is enabled, and whether FP32 matmuls
and convolutions may use TF32 tensor cores.
"""
from dataclasses import dataclass
from typing import Optional

import torch


@dataclass(frozen=True)
class Mode:
    name: str
    autocast_dtype: Optional[torch.dtype]  # None: autocast disabled
    loss_scaling: bool  # dynamic loss scaling with torch.amp.GradScaler
    tf32: bool  # TF32 allowed for FP32 matmuls and convolutions
    description: str


MODES = {
    "fp32": Mode("fp32", None, False, False, "FP32, TF32 off"),
    "tf32": Mode("tf32", None, False, True, "FP32 with TF32 tensor cores for matmul and conv"),
    "amp-fp16": Mode("amp-fp16", torch.float16, True, False, "autocast float16 + GradScaler"),
    "amp-fp16-noscale": Mode("amp-fp16-noscale", torch.float16, False, False,
                             "autocast float16 without loss scaling (small gradients may underflow)"),
    "amp-bf16": Mode("amp-bf16", torch.bfloat16, False, False, "autocast bfloat16"),
}


def mode_from_flags(fp16, bf16, loss_scaling, tf32):
    """The mode the seed flags ask for (--fp16 [-s] / --bf16 / --tf32 / none)."""
    if fp16:
        return MODES["amp-fp16" if loss_scaling else "amp-fp16-noscale"]
    if bf16:
        return MODES["amp-bf16"]
    return MODES["tf32" if tf32 else "fp32"]


def set_tf32(enabled):
    """TF32 for FP32 matmuls (cuBLAS) and convolutions (cuDNN). PyTorch allows it for cuDNN
    convolutions by default, so FP32 runs must switch it off explicitly."""
    precision = "tf32" if enabled else "ieee"
    torch.backends.cuda.matmul.fp32_precision = precision
    torch.backends.cudnn.conv.fp32_precision = precision


def tf32_flags():
    return {"matmul": torch.backends.cuda.matmul.fp32_precision == "tf32",
            "cudnn_conv": torch.backends.cudnn.conv.fp32_precision == "tf32"}


def make_scaler(mode, device):
    """A GradScaler that is a pass-through unless the mode scales the loss."""
    return torch.amp.GradScaler(device.type, enabled=mode.loss_scaling)


def autocast(mode, device):
    return torch.amp.autocast(device.type, dtype=mode.autocast_dtype or torch.float32,
                              enabled=mode.autocast_dtype is not None)
