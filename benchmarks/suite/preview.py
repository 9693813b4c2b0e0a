"""What a pass would run, before it runs: its steps in order with each one's estimate and why it
is due, and what would wait for a later pass. `gpu_suite.py --plan` prints it and trains
nothing; every pass prints it first. It spends the budget as ledger.spend does, by the
estimates alone: a step whose estimate fits what is left runs, and a smaller one behind a step
that does not fit may still start."""
from __future__ import annotations

import math
from typing import Dict, List, Sequence

from benchmarks.suite.estimate import Estimate, Window
from benchmarks.suite.plan import Step


def plan_lines(pending: Sequence[Step], due: Dict[str, List[str]], estimates: Dict[str, Estimate], budget_s: float,
               spent_s: float, windows: Dict[str, Window], warmup: int) -> List[str]:
    """The plan of a pass that may start `pending` in order, `spent_s` of `budget_s` (inf without
    a budget) already gone, by each step's estimate; `windows` are the headline steps timed for
    the energy window, by name."""
    left = budget_s - spent_s
    runs: List[str] = []
    waits: List[str] = []
    for step in pending:
        estimate = estimates[step.name]
        why = "; ".join(due.get(step.name) or ["planned anew: nothing is due"])
        window = windows.get(step.name)
        how = f"{estimate.source}; {window.describe(warmup)}" if window else estimate.source
        if estimate.seconds <= left:
            left -= estimate.seconds
            runs.append(f"  {len(runs) + 1}. {step.name}: about {estimate.seconds / 60:.1f} min ({how}); due: {why}")
        else:
            waits.append(f"  {waiting(step.name, estimate.seconds)}; due: {why}")
    budget = "no budget" if math.isinf(budget_s) else f"a budget of {budget_s / 60:g} min, {spent_s:.0f} s of it spent"
    lines = [f"the pass would run, in order ({budget}):"] + (runs or ["  nothing: no step fits"])
    if waits:
        lines += ["and leave waiting for a later pass, in order:"] + waits
    return lines


def waiting(name: str, seconds: float) -> str:
    """A step that waits, as the plan and the pass's closing line name it."""
    return f"{name}: about {seconds / 60:.1f} min"
