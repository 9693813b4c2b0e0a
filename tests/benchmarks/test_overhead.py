"""benchmarks/overhead.py: ampbench's loop against a bare one, and on a GPU its GPU meter's own
cost on the step, ampbench with the meter against ampbench without it."""
import subprocess
import sys

import pytest
import torch

from benchmarks import overhead
from conftest import ROOT
from utils.measure import nvml_meter
from utils.training import loop


def test_a_run_can_be_made_not_to_read_its_gpu():
    """The run without the meter overhead.py times: no NVML opened, no sampler thread, and its
    record says why it has no figures."""
    meter = loop.gpu_meter(torch.device("cuda", 0), read=False)
    assert not meter.live and meter.sampler is None and meter.nvml is None
    assert meter.finish(8)["gpu_busy_unavailable"] == nvml_meter.NOT_READ


def test_the_meter_line_is_the_paired_ratio_of_with_over_without_and_says_what_the_meter_read():
    times = {"ampbench": [0.0101, 0.0100, 0.0102, 0.0100], "unmetered": [0.0100, 0.0101, 0.0101, 0.0100]}
    line = overhead.meter_line(times, "too few samples: 3 of NVML's utilization samples lay ...")
    ratio, low, high = overhead.paired_ratio(times["unmetered"], times["ampbench"])
    assert line == (f"GPU meter ratio with/without: {ratio:.3f} [95% CI {low:.3f}, {high:.3f}] over 4 paired rounds "
                    "(target: the interval holds 1.0; it holds 1.0); it read the energy counter and the busy "
                    "share's samples")
    slower = {"ampbench": [0.02] * 4, "unmetered": [0.01] * 4}
    assert "it MISSES 1.0); it read no busy share: " + nvml_meter.NO_MODULE in overhead.meter_line(
        slower, nvml_meter.NO_MODULE)  # what it measured then was no meter at all


@pytest.mark.whole_runs
def test_on_the_cpu_it_says_the_meter_is_measured_on_a_gpu():
    done = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "overhead.py"), "-b", "4", "--steps", "1",
                           "--timing-warmup", "1", "--rounds", "2"], cwd=ROOT, capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[-2].startswith("throughput ratio ampbench/bare: ") and "over 2 paired rounds" in lines[-2]
    assert lines[-1] == "GPU meter ratio: none on the CPU (no GPU to read); -p measures the meter's cost"


def test_the_suites_pages_show_the_meters_cost_from_the_overhead_steps_log(tmp_path):
    """The overhead step's log, as a GPU writes it: the run page gives the meter's cost beside
    ampbench's loop against the bare one."""
    import shutil

    from benchmarks.suite import render

    saved = ROOT / "results" / "NVIDIA-H200" / "2026-11-26"
    folder = tmp_path / "NVIDIA-H200" / "2026-11-26"
    shutil.copytree(saved, folder)
    meter = ("GPU meter ratio with/without: 0.998 [95% CI 0.990, 1.006] over 7 paired rounds (target: the interval "
             "holds 1.0; it holds 1.0); it read the energy counter and the busy share's samples")
    with open(folder / "overhead.log", "a") as log:
        log.write(meter + "\n")
    cost = ("* The GPU meter's own cost (`benchmarks/overhead.py`: ampbench's loop with its NVML reads against "
            "without): 0.998 [95% CI 0.990, 1.006] over 7 paired rounds (target: the interval holds 1.0; it holds "
            "1.0); it read the energy counter and the busy share's samples.")
    page = render.render(folder)
    assert cost in page and "* `benchmarks/overhead.py` (ampbench's loop against a bare AMP-recipe loop): " in page
