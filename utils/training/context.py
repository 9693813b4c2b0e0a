"""Where one invocation runs and how it reports: the device, the process's place in the job,
the stop signals and the progress display, handed from utils/app.py to every stage that needs
them instead of four arguments each."""
from dataclasses import dataclass, field

import torch

from utils.launch import World
from utils.measure.progress import Reporter
from utils.stop import StopRequest


@dataclass
class RunContext:
    device: torch.device
    world: World = field(default_factory=World)  # one process unless a launcher started several
    stop: StopRequest = field(default_factory=StopRequest)  # main.py's, installed before torch was imported
    reporter: Reporter = field(default_factory=lambda: Reporter(False))  # quiet unless main.py asks
    # whether the run reads its GPU through NVML (energy, busy share): benchmarks/overhead.py times
    # runs without, to measure what the reading costs a step
    read_gpu: bool = True
