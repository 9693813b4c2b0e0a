"""The test accuracy during training (--eval-every) and at the end: each point with the
training time so far, every step's (the timing warm-up's too), never the evaluations' (MLPerf's
rule: the clock that reaches a target counts training, and the evaluations are timed apart)."""
from __future__ import annotations

import time
from typing import Callable, Dict, Iterable, Optional


class AccuracyCurve:
    """Evaluates every `every` steps (None: only at the end) through `evaluate(step)`, a function
    that returns the test accuracy or None when a stop signal cut the pass short. Points and
    the evaluations' time continue those of earlier processes (a resumed checkpoint)."""

    def __init__(self, evaluate: Callable[[int], Optional[float]], every: Optional[int], steps_per_epoch: float,
                 target: Optional[float] = None, points: Optional[Iterable[Dict[str, float]]] = None,
                 eval_time_s: float = 0.0):
        self.evaluate, self.every, self.steps_per_epoch, self.target = evaluate, every, steps_per_epoch, target
        self.points = list(points or [])
        self.eval_time_s = eval_time_s

    def wants(self, step: int, last_step: int) -> bool:
        """Whether to evaluate after `step` during the loop (the last step's is the final one)."""
        return bool(self.every and step % self.every == 0 and step < last_step)

    def take(self, step: int, train_s: float) -> Optional[float]:
        """Evaluate now, after `step`; returns the accuracy (None if stopped)."""
        if self.points and self.points[-1]["step"] == step:  # already evaluated at this step
            return self.points[-1]["accuracy"]
        started = time.perf_counter()
        accuracy = self.evaluate(step)
        self.eval_time_s += time.perf_counter() - started
        if accuracy is not None:
            self.points.append({"step": step, "epoch": step / self.steps_per_epoch, "train_s": train_s,
                                "accuracy": accuracy})
        return accuracy

    @property
    def first_at_target(self) -> Optional[Dict[str, float]]:
        """The first point at or above the target accuracy, or None (never, or no target)."""
        if self.target is None:
            return None
        return next((point for point in self.points if point["accuracy"] >= self.target), None)

    @property
    def reached_target(self) -> bool:
        return self.first_at_target is not None
