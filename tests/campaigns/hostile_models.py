"""A user's module of --model-factory functions, each wrong in one way (tests/campaigns/
test_userdata_advice_suite_campaign.py): models that raise, hang, return the wrong shape or NaN,
have no parameters, and factories that change torch's or the process's global state. main.py
imports it as hostile_models (tests/campaigns is on sys.path under pytest, and on PYTHONPATH in the
processes the long cases start)."""
import os
import signal
import sys
import time

import torch
from torch import nn


class Tiny(nn.Module):
    """A small convnet that trains: a convolution and a Linear head of num_classes."""

    def __init__(self, num_classes=10):
        super().__init__()
        self.conv = nn.Conv2d(3, 8, 3, padding=1)
        self.pool = nn.AdaptiveAvgPool2d(2)
        self.head = nn.Linear(32, num_classes)

    def forward(self, images):
        return self.head(self.pool(torch.relu(self.conv(images))).flatten(1))


def tiny(num_classes):
    return Tiny(num_classes)


class Altered(Tiny):
    """Tiny with its logits passed through `change` (a staticmethod of each subclass)."""

    def forward(self, images):
        return self.change(super().forward(images))


class NaNOut(Altered):
    change = staticmethod(lambda logits: logits * float("nan"))


class InfOut(Altered):
    change = staticmethod(lambda logits: logits * float("inf"))


class Detached(Altered):
    change = staticmethod(lambda logits: logits.detach())


class WholeNumbers(Altered):
    change = staticmethod(lambda logits: logits.long())


class DoubleOut(Altered):
    change = staticmethod(lambda logits: logits.double())


class OneRow(Altered):
    change = staticmethod(lambda logits: logits[:1])


class ThreeDims(Altered):
    change = staticmethod(lambda logits: logits.unsqueeze(1))


class Flat(Altered):
    change = staticmethod(lambda logits: logits.flatten())


class NoPathToParameters(nn.Module):
    """Has a parameter, but its logits are the images' first pixels: no gradient reaches it."""

    def __init__(self, num_classes=10):
        super().__init__()
        self.weight = nn.Parameter(torch.zeros(1))
        self.num_classes = num_classes

    def forward(self, images):
        return images.flatten(1)[:, :self.num_classes] * 1.0


class AtTheFifthStep(Tiny):
    """Calls `misbehave` from its fifth forward in training mode on (after the build's check and a few steps)."""

    def __init__(self, num_classes=10):
        super().__init__(num_classes)
        self.calls = 0

    def forward(self, images):
        self.calls += self.training
        if self.calls > 4:
            self.misbehave()
        return super().forward(images)


class RaisesInTraining(AtTheFifthStep):
    def misbehave(self):
        raise ValueError("the fifth batch is not welcome")


class RaisesInEvaluation(Tiny):
    def forward(self, images):
        if not self.training:
            raise RuntimeError("evaluation is not implemented")
        return super().forward(images)


class UnusedLayer(Tiny):
    def __init__(self, num_classes=10):
        super().__init__(num_classes)
        self.spare = nn.Linear(5, 5)


class OnlyBuffers(nn.Module):
    def __init__(self, num_classes=10):
        super().__init__()
        self.register_buffer("logits", torch.zeros(num_classes))

    def forward(self, images):
        return self.logits.expand(images.shape[0], -1)


class HangsInTraining(AtTheFifthStep):
    """Never returns from its fifth forward in training mode."""

    def misbehave(self):
        print("the model hangs", flush=True)
        while True:
            time.sleep(0.05)


def hangs(num_classes):
    """Waits forever, as a factory waiting on a lock or a network drive does."""
    print("the factory waits", flush=True)
    while True:
        time.sleep(0.05)


def spins(num_classes):
    """Loops forever without sleeping."""
    print("the factory waits", flush=True)
    while True:
        pass


def switches_off_gradients(num_classes):
    torch.set_grad_enabled(False)
    return Tiny(num_classes)


def sets_double_default(num_classes):
    """Builds in float32 but leaves torch's default dtype at float64."""
    torch.set_default_dtype(torch.float64)
    return Tiny(num_classes).float()


def changes_directory(num_classes):
    os.chdir("..")  # the folder above the one it was called in
    return Tiny(num_classes)


def ignores_stop_signals(num_classes):
    for number in (signal.SIGINT, signal.SIGTERM):
        signal.signal(number, signal.SIG_IGN)
    return Tiny(num_classes)


def exits(num_classes):
    sys.exit(3)


def recurses(num_classes):
    return recurses(num_classes)


def out_of_memory(num_classes):
    raise MemoryError()


def too_large(num_classes):
    return nn.Linear(1 << 20, 1 << 20)  # 4 TiB of float32


def on_the_meta_device(num_classes):
    return Tiny(num_classes).to("meta")


def returns_the_class(num_classes):
    return Tiny


def returns_nothing(num_classes):
    return None


def talks(num_classes):
    print("building the model " * 10)
    print("warning: a factory's own warning", file=sys.stderr)
    return Tiny(num_classes)


def ünïcode_näme(num_classes):
    return Tiny(num_classes)
