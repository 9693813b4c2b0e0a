"""The GPU's energy and busy share over a run's timed steps, read through NVML (nvidia-ml-py,
imported as pynvml only on a GPU run; optional: requirements-energy.txt).

Energy: where the GPU has one (Volta and newer), NVML's total-energy counter (millijoules since
the driver loaded) is read where a timed span starts and where it ends; on a GPU without it, the
sampler thread samples the power draw (milliwatts) and the samples are integrated over time.
Busy share: the driver buffers utilization samples, each the percent of its sample period (1/6 s
to 1 s by product) in which one or more kernels ran, stamped in microseconds of the host's wall
clock at the period's end; the sampler thread drains the buffer while a span is open, each
sample once (by its stamp). The share is the mean of the samples whose whole period lies inside
a span, and only where there are MIN_BUSY_SAMPLES of them: a sample straddling a span's edge
measured the warm-up or a pause in part, and a mean of a few says little. The training thread
reads only where the loop already stops for the host: the warm-up's end, the pauses the step
times leave out (checkpoints, evaluations, the census) and after the loop, never inside a step.
Each process reads its own GPU. Where a figure cannot be read, it is None and a sentence says
why. No torch here: the reader is tested with a made-up NVML."""
from __future__ import annotations

import importlib
import os
import statistics
import threading
import time
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

COUNTER = "nvml-energy-counter"
POWER_SAMPLES = "nvml-power-samples"
UTILIZATION_SAMPLES = "nvml-utilization-samples"
COUNTER_MODULUS = 2 ** 64  # the counter is an unsigned 64-bit count of millijoules: it wraps there
SAMPLE_INTERVAL_S = 0.1  # the power sampler's period
# How often the sampler drains the utilization samples when it samples no power. The driver keeps a
# bounded buffer of them (its size is not documented; 100 have been reported, some 16 s at the
# fastest sample period): drained every second, none is lost.
DRAIN_INTERVAL_S = 1.0
# No single GPU draws this much: a larger mean is a counter that went back (a driver reload), not a wrap.
MAX_PLAUSIBLE_WATTS = 5000.0
# How often the energy counter moves. NVML's reference documents no period for it; measured, A100s
# and H100s update their power reading every 100 ms from a 25 ms window (Yang, Adamek and Armour,
# "Part-time Power Measurements: nvidia-smi's Lack of Attention", arXiv:2312.02741, SC24), PETSc
# finds the counter moving every 20 to 100 ms on recent GPUs (PetscLogGpuEnergyMeter's manual page),
# and an H200's moved every 0.1 s under load in ampbench's GPU suite.
COUNTER_UPDATE_S = 0.1
# Each reading of a window lags the GPU's energy by up to one update, so the joules between two
# readings are off by up to one update's worth: 1% or less over a window of 100 updates. A window
# shorter than this still records its joules, flagged, and gives no energy ratio (compare.py).
MIN_ENERGY_WINDOW_S = 100 * COUNTER_UPDATE_S
# The fewest utilization samples a busy share rests on: ten whole periods cover at least 10/12 of
# the window they stand for (a period straddling each edge is left out), and a 10-second energy
# window holds ten of the slowest GPUs' one-second periods.
MIN_BUSY_SAMPLES = 10
TOO_FEW_SAMPLES = "too few samples"  # how gpu_busy_unavailable starts where the samples fall short of the minimum
# NVML stamps its samples with the host's wall clock; a sample this far outside the spans is on another clock
CLOCK_TOLERANCE_S = 60.0
CPU_RUN = "a CPU run: no GPU to read"
NOT_READ = "the run was made not to read its GPU (benchmarks/overhead.py's run without the GPU meter)"
NO_MODULE = ("nvidia-ml-py (pynvml) is not installed: python -m pip install --no-deps -r requirements-energy.txt "
             "measures it")


def counter_joules(start_mj: int, end_mj: int) -> float:
    """The joules between two readings of the counter, across a wrap of its 64 bits."""
    return ((end_mj - start_mj) % COUNTER_MODULUS) / 1000.0


def trapezoid_joules(samples: Sequence[Tuple[float, float]]) -> float:
    """The joules under (seconds, milliwatts) samples, joined by straight lines."""
    return sum((t1 - t0) * (p0 + p1) / 2 for (t0, p0), (t1, p1) in zip(samples, samples[1:])) / 1000.0


def window_too_short(seconds: float) -> bool:
    """Whether an energy window of `seconds` spans too few of the counter's updates to resolve
    its joules (MIN_ENERGY_WINDOW_S)."""
    return seconds < MIN_ENERGY_WINDOW_S


def sample_period_s(stamps: Sequence[int]) -> Optional[float]:
    """The median gap between neighbouring utilization samples, from their stamps (microseconds)
    in order, in seconds; None without two samples."""
    gaps = [later - earlier for earlier, later in zip(stamps, stamps[1:])]
    return statistics.median(gaps) / 1e6 if gaps else None


def too_few_samples(count: int, seconds: float, period_s: Optional[float]) -> str:
    """gpu_busy_unavailable where fewer than MIN_BUSY_SAMPLES lay wholly inside the timed steps."""
    pace = f" (NVML takes one every {period_s:.3g} s on this GPU)" if period_s else ""
    return (f"{TOO_FEW_SAMPLES}: {count} of NVML's utilization samples lay wholly inside the {seconds:.3g} s of "
            f"timed steps{pace}, and a share needs {MIN_BUSY_SAMPLES}; time more steps")


def too_few_count(reason: Optional[str]) -> Optional[int]:
    """The count too_few_samples() gave in `reason`, or None where it is another reason."""
    prefix = TOO_FEW_SAMPLES + ": "
    if not reason or not reason.startswith(prefix):
        return None
    count = reason[len(prefix):].split(" ", 1)[0]
    return int(count) if count.isdigit() else None


class Meter:
    """One GPU's energy and busy share over the spans that start() or resume() open and pause()
    closes; finish() gives the figures or the reasons there are none. A meter made with a
    `reason` (and no NVML) reads nothing: its calls do nothing, and finish() gives that reason
    for both figures."""

    def __init__(self, nvml: Any = None, handle: Any = None, source: Optional[str] = None,
                 reason: Optional[str] = None, clock: Callable[[], float] = time.perf_counter,
                 interval_s: Optional[float] = None, wall: Callable[[], float] = time.time):
        self.nvml, self.handle, self.source = nvml, handle, source
        self.energy_reason: Optional[str] = reason  # why there is no energy figure, once known
        self.busy_reason: Optional[str] = reason  # why there is no busy share, once known
        self.clock = clock
        self.wall = wall  # the clock NVML stamps its samples with: the host's, in seconds since the epoch
        self.interval_s = interval_s  # the sampler's period; None: the power's, or the drain's without it
        self.index: Optional[int] = None  # NVML's index of the GPU read (nvidia-smi's)
        self.started = self.running = False
        self.opened = 0.0  # when the open span opened, by `clock`
        self.joules = self.seconds = 0.0
        self.power_samples = 0  # power samples integrated (POWER_SAMPLES)
        self.span: List[Tuple[float, int]] = []  # the open span's (seconds, energy reading): one, or every sample
        self.last_seen = 0  # the stamp of the newest utilization sample drained (NVML's microseconds)
        self.utilization: List[List[Tuple[int, int]]] = []  # each span's (stamp, percent busy) samples
        self.bounds: List[Tuple[int, int]] = []  # each closed span's opening and closing, by `wall`, in microseconds
        self.opened_us = 0  # the open span's opening, by `wall`, in microseconds
        self.seen: List[int] = []  # every sample's stamp drained, in a span or not: their gaps are the sample period
        self.lock = threading.Lock()
        self.stopping = threading.Event()
        self.sampler: Optional[threading.Thread] = None

    @property
    def live(self) -> bool:
        """Whether it still reads anything of the GPU."""
        return self.energy_reason is None or self.busy_reason is None

    @property
    def samples_power(self) -> bool:
        """Whether the sampler thread samples the power (a GPU without the energy counter)."""
        return self.source == POWER_SAMPLES and self.energy_reason is None

    def start(self) -> None:
        """Open the first span: where the timed steps begin."""
        if self.live and not self.started:
            self.started = True
            if self.samples_power or self.busy_reason is None:
                self.sampler = threading.Thread(target=self.sample, name="ampbench-nvml-sampler", daemon=True)
                self.sampler.start()
            self.resume()

    def resume(self) -> None:
        """Open a span again after a pause. Every step calls it: only the training thread opens
        and closes spans, so it takes the lock (which the sampler holds while NVML answers) only
        when a span must open."""
        if self.running or not self.started:
            return
        with self.lock:
            if not self.live:
                return
            self.opened = self.clock()
            if self.energy_reason is None:
                self.span = self.energy_reading(self.opened, "at the start of a span")
            if self.busy_reason is None:
                self.drain(False, "at the start of a span")  # what the driver buffered in the pause is no step's
                self.utilization.append([])
                self.opened_us = int(self.wall() * 1e6)
            self.running = self.live

    def pause(self) -> None:
        """Close the open span: its seconds, energy and utilization samples are added up."""
        with self.lock:
            if not self.running:
                return
            self.running = False
            now = self.clock()
            self.seconds += now - self.opened
            end = self.energy_reading(now, "at the end of a span") if self.energy_reason is None else []
            if end:
                span = self.span + end
                if self.source == COUNTER:
                    self.joules += counter_joules(span[0][1], span[-1][1])
                else:
                    self.joules += trapezoid_joules(span)
                    self.power_samples += len(span)
            if self.busy_reason is None:
                self.drain(True, "at the end of a span")
                self.bounds.append((self.opened_us, int(self.wall() * 1e6)))

    def energy_reading(self, now: float, where: str) -> List[Tuple[float, int]]:
        """[(now, the counter's millijoules or the power's milliwatts)], or [] once NVML failed
        (energy_reason then says where and how)."""
        read = self.nvml.nvmlDeviceGetTotalEnergyConsumption if self.source == COUNTER \
            else self.nvml.nvmlDeviceGetPowerUsage
        try:
            return [(now, read(self.handle))]
        except self.nvml.NVMLError as error:
            self.energy_reason = f"NVML failed reading the GPU's {self.what()} {where}: {error}"
            return []

    def what(self) -> str:
        return "energy counter" if self.source == COUNTER else "power"

    def drain(self, keep: bool, where: str) -> None:
        """Take the utilization samples the driver buffered since the newest one taken, each once:
        into the open span's with `keep`, else dropped. One that failed sets busy_reason."""
        nvml = self.nvml
        try:
            _, samples = nvml.nvmlDeviceGetSamples(self.handle, nvml.NVML_GPU_UTILIZATION_SAMPLES, self.last_seen)
        except nvml.NVMLError_NotFound:  # NVML's answer when no sample is newer than last_seen
            return
        except nvml.NVMLError as error:
            self.busy_reason = f"NVML failed reading the GPU's utilization samples {where}: {error}"
            return
        fresh = {sample.timeStamp: sample.sampleValue.uiVal for sample in samples if sample.timeStamp > self.last_seen}
        odd = next((busy for busy in fresh.values() if not 0 <= busy <= 100), None)
        if odd is not None:  # no share of a sample period: the driver's samples cannot be trusted
            self.busy_reason = f"NVML gave a utilization sample of {odd}%, which is no share of a sample period"
            return
        if fresh:
            self.last_seen = max(fresh)
            self.seen += sorted(fresh)
            if keep:
                self.utilization[-1] += sorted(fresh.items())

    def sample(self) -> None:
        """The sampler thread: while a span is open, a power sample each period on a GPU without
        the energy counter, and the utilization samples the driver buffered since the last drain."""
        period = self.interval_s or (SAMPLE_INTERVAL_S if self.samples_power else DRAIN_INTERVAL_S)
        while not self.stopping.wait(period):
            with self.lock:
                if not self.running:
                    continue
                if self.samples_power:
                    self.span += self.energy_reading(self.clock(), "while sampling")
                if self.busy_reason is None:
                    self.drain(True, "while sampling")

    def finish(self, images: int) -> Dict[str, Any]:
        """runs[]'s energy and gpu_busy over the spans read, each beside the sentence saying why
        it is None (energy_unavailable, gpu_busy_unavailable); `images` are the images this
        process trained in them. Stops the sampler and NVML."""
        self.pause()
        self.stopping.set()
        if self.sampler is not None:
            self.sampler.join()
        if self.nvml is not None:
            shut_down(self.nvml)
        energy, energy_unavailable = self.energy_figure(images)
        busy, busy_unavailable = self.busy_figure()
        return {"energy": energy, "energy_unavailable": energy_unavailable, "gpu_busy": busy,
                "gpu_busy_unavailable": busy_unavailable}

    def energy_figure(self, images: int) -> Tuple[Optional[Dict[str, Any]], Optional[str]]:
        """(runs[].energy, None), or (None, why there is none)."""
        why = self.energy_unusable(images)
        if why:
            return None, why
        return {"joules_per_image": self.joules / images, "mean_watts": self.joules / self.seconds,
                "joules": self.joules, "seconds": self.seconds, "images": images, "source": self.source,
                "power_samples": self.power_samples if self.source == POWER_SAMPLES else None,
                "nvml_index": self.index, "window_too_short": window_too_short(self.seconds)}, None

    def energy_unusable(self, images: int) -> Optional[str]:
        """Why the spans read give no energy figure, or None."""
        if self.energy_reason:
            return self.energy_reason
        if not self.started or images <= 0 or self.seconds <= 0:
            return "no step was timed"
        if self.joules <= 0:
            return ("the GPU's energy counter did not move over the timed steps" if self.source == COUNTER
                    else "NVML reported no power draw over the timed steps")
        if self.joules / self.seconds > MAX_PLAUSIBLE_WATTS:
            return (f"the GPU's energy counter went back over the timed steps (a mean of "
                    f"{self.joules / self.seconds:.3g} W, beyond any GPU's draw): the driver was reloaded?")
        return None

    def busy_figure(self) -> Tuple[Optional[Dict[str, Any]], Optional[str]]:
        """(runs[].gpu_busy, None): the mean of the utilization samples whose whole period lies in
        a span, each the share of its period in which kernels ran, where there are at least
        MIN_BUSY_SAMPLES of them; or (None, why there is none)."""
        if self.busy_reason:
            return None, self.busy_reason
        if not self.started or self.seconds <= 0:
            return None, "no step was timed"
        stamped = [(stamp, busy, bound) for span, bound in zip(self.utilization, self.bounds) for stamp, busy in span]
        if not stamped:
            return None, (f"NVML buffered no utilization sample in the {self.seconds:.3g} s of timed steps (it "
                          "takes one every 1/6 s to 1 s, by GPU)")
        tolerance = CLOCK_TOLERANCE_S * 1e6
        if not any(opened - tolerance <= stamp <= closed + tolerance for stamp, _, (opened, closed) in stamped):
            return None, ("NVML's utilization samples are not stamped with this host's clock, so none can be placed "
                          "in the timed steps")
        period_s = sample_period_s(sorted(set(self.seen)))
        period = period_s * 1e6 if period_s else None
        inside = [busy for stamp, busy, (opened, closed) in stamped
                  if period is not None and stamp - period >= opened and stamp <= closed]
        if len(inside) < MIN_BUSY_SAMPLES:
            return None, too_few_samples(len(inside), self.seconds, period_s)
        return {"share": statistics.mean(inside) / 100.0, "source": UTILIZATION_SAMPLES, "window_s": self.seconds,
                "samples": len(inside), "sample_period_s": period_s}, None


def open_meter(index: int, bus_id: Optional[str], clock: Callable[[], float] = time.perf_counter,
               interval_s: Optional[float] = None, wall: Callable[[], float] = time.time) -> Meter:
    """The Meter of cuda:`index` (this process's GPU), found in NVML by its PCI `bus_id` (as
    CUDA_VISIBLE_DEVICES renumbers the GPUs torch sees, NVML does not); without one, by the
    index, when nothing renumbers them. Its energy counter where the GPU has one, else its power;
    its utilization samples. A meter that says why there is no figure where NVML cannot be
    imported, started or asked."""
    try:
        nvml = importlib.import_module("pynvml")
    except ImportError:
        return Meter(reason=NO_MODULE)
    try:
        nvml.nvmlInit()
    except nvml.NVMLError as error:
        return Meter(reason=f"NVML failed to initialise: {error}")
    meter = Meter(nvml, clock=clock, interval_s=interval_s, wall=wall)
    missing = locate(meter, index, bus_id)
    meter.energy_reason = missing or choose_source(meter)
    meter.busy_reason = missing or probe_utilization(meter)
    if not meter.live:  # nothing to read: NVML goes now, and finish() has none to shut down
        shut_down(nvml)
        meter.nvml = None
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


def probe_utilization(meter: Meter) -> Optional[str]:
    """None where NVML gives the GPU's utilization samples; else why it does not."""
    nvml = meter.nvml
    try:
        nvml.nvmlDeviceGetSamples(meter.handle, nvml.NVML_GPU_UTILIZATION_SAMPLES, 0)
    except nvml.NVMLError_NotFound:  # none buffered yet
        return None
    except nvml.NVMLError_NotSupported:
        return "this GPU reports no utilization samples to NVML"
    except nvml.NVMLError as error:
        return f"NVML failed reading the GPU's utilization samples: {error}"
    return None
