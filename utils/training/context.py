"""Where one invocation runs and how it reports: the device, the process's place in the job,
the stop signals and the progress display, handed from utils/app.py to every stage that needs
them instead of four arguments each."""
from dataclasses import dataclass, field
from typing import Optional

import torch

from utils.measure.progress import Reporter
from utils.stop import StopRequest
from utils.training.distributed import World


@dataclass
class RunContext:
    device: torch.device
    world: World = field(default_factory=World)  # one process unless a launcher started several
    stop: StopRequest = field(default_factory=StopRequest)  # main.py's, installed before torch was imported
    reporter: Reporter = field(default_factory=lambda: Reporter(False))  # quiet unless main.py asks
    checkpoint_step: Optional[int] = None  # the step --checkpoint holds, once this process wrote it
    failed_saves: int = 0  # checkpoint saves that failed (a full disk): training went on, the exit status says so
    failed_outputs: list = field(default_factory=list)  # other writes that failed on the way (a trace), in words
