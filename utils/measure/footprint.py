"""Where a training step's memory goes: parameters, gradients, optimizer state, and the
activations autograd saves for backward, counted exactly as it saves them
(torch.autograd.graph.saved_tensors_hooks), by dtype, apart from the low-precision copies of
the weights that autocast makes and saves too; on CUDA also the allocator's peaks,
allocated and reserved (what nvidia-smi shows). Measured on one census step (--numerics)."""
from __future__ import annotations

import collections
import contextlib
from typing import Any, Counter, Dict, Iterator, Set, Tuple

import torch
from torch import nn


def is_parameter_copy(tensor: torch.Tensor) -> bool:
    """Whether autograd made `tensor` by casting a parameter: autocast's low-precision weight."""
    function = tensor.grad_fn
    return function is not None and function.name().startswith("ToCopyBackward") and any(
        following is not None and following.name().endswith("AccumulateGrad")
        for following, _ in function.next_functions)


def tensor_bytes(tensor: torch.Tensor) -> int:
    return tensor.numel() * tensor.element_size()


class Footprint:
    def __init__(self, model: nn.Module, optimizer: torch.optim.Optimizer, device: torch.device):
        self.model, self.optimizer, self.device = model, optimizer, device
        self.parameter_ids = {param.data_ptr() for param in model.parameters()}
        self.saved: Counter[str] = collections.Counter()  # dtype name -> bytes of activations
        self.weight_copies: Counter[str] = collections.Counter()  # dtype name -> bytes of autocast's casts of weights
        self.seen: Set[Tuple[int, int, torch.dtype]] = set()
        self.gradient_bytes = 0

    @contextlib.contextmanager
    def saving(self) -> Iterator[None]:
        """Count each tensor autograd saves for backward once (a view or a weight saved by
        several ops is one allocation); the parameters themselves are counted as parameters."""
        def pack(tensor):
            key = (tensor.data_ptr(), tensor.numel(), tensor.dtype)
            if tensor.data_ptr() not in self.parameter_ids and key not in self.seen:
                self.seen.add(key)
                counter = self.weight_copies if is_parameter_copy(tensor) else self.saved
                counter[str(tensor.dtype).replace("torch.", "")] += tensor_bytes(tensor)
            return tensor

        with torch.autograd.graph.saved_tensors_hooks(pack, lambda tensor: tensor):
            yield

    def note_gradients(self) -> None:
        self.gradient_bytes = sum(tensor_bytes(param.grad) for param in self.model.parameters()
                                  if param.grad is not None)

    def result(self) -> Dict[str, Any]:
        optimizer_bytes = sum(tensor_bytes(value) for state in self.optimizer.state.values()
                              for value in state.values() if isinstance(value, torch.Tensor))
        cuda = self.device.type == "cuda"
        return {
            "parameters_bytes": sum(tensor_bytes(param) for param in self.model.parameters()),
            "gradients_bytes": self.gradient_bytes,
            "optimizer_bytes": optimizer_bytes,
            "activations_bytes": sum(self.saved.values()),
            "activations_by_dtype": dict(self.saved),
            "weight_copies_bytes": sum(self.weight_copies.values()),
            "cuda_peak_allocated_bytes": torch.cuda.max_memory_allocated(self.device) if cuda else None,
            "cuda_peak_reserved_bytes": torch.cuda.max_memory_reserved(self.device) if cuda else None,
        }
