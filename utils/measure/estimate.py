"""How long a training run will take, estimated before it starts: what a time budget spends by
(the GPU suite's --budget, benchmarks/suite/estimate.py, and main.py --advise's plan).

A run's estimate is its steps at the median step time measured before for the same setting
(a results document's runs, document_runs()), plus the extra its first step took; else its
FLOPs at UTILISATION of the GPU's dense peak for the mode's arithmetic (a GPU without known
peaks gets the lowest peak of the cards that are known), or on a CPU at CPU_GFLOPS_PER_CORE per
core, plus FIRST_RUN_S for the first run of each mode in a process and a compile time for a
compiled one. A process adds START_S. No torch: the FLOPs are counted by the caller
(utils/measure/flops.py), once.
"""
from __future__ import annotations

import statistics
from dataclasses import dataclass
from typing import Any, Dict, List, Optional, Sequence, Tuple

from models.families import DEFAULT_IMAGE_SIZE
from utils.measure import gpus
from utils.modes import MODES

RunKey = Tuple[str, str, str, int, bool, bool, bool, int]  # a Run's key: the settings its step time depends on

# a process's start on a GPU node: python, torch and torchvision, the data, the model (15-20 s on the H100)
START_S = 15.0
# the first run of a mode in a process, beyond its steps: the model copy, cuDNN's autotuning, the first step
# (on the H100 at batch 256: 1-3 s, and 16 s for resnet50's first fp32 run, the process's first CUDA work)
FIRST_RUN_S = 3.0
COMPILE_S = 45.0  # torch.compile of one mode's model on a GPU (vit_s4's, estimated; resnet50's took 8 s)
# the share of the dense peak reached at batch 256 on the H100 (results/NVIDIA-H100-80GB-HBM3/2026-11-22:
# the lowest MFU of resnet50 and resnet18 per arithmetic); float8 runs at its autocast dtype's peak and share
UTILISATION = {"fp32": 0.30, "tf32": 0.09, "fp16": 0.06, "bf16": 0.055}
CPU_GFLOPS_PER_CORE = 35.0  # classic-cpu on the H100 node: resnet18, batch 128, 0.59 TFLOP/s over 16 cores


@dataclass(frozen=True)
class Run:
    """One training run a process makes, as far as its time goes."""
    model: str
    stem: str
    mode: str
    batch: int
    steps: int
    channels_last: bool = False
    compiled: bool = False
    evaluations: int = 0  # passes over the test images
    first: bool = True  # the first run of its mode in its process
    on_cpu: bool = False
    image_size: int = DEFAULT_IMAGE_SIZE

    @property
    def key(self) -> RunKey:
        return (self.model, self.stem, self.mode, self.batch, self.channels_last, self.compiled, self.on_cpu,
                self.image_size)


def training_runs(model: str, stem: str, modes: Sequence[str], batch: int, steps: int, repeats: int = 1,
                  channels_last: bool = False, compiled: bool = False, evaluations: int = 0,
                  on_cpu: bool = False, image_size: int = DEFAULT_IMAGE_SIZE,
                  mode_steps: Optional[Dict[str, int]] = None) -> List[Run]:
    """The runs of one process: every mode, `repeats` times (repeats or seeds), in its order, each
    of `steps` or, where `mode_steps` (--mode-steps) names its mode, of its own."""
    own = mode_steps or {}
    return [Run(model, stem, mode, batch, own.get(mode, steps), channels_last, compiled, evaluations, repeat == 0,
                on_cpu, image_size) for repeat in range(repeats) for mode in modes]


@dataclass(frozen=True)
class MeasuredRun:
    median_s: float  # the median of the runs' median steps
    first_extra_s: Optional[float]  # the first step's time beyond the median, where a first run was saved
    fastest_s: float  # the fastest run's median step


def rate(mode: str, device_name: Optional[str], on_cpu: bool, cores: int) -> float:
    """FLOPs per second of a training step of `mode` on the GPU called `device_name` (None: one
    without known peaks), or on `cores` CPU cores."""
    if on_cpu:
        return CPU_GFLOPS_PER_CORE * 1e9 * cores
    found = MODES[mode]
    autocast = found.low_precision_dtype  # an fp8 mode's steps run at its autocast dtype's rate
    arithmetic = gpus.ARITHMETIC[autocast if found.float8 and autocast else found.compute_dtype]
    peaks = gpus.peaks_of(device_name) if device_name else None
    peak = peaks[arithmetic] if peaks and arithmetic in peaks else gpus.lowest_peak(arithmetic)
    return peak * 1e12 * UTILISATION[arithmetic]


def run_seconds(run: Run, saved: Optional[MeasuredRun], step_s: Optional[float], evaluation_s: float = 0.0,
                compile_s: float = COMPILE_S) -> float:
    """The seconds of `run`: by its `saved` measurement where there is one, else by `step_s`
    (its FLOPs over rate()), with the first run's start and `compile_s` for a compiled one;
    `evaluation_s` is its passes over the test images."""
    if saved is not None:
        first = FIRST_RUN_S if saved.first_extra_s is None else saved.first_extra_s
        return run.steps * saved.median_s + (first if run.first else 0.0) + evaluation_s
    assert step_s is not None  # the caller counts the FLOPs where nothing was measured
    start = FIRST_RUN_S + (compile_s if run.compiled else 0.0) if run.first else 0.0
    return start + run.steps * step_s + evaluation_s


def document_runs(document: Dict[str, Any]) -> Dict[RunKey, MeasuredRun]:
    """A result document's runs by setting: the median of their median steps, the first step's
    extra over the median in the first run of each, and the fastest run's median step."""
    config = document["config"]
    medians: Dict[RunKey, List[float]] = {}
    extras: Dict[RunKey, float] = {}
    for run in document["runs"]:
        median_ms = (run.get("step_time_ms") or {}).get("median")
        if median_ms is None:
            continue
        key = Run(config["model"], config.get("stem", "cifar"), run["mode"], run["batch_size"], steps=0,
                  channels_last=bool(run.get("channels_last")), compiled=bool(run.get("compiled")),
                  on_cpu=run.get("device") == "cpu", image_size=config.get("image_size") or DEFAULT_IMAGE_SIZE).key
        if key not in medians and run.get("first_step_s") is not None:
            extras[key] = max(run["first_step_s"] - median_ms / 1000.0, 0.0)
        medians.setdefault(key, []).append(median_ms / 1000.0)
    return {key: MeasuredRun(statistics.median(values), extras.get(key), min(values))
            for key, values in medians.items()}
