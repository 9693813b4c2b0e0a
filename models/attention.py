"""Self-attention whose projections are nn.Linear layers, for torchvision's VisionTransformer.

torchvision's EncoderBlock attends with nn.MultiheadAttention, whose QKV projection is a weight
of its own (in_proj_weight) and whose out_proj it calls through F.linear: layer converters such
as torchao's float8 training, which swap nn.Linear modules, never reach either. SelfAttention
computes the same function with an nn.Linear QKV projection (width -> 3 x width), an nn.Linear
output projection and F.scaled_dot_product_attention, and loads torchvision's state dicts.
"""
from __future__ import annotations

import math
from typing import Any, Dict, Tuple

import torch
import torch.nn.functional as F
from torch import nn

from utils import compat

# nn.MultiheadAttention's parameter names -> SelfAttention's (out_proj.weight and .bias keep theirs)
TORCHVISION_KEYS = {"in_proj_weight": "qkv.weight", "in_proj_bias": "qkv.bias"}


class SelfAttention(nn.Module):
    """Multi-head self-attention as torchvision's EncoderBlock calls nn.MultiheadAttention:
    batch first, with biases, `output, _ = attention(x, x, x, need_weights=False)`."""

    def __init__(self, qkv: nn.Linear, out_proj: nn.Linear, num_heads: int, dropout: float = 0.0) -> None:
        super().__init__()
        self.qkv = qkv
        self.out_proj = out_proj
        self.num_heads = num_heads  # nn.MultiheadAttention's name for it
        self.dropout = dropout  # on the attention weights, in training only
        self.fused = compat.has_scaled_dot_product_attention()

    @classmethod
    def from_multihead(cls, attention: nn.MultiheadAttention) -> SelfAttention:
        """The SelfAttention that holds `attention`'s own parameters (the same tensors): the
        layers are made without initialising them, so no random numbers are drawn."""
        width, device = attention.embed_dim, attention.in_proj_weight.device
        qkv = nn.utils.skip_init(nn.Linear, width, 3 * width, device=device)
        out_proj = nn.utils.skip_init(nn.Linear, width, width, device=device)
        qkv.weight, qkv.bias = attention.in_proj_weight, attention.in_proj_bias
        out_proj.weight, out_proj.bias = attention.out_proj.weight, attention.out_proj.bias
        return cls(qkv, out_proj, attention.num_heads, attention.dropout).train(attention.training)

    def forward(self, query: torch.Tensor, key: torch.Tensor, value: torch.Tensor,
                need_weights: bool = False) -> Tuple[torch.Tensor, None]:
        """(attention output, None) for `query` (batch, tokens, width); `key` and `value` must be
        `query` itself, and no attention weights are returned, as in EncoderBlock's call."""
        if key is not query or value is not query or need_weights:
            raise ValueError("SelfAttention attends a sequence to itself and returns no weights: "
                             "call it as attention(x, x, x, need_weights=False)")
        batch, tokens, width = query.shape
        heads = self.qkv(query).reshape(batch, tokens, 3, self.num_heads, width // self.num_heads)
        q, k, v = heads.permute(2, 0, 3, 1, 4).unbind(0)  # each (batch, heads, tokens, head width)
        dropout = self.dropout if self.training else 0.0
        if self.fused:
            mixed = F.scaled_dot_product_attention(q, k, v, dropout_p=dropout)
        else:
            mixed = attention_by_matmuls(q, k, v, dropout)
        return self.out_proj(mixed.transpose(1, 2).reshape(batch, tokens, width)), None

    def _load_from_state_dict(self, state_dict: Dict[str, Any], prefix: str, *args: Any, **kwargs: Any) -> None:
        """Read torchvision's layout (in_proj_weight, in_proj_bias) too: its checkpoints and weights load."""
        for old, new in TORCHVISION_KEYS.items():
            if prefix + old in state_dict:
                state_dict[prefix + new] = state_dict.pop(prefix + old)
        super()._load_from_state_dict(state_dict, prefix, *args, **kwargs)


def attention_by_matmuls(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, dropout: float) -> torch.Tensor:
    """softmax(q k^T / sqrt(head width)) v, dropout on the weights: F.scaled_dot_product_attention's
    math where this torch lacks it (torch 2.0)."""
    weights = torch.softmax(q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1]), dim=-1)
    return F.dropout(weights, dropout) @ v


def swap_attention(model: nn.Module) -> nn.Module:
    """Replace, in place, the nn.MultiheadAttention of every torchvision EncoderBlock in `model`
    with a SelfAttention holding its weights; returns `model`. Other models are left as they are."""
    from torchvision.models.vision_transformer import EncoderBlock

    blocks = [block for block in model.modules()
              if isinstance(block, EncoderBlock) and isinstance(block.self_attention, nn.MultiheadAttention)]
    for block in blocks:
        block.self_attention = SelfAttention.from_multihead(block.self_attention)
    if blocks and not compat.has_scaled_dot_product_attention():
        compat.degrade("attention", "attention computed by two matmuls and a softmax (no "
                                    "F.scaled_dot_product_attention before torch 2.0): the same math, unfused, "
                                    "with the attention weights in memory")
    return model
