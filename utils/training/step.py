"""The training step, its optimizer and its learning-rate schedule.

The step is PyTorch's AMP recipe: autocast around forward and loss, then GradScaler's
scale(loss).backward(), step(optimizer), update(), with gradient accumulation and clipping
as in PyTorch's AMP examples. Every mode runs this same code; the mode only switches autocast
and the scaler on or off and picks the dtype.
"""
from __future__ import annotations

import contextlib
import functools
import inspect
import math
import warnings
from typing import TYPE_CHECKING, ContextManager, Iterable, Iterator, List, Optional, Sequence, Tuple, Union, cast

import torch
from torch import nn

from models import families
from utils import compat
from utils.training import precision

if TYPE_CHECKING:
    from typing import Protocol

    from utils.modes import Mode

    class SyncingModel(Protocol):
        """A model that syncs gradients in backward, as DDP does, and can hold the sync off."""

        def no_sync(self) -> ContextManager[None]: ...


class MicroBatches:
    """The micro-batches of one optimizer step (--accum-steps K): the first, already fetched
    (the data time is the wait for it), then the others drawn from the loader only as the step
    reaches each, so memory holds one micro-batch at a time however large K is."""

    def __init__(self, first: Tuple[torch.Tensor, torch.Tensor], loader: Iterator[Tuple[torch.Tensor, torch.Tensor]],
                 count: int):
        self.first: Optional[Tuple[torch.Tensor, torch.Tensor]] = first  # None once the step has taken it
        self.loader, self.count = loader, count

    def __len__(self) -> int:
        return self.count

    def __iter__(self) -> Iterator[Tuple[torch.Tensor, torch.Tensor]]:
        yield self.take_first()
        for _ in range(self.count - 1):
            yield next(self.loader)

    def take_first(self) -> Tuple[torch.Tensor, torch.Tensor]:
        first, self.first = self.first, None  # from here the step alone holds it
        assert first is not None  # the first micro-batch is taken once
        return first


def train_step(model: nn.Module, batches: Union[MicroBatches, Sequence[Tuple[torch.Tensor, torch.Tensor]]],
               criterion: nn.Module, optimizer: torch.optim.Optimizer, scaler: precision.LossScaler, mode: Mode,
               device: torch.device, clip_grad: Optional[float] = None, skip_nonfinite: bool = False) -> torch.Tensor:
    """One optimizer step over the micro-batches `batches` (a sized iterable, which may draw
    each one lazily: one is held at a time); returns the loss of the whole effective batch as a
    device tensor (no host sync, unless `skip_nonfinite`)."""
    total, seen = None, 0
    for images, labels in batches:  # not enumerate(), whose cached result tuple keeps the last batch alive
        seen += 1
        with gradient_sync(model, seen == len(batches)):
            with precision.autocast(mode, device):
                loss = criterion(model(images).float(), labels)  # the loss is always FP32
            if len(batches) > 1:  # the mean over the effective batch (no kernel spent dividing by 1)
                loss = loss / len(batches)
            scaler.scale(loss).backward()
        total = loss.detach() if total is None else total + loss.detach()
        del images, labels, loss  # freed before the next micro-batch is drawn
    assert total is not None  # a step has at least one micro-batch
    if skip_nonfinite and not torch.isfinite(total).item():  # --on-nan skip, without a scaler
        model.zero_grad(set_to_none=True)
        optimizer.zero_grad(set_to_none=True)
        return total
    if clip_grad is not None:
        scaler.unscale_(optimizer)  # clip the true gradients, not the scaled ones
        nn.utils.clip_grad_norm_([p for group in optimizer.param_groups for p in group["params"]], clip_grad)
    scaler.step(optimizer)  # skipped by the scaler when a gradient is inf/NaN
    scaler.update()
    optimizer.zero_grad(set_to_none=True)
    return total


def gradient_sync(model: nn.Module, enabled: bool) -> ContextManager[None]:
    """DDP all-reduces gradients in backward; while accumulating, only the last micro-batch
    needs to (the others run under no_sync)."""
    if enabled or not hasattr(model, "no_sync"):
        return contextlib.nullcontext()
    return cast("SyncingModel", model).no_sync()




OPTIMIZERS = {"sgd": torch.optim.SGD, "adamw": torch.optim.AdamW}
FUSED_RELEASES = {"sgd": "has_fused_sgd", "adamw": "has_fused_adamw"}  # compat's checks, looked up when used


def make_optimizer(params: Iterable[torch.Tensor], *, lr: float, momentum: Optional[float] = 0.9,
                   weight_decay: float = 5e-4, nesterov: bool = False, impl: str = "fused", kind: str = "sgd",
                   no_decay: Optional[Sequence[bool]] = None) -> Tuple[torch.optim.Optimizer, str]:
    """SGD or AdamW (`kind`) and the implementation that really runs: "fused" (one kernel for
    the whole update, which takes GradScaler's inf check on the device, so no step waits for
    the host) where this torch and device have it, else "foreach" (torch's multi-tensor
    optimizer, the classic recipe: GradScaler reads its inf check on the host, one sync per
    scaled step). `no_decay` flags the parameters AdamW's weight decay spares."""
    params = list(params)
    device = params[0].device
    if impl == "fused" and not (getattr(compat, FUSED_RELEASES[kind])() and fused_optimizer_works(device.type, kind)):
        name = OPTIMIZERS[kind].__name__
        compat.degrade("optimizer", f"fused {name} is not available with torch {torch.__version__} on "
                                    f"{device.type}: the foreach {name} ran, and GradScaler waits for the host once "
                                    "per step")
        impl = "foreach"
    cls = OPTIMIZERS[kind]
    if impl == "fused":
        options = {"fused": True}
    else:  # before torch 1.12 the optimizers have no foreach switch: their for-loop is the classic recipe there
        options = {"foreach": True} if "foreach" in inspect.signature(cls).parameters else {}
    if kind == "sgd":
        optimizer = cls(params, lr=lr, momentum=momentum, weight_decay=weight_decay, nesterov=nesterov, **options)
    else:
        spared = no_decay or [False] * len(params)
        groups = [{"params": [p for p, skip in zip(params, spared) if skip is flag],
                   "weight_decay": 0.0 if flag else weight_decay} for flag in (False, True)]
        optimizer = cls([group for group in groups if group["params"]], lr=lr, **options)
    start_momentum(optimizer)
    return optimizer, impl


def no_decay_flags(model: nn.Module, model_name: str) -> List[bool]:
    """For each trainable parameter of `model` (the model named `model_name`), in order, whether
    AdamW's weight decay spares it, as DeiT (timm) and the CIFAR ViT references do: biases and
    norms (parameters of one dimension), and the parameters its family names (a ViT's class
    token and position embedding)."""
    spared = families.family_of(model_name).no_decay
    return [param.ndim <= 1 or name.rsplit(".", 1)[-1] in spared
            for name, param in model.named_parameters() if param.requires_grad]


def start_momentum(optimizer: torch.optim.Optimizer) -> None:
    """Fused SGD makes its momentum buffers with empty_like at its first step and fills them in
    the kernel, which a skipped (overflowing) first step never runs: the next step then reads
    uninitialised memory; and it refuses a mix of buffers and none (a restored state may hold
    None). Zeros give the same first update (buffer = momentum x 0 + gradient) and survive a
    skip. Call after building a fused SGD and after loading its state."""
    if not optimizer.defaults.get("fused") or not optimizer.defaults.get("momentum"):
        return
    for group in optimizer.param_groups:
        for param in group["params"]:
            if optimizer.state[param].get("momentum_buffer") is None:
                optimizer.state[param]["momentum_buffer"] = torch.zeros_like(param)


@functools.lru_cache(maxsize=None)
def fused_optimizer_works(device_type: str, kind: str = "sgd") -> bool:
    """Whether SGD or AdamW (`kind`) with fused=True steps on this kind of device with
    GradScaler's on-device skip (SGD: torch 2.3 on CUDA; AdamW: 2.0 on CUDA; the CPU later)."""
    param = torch.zeros(2, device=device_type, requires_grad=True)
    param.grad = torch.ones_like(param)
    try:
        optimizer = OPTIMIZERS[kind]([param], lr=0.1, fused=True, **({"momentum": 0.9} if kind == "sgd" else {}))
        optimizer.step()
    except (RuntimeError, TypeError, ValueError):
        return False
    return getattr(optimizer, "_step_supports_amp_scaling", False)


def make_scheduler(optimizer: torch.optim.Optimizer, schedule: str, steps: int,
                   warmup_steps: int) -> torch.optim.lr_scheduler.LRScheduler:
    """LR per step: a linear warm-up over `warmup_steps`, then constant or cosine to zero; or
    torch's OneCycleLR (its ramp-up takes the warm-up steps, else 30%). The schedule counts
    every step, including those a loss scaler skipped (as timm and NVIDIA's examples do): the
    fused optimizer skips on the device, where the host cannot see it without waiting."""
    if schedule == "onecycle":
        return torch.optim.lr_scheduler.OneCycleLR(
            optimizer, max_lr=[group["lr"] for group in optimizer.param_groups], total_steps=steps,
            pct_start=warmup_steps / steps if warmup_steps else 0.3)

    def factor(step):
        if step < warmup_steps:
            return (step + 1) / warmup_steps
        if schedule == "cosine":
            return 0.5 * (1 + math.cos(math.pi * (step - warmup_steps) / max(1, steps - warmup_steps)))
        return 1.0

    return torch.optim.lr_scheduler.LambdaLR(optimizer, factor)


# torch warns when a schedule's first step comes before any optimizer step, as it does where a
# loss scaler skipped the first update; advance() steps the schedule at every step, skipped or not.
SKIPPED_FIRST_UPDATE = r"Detected call of `lr_scheduler\.step\(\)` before `optimizer\.step\(\)`"


def advance(scheduler: torch.optim.lr_scheduler.LRScheduler) -> None:
    """One step of the schedule, without torch's warning for a first update the scaler skipped
    (filtered here only: a filter set at import would hide the warning everywhere)."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=SKIPPED_FIRST_UPDATE)
        scheduler.step()
