"""Vision transformers for small images (CIFAR's 32x32 and up), built with torchvision's own VisionTransformer.

torchvision's vit_* builders fix the image size at 224x224 (patch 16 or 32); at 32x32 and patch 4
the same class gives an 8x8 grid of 64 tokens plus the class token, the layout of the CIFAR ViT
references (Tiny and Small widths from DeiT, Touvron et al., 2021; Base and Large from ViT). The
name says width and patch: vit_t4 is the Tiny width with 4x4 patches. models/factory.py swaps their
attention for models/attention.py's, as it does torchvision's own ViTs'.
"""
from __future__ import annotations

from typing import Optional

from torchvision.models.vision_transformer import VisionTransformer

from models.families import CIFAR_VIT_PATCH, CIFAR_VITS, DEFAULT_IMAGE_SIZE


def build_cifar_vit(name: str, num_classes: int, dropout: Optional[float] = None,
                    image_size: int = DEFAULT_IMAGE_SIZE) -> VisionTransformer:
    """A randomly initialised CIFAR ViT for images of `image_size` (4x4 patches); `dropout` (default 0,
    torchvision's) applies after the attention and in the MLP blocks."""
    hidden, layers, heads, mlp = CIFAR_VITS[name]
    return VisionTransformer(image_size=image_size, patch_size=CIFAR_VIT_PATCH, num_layers=layers, num_heads=heads,
                             hidden_dim=hidden, mlp_dim=mlp, num_classes=num_classes,
                             dropout=0.0 if dropout is None else dropout)
