"""A lent GPU's slice: the minutes a pass is given (--budget, and a lease's --minutes), what a
lease keeps back after its stop, and the margin it learns from the suite's own history, the
committed passes' estimates against their times (benchmarks/lease.py spends by these; the docs'
figures of them are rendered from results/). No torch: a lease says its -h at once."""
from __future__ import annotations

import argparse
import math
from pathlib import Path
from typing import Tuple

from benchmarks.suite.history import device_folders, saved_suites

LEASE_MINUTES = 10.0  # how long a lent machine runs one command
RESERVE_S = 30.0  # after a lease's stop: the step in flight's grace (ledger.GRACE_S, 10 s), the render and the pack
# estimates that rest on the device's own figures (not "runs scaled from" another GPU's, nor "FLOPs")
MEASURED = ("measured on", "runs measured")


def minutes(text: str) -> float:
    """A positive number of minutes (argparse's type), else its refusal."""
    try:
        found = float(text)
    except ValueError:
        found = math.nan
    if not math.isfinite(found) or found <= 0:
        raise argparse.ArgumentTypeError(f"takes a positive number of minutes, not {text!r}")
    return found


def committed_overrun(results_root: Path) -> Tuple[float, str]:
    """(the largest overrun, in seconds, of a step whose estimate rested on measurements, in every
    GPU pass saved under `results_root`; the ratios it comes from, in words). The suite starts a
    step only while its estimate fits what is left of its budget, so a pass ends late by its last
    step's overrun alone: this is what a lease keeps back besides RESERVE_S."""
    ran = [entry for folder in device_folders(results_root) for suite in saved_suites(folder)
           if not suite.record.get("quick")
           for entry_of_pass in suite.record.get("passes", []) for entry in entry_of_pass.get("ran", [])
           if entry.get("estimate_s") and entry.get("elapsed_s") is not None]
    measured = [entry for entry in ran if str(entry.get("estimate_from", "")).startswith(MEASURED)]
    if not measured:
        return 60.0, "no committed pass ran a step estimated from measurements: a minute kept back"
    ratios = [entry["elapsed_s"] / entry["estimate_s"] for entry in ran]
    overrun = max(0.0, max(entry["elapsed_s"] - entry["estimate_s"] for entry in measured))
    return overrun, (f"committed passes ran steps {min(ratios):.2f}x to {max(ratios):.2f}x their estimates, those "
                     f"estimated from measurements at most {overrun:.1f} s over")
