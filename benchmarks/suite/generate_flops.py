"""Writes benchmarks/suite/flops.json: one image's training FLOPs of every model, stem and image
size the GPU suite's plans train (every step of suite/plan.py, with --quick and without, the FP8
sweep's blocks and the headline's energy windows), counted by torch (estimate.counted_flops), so
that --plan estimates a step from its FLOPs without torch. A training step's FLOPs are linear in
its batch (utils/measure/flops.py counts two images and scales), so one image's count is kept,
and a count that two images do not double is refused. The models do not depend on the device:
each plan is read with every mode and with CIFAR-10 present, so no step is left out. After
changing the suite's steps or how FLOPs are counted, run

    python -m benchmarks.suite.generate_flops

and commit flops.json; `--check` (run by tests/benchmarks/test_flops_table.py) says whether the
table drifted from the plans and the counts, and changes nothing.
"""
from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any, Dict, List, Set, Tuple

from benchmarks.suite.device import DataFacts
from benchmarks.suite.estimate import FLOPS_TABLE, counted_flops, runs_of
from benchmarks.suite.plan import MODES, SECTIONS, TRANSFORMER_MODES, Plan, Planner, available_flags, planned_steps
from benchmarks.suite.plan import window_runs as headline_windows
from utils import console
from utils.fileio import atomic_write

NAME = "generate_flops.py"
# what the plans need to know of the data: CIFAR-10 present (its steps planned), its sizes
CIFAR10 = DataFacts(None, 50_000, 10_000)


def planned_models() -> Set[Tuple[str, str, int]]:
    """(model, stem, image size) of every training run of every step, with --quick and without."""
    found = set()
    for quick in (False, True):
        planner = Planner(Path("results", "DEVICE", "DATE"), None, Plan(quick), MODES, available_flags(),
                          TRANSFORMER_MODES, lambda line: None, CIFAR10)
        runs = [run for runs in headline_windows(planner).values() for run in runs]
        for step in planned_steps(planner, list(SECTIONS)):
            runs += [run for command in step.commands for run in runs_of(command, lambda: CIFAR10)]
        found |= {(run.model, run.stem, run.image_size) for run in runs}
    return found


def table() -> Dict[str, Any]:
    """flops.json's content: each model's one image's training FLOPs, by torch's count."""
    models: List[Dict[str, Any]] = []
    for model, stem, size in sorted(planned_models()):
        image, pair = counted_flops(model, stem, 1, size), counted_flops(model, stem, 2, size)
        if pair != 2 * image:
            raise ValueError(f"{model} ({stem}, {size}x{size}): two images count {pair} FLOPs, not twice one "
                             f"image's {image}; key the table by batch too")
        models.append({"model": model, "stem": stem, "image_size": size, "image_flops": image})
    return {"about": "one image's training FLOPs (a forward and backward) of every model the GPU suite's plans "
                     "train, counted by torch; written by python -m benchmarks.suite.generate_flops",
            "models": models}


def written(content: Dict[str, Any]) -> str:
    """The table as flops.json holds it: strict JSON, a model a line."""
    models = ",\n".join(f"  {json.dumps(entry, allow_nan=False)}" for entry in content["models"])
    return f'{{\n "about": {json.dumps(content["about"])},\n "models": [\n{models}\n ]\n}}\n'


def main() -> int:
    parser = console.Parser(NAME, prog="python -m benchmarks.suite.generate_flops",
                            description="Write benchmarks/suite/flops.json from the suite's plans, counted by torch.")
    parser.add_argument("--check", action="store_true", help="say whether the table drifted; write nothing")
    args = parser.parse_args()
    text = written(table())
    if FLOPS_TABLE.is_file() and FLOPS_TABLE.read_text() == text:
        return 0
    if args.check:
        print(f"{NAME}: {FLOPS_TABLE.name} differs from the suite's plans and their counts; run python -m "
              "benchmarks.suite.generate_flops and commit it.", file=sys.stderr)
        return 1
    atomic_write(str(FLOPS_TABLE), lambda f: f.write(text.encode()))
    return 0


if __name__ == "__main__":
    sys.exit(console.program(NAME, main)())
