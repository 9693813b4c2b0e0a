"""Model families, one table: the models each covers, how it trains unless flags say otherwise,
which of its parameters AdamW's weight decay spares, whether --stem applies, what it needs of
the builder, and the image sizes it takes (--image-size).

Adding a family is adding a row to FAMILIES: RunConfig's recipe and lr, the optimizer's
parameter groups, the --stem rule, the builder and --list-models all read it. Nothing here
imports torch (nor anything of the project): utils/config.py reads it, and `main.py -h` stays
instant.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Mapping, Optional, Tuple

BASE_BATCH = 128  # the global batch (images per optimizer step across all processes) each base lr is for


@dataclass(frozen=True)
class Recipe:
    """A family's optimizer and label smoothing, where the flags leave them unset."""
    optimizer: str  # a key of OPTIMIZER_DEFAULTS
    label_smoothing: float


# The default recipes, tuned so that every model learns within a default-length run; flags
# override each setting. Transformers train as DeiT (timm) and the CIFAR ViT references train
# them: AdamW and label smoothing 0.1. A model of the user's own (--model-factory) may be of any
# kind, with or without batch norms: AdamW, whose lr needs no batch norm to hold, and plain
# cross-entropy, as the user's own training most likely computes it.
USER_RECIPE = "user"
RECIPES = {
    "convnet": Recipe("sgd", 0.0),
    "transformer": Recipe("adamw", 0.1),
    USER_RECIPE: Recipe("adamw", 0.0),
}


@dataclass(frozen=True)
class OptimizerDefaults:
    """An optimizer's settings where the flags leave them unset, and its lr rule: the base lr
    at BASE_BATCH, scaled with the global batch."""
    momentum: Optional[float]
    weight_decay: float
    base_lr: float
    sqrt_scaling: bool  # the lr grows with sqrt(global batch / BASE_BATCH), else linearly
    base_lr_without_batch_norm: Optional[float] = None  # for models without batch norm, where base_lr stalls

    def lr(self, global_batch: int, batch_norm: bool) -> float:
        """The lr for `global_batch` images a step; `batch_norm`: whether the model has batch norms."""
        scale = global_batch / BASE_BATCH
        base = self.base_lr
        if not batch_norm and self.base_lr_without_batch_norm is not None:
            base = self.base_lr_without_batch_norm
        return base * (math.sqrt(scale) if self.sqrt_scaling else scale)


OPTIMIZER_DEFAULTS = {
    # SGD with momentum, linear scaling; models without batch norm, e.g. squeezenet, stall at 0.1
    # and learn at 0.03 to 0.04 on the subset.
    "sgd": OptimizerDefaults(momentum=0.9, weight_decay=5e-4, base_lr=0.1, sqrt_scaling=False,
                             base_lr_without_batch_norm=0.04),
    # AdamW's betas stay torch's (0.9, 0.999). 1e-3 at batch 128, as the CIFAR references use;
    # Adam's square-root scaling keeps 512 at 2e-3 where linear scaling would reach 4e-3.
    "adamw": OptimizerDefaults(momentum=None, weight_decay=0.05, base_lr=1e-3, sqrt_scaling=True),
}

DEFAULT_IMAGE_SIZE = 32  # CIFAR-10's own: --image-size upsamples it on the device
DEFAULT_NUM_CLASSES = 10  # CIFAR-10's, which synthetic labels take too unless --num-classes says otherwise
# --image-size's range: 16 leaves a convnet's last feature maps a pixel or two; at 1024 a batch of
# 128 float32 images is 1.6 GB before the model's first activation.
IMAGE_SIZES = (16, 1024)
# ResNet-family models take the CIFAR stem (3x3 stride 1, no max-pool) up to this size and
# torchvision's ImageNet stem (7x7 stride 2 and a max-pool: a quarter of the resolution) above:
# at 64 the ImageNet stem leaves layer4 2x2 feature maps, at 224 the 7x7 it was designed for,
# where the CIFAR stem would cost 16 times the FLOPs of ImageNet training.
CIFAR_STEM_UP_TO = 64
STEMS = ("cifar", "imagenet")  # --stem's choices
CIFAR_VIT_PATCH = 4
# The most patches a side a ViT takes. Self-attention's work grows with the square of the tokens:
# at 64x64 patches (4,096 tokens) vit_t4's attention already does 3.6 times the work of its
# Linear layers; at 256x256 (vit_t4 at 1024x1024, 65,536 tokens) 57 times, 1.5e16 FLOPs a step
# of 128 images: tens of seconds a step on an H100, days on a CPU.
VIT_PATCHES_A_SIDE = 64
VIT_ATTENTION = (f"{VIT_PATCHES_A_SIDE} patches a side at most: self-attention's work grows with the square of "
                 "the patches")
# The vision transformers built here for small images (models/vit.py): torchvision's own class
# with the Tiny and Small widths of DeiT, the Base and Large of ViT (Dosovitskiy et al., 2021),
# and 4x4 patches; name -> (hidden width, layers, heads, MLP width).
CIFAR_VITS = {
    "vit_t4": (192, 12, 3, 768),
    "vit_s4": (384, 12, 6, 1536),
    "vit_b4": (768, 12, 12, 3072),
    "vit_l4": (1024, 24, 16, 4096),
}


@dataclass(frozen=True)
class Family:
    """Models that train, build and refuse alike."""
    recipe: str  # a key of RECIPES
    names: Tuple[str, ...] = ()  # the model names it covers ...
    prefixes: Tuple[str, ...] = ()  # ... and every name that starts with one of these
    no_decay: Tuple[str, ...] = ()  # parameters AdamW's weight decay spares, besides biases and norms
    resnet_stem: bool = False  # a 7x7 stride-2 conv1 and a max-pool, which --stem cifar replaces
    options: Mapping[str, object] = field(default_factory=dict)  # the torchvision builder's keyword arguments
    # the images it takes: from min_image_size to max_image_size pixels a side, a multiple of
    # image_multiple (why, where said); --list-models leaves out those that refuse the run's size
    min_image_size: int = 1
    max_image_size: int = IMAGE_SIZES[1]
    image_multiple: int = 1
    size_reason: Optional[str] = None  # why the least size or the multiple
    max_size_reason: Optional[str] = None
    size_option: Optional[str] = None  # the builder's keyword for the image size: image_size=N, or input_size=(N, N)

    def covers(self, model: str) -> bool:
        return model in self.names or model.startswith(self.prefixes)

    def takes(self, image_size: int) -> bool:
        return self.min_image_size <= image_size <= self.max_image_size and image_size % self.image_multiple == 0


VIT_NO_DECAY = ("class_token", "pos_embedding")  # as DeiT (timm) and the CIFAR ViT references
AUX_LOGITS_OFF = {"aux_logits": False, "init_weights": True}  # no auxiliary heads in training mode
SHRINKS = "below it its feature maps shrink to nothing"
# The first family that covers a model name is its family; a model no family covers is one of
# OTHER_CONVNETS (tests/unit/models/test_models.py builds every model to keep the image sizes true).
TORCHVISION_VIT = ("torchvision's vision transformers are built for 224x224 images and up, in whole patches; "
                   f"{', '.join(CIFAR_VITS)} are the same class with 4x4 patches for smaller images")
FAMILIES = {
    "cifar_vit": Family("transformer", names=tuple(CIFAR_VITS), no_decay=VIT_NO_DECAY,
                        max_image_size=CIFAR_VIT_PATCH * VIT_PATCHES_A_SIDE, image_multiple=CIFAR_VIT_PATCH,
                        size_reason="whole 4x4 patches", max_size_reason=VIT_ATTENTION),
    **{f"vit_patch{patch}": Family("transformer", names=names, no_decay=VIT_NO_DECAY, min_image_size=224,
                                   max_image_size=min(patch * VIT_PATCHES_A_SIDE, IMAGE_SIZES[1]), image_multiple=patch,
                                   size_reason=TORCHVISION_VIT, max_size_reason=VIT_ATTENTION, size_option="image_size")
       for patch, names in ((16, ("vit_b_16", "vit_l_16")), (32, ("vit_b_32", "vit_l_32")), (14, ("vit_h_14",)))},
    "swin": Family("transformer", prefixes=("swin_",), no_decay=("relative_position_bias_table",)),
    # The last batch norm of each residual block starts at zero, so each block starts as the
    # identity (Goyal et al., 2017): at the default lr of 0.1 a resnet18 then learns from the
    # first epoch (28.6% after one epoch of the subset at -b 128, against 12.7%, chance, without).
    "resnet": Family("convnet", prefixes=("resnet", "resnext", "wide_resnet"), resnet_stem=True,
                     options={"zero_init_residual": True}),
    "googlenet": Family("convnet", names=("googlenet",), options=AUX_LOGITS_OFF),
    "inception_v3": Family("convnet", names=("inception_v3",), options=AUX_LOGITS_OFF, min_image_size=75,
                           size_reason="its unpadded convolutions and pools"),
    # the least sizes below are the smallest that build (tests/unit/models/test_models.py)
    "alexnet": Family("convnet", names=("alexnet",), min_image_size=63, size_reason=SHRINKS),
    "convnext": Family("convnet", prefixes=("convnext_",), min_image_size=32, size_reason=SHRINKS),
    "densenet": Family("convnet", prefixes=("densenet",), min_image_size=29, size_reason=SHRINKS),
    "squeezenet1_0": Family("convnet", names=("squeezenet1_0",), min_image_size=21, size_reason=SHRINKS),
    "squeezenet1_1": Family("convnet", names=("squeezenet1_1",), min_image_size=17, size_reason=SHRINKS),
    "vgg": Family("convnet", prefixes=("vgg",), min_image_size=32, size_reason=SHRINKS),
    "maxvit": Family("convnet", names=("maxvit_t",), no_decay=("relative_position_bias_table",), min_image_size=224,
                     image_multiple=224, size_reason="its 7x7 attention windows tile its last feature map",
                     size_option="input_size"),
}
OTHER_CONVNETS = Family("convnet")


def family_of(model: str) -> Family:
    """The family of the model named `model`."""
    return next((family for family in FAMILIES.values() if family.covers(model)), OTHER_CONVNETS)


def recipe_name(model: str, user_model: bool = False) -> str:
    """The recipe (a key of RECIPES) `model` trains with where the flags leave a setting unset:
    its family's, or USER_RECIPE for a model of the user's own (`user_model`: --model-factory)."""
    return USER_RECIPE if user_model else family_of(model).recipe


def recipe_of(model: str, user_model: bool = False) -> Recipe:
    return RECIPES[recipe_name(model, user_model)]


def default_stem(image_size: int) -> str:
    """The --stem a run at `image_size` takes unless given (CIFAR_STEM_UP_TO says why)."""
    return "cifar" if image_size <= CIFAR_STEM_UP_TO else "imagenet"


def size_refusal(model: str, image_size: int) -> Optional[str]:
    """Why `model` cannot take images of `image_size` pixels a side, with a size in IMAGE_SIZES
    that it takes (the nearest above, else the largest below), or None."""
    family = family_of(model)
    if family.takes(image_size):
        return None
    low, high, multiple = family.min_image_size, family.max_image_size, family.image_multiple
    bounds = (f" from {low}x{low} to {high}x{high}" if low > 1 and high < IMAGE_SIZES[1] else
              f" of at least {low}x{low}" if low > 1 else f" of at most {high}x{high}" if high < IMAGE_SIZES[1] else "")
    needs = bounds + (f" with sides a multiple of {multiple}" if multiple > 1 else "")
    reasons = ([family.size_reason] if image_size < low or image_size % multiple else []) + \
        ([family.max_size_reason] if image_size > high else [])
    why = f" ({'; '.join(reason for reason in reasons if reason)})" if any(reasons) else ""
    sizes = [size for size in range(IMAGE_SIZES[0], IMAGE_SIZES[1] + 1) if family.takes(size)]
    if not sizes:
        return (f"model '{model}' needs images{needs}{why}, and no --image-size from {IMAGE_SIZES[0]} to "
                f"{IMAGE_SIZES[1]} is one: choose another model (--list-models).")
    fitting = next((size for size in sizes if size >= image_size), sizes[-1])
    return (f"model '{model}' needs images{needs}{why}, and this run's are {image_size}x{image_size}: run it "
            f"with --image-size {fitting}.")


def uses_resnet_stem(model: str) -> bool:
    return family_of(model).resnet_stem
