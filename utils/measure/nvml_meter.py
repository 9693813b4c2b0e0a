"""The GPU's energy over a run's timed steps, read through NVML (nvidia-ml-py, imported as
pynvml only on a GPU run; optional: requirements-energy.txt).

Where the GPU has one (Volta and newer), NVML's total-energy counter (millijoules since the
driver loaded) is read where a timed span starts and where it ends; on a GPU without it, a
thread of its own samples the power draw (milliwatts) and the samples are integrated over time.
The training thread reads only where the loop already stops for the host: the warm-up's end,
the pauses the step times leave out (checkpoints, evaluations, the census) and after the loop,
never inside a step. Each process reads its own GPU. Where nothing can be read, the figure is
None and a sentence says why. No torch here: the reader is tested with a made-up NVML."""
from __future__ import annotations

import importlib
import os
import threading
import time
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

COUNTER = "nvml-energy-counter"
POWER_SAMPLES = "nvml-power-samples"
COUNTER_MODULUS = 2 ** 64  # the counter is an unsigned 64-bit count of millijoules: it wraps there
SAMPLE_INTERVAL_S = 0.1  # the power sampler's period
# No single GPU draws this much: a larger mean is a counter that went back (a driver reload), not a wrap.
MAX_PLAUSIBLE_WATTS = 5000.0
CPU_RUN = "a CPU run: no GPU energy to read"
NO_MODULE = ("nvidia-ml-py (pynvml) is not installed: python -m pip install --no-deps -r requirements-energy.txt "
             "measures it")


def counter_joules(start_mj: int, end_mj: int) -> float:
    """The joules between two readings of the counter, across a wrap of its 64 bits."""
    return ((end_mj - start_mj) % COUNTER_MODULUS) / 1000.0


def trapezoid_joules(samples: Sequence[Tuple[float, float]]) -> float:
    """The joules under (seconds, milliwatts) samples, joined by straight lines."""
    return sum((t1 - t0) * (p0 + p1) / 2 for (t0, p0), (t1, p1) in zip(samples, samples[1:])) / 1000.0


class Meter:
    """One GPU's energy over the spans that start() or resume() open and pause() closes;
    finish() gives the figure or the reason there is none. A meter made with a `reason` (and
    no NVML) reads nothing: its calls do nothing, and finish() gives that reason."""

    def __init__(self, nvml: Any = None, handle: Any = None, source: Optional[str] = None,
                 reason: Optional[str] = None, clock: Callable[[], float] = time.perf_counter,
                 interval_s: float = SAMPLE_INTERVAL_S):
        self.nvml, self.handle, self.source, self.reason = nvml, handle, source, reason
        self.clock, self.interval_s = clock, interval_s
        self.index: Optional[int] = None  # NVML's index of the GPU read (nvidia-smi's)
        self.started = self.running = False
        self.joules = self.seconds = 0.0
        self.samples = 0  # power samples integrated (POWER_SAMPLES)
        self.span: List[Tuple[float, float]] = []  # the open span's (seconds, reading): one, or every sample
        self.lock = threading.Lock()
        self.stopping = threading.Event()
        self.sampler: Optional[threading.Thread] = None

    @property
    def live(self) -> bool:
        """Whether it still reads the GPU (no reason yet to give up)."""
        return self.reason is None

    def read(self) -> Tuple[float, float]:
        """(now, the counter's millijoules or the power's milliwatts)."""
        if self.source == COUNTER:
            return self.clock(), self.nvml.nvmlDeviceGetTotalEnergyConsumption(self.handle)
        return self.clock(), self.nvml.nvmlDeviceGetPowerUsage(self.handle)

    def start(self) -> None:
        """Open the first span: where the timed steps begin."""
        if self.live and not self.started:
            self.started = True
            if self.source == POWER_SAMPLES:
                self.sampler = threading.Thread(target=self.sample, name="ampbench-power-sampler", daemon=True)
                self.sampler.start()
            self.resume()

    def resume(self) -> None:
        """Open a span again after a pause."""
        with self.lock:
            if self.live and self.started and not self.running:
                self.span = self.reading("at the start of a span")
                self.running = bool(self.span)

    def pause(self) -> None:
        """Close the open span: its energy and seconds are added up."""
        with self.lock:
            if not self.running:
                return
            self.running = False
            end = self.reading("at the end of a span")
            if not end:
                return
            span = self.span + end
            self.seconds += span[-1][0] - span[0][0]
            if self.source == COUNTER:
                self.joules += counter_joules(span[0][1], span[-1][1])
            else:
                self.joules += trapezoid_joules(span)
                self.samples += len(span)

    def reading(self, where: str) -> List[Tuple[float, float]]:
        """[(now, reading)], or [] once NVML failed (the reason then says where and how)."""
        try:
            return [self.read()]
        except self.nvml.NVMLError as error:
            self.reason = f"NVML failed reading the GPU's {self.what()} {where}: {error}"
            return []

    def what(self) -> str:
        return "energy counter" if self.source == COUNTER else "power"

    def sample(self) -> None:
        """The sampler thread: a power sample every interval_s while a span is open."""
        while not self.stopping.wait(self.interval_s):
            with self.lock:
                if self.running:
                    self.span += self.reading("while sampling")
                    self.running = self.live

    def finish(self, images: int) -> Tuple[Optional[Dict[str, Any]], Optional[str]]:
        """(runs[].energy, None) over the spans read, `images` being the images this process
        trained in them; or (None, why there is none). Stops the sampler and NVML."""
        self.pause()
        self.stopping.set()
        if self.sampler is not None:
            self.sampler.join()
        if self.nvml is not None:
            shut_down(self.nvml)
        why = self.unusable(images)
        if why:
            return None, why
        return {"joules_per_image": self.joules / images, "mean_watts": self.joules / self.seconds,
                "joules": self.joules, "seconds": self.seconds, "images": images, "source": self.source,
                "power_samples": self.samples if self.source == POWER_SAMPLES else None, "nvml_index": self.index}, None

    def unusable(self, images: int) -> Optional[str]:
        """Why the spans read give no figure, or None."""
        if self.reason:
            return self.reason
        if not self.started or images <= 0 or self.seconds <= 0:
            return "no step was timed"
        if self.joules <= 0:
            return ("the GPU's energy counter did not move over the timed steps" if self.source == COUNTER
                    else "NVML reported no power draw over the timed steps")
        if self.joules / self.seconds > MAX_PLAUSIBLE_WATTS:
            return (f"the GPU's energy counter went back over the timed steps (a mean of "
                    f"{self.joules / self.seconds:.3g} W, beyond any GPU's draw): the driver was reloaded?")
        return None


def open_meter(index: int, bus_id: Optional[str], clock: Callable[[], float] = time.perf_counter,
               interval_s: float = SAMPLE_INTERVAL_S) -> Meter:
    """The Meter of cuda:`index` (this process's GPU), found in NVML by its PCI `bus_id` (as
    CUDA_VISIBLE_DEVICES renumbers the GPUs torch sees, NVML does not); without one, by the
    index, when nothing renumbers them. Its energy counter where the GPU has one, else its power.
    A meter that says why there is no figure where NVML cannot be imported, started or asked."""
    try:
        nvml = importlib.import_module("pynvml")
    except ImportError:
        return Meter(reason=NO_MODULE)
    try:
        nvml.nvmlInit()
    except nvml.NVMLError as error:
        return Meter(reason=f"NVML failed to initialise: {error}")
    meter = Meter(nvml, clock=clock, interval_s=interval_s)
    why = locate(meter, index, bus_id) or choose_source(meter)
    if why:
        shut_down(nvml)
        return Meter(reason=why)
    return meter


def shut_down(nvml: Any) -> None:
    """Let NVML go; a failure to do so changes no reading taken."""
    try:
        nvml.nvmlShutdown()
    except nvml.NVMLError:
        pass


def locate(meter: Meter, index: int, bus_id: Optional[str]) -> Optional[str]:
    """Set meter.handle and meter.index to cuda:`index`'s GPU; or say why it cannot be found."""
    nvml = meter.nvml
    if bus_id is None and os.environ.get("CUDA_VISIBLE_DEVICES") is not None:
        return (f"this torch does not give cuda:{index}'s PCI bus id, and CUDA_VISIBLE_DEVICES renumbers the GPUs: "
                f"NVML's GPU {index} may be another one")
    try:
        meter.handle = nvml.nvmlDeviceGetHandleByPciBusId(bus_id) if bus_id is not None \
            else nvml.nvmlDeviceGetHandleByIndex(index)
        meter.index = nvml.nvmlDeviceGetIndex(meter.handle)
    except nvml.NVMLError as error:
        return f"NVML found no GPU at {bus_id or f'index {index}'} for cuda:{index}: {error}"
    return None


def choose_source(meter: Meter) -> Optional[str]:
    """Set meter.source: the energy counter where the GPU has one, else the power; or say
    why neither can be read."""
    nvml = meter.nvml
    for source, probe in ((COUNTER, nvml.nvmlDeviceGetTotalEnergyConsumption),
                          (POWER_SAMPLES, nvml.nvmlDeviceGetPowerUsage)):
        meter.source = source
        try:
            probe(meter.handle)
            return None
        except nvml.NVMLError_NotSupported:
            continue
        except nvml.NVMLError as error:
            return f"NVML failed reading the GPU's {meter.what()}: {error}"
    return "this GPU reports neither its energy nor its power draw to NVML"
