"""A user's module of --model-factory functions as research code really has them (tests/campaigns/
test_user_code_campaign.py): outputs that hold their logits in an object, lazy layers, TorchScript,
threads left running, positional-only parameters, and each way one of them can still be wrong.
main.py imports it as user_code (tests/campaigns is on sys.path under pytest, and on PYTHONPATH in
the processes the long cases start)."""
import collections
import dataclasses
import threading
import time

import torch
from hostile_models import Tiny as Plain
from torch import nn


class Tiny(Plain):
    """hostile_models' small convnet that trains; `wrap` makes its output what each subclass returns."""

    def forward(self, images):
        return self.wrap(super().forward(images))

    def wrap(self, logits):
        return logits


class ModelOutput(collections.OrderedDict):
    """Hugging Face's ModelOutput in small: a dict whose values are attributes too."""

    def __init__(self, **fields):
        super().__init__(**fields)
        self.__dict__.update(fields)


@dataclasses.dataclass
class ClassifierOutput:
    loss: object
    logits: torch.Tensor


Prediction = collections.namedtuple("Prediction", ["logits", "features"])


class Scored:
    """An output object whose class name begins with a consonant, holding scores, not logits."""

    def __init__(self, scores):
        self.scores = scores


class Estimate:
    def __init__(self, logits):
        self.logits = logits


class RaisingOutput:
    """Its `logits` is a property that raises."""

    @property
    def logits(self):
        raise RuntimeError("logits are computed on demand")


class AsModelOutput(Tiny):
    def wrap(self, logits):
        return ModelOutput(logits=logits, hidden_states=None)


class AsDict(Tiny):
    def wrap(self, logits):
        return {"logits": logits, "aux": logits.detach()}


class AsDataclass(Tiny):
    def wrap(self, logits):
        return ClassifierOutput(None, logits)


class AsNamedTuple(Tiny):
    def wrap(self, logits):
        return Prediction(logits, None)


class ObjectWhileTraining(Tiny):
    """An output object in training mode and the logits alone in evaluation, as some models do."""

    def wrap(self, logits):
        return ModelOutput(logits=logits) if self.training else logits


class LogitsNone(Tiny):
    def wrap(self, logits):
        return ModelOutput(logits=None, scores=logits)


class LogitsAList(Tiny):
    def wrap(self, logits):
        return Estimate(logits.tolist())


class LogitsDetached(Tiny):
    def wrap(self, logits):
        return ModelOutput(logits=logits.detach())


class LogitsWholeNumbers(Tiny):
    def wrap(self, logits):
        return {"logits": logits.long()}


class LogitsOneRow(Tiny):
    def wrap(self, logits):
        return Estimate(logits[:1])


class ScoresOnly(Tiny):
    def wrap(self, logits):
        return {"scores": logits}


class ScoredObject(Tiny):
    def wrap(self, logits):
        return Scored(logits)


class Embedding:
    """An output object whose class name begins with a vowel, holding no logits."""

    def __init__(self, vector):
        self.vector = vector


class AsEmbedding(Tiny):
    def wrap(self, logits):
        return Embedding(logits)


class LogitsPropertyRaises(Tiny):
    def wrap(self, logits):
        return RaisingOutput()


def seven_classes_in_an_object():
    return AsModelOutput(7)


def lazy_head(num_classes):
    return nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.ReLU(), nn.AdaptiveAvgPool2d(2), nn.Flatten(),
                         nn.LazyLinear(num_classes))


def lazy_all_through(num_classes):
    """Every layer lazy: convolution, batch norm and head take their sizes from the first batch."""
    return nn.Sequential(nn.LazyConv2d(8, 3, padding=1), nn.LazyBatchNorm2d(), nn.ReLU(), nn.AdaptiveAvgPool2d(2),
                         nn.Flatten(), nn.LazyLinear(num_classes))


class LazySpare(Tiny):
    """A lazy layer its forward never reaches: no batch can give it a shape."""

    def __init__(self, num_classes=10):
        super().__init__(num_classes)
        self.spare = nn.LazyLinear(4)


def lazy_gray(num_classes):
    """A lazy head after a convolution for one channel: RGB images cannot settle it."""
    return nn.Sequential(nn.Conv2d(1, 4, 3), nn.Flatten(), nn.LazyLinear(num_classes))


def scripted(num_classes):
    return torch.jit.script(Plain(num_classes))  # TorchScript compiles no super() call: the plain Tiny


def traced(num_classes):
    return torch.jit.trace(Tiny(num_classes), torch.zeros(1, 3, 16, 16))


class WithScriptedBlock(Tiny):
    def __init__(self, num_classes=10):
        super().__init__(num_classes)
        self.conv = torch.jit.script(nn.Conv2d(3, 8, 3, padding=1))


def positional_only(num_classes, /):
    return Tiny(num_classes)


def positional_only_both(num_classes, image_size, /):
    return nn.Sequential(nn.Flatten(), nn.Linear(3 * image_size * image_size, num_classes))


def positional_only_default_then_keyword(num_classes=10, /, *, image_size=32):
    return nn.Sequential(nn.Flatten(), nn.Linear(3 * image_size * image_size, num_classes))


def positional_only_dropout(num_classes, dropout=0.0, /):
    return nn.Sequential(nn.Flatten(), nn.Dropout(dropout), nn.LazyLinear(num_classes))


def sleep_forever():
    while True:
        time.sleep(0.05)


def starts_a_thread(num_classes):
    """Starts a thread that never ends (a prefetcher, a watchdog) and leaves it running."""
    threading.Thread(target=sleep_forever, name="watchdog").start()
    return Tiny(num_classes)


def starts_a_short_thread(num_classes):
    """A thread that ends by itself half a second later: Python waits for it, and so may the run."""
    threading.Thread(target=time.sleep, args=(0.5,), name="flusher").start()
    return Tiny(num_classes)


def starts_a_daemon_thread(num_classes):
    threading.Thread(target=sleep_forever, name="daemon", daemon=True).start()
    return Tiny(num_classes)


def starts_a_thread_then_raises(num_classes):
    threading.Thread(target=sleep_forever, name="loader").start()
    raise ValueError("the weights are not there yet")


class ThreadInForward(Tiny):
    """Starts a never-ending thread from its first forward in training mode."""

    started = False

    def forward(self, images):
        if self.training and not ThreadInForward.started:
            ThreadInForward.started = True
            threading.Thread(target=sleep_forever, name="logger").start()
        return super().forward(images)


def dropout_first(dropout, num_classes, /):
    """Requires a dropout, positional-only, before num_classes: only --dropout can give it."""
    return nn.Sequential(nn.Flatten(), nn.Dropout(dropout), nn.LazyLinear(num_classes))
