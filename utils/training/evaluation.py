"""Test-set accuracy, measured after training (and on --eval-every's cadence) outside the
timed steps, under the run's own autocast."""
from __future__ import annotations

from typing import TYPE_CHECKING, Optional

import torch
from torch import nn

from utils.training import distributed, precision

if TYPE_CHECKING:
    from utils.config import DataSettings, Speed, Training
    from utils.data.dataset import Data
    from utils.modes import Mode
    from utils.training.context import RunContext


@torch.no_grad()
def evaluate(model: nn.Module, mode: Mode, data: Data, training: Training, speed: Speed, data_settings: DataSettings,
             context: RunContext) -> Optional[float]:
    """Top-1 accuracy on the test set, in batches of the run's, laid out as its steps' and under
    the same autocast; with several ranks each scores its shard of the test set and the counts
    are summed. None when a stop signal, or a streamed file that is no whole image, cut the pass
    short on any rank. In a terminal, the
    context's reporter shows a bar."""
    device, world, batch_size = context.device, context.world, training.batch_size
    model.eval()
    counts = torch.zeros(3, dtype=torch.long, device=device)  # correct, seen, stopped
    rank_batches = data.test_batches(batch_size=batch_size, device=device, channels_last=speed.channels_last,
                                     shard=(world.rank, world.size), input_shape=data_settings.input_shape)
    shard = -(-data.test_count // world.size)
    batches = context.reporter.evaluation(rank_batches, -(-shard // batch_size), mode.name)
    for images, labels in batches:
        if context.stop.requested or data.failure:  # host flags: no sync
            counts[2] = 1
            break
        with precision.autocast(mode, device):
            counts[0] += (model(images).argmax(dim=1) == labels).sum()
        counts[1] += len(labels)
    model.train()
    correct, seen, stopped = distributed.all_reduce(counts, "sum").tolist()
    return None if stopped else correct / seen
