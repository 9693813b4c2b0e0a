"""torchvision classification models, built for the run's classes (CIFAR-10's 10 unless told)
and images of the run's size, each as its family (models/families.py) says."""
from __future__ import annotations

import contextlib
import difflib
import inspect
import itertools
from typing import Dict, Iterator, List, Optional

import torch
import torchvision.models as tvm
from torch import nn

from models import families
from models.attention import swap_attention
from models.families import CIFAR_VITS, DEFAULT_IMAGE_SIZE, DEFAULT_NUM_CLASSES
from models.vit import build_cifar_vit
from utils import compat
from utils.errors import UserError


def model_names() -> List[str]:
    """Every model name, sorted: torchvision's classification models (before torchvision 0.14's
    registry: the public functions of torchvision.models, which are its model builders then) and
    the CIFAR ViTs."""
    if compat.has_model_registry():
        names = tvm.list_models(module=tvm)
    else:
        names = [name for name, obj in vars(tvm).items() if inspect.isfunction(obj) and not name.startswith("_")]
    return sorted(set(names) | set(CIFAR_VITS))


def build_model(name: str, stem: Optional[str] = None, dropout: Optional[float] = None,
                batch_size: Optional[int] = None, image_size: int = DEFAULT_IMAGE_SIZE,
                num_classes: int = DEFAULT_NUM_CLASSES) -> nn.Module:
    """A randomly initialised model with a head of `num_classes` (and the given dropout
    probability, for models that have one).

    With stem="cifar" (the default up to families.CIFAR_STEM_UP_TO pixels), ResNet-family models get
    the usual CIFAR stem: the first conv becomes 3x3 stride 1 (same output channels, no bias) and
    the max-pool is removed, so small inputs keep their resolution into layer1. Other families
    keep torchvision's layout, but for the ViTs' attention, whose projections become nn.Linear
    layers (models/attention.py). Each family's builder options apply (ResNet-family models start
    each residual block at the identity, a zero-initialised last batch norm; the models whose
    layout depends on the image size are built for `image_size`). A size the family's table
    refuses is refused; given `batch_size`, a batch too small for the model's batch norms in
    training is refused; the model is checked with images of `image_size`.
    """
    names = model_names()
    if name not in names:
        close = difflib.get_close_matches(name, names, n=3, cutoff=0.5)
        hint = f"did you mean {', '.join(close)}?" if close else "run with --list-models to see them all."
        raise UserError(f"unknown model '{name}': {hint}")
    refusal = families.size_refusal(name, image_size)
    if refusal:
        raise UserError(refusal)
    family = families.family_of(name)
    options = dict(family.options, **({} if dropout is None else {"dropout": dropout}))
    if family.size_option == "image_size":
        options["image_size"] = image_size
    elif family.size_option == "input_size":
        options["input_size"] = (image_size, image_size)
    try:
        if name in CIFAR_VITS:
            model = build_cifar_vit(name, num_classes, dropout, image_size)
        else:
            model = getattr(tvm, name)(num_classes=num_classes, **options)  # no weights: random initialisation
    except TypeError:
        raise UserError(f"model '{name}' has no dropout setting; drop --dropout.") from None
    if (stem or families.default_stem(image_size)) == "cifar" and family.resnet_stem:
        model.conv1 = nn.Conv2d(3, model.conv1.out_channels, kernel_size=3, stride=1, padding=1, bias=False)
        nn.init.kaiming_normal_(model.conv1.weight, mode="fan_out", nonlinearity="relu")
        model.maxpool = nn.Identity()
    swap_attention(model)  # every ViT, in every mode: its projections become nn.Linear layers FP8 can reach
    check_accepts_images(model, name, image_size, batch_size)
    return model


@contextlib.contextmanager
def weightless() -> Iterator[None]:
    """Models built in the block hold their parameters on the meta device: the shapes without
    the memory or the random initialisation of their weights, so that the largest model is
    checked or predicted for at once (torch 2.1, compat.runs_on_meta). Only parameters: a
    builder may compute with tensors (regnet's widths), which torch.device("meta") would make
    meta too."""
    register = nn.Module.register_parameter

    def on_meta(module: nn.Module, name: str, parameter: Optional[nn.Parameter]) -> None:
        if parameter is not None:
            parameter = nn.Parameter(parameter.to("meta"), parameter.requires_grad)
        register(module, name, parameter)

    # setattr, not an assignment: replacing a class's method is the point here, and the type
    # checker rightly refuses it written as one
    setattr(nn.Module, "register_parameter", on_meta)  # noqa: B010
    try:
        yield
    finally:
        setattr(nn.Module, "register_parameter", register)  # noqa: B010


def class_name(model: nn.Module) -> str:
    """The model's class with its module, as the results record it: torchvision.models.resnet.ResNet."""
    return f"{type(model).__module__}.{type(model).__qualname__}"


def has_batch_norm(model: nn.Module) -> bool:
    return any(isinstance(module, nn.modules.batchnorm._BatchNorm) for module in model.modules())


def check_accepts_images(model: nn.Module, name: str, image_size: int, batch_size: Optional[int] = None) -> None:
    """Run two images of `image_size` through the new model (eval mode, no grad: no state changes), so
    that models with a fixed or minimum input size fail now with a clear sentence; and, given
    the batch size, that every batch norm will see more than one value per channel in training.
    On the meta device where this torch runs models there (compat.runs_on_meta): the shapes
    alone, at once for any model and size, with a weightless model's too."""
    try:
        with batch_norm_inputs(model) as values_per_image, torch.no_grad():
            model.eval()
            if compat.runs_on_meta():
                forward_on_meta(model, image_size)
            else:
                model(torch.zeros(CHECK_IMAGES, 3, image_size, image_size))
    except (RuntimeError, ValueError, AssertionError) as error:  # a size models/families.py does not know of
        reason = str(error).splitlines()[0] if str(error) else type(error).__name__
        raise UserError(f"model '{name}' cannot take {image_size}x{image_size} images ({reason}); "
                        "choose another, e.g. resnet18 or resnet50, or another --image-size.") from None
    finally:
        model.train()
    check_batch_for_norms(values_per_image, name, image_size, batch_size)


CHECK_IMAGES = 2  # the images a model's check runs: a batch norm in training needs more than one value


def forward_on_meta(model: nn.Module, image_size: int) -> object:
    """`model`'s output for CHECK_IMAGES images of `image_size`, computed on the meta device
    (shapes alone, torch 2.1) with its own parameters and buffers left untouched; outside
    torch.no_grad it carries a gradient where the output depends on a trainable parameter."""
    state = {key: torch.empty_like(value, device="meta", requires_grad=value.requires_grad)
             for key, value in itertools.chain(model.named_parameters(), model.named_buffers())}
    return torch.func.functional_call(model, state, (torch.zeros(CHECK_IMAGES, 3, image_size, image_size,
                                                                 device="meta"),))


@contextlib.contextmanager
def batch_norm_inputs(model: nn.Module) -> Iterator[Dict[nn.Module, int]]:
    """{batch norm: the values per channel one image gives it} for the forwards run in the block."""
    values_per_image = {}

    def record(module, inputs, output):
        values_per_image[module] = inputs[0][0].numel() // inputs[0].shape[1]

    norms = [m for m in model.modules() if isinstance(m, nn.modules.batchnorm._BatchNorm)]
    hooks = [m.register_forward_hook(record) for m in norms]
    try:
        yield values_per_image
    finally:
        for hook in hooks:
            hook.remove()


def check_batch_for_norms(values_per_image: Dict[nn.Module, int], name: str, image_size: int,
                          batch_size: Optional[int]) -> None:
    """Refuse a batch in which a batch norm would see one value per channel (batch_norm_inputs')."""
    fewest = min(values_per_image.values(), default=None)
    if batch_size is not None and fewest is not None and batch_size * fewest < 2:
        raise UserError(f"model '{name}' has a batch norm that sees {fewest} value per channel of each "
                        f"{image_size}x{image_size} image, "
                        f"so training needs a batch of at least {-(-2 // fewest)}; raise --batch-size/-b.")
