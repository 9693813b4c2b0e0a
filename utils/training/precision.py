"""Precision modes: what autocast, GradScaler and the TF32 switches do in each.

Every mode runs the same training step (utils/training/step.py); a mode only chooses the autocast
dtype and whether it is enabled, whether GradScaler is enabled, and whether FP32 matmuls
and convolutions may use TF32 tensor cores. The classic FP16-weights recipe (`fp16-master`)
fits the same step: its static loss scaler has GradScaler's interface.
"""
from __future__ import annotations

import warnings
from typing import TYPE_CHECKING, Dict, List, Optional, Protocol, Tuple, Union

import torch
from torch import nn

from utils import compat
from utils.errors import UserError
from utils.modes import INITIAL_LOSS_SCALE
from utils.training import cpu_arithmetic, float8

if TYPE_CHECKING:
    from utils.modes import Mode


def check_supported(mode: Mode, device: torch.device, fp8_emulate: bool = False,
                    allow_slow_fp16: bool = False) -> Optional[str]:
    """Whether `mode` can run on `device`, the one answer, asked before any training: refuses a
    mode that this torch (torchao for the fp8 modes; `fp8_emulate` computes FP8 in software) or
    device cannot run, or that this CPU would run for hours instead of minutes (float16 without
    fast float16 arithmetic, unless `allow_slow_fp16`). Returns a sentence, to print, for a mode that
    runs but slower than fp32 on this CPU; else None."""
    if mode.float8:
        float8.check_requirements(mode, device, fp8_emulate)
    if device.type == "cuda":
        check_gpu(mode, device)
        return None
    check_cpu(mode)
    slow = cpu_arithmetic.slow_on_this_cpu(mode)
    if slow and mode.low_precision_dtype == "float16" and not allow_slow_fp16:
        raise UserError(f"{slow}; use amp-bf16 (--modes amp-bf16, or --modes fp32,amp-bf16), a GPU (-p), or add "
                        "--allow-slow-fp16 to run it anyway.")
    return slow


def check_gpu(mode: Mode, device: torch.device) -> None:
    """A GPU's part: TF32 and native bfloat16 need Ampere (compute capability 8.0)."""
    capability = torch.cuda.get_device_capability(device)
    if mode.tf32 and capability < (8, 0):
        raise UserError(f"mode {mode.name} needs an Ampere or newer GPU (compute capability 8.0); this GPU has "
                        f"{capability[0]}.{capability[1]}: use fp32.")
    if mode.autocast_dtype == torch.bfloat16 and capability < (8, 0):  # is_bf16_supported() counts emulation
        raise UserError(f"mode {mode.name} needs native bfloat16 (Ampere or newer, compute capability 8.0); this "
                        f"GPU has {capability[0]}.{capability[1]} and would only emulate it: use amp-fp16.")


def check_cpu(mode: Mode) -> None:
    """The CPU's part: no TF32 there, and what this torch build lacks on it."""
    if mode.tf32:
        raise UserError(f"mode {mode.name} only applies to CUDA GPUs: on the CPU run fp32, or add -p on a GPU node.")
    if mode.autocast_dtype == torch.float16 and not cpu_autocasts_to_half():
        raise UserError(f"mode {mode.name} needs float16 autocast on the CPU, which torch {torch.__version__} lacks "
                        "(it would silently train in FP32): run it on a GPU (-p), or use amp-bf16 on the CPU "
                        "(--modes amp-bf16, or --modes fp32,amp-bf16).")
    if mode.loss_scaling and not mode.master_weights and not compat.has_device_grad_scaler():
        raise UserError(f"mode {mode.name} needs a GradScaler on the CPU, which torch {torch.__version__} lacks "
                        "(torch 2.3 has one): run it on a GPU (-p).")
    if mode.master_weights:
        try:
            conv, norm = nn.Conv2d(3, 2, 3).half(), nn.BatchNorm2d(2)
            norm(conv(torch.zeros(2, 3, 4, 4, dtype=torch.float16))).float().sum().backward()
        except RuntimeError:
            raise UserError(f"mode {mode.name} needs float16 convolutions, which this CPU build of torch "
                            "lacks: run it on a GPU (-p).") from None


def cpu_autocasts_to_half() -> bool:
    """Whether CPU autocast really runs convolutions in float16: older torch raises, or warns and
    runs them in FP32."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            with torch.autocast("cpu", dtype=torch.float16):
                out = nn.functional.conv2d(torch.zeros(1, 3, 4, 4), torch.zeros(2, 3, 3, 3))
    except RuntimeError:
        return False
    return out.dtype == torch.float16


def set_tf32(enabled: bool) -> None:
    """TF32 for FP32 matmuls (cuBLAS) and convolutions (cuDNN). PyTorch allows it for cuDNN
    convolutions by default, so FP32 runs must switch it off explicitly.

    Through the allow_tf32 switches, which every torch since 1.7 has: torch 2.9's
    fp32_precision setters would make the legacy getters raise (torch.backends.cudnn.allow_tf32
    then refuses to answer), and Inductor's max-autotune reads them."""
    torch.backends.cuda.matmul.allow_tf32 = enabled
    torch.backends.cudnn.allow_tf32 = enabled


def prepare_model(model: nn.Module, mode: Mode, device: torch.device, static_loss_scale: float
                  ) -> Tuple[List[torch.Tensor], Union[torch.amp.GradScaler, StaticLossScaler]]:
    """Make `model` ready for `mode`; return (parameters the optimizer updates, scaler).

    The scaler is a GradScaler that passes through unless the mode scales the loss; for
    fp16-master the model is cast to FP16 (BatchNorm kept in FP32) and the optimizer updates
    FP32 master copies through a StaticLossScaler.
    """
    if not mode.master_weights:
        return list(model.parameters()), grad_scaler(device, mode.loss_scaling)
    model.half()
    for module in model.modules():
        if isinstance(module, nn.modules.batchnorm._BatchNorm):
            module.float()
    model.register_forward_pre_hook(cast_inputs_to_half)
    masters = MasterWeights(model)
    return masters.params, StaticLossScaler(masters, static_loss_scale)


def grad_scaler(device: torch.device, enabled: bool) -> torch.amp.GradScaler:
    """torch.amp.GradScaler for this device (torch 2.3); before, the CUDA-only one
    (check_supported has refused loss scaling on the CPU there)."""
    if compat.has_device_grad_scaler():
        return torch.amp.GradScaler(device.type, init_scale=INITIAL_LOSS_SCALE, enabled=enabled)
    return torch.cuda.amp.GradScaler(init_scale=INITIAL_LOSS_SCALE, enabled=enabled)


def cast_inputs_to_half(module: nn.Module, inputs: Tuple[torch.Tensor, ...]) -> Tuple[torch.Tensor, ...]:
    return tuple(x.half() for x in inputs)


class LossScaler(Protocol):
    """What the training step asks of a loss scaler: GradScaler's calls, which StaticLossScaler
    and --explain's labelled scaler answer too."""

    def scale(self, loss: torch.Tensor) -> torch.Tensor: ...

    def unscale_(self, optimizer: torch.optim.Optimizer) -> object: ...

    def step(self, optimizer: torch.optim.Optimizer) -> object: ...

    def update(self) -> object: ...


class MasterWeights:
    """FP32 copies of a half-precision model's parameters: the optimizer updates these, and
    they are copied back into the model after each step (Micikevicius et al., ICLR 2018)."""

    def __init__(self, model: nn.Module):
        self.model_params = [p for p in model.parameters() if p.requires_grad]
        self.params = [p.detach().float().clone().requires_grad_(True) for p in self.model_params]

    def take_gradients(self, inv_scale: float) -> torch.Tensor:
        """Move the model's gradients, unscaled and in FP32, onto the masters; return a device
        tensor that is True if any of them is inf or NaN."""
        finite = []
        for master, param in zip(self.params, self.model_params):
            master.grad = param.grad.float().mul_(inv_scale) if param.grad is not None else None
            param.grad = None
            if master.grad is not None:
                finite.append(torch.isfinite(master.grad).all())
        return ~torch.stack(finite).all()

    @torch.no_grad()
    def copy_to_model(self) -> None:
        for master, param in zip(self.params, self.model_params):
            param.copy_(master)


class StaticLossScaler:
    """GradScaler's interface around a fixed loss scale, for the fp16-master recipe: gradients
    of the scaled FP16 loss are unscaled into the FP32 masters; a step whose gradients
    overflow is skipped (safer than Apex's static-scale mode, which steps anyway; Apex skips
    only with a dynamic scale), otherwise the optimizer steps and the masters are copied back
    into the FP16 model. With the fused optimizer the check and the skip stay on the device,
    as GradScaler's do; `skipped` counts the skipped steps there."""

    def __init__(self, masters: MasterWeights, scale: float):
        self.masters = masters
        self.loss_scale = float(scale)
        self.found_inf: Optional[torch.Tensor] = None  # set by unscale_ until the step
        self.skipped = torch.zeros((), dtype=torch.long, device=masters.params[0].device)

    def is_enabled(self) -> bool:
        return True

    def get_scale(self) -> float:
        return self.loss_scale

    def scale(self, loss: torch.Tensor) -> torch.Tensor:
        return loss * self.loss_scale

    def unscale_(self, optimizer: torch.optim.Optimizer) -> None:
        self.found_inf = self.masters.take_gradients(1.0 / self.loss_scale)

    def step(self, optimizer: torch.optim.Optimizer) -> None:
        if self.found_inf is None:
            self.unscale_(optimizer)
        found_inf, self.found_inf = self.found_inf, None
        assert found_inf is not None  # unscale_() has set it
        self.skipped += found_inf
        if getattr(optimizer, "_step_supports_amp_scaling", False):  # fused: the kernel skips by itself
            # the fused step reads these attributes, which GradScaler sets alike; torch's stubs do not declare them
            optimizer.grad_scale, optimizer.found_inf = None, found_inf.float().reshape(1)  # type: ignore[attr-defined]
            try:
                optimizer.step()
            finally:
                del optimizer.grad_scale, optimizer.found_inf  # type: ignore[attr-defined]
            self.masters.copy_to_model()  # unchanged masters after a skip: a copy of the same weights
        elif not found_inf.item():  # foreach: the host decides, one sync per step
            optimizer.step()
            self.masters.copy_to_model()

    def update(self) -> None:
        pass

    def state_dict(self) -> Dict[str, float]:
        return {"scale": self.loss_scale, "skipped": int(self.skipped)}

    def load_state_dict(self, state: Dict[str, float]) -> None:
        self.loss_scale = state["scale"]
        self.skipped.fill_(state.get("skipped", 0))


def autocast(mode: Mode, device: torch.device) -> torch.autocast:
    """The mode's autocast, on or off; off, it keeps the device's default dtype (torch before 2.1
    warns at every step about any other dtype on the CPU, even when disabled)."""
    return torch.autocast(device.type, dtype=mode.autocast_dtype, enabled=mode.autocast_dtype is not None)
