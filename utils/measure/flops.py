"""Training FLOPs per step, achieved TFLOP/s, and model FLOPs utilisation (MFU) where the GPU's
dense peak is known."""
from __future__ import annotations

import copy
import math
from typing import TYPE_CHECKING, Any, Callable, Dict, NamedTuple, Optional, Sequence, Tuple

import torch
from torch import nn

from utils import compat
from utils.config import DEFAULT_INPUT_SHAPE, InputShape
from utils.measure import gpus
from utils.measure.gpus import ARITHMETIC

if TYPE_CHECKING:
    from torch.utils.flop_counter import FlopCounterMode

    from utils.modes import Mode

COUNT_BATCH = 2  # conv and matmul FLOPs are linear in the batch: count 2 images, scale up


def training_flops_per_step(model: nn.Module, batch_size: int, input_shape: InputShape = DEFAULT_INPUT_SHAPE) -> int:
    """FLOPs of one forward and backward pass (convolutions and matmuls) of a batch of
    `input_shape` images, counted on the meta
    device at no compute cost: by torch.utils.flop_counter where this torch has it (torch 2.1),
    with grouped convolutions' weight gradients counted once, not `groups` times as it does."""
    if not compat.has_flop_counter():
        compat.degrade("flops", "FLOPs counted from nn.Conv2d and nn.Linear layers (no torch.utils.flop_counter "
                                "before torch 2.1): matmuls outside such layers are left out")
        return layer_flops_per_step(model, batch_size, input_shape)
    return counted_step(model, input_shape).get_total_flops() * batch_size // COUNT_BATCH


def training_flops_or_why(model: nn.Module, batch_size: int,
                          input_shape: InputShape = DEFAULT_INPUT_SHAPE) -> Tuple[Optional[int], Optional[str]]:
    """(training_flops_per_step's count, None), or (None, why it could not be counted, in words):
    a model of the user's own (--model-factory) may do what the meta device cannot (make a
    tensor on the CPU in its forward, branch on a tensor's value)."""
    try:
        return training_flops_per_step(model, batch_size, input_shape), None
    except Exception as error:  # the user's forward, raising anything on the meta device
        reason = (str(error).strip().splitlines() or [type(error).__name__])[0][:160]
        return None, (f"torch's FLOP counter runs the model on the meta device, and it raised "
                      f"{type(error).__name__}: {reason}")


def counted_step(model: nn.Module, input_shape: InputShape,
                 watch: Optional[Callable[[nn.Module], None]] = None) -> FlopCounterMode:
    """A FlopCounterMode that has counted one forward and backward of COUNT_BATCH images of
    `input_shape` through a meta-device twin of `model` (torch 2.1); `watch(twin)` may hook the twin first."""
    from torch.utils.flop_counter import FlopCounterMode
    twin = copy.deepcopy(model).to("meta")
    if watch is not None:
        watch(twin)
    with FlopCounterMode(display=False, custom_mapping={torch.ops.aten.convolution_backward: conv_backward_flops}) \
            as counter:
        twin(torch.empty(COUNT_BATCH, *input_shape, device="meta")).float().sum().backward()
    return counter


class StepCount(NamedTuple):
    """One forward and backward of a step, counted on the meta device (torch 2.1)."""
    linears: Dict[str, Tuple[int, Tuple[int, int, int]]]  # {name: (FLOPs of one step, (M, K, N) of its forward)}
    total: int  # the step's FLOPs by the counter
    outputs: Dict[str, int]  # {name: elements its forward writes in a step} of every leaf module but nn.Identity


def count_step(model: nn.Module, batch_size: int, input_shape: InputShape = DEFAULT_INPUT_SHAPE) -> StepCount:
    """The StepCount of a step of `model` on batches of `batch_size`, in one pass. A Linear is
    among `linears` when its own forward runs; its step is its forward, 2 x M x K x N, and as
    much again for its input's gradient (when the input needs one) and its weight's; a layer
    whose weight another module uses directly (swin's attention passes its qkv and proj weights
    to F.linear) is not among them. `outputs` are the activations whose memory traffic a
    step's elementwise and normalisation work moves."""
    linears: Dict[str, Tuple[int, Tuple[int, int, int]]] = {}
    outputs: Dict[str, int] = {}

    def record(module, inputs, output, name):
        if isinstance(module, nn.Linear):
            rows = output.numel() // module.out_features * batch_size // COUNT_BATCH
            passes = 1 + inputs[0].requires_grad + module.weight.requires_grad
            linears[name] = (2 * rows * module.in_features * module.out_features * passes,
                             (rows, module.in_features, module.out_features))
        if not isinstance(module, nn.Identity):
            written = output.numel() if isinstance(output, torch.Tensor) else 0
            outputs[name] = outputs.get(name, 0) + written * batch_size // COUNT_BATCH

    def watch(twin):
        for name, module in twin.named_modules():
            if not list(module.children()):  # a leaf: a Linear is one
                module.register_forward_hook(lambda module, inputs, output, name=name: record(module, inputs, output,
                                                                                              name))

    total = counted_step(model, input_shape, watch).get_total_flops() * batch_size // COUNT_BATCH
    return StepCount(linears, total, outputs)


def conv_backward_flops(grad_out_shape: Sequence[int], x_shape: Sequence[int], w_shape: Sequence[int],
                        bias: Optional[Sequence[int]], stride: Sequence[int], padding: Sequence[int],
                        dilation: Sequence[int], transposed: bool, output_padding: Sequence[int], groups: int,
                        output_mask: Sequence[bool], **shapes: object) -> int:
    """A convolution's backward: its input gradient and its weight gradient each cost as much
    as its forward, 2 x output elements x (input channels / groups) x kernel size."""
    forward = 2 * math.prod(x_shape if transposed else grad_out_shape) * math.prod(w_shape[1:])
    return forward * (bool(output_mask[0]) + bool(output_mask[1]))


def layer_flops_per_step(model: nn.Module, batch_size: int, input_shape: InputShape = DEFAULT_INPUT_SHAPE) -> int:
    """The same count without FlopCounterMode: each Conv2d and Linear does 2 x (multiply-adds)
    forward, as much again for the gradient of its input (unless that input needs none, as the
    images don't) and for the gradient of its weight; read from one forward pass of two images
    on the CPU (torch 1.x cannot run convolutions on the meta device)."""
    twin = copy.deepcopy(model).to("cpu", torch.float32).eval()  # eval: the same shapes, no state changes
    total = []

    def count(module, inputs, output):
        if isinstance(module, nn.Conv2d):
            kernel = module.in_channels // module.groups * module.kernel_size[0] * module.kernel_size[1]
            forward = 2 * output.numel() * kernel
        else:
            forward = 2 * output.numel() * module.in_features
        total.append(forward * (1 + inputs[0].requires_grad + module.weight.requires_grad))

    layers = [module for module in twin.modules() if isinstance(module, (nn.Conv2d, nn.Linear))]
    hooks = [layer.register_forward_hook(count) for layer in layers]
    try:
        twin(torch.zeros(COUNT_BATCH, *input_shape))
    finally:
        for hook in hooks:
            hook.remove()
    return sum(total) * batch_size // COUNT_BATCH


def arithmetic(mode: Mode) -> str:
    return ARITHMETIC[mode.compute_dtype]


def peak_tflops(device_name: str, mode: Mode,
                fp8_share: Optional[float] = None) -> Tuple[Optional[float], Optional[str]]:
    """(peak TFLOP/s or None, why none). An fp8 mode runs `fp8_share` of its FLOPs at the FP8
    peak and the rest at its autocast dtype's, so its peak is the rate of that mix at both peaks."""
    peaks = gpus.peaks_of(device_name)
    if peaks is None:
        return None, f"dense peak of '{device_name}' unknown"
    kind = arithmetic(mode)
    if kind not in peaks:
        return None, f"{device_name} has no {kind} tensor cores"
    if kind == "fp8":
        # an fp8 mode autocasts the rest of its step, and a run's fp8 accounting gives the share
        assert mode.low_precision_dtype is not None and fp8_share is not None
        rest = peaks[ARITHMETIC[mode.low_precision_dtype]]
        return 1.0 / (fp8_share / peaks[kind] + (1.0 - fp8_share) / rest), None
    return peaks[kind], None


def utilisation(flops_per_step: int, median_step_ms: float, device_name: str, mode: Mode, on_gpu: bool,
                devices: int = 1, fp8_share: Optional[float] = None) -> Dict[str, Any]:
    """Achieved TFLOP/s at the median step time, and MFU % against the dense peak of all
    `devices` (flops_per_step is the whole job's); `fp8_share` is an fp8 mode's."""
    achieved = flops_per_step / (median_step_ms / 1000.0) / 1e12
    peak, why = peak_tflops(device_name, mode, fp8_share) if on_gpu else (None, "no peak figures for CPUs")
    peak = peak * devices if peak is not None else None
    return {"train_flops_per_step": flops_per_step, "tflops": achieved, "peak_tflops": peak,
            "mfu_pct": None if peak is None else 100.0 * achieved / peak, "mfu_note": why}
