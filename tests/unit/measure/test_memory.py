"""Peak memory is the steady state's: the warm-up (cuDNN autotuning, compilation) has its own."""
import torch
from torch import nn

from utils import launch, modes
from utils.config import RunConfig
from utils.data.dataset import synthetic
from utils.training import loop
from utils.training.context import RunContext
from utils.training.trainer import build_trainer

CPU = torch.device("cpu")
SCRATCH_BYTES = 512 * 2 ** 20


class WarmupScratch(nn.Module):
    """A small model whose first forward (a warm-up step) also fills a large temporary, as
    cuDNN's autotuning does with its workspaces."""

    def __init__(self):
        super().__init__()
        self.net = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.ReLU(), nn.AdaptiveAvgPool2d(1), nn.Flatten(),
                                 nn.Linear(8, 10))
        self.calls = 0

    def forward(self, images):
        self.calls += 1
        if self.calls == 1:
            torch.ones(SCRATCH_BYTES // 4)  # written, so resident, and freed at once
        return self.net(images)


def test_a_large_warm_up_temporary_shows_in_the_warm_up_peak_only():
    config = RunConfig.build(steps=6, warmup=2, batch_size=8, no_progress=True, no_eval=True)
    trainer = build_trainer(WarmupScratch(), modes.MODES["fp32"], synthetic(CPU, seed=0), config.plan(False, 1),
                            config.training, config.precision, config.data, config.speed, config.distributed, CPU,
                            launch.World())
    stats = loop.train(trainer, config.training, config.accuracy, config.checkpoints, RunContext(CPU)).stats
    assert stats.warmup_peak_memory_bytes - stats.peak_memory_bytes > 0.8 * SCRATCH_BYTES, stats
    assert len(stats.step_ms) == 4
