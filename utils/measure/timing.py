"""Step timing that is right for asynchronous CUDA.

On CUDA, events are recorded on the stream at each step boundary and when the batch is
ready, and read once after a final synchronize: the timed loop never waits for the GPU.
On the CPU the work is synchronous, so perf_counter at the same points is exact.
Step i lasts from its boundary to the next one, so host overhead between steps is counted.
"""
from __future__ import annotations

import time
from typing import TYPE_CHECKING, List, Union

import torch

if TYPE_CHECKING:
    Mark = Union[torch.cuda.Event, float]  # a CUDA event on CUDA, perf_counter seconds on the CPU


class StepTimer:
    def __init__(self, device: torch.device):
        self.cuda = device.type == "cuda"
        self.boundaries: List[Mark] = []  # marks of the open segment: one per step start
        self.data_ready: List[Mark] = []  # one per step, when its batch is ready
        self.step_ms: List[float] = []  # closed steps, in milliseconds
        self.data_ms: List[float] = []

    def now(self) -> Mark:
        if self.cuda:
            event = torch.cuda.Event(enable_timing=True)
            event.record()
            return event
        return time.perf_counter()

    def start_step(self) -> None:
        self.boundaries.append(self.now())

    def batch_ready(self) -> None:
        self.data_ready.append(self.now())

    def close(self) -> None:
        """End the open segment: close its last step, wait for the device (the one sync) and
        turn its marks into milliseconds. Call after the timed loop, and before a pause in it
        (a checkpoint), which the next start_step() then leaves out of every step."""
        self.boundaries.append(self.now())
        if self.cuda:
            torch.cuda.synchronize()
        marks, ready = self.boundaries, self.data_ready
        self.step_ms += [self.elapsed_ms(start, end) for start, end in zip(marks, marks[1:])]
        self.data_ms += [self.elapsed_ms(start, end) for start, end in zip(marks, ready)]
        self.boundaries, self.data_ready = [], []

    def elapsed_ms(self, start: Mark, end: Mark) -> float:
        if self.cuda:  # now() recorded events
            assert isinstance(start, torch.cuda.Event) and isinstance(end, torch.cuda.Event)
            return start.elapsed_time(end)
        assert not isinstance(start, torch.cuda.Event) and not isinstance(end, torch.cuda.Event)
        return (end - start) * 1000.0
