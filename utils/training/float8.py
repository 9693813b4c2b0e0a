"""The fp8 modes' float8 Linear layers, by torchao's float8 training: which device may run them,
which layers convert and why the others stay in bfloat16, and the share of a step's matmul
FLOPs that runs in FP8.

torchao is optional (requirements-fp8.txt) and imported here alone, only when an fp8 mode runs.
"""
from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Any, Dict, List, Optional

from torch import nn

from utils import compat
from utils.config import DEFAULT_INPUT_SHAPE, InputShape
from utils.errors import UserError
from utils.modes import FP8_NEEDS_A_GPU, LOW_FP8_SHARE

if TYPE_CHECKING:
    import torch

    from utils.modes import Mode

INSTALL = "pip install --no-deps -r requirements-fp8.txt"
FP8_CAPABILITY = (8, 9)  # FP8 tensor cores: Ada (8.9) and Hopper (9.0) on
FP8_MULTIPLE = 16  # torch._scaled_mm needs both dimensions of a weight in multiples of 16
HEAD = "the model's output layer (the head), kept in bfloat16"
UNALIGNED = f"a dimension not a multiple of {FP8_MULTIPLE}, which FP8 matmuls need"
NEVER_RAN = "its forward never runs in a training step"
CONVOLUTION = "not an nn.Linear: a convolution"


def check_requirements(mode: Mode, device: torch.device, emulate: bool) -> None:
    """Refuse an fp8 mode that this torch, torchao or device cannot run (a part of
    utils/training/precision.py's check_supported, the one answer)."""
    import torch

    if not compat.has_float8_training():
        low = compat.MIN_FLOAT8_TORCH
        raise UserError(f"mode {mode.name} needs torch {low[0]}.{low[1]} or newer for torchao's float8 training, "
                        f"and this is torch {torch.__version__}: use amp-bf16.")
    check_torchao(mode)
    if emulate:
        return
    if device.type != "cuda":  # main.py refuses it among the flags already; a caller of this check may not
        raise UserError(f"mode {mode.name} {FP8_NEEDS_A_GPU}")
    capability = torch.cuda.get_device_capability(device)
    if capability < FP8_CAPABILITY:
        raise UserError(f"mode {mode.name} needs FP8 tensor cores (compute capability 8.9: Ada, Hopper or newer); "
                        f"this GPU has {capability[0]}.{capability[1]}: use amp-bf16.")


def check_torchao(mode: Mode) -> None:
    """Refuse, before any training, a torchao that is missing, that cannot be imported beside this
    torch (a build for another torch fails to load its extension), older than the release the
    fp8 modes are built on, or without the float8 training API they call."""
    import importlib.util

    import torch

    if importlib.util.find_spec("torchao") is None:
        raise UserError(f"mode {mode.name} needs torchao, which is not installed here: {INSTALL} (it leaves torch "
                        "as it is).")
    version = compat.distribution_version("torchao")
    if version is not None and compat.release(version) < compat.MIN_TORCHAO:
        raise UserError(f"mode {mode.name} needs torchao {compat.MIN_TORCHAO[0]}.{compat.MIN_TORCHAO[1]} or newer, "
                        f"and this is torchao {version}: {INSTALL} (it leaves torch as it is).")
    shown = version or "(of unknown version)"
    try:
        quiet_import()
    except Exception as error:  # ImportError, or OSError/RuntimeError from an extension built for another torch
        said = str(error).strip().splitlines()[0][:200] if str(error).strip() else "no message"
        raise UserError(f"mode {mode.name} needs torchao's float8 training, and torchao {shown} here cannot be "
                        f"imported beside torch {torch.__version__} "
                        f"({type(error).__name__}: {said}); install the release built for this torch: "
                        f"{INSTALL}.") from None
    missing = missing_api()
    if missing:
        raise UserError(f"mode {mode.name} needs {missing} of torchao's float8 training, which torchao "
                        f"{shown} here lacks: {INSTALL} (it leaves torch as it is).")


def missing_api() -> Optional[str]:
    """The first part of torchao.float8 that convert() uses and this torchao lacks, or None."""
    import torchao.float8 as torchao_float8

    config = getattr(torchao_float8, "Float8LinearConfig", None)
    if config is None:
        return "torchao.float8.Float8LinearConfig"
    if not callable(getattr(config, "from_recipe_name", None)):
        return "Float8LinearConfig.from_recipe_name"
    if not dataclasses.is_dataclass(config) or "emulate" not in {field.name for field in dataclasses.fields(config)}:
        return "Float8LinearConfig's emulate setting"
    if not callable(getattr(torchao_float8, "convert_to_float8_training", None)):
        return "torchao.float8.convert_to_float8_training"
    return None


def quiet_import() -> None:
    """Import torchao.float8 without the deprecation log line torch's pytree writes at its import
    (torchao registers an Enum for torch.compile): nothing a user can act on."""
    import importlib
    import logging

    log = logging.getLogger("torch.utils._pytree")
    level = log.level
    log.setLevel(logging.ERROR)
    try:
        importlib.import_module("torchao.float8")
    finally:
        log.setLevel(level)


def left_out(model: nn.Module) -> Dict[str, str]:
    """{name: why} of every nn.Linear that stays in bfloat16; every other nn.Linear converts (a
    ViT's attention projections too: models/attention.py makes them nn.Linear layers)."""
    linears = [(name, module) for name, module in model.named_modules() if isinstance(module, nn.Linear)]
    why = {}
    for index, (name, module) in enumerate(linears):
        if index == len(linears) - 1:
            why[name] = HEAD
        elif module.in_features % FP8_MULTIPLE or module.out_features % FP8_MULTIPLE:
            why[name] = UNALIGNED
    return why


def convert(model: nn.Module, recipe: str, emulate: bool) -> nn.Module:
    """Swap `model`'s convertible nn.Linear layers, in place, for torchao's Float8Linear with
    `recipe`'s scaling ("tensorwise" or "rowwise"); `emulate` computes FP8 on any device."""
    from torchao.float8 import Float8LinearConfig, convert_to_float8_training

    config = dataclasses.replace(Float8LinearConfig.from_recipe_name(recipe), emulate=emulate)
    stay = left_out(model)
    convert_to_float8_training(model, config=config, module_filter_fn=lambda module, name: name not in stay)
    return model


def accounting(model: nn.Module, batch_size: int, model_name: str,
               input_shape: InputShape = DEFAULT_INPUT_SHAPE) -> Dict[str, Any]:
    """What runs in FP8 in one step of `model`: the Linear layers converted out of all, their
    share of the step's matmul and convolution FLOPs (torch's FLOP counter), and every layer left
    out with why: RunRecord.fp8 once the run adds its recipe and emulated. Refuses a model in
    which nothing would run in FP8."""
    from utils.measure import flops

    try:
        count = flops.count_step(model, batch_size, input_shape)
    except Exception as error:  # a --model-factory model that the meta device cannot run
        reason = (str(error).strip().splitlines() or [type(error).__name__])[0][:160]
        raise UserError(f"model {model_name} cannot be counted on the meta device ({type(error).__name__}: "
                        f"{reason}), and fp8's accounting of its Linear layers and FLOPs runs there; use amp-bf16, "
                        "or make its forward create its tensors on its input's device.") from None
    linear_flops, total = count.linears, count.total
    why = left_out(model)
    for name, module in model.named_modules():
        if isinstance(module, nn.Linear) and name not in why and name not in linear_flops:
            why[name] = NEVER_RAN
    converted = converted_layers(model, linear_flops)
    if not converted:
        raise UserError(f"model {model_name} has no nn.Linear layer that FP8 can run (its matmul FLOPs are in "
                        "convolutions and the head, which torchao's float8 training leaves in bfloat16), so fp8 "
                        "would time amp-bf16 with extra work: use amp-bf16, or a transformer (vit_t4, vit_s4).")
    fp8_flops = sum(linear_flops[name][0] for name in converted)
    linears = len([module for module in model.modules() if isinstance(module, nn.Linear)])
    return {"linear_layers": linears, "converted_layers": len(converted), "fp8_flops_per_step": fp8_flops,
            "flop_share": fp8_flops / total, "left_out": sorted_left_out(model, why),
            "matmul_shapes": sorted({linear_flops[name][1] for name in converted})}


def converted_layers(model: nn.Module, linear_flops: Dict[str, Any]) -> List[str]:
    """The names of the Linear layers that convert to float8: those whose forward runs in a step
    (`linear_flops`, flops.count_step's linears) and that left_out() keeps."""
    why = left_out(model)
    return [name for name in linear_flops if name not in why]


def sorted_left_out(model: nn.Module, why: Dict[str, str]) -> List[Dict[str, str]]:
    """[{layer, why}] in the model's order: the Linear layers in `why`, and the convolutions."""
    found = []
    for name, module in model.named_modules():
        if name in why:
            found.append({"layer": name, "why": why[name]})
        elif isinstance(module, nn.modules.conv._ConvNd):
            found.append({"layer": name, "why": CONVOLUTION})
    return found


def low_share_note(block: Dict[str, Any], mode_name: str) -> Optional[str]:
    """A loud sentence when under LOW_FP8_SHARE of the step's matmul FLOPs runs in FP8, else None."""
    if block["flop_share"] >= LOW_FP8_SHARE:
        return None
    return (f"only {100 * block['flop_share']:.0f}% of the step's matmul FLOPs run in FP8 in {mode_name} "
            f"({block['converted_layers']} of {block['linear_layers']} Linear layers), so its speed is mostly "
            "bfloat16's: read it against amp-bf16.")
