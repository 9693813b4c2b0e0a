"""--numerics: why FP16 needs loss scaling, measured on this model (Micikevicius et al., "Mixed
Precision Training", ICLR 2018, Figure 3), and where the memory of a step goes.

On sampled steps (every --numerics-every steps and the last; paused out of the step timing),
on that step's batch and weights, the census runs backward passes without updating anything:
an FP32 reference (autocast off), the mode's own low-precision one without a loss scale, and
for float16 one with the scale (the scaler's, or GradScaler's initial 65536 for the mode
without a scaler). A hook on every leaf layer's output compares its gradient with the
reference: the share of elements that are zero in low precision but not in FP32 and small enough
to underflow (flushed to zero: below the dtype's smallest normal number once scaled; a ReLU that
cuts differently in low precision is not underflow), in FP16's subnormal range, or not finite
(overflowed), and the relative error. The
reference gradients' log2 histogram is the figure's, with FP16's limits drawn. Batch-norm
statistics and the random state are restored after each pass, so training continues as if the
census had not run. The first sample also measures the step's memory (`footprint`, which the
result record keeps as runs[].memory).
"""
from __future__ import annotations

import collections
import contextlib
import math
from typing import TYPE_CHECKING, Any, Callable, Counter, Dict, List, Optional, Tuple

import torch
from torch import nn

from utils.measure.footprint import Footprint
from utils.modes import INITIAL_LOSS_SCALE, Mode
from utils.numerics.fp16 import FP16_MAX, FP16_MIN_NORMAL

if TYPE_CHECKING:
    from utils.training.trainer import Trainer

    # snapshot(): the buffers by name, the CPU random state, the CUDA one (None on the CPU)
    Saved = Tuple[Dict[str, torch.Tensor], torch.Tensor, Optional[torch.Tensor]]

LOG2_LOW, LOG2_HIGH = -80, 24  # the histogram's bins: [e, e+1) for e in this range, the ends open
ELEMENTS, FLUSHED, SUBNORMAL, OVERFLOW = range(4)  # a layer's counts, in this order


def census_dtype(mode: Mode) -> Optional[str]:
    """The dtype a mode's census examines, or None for a mode it cannot examine (fp16-master
    holds FP16 weights, so it has no FP32 reference to compare with)."""
    if mode.master_weights:
        return None
    return mode.low_precision_dtype or "float32"


class Census:
    """The gradient census of one run: `wants(step)` says which steps it samples; `take`
    examines one; `result()` is runs[].numerics and `footprint` (after a sample) runs[].memory."""

    def __init__(self, mode: Mode, device: torch.device, steps: int, every: int):
        self.mode, self.device, self.steps, self.every = mode, device, steps, every
        self.dtype = census_dtype(mode)
        self.samples: List[int] = []
        # name -> {"scale", "counts": {layer: [ELEMENTS, FLUSHED, SUBNORMAL, OVERFLOW]}, "error"}
        self.passes: Dict[str, Dict[str, Any]] = {}
        self.histogram = torch.zeros(LOG2_HIGH - LOG2_LOW, dtype=torch.long)
        self.zeros = 0
        self.activation_max: Tuple[float, Optional[str]] = (0.0, None)
        self.footprint: Optional[Dict[str, Any]] = None

    def wants(self, step: int) -> bool:
        return self.dtype is not None and (step % self.every == 0 or step == self.steps)

    def take(self, trainer: Trainer, images: torch.Tensor, labels: torch.Tensor, step: int) -> None:
        model, criterion = trainer.model, trainer.criterion
        saved = snapshot(model, self.device)
        reference: Dict[str, torch.Tensor] = {}
        backward(model, criterion, images, labels, None, 1.0, saved, self.device,
                 on_gradient=lambda name, grad: reference.__setitem__(name, grad.float().clone()))  # autograd reuses it
        for grad in reference.values():
            self.count_exponents(grad)
        scaled = None
        if self.dtype == "float16":
            scaled = trainer.scaler.get_scale() if self.mode.loss_scaling else INITIAL_LOSS_SCALE
        passes = [("unscaled", 1.0)] + ([("scaled", scaled)] if scaled else [])
        for index, (name, scale) in enumerate(passes):
            entry = self.passes.setdefault(name, {"scale": scale, "counts": {}, "error": [0.0, 0.0]})
            entry["scale"] = scale
            footprint = Footprint(model, trainer.optimizer, self.device) if self.footprint is None and index == 0 \
                else None

            def compare(layer, grad, entry=entry, scale=scale):
                self.compare(entry, layer, grad, reference.get(layer), scale)

            backward(model, criterion, images, labels, self.mode.autocast_dtype, scale, saved, self.device,
                     on_gradient=compare, on_activation=self.note_activation, footprint=footprint)
            if footprint is not None:
                self.footprint = footprint.result()
        self.samples.append(step)

    def count_exponents(self, grad: torch.Tensor) -> None:
        values = grad.abs().flatten()
        nonzero = values[values > 0]
        self.zeros += int(values.numel() - nonzero.numel())
        exponents = torch.floor(torch.log2(nonzero)).clamp(LOG2_LOW, LOG2_HIGH - 1).long() - LOG2_LOW
        self.histogram += torch.bincount(exponents, minlength=LOG2_HIGH - LOG2_LOW).cpu()

    def compare(self, entry: Dict[str, Any], layer: str, grad: torch.Tensor, reference: Optional[torch.Tensor],
                scale: float) -> None:
        if reference is None or reference.shape != grad.shape:
            return
        counts = entry["counts"].setdefault(layer, [0, 0, 0, 0])
        magnitude = grad.abs()
        underflows = (reference * scale).abs() < torch.finfo(grad.dtype).tiny  # below the dtype's normal range
        counts[ELEMENTS] += grad.numel()
        counts[FLUSHED] += int(((grad == 0) & (reference != 0) & underflows).sum())
        if grad.dtype == torch.float16:
            counts[SUBNORMAL] += int(((magnitude > 0) & (magnitude < FP16_MIN_NORMAL)).sum())
        counts[OVERFLOW] += int((~torch.isfinite(grad)).sum())
        finite = torch.isfinite(grad)
        difference = torch.where(finite, grad.float() / scale - reference, torch.zeros_like(reference))
        entry["error"][0] += float(difference.pow(2).sum())
        entry["error"][1] += float(reference.pow(2).sum())

    def note_activation(self, layer: str, value: float) -> None:
        if value > self.activation_max[0]:
            self.activation_max = (value, layer)

    def result(self) -> Optional[Dict[str, Any]]:
        """runs[].numerics: what the samples found, per pass and per layer, and the histogram."""
        if not self.samples:
            return None
        passes = {}
        for name, entry in self.passes.items():
            totals = [sum(counts[index] for counts in entry["counts"].values()) for index in range(OVERFLOW + 1)]
            layers = {layer: {"elements": counts[ELEMENTS], "flushed_share": counts[FLUSHED] / counts[ELEMENTS],
                              "subnormal_share": counts[SUBNORMAL] / counts[ELEMENTS],
                              "overflow_share": counts[OVERFLOW] / counts[ELEMENTS]}
                      for layer, counts in entry["counts"].items() if counts[ELEMENTS]}
            worst = max(layers, key=lambda layer: layers[layer]["flushed_share"]) if layers else None
            elements = totals[ELEMENTS]
            passes[name] = {
                "scale": entry["scale"], "elements": elements,
                "flushed_share": totals[FLUSHED] / elements if elements else 0.0,
                "subnormal_share": totals[SUBNORMAL] / elements if elements else 0.0,
                "overflow_share": totals[OVERFLOW] / elements if elements else 0.0,
                "relative_error": math.sqrt(entry["error"][0] / entry["error"][1]) if entry["error"][1] else None,
                "worst_layer": worst, "worst_flushed_share": layers[worst]["flushed_share"] if worst else None,
                "layers": layers}
        value, layer = self.activation_max
        return {"dtype": self.dtype, "sampled_steps": self.samples, "passes": passes,
                "activation_max": {"value": value, "layer": layer, "share_of_fp16_max": value / FP16_MAX},
                "histogram": {"log2_low": LOG2_LOW, "counts": self.histogram.tolist(), "zeros": self.zeros}}


def leaf_layers(model: nn.Module) -> List[Tuple[str, nn.Module]]:
    return [(name, module) for name, module in model.named_modules() if name and not list(module.children())]


def snapshot(model: nn.Module, device: torch.device) -> Saved:
    """The buffers (batch-norm statistics) and random state that a forward pass changes."""
    cuda = device.type == "cuda"
    return ({name: buffer.detach().clone() for name, buffer in model.named_buffers()}, torch.get_rng_state(),
            torch.cuda.get_rng_state(device) if cuda else None)


def restore(model: nn.Module, saved: Saved, device: torch.device) -> None:
    buffers, cpu_state, cuda_state = saved
    with torch.no_grad():
        for name, buffer in model.named_buffers():
            buffer.copy_(buffers[name])
    torch.set_rng_state(cpu_state)
    if cuda_state is not None:
        torch.cuda.set_rng_state(cuda_state, device)


def backward(model: nn.Module, criterion: nn.Module, images: torch.Tensor, labels: torch.Tensor,
             dtype: Optional[torch.dtype], scale: float, saved: Saved, device: torch.device,
             on_gradient: Callable[[str, torch.Tensor], None],
             on_activation: Optional[Callable[[str, float], None]] = None,
             footprint: Optional[Footprint] = None) -> None:
    """One forward and backward of `images` under autocast to `dtype` (None: off), of the loss
    times `scale`, with `on_gradient(layer, gradient)` called for each leaf layer's output
    gradient; the weights' gradients are dropped and the buffers and random state restored."""
    restore(model, saved, device)
    handles = []
    calls: Counter[str] = collections.Counter()

    def watch(name):
        def hook(module, inputs, output):
            if isinstance(output, torch.Tensor) and output.requires_grad:
                calls[name] += 1  # a module used twice (ResNet's ReLU) has two outputs
                key = name if calls[name] == 1 else f"{name}#{calls[name]}"
                if on_activation is not None and output.is_floating_point():
                    on_activation(key, float(output.detach().abs().max()))
                output.register_hook(lambda grad: on_gradient(key, grad.detach()))
        return hook

    for name, module in leaf_layers(model):
        handles.append(module.register_forward_hook(watch(name)))
    try:
        with torch.autocast(device.type, dtype=dtype, enabled=dtype is not None), \
                footprint.saving() if footprint is not None else contextlib.nullcontext():
            loss = criterion(model(images).float(), labels)
        (loss * scale).backward()
        if footprint is not None:
            footprint.note_gradients()
    finally:
        for handle in handles:
            handle.remove()
        for param in model.parameters():
            param.grad = None
        restore(model, saved, device)
