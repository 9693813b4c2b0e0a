"""A user's own module for --model-factory (tests/cli/test_user_model_and_data.py): the models
and factories a user writes, and each way one can be wrong. Imported by main.py from here as
user_models (tests/cli is on sys.path under pytest) or tests.cli.user_models (from the checkout)."""
import torch
from torch import nn


class TinyNet(nn.Module):
    """A small convnet: a convolution, a batch norm and a Linear head of num_classes."""

    def __init__(self, num_classes=10, dropout=0.0):
        super().__init__()
        self.features = nn.Sequential(nn.Conv2d(3, 16, 3, padding=1), nn.BatchNorm2d(16), nn.ReLU(),
                                      nn.AdaptiveAvgPool2d(4), nn.Flatten())
        self.head = nn.Sequential(nn.Dropout(dropout), nn.Linear(16 * 4 * 4, num_classes))

    def forward(self, images):
        return self.head(self.features(images))


def tiny_net(num_classes):
    """A function factory that takes the class count alone (no dropout)."""
    return TinyNet(num_classes)


def mlp(num_classes, image_size):
    """Linear layers of widths that FP8 takes (multiples of 16), sized by the image."""
    return nn.Sequential(nn.Flatten(), nn.Linear(3 * image_size * image_size, 64), nn.ReLU(), nn.Linear(64, 64),
                         nn.ReLU(), nn.Linear(64, num_classes))


class CpuPositions(TinyNet):
    """Adds a ramp made on the CPU to its input: it trains on the CPU, and the meta device cannot
    run it (its check and FLOP count fall back or say so)."""

    def forward(self, images):
        return super().forward(images + torch.arange(images.shape[-1], dtype=images.dtype) / 100)


def norm_head(num_classes):
    """A batch norm over one value per channel of each image: a batch of 1 cannot train it."""
    return nn.Sequential(nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(3, 8), nn.BatchNorm1d(8),
                         nn.Linear(8, num_classes))


NOT_CALLABLE = 3


def fixed_head():
    """Ignores the run's classes: seven, always."""
    return TinyNet(7)


def raises(num_classes):
    raise FileNotFoundError("no weights at /nowhere/weights.pt")


def not_a_module(num_classes):
    return {"model": TinyNet(num_classes)}


def no_parameters():
    return nn.Sequential(nn.AdaptiveAvgPool2d(1), nn.Flatten())


def frozen(num_classes):
    model = TinyNet(num_classes)
    model.requires_grad_(False)
    return model


def half_precision(num_classes):
    return TinyNet(num_classes).half()


class WithFeatures(TinyNet):
    """Returns (logits, features), as some models do."""

    def forward(self, images):
        features = self.features(images)
        return self.head(features), features


class FeatureMap(nn.Module):
    """A segmentation-like output, (batch, classes, height, width)."""

    def __init__(self, num_classes=10):
        super().__init__()
        self.conv = nn.Conv2d(3, num_classes, 1)

    def forward(self, images):
        return self.conv(images)


def gray_only(num_classes):
    """A first convolution for one channel: RGB images do not fit it."""
    return nn.Sequential(nn.Conv2d(1, 8, 3), nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(8, num_classes))


def needs_config(config, num_classes=10):
    return TinyNet(num_classes)


class ClassifierOutput:
    """An output object as Hugging Face's models return: the logits as an attribute, beside others."""

    def __init__(self, logits, features):
        self.loss, self.logits, self.features = None, logits, features


class WithLogits(WithFeatures):
    """Returns its logits inside an output object, as a Hugging Face *ForImageClassification does."""

    def forward(self, images):
        return ClassifierOutput(*super().forward(images))


class LogitsByKey(WithFeatures):
    def forward(self, images):
        logits, features = super().forward(images)
        return {"features": features, "logits": logits}


class ImageFeatures:
    """An output object without logits."""

    def __init__(self, features):
        self.features = features


class FeaturesOnly(TinyNet):
    def forward(self, images):
        return ImageFeatures(self.features(images))


def lazy_head(num_classes):
    """A LazyLinear head: its input width comes from the first batch, as torch's lazy modules do."""
    return nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.ReLU(), nn.AdaptiveAvgPool2d(2), nn.Flatten(),
                         nn.LazyLinear(num_classes))


def scripted(num_classes):
    return torch.jit.script(TinyNet(num_classes))


def positional_only(num_classes, image_size, /):
    return nn.Sequential(nn.Flatten(), nn.Linear(3 * image_size * image_size, num_classes))
