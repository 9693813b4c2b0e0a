"""The GPU's busy share (utils/measure/nvml_meter.py), read from a made-up NVML's utilization
samples (conftest.fake_nvml) over the same spans as the energy: the samples stamped in the
spans and no other, each once, what a buffer that overflowed leaves, and every reason there is
no share."""
import sys
import threading
import types

import pytest

from conftest import FakeGpu
from utils.measure import nvml_meter

BUS = "00000000:3B:00.0"
NEVER = 3600.0  # a sampler period the thread never reaches: the training thread's reads alone


class Buffer:
    """The driver's buffer of utilization samples: the newest `holds` of those produced so far."""

    def __init__(self, holds=100):
        self.produced, self.holds, self.reads = [], holds, 0

    def add(self, *samples):
        self.produced += samples

    def __call__(self):
        self.reads += 1
        return self.produced[-self.holds:]


def seconds(*values):
    return iter(values).__next__


def test_the_share_is_the_mean_of_the_samples_stamped_in_the_spans_and_pauses_are_left_out(install_nvml):
    buffer = Buffer()
    nvml = install_nvml(FakeGpu(0, BUS, energy=lambda: 1000, utilization=buffer))
    meter = nvml_meter.open_meter(0, BUS, clock=seconds(10.0, 12.0, 50.0, 51.0), interval_s=NEVER)
    buffer.add((1_000_000, 100))  # the warm-up's: before the first span opens
    meter.start()
    buffer.add((1_200_000, 40), (1_400_000, 60))
    meter.pause()  # an evaluation: the GPU busy with no step
    buffer.add((1_600_000, 100), (1_800_000, 100))
    meter.resume()
    buffer.add((2_000_000, 20), (2_200_000, 30))
    found = meter.finish(8)
    assert found["gpu_busy_unavailable"] is None and nvml.opened == 0
    assert found["gpu_busy"] == {"share": pytest.approx(0.375), "source": nvml_meter.UTILIZATION_SAMPLES,
                                 "window_s": 3.0, "samples": 4, "sample_period_s": 0.2}


def test_a_sample_seen_twice_counts_once(install_nvml):
    """NVML answers the samples stamped after the newest one taken; should it give one again, or
    one stamp twice in an answer, the meter keeps each stamp once."""
    buffered = [(1_000_000, 10), (1_200_000, 90)]
    nvml = install_nvml(FakeGpu(0, BUS, energy=lambda: 1000))
    nvml.nvmlDeviceGetSamples = lambda gpu, kind, last_seen: (1, [  # the whole buffer at every call
        types.SimpleNamespace(timeStamp=stamp, sampleValue=types.SimpleNamespace(uiVal=busy))
        for stamp, busy in buffered])
    meter = nvml_meter.open_meter(0, BUS, clock=seconds(0.0, 1.0, 2.0, 3.0), interval_s=NEVER)
    meter.start()  # the two buffered are the warm-up's
    buffered += [(1_400_000, 30), (1_400_000, 30)]
    meter.pause()
    meter.resume()
    buffered.append((1_600_000, 70))
    busy = meter.finish(1)["gpu_busy"]
    assert (busy["samples"], busy["share"]) == (2, pytest.approx(0.5))


def test_a_buffer_that_overflowed_leaves_the_mean_of_the_samples_it_kept(install_nvml):
    """Ten samples produced while the buffer holds four: the six oldest are lost, the share is
    the four kept, each counted once, and their period is still the gap between neighbours."""
    buffer = Buffer(holds=4)
    install_nvml(FakeGpu(0, BUS, energy=lambda: 1000, utilization=buffer))
    meter = nvml_meter.open_meter(0, BUS, clock=seconds(0.0, 2.0), interval_s=NEVER)
    meter.start()
    buffer.add(*[(100_000 * (i + 1), 10 * i) for i in range(10)])
    busy = meter.finish(1)["gpu_busy"]
    assert (busy["samples"], busy["share"], busy["sample_period_s"]) == (4, pytest.approx(0.75), 0.1)


def test_the_sampler_thread_drains_the_buffer_while_a_span_is_open(install_nvml):
    """A buffer that holds two samples, one produced at each read: only a thread draining it
    as the span goes on keeps them all, each once."""
    produced = Buffer(holds=2)
    drained_enough = threading.Event()

    def utilization():
        produced.add((1_000 * (len(produced.produced) + 1), 50))
        if len(produced.produced) >= 12:
            drained_enough.set()
        return produced()

    install_nvml(FakeGpu(0, BUS, energy=lambda: 1000, utilization=utilization))
    meter = nvml_meter.open_meter(0, BUS, interval_s=0.001)
    meter.start()
    assert drained_enough.wait(60), "the sampler thread drained nothing"
    found = meter.finish(1)
    busy = found["gpu_busy"]
    assert busy["samples"] >= 10 and busy["share"] == 0.5 and not meter.sampler.is_alive()
    assert busy["sample_period_s"] == 0.001


def test_no_sample_in_the_window_gives_no_share_and_says_so(install_nvml):
    install_nvml(FakeGpu(0, BUS, energy=lambda: 1000, utilization=lambda: []))
    meter = nvml_meter.open_meter(0, BUS, clock=seconds(0.0, 0.05), interval_s=NEVER)
    meter.start()
    found = meter.finish(1)
    assert found["gpu_busy"] is None
    assert found["gpu_busy_unavailable"].startswith("NVML buffered no utilization sample in the 0.05 s of timed steps")


def test_one_sample_gives_a_share_and_no_period(install_nvml):
    buffer = Buffer()
    install_nvml(FakeGpu(0, BUS, energy=lambda: 1000, utilization=buffer))
    meter = nvml_meter.open_meter(0, BUS, clock=seconds(0.0, 0.5), interval_s=NEVER)
    meter.start()
    buffer.add((7_000_000, 64))
    busy = meter.finish(1)["gpu_busy"]
    assert (busy["share"], busy["samples"], busy["sample_period_s"]) == (0.64, 1, None)


def test_a_gpu_without_utilization_samples_still_reads_its_energy(install_nvml):
    install_nvml(FakeGpu(0, BUS, energy=iter([0, 0, 5000]).__next__))
    meter = nvml_meter.open_meter(0, BUS, clock=seconds(0.0, 1.0), interval_s=NEVER)
    meter.start()
    found = meter.finish(10)
    assert found["energy"]["joules"] == 5.0 and meter.sampler is None  # nothing for a thread to sample
    assert (found["gpu_busy"], found["gpu_busy_unavailable"]) == (None, "this GPU reports no utilization samples "
                                                                        "to NVML")


def test_a_gpu_without_energy_readings_still_reads_its_busy_share(install_nvml):
    buffer = Buffer()
    nvml = install_nvml(FakeGpu(0, BUS, utilization=buffer))
    meter = nvml_meter.open_meter(0, BUS, clock=seconds(0.0, 1.0), interval_s=NEVER)
    meter.start()
    buffer.add((1_000, 80))
    found = meter.finish(10)
    assert found["energy"] is None and "neither its energy nor its power" in found["energy_unavailable"]
    assert found["gpu_busy"]["share"] == 0.8 and nvml.opened == 0


def test_nvml_failing_to_give_samples_during_the_run_gives_no_share(install_nvml):
    buffer = Buffer()
    nvml = install_nvml(FakeGpu(0, BUS, energy=lambda: 1000, utilization=buffer))
    meter = nvml_meter.open_meter(0, BUS, clock=seconds(0.0, 1.0), interval_s=NEVER)
    meter.start()

    def failing(gpu, kind, last_seen):
        raise nvml.NVMLError("GPU is lost")

    nvml.nvmlDeviceGetSamples = failing
    found = meter.finish(10)
    assert found["gpu_busy"] is None and nvml.opened == 0
    assert found["gpu_busy_unavailable"] == ("NVML failed reading the GPU's utilization samples at the end of a "
                                             "span: GPU is lost")


def test_every_reason_the_meter_cannot_read_is_the_busy_shares_reason_too(install_nvml, monkeypatch):
    def why(meter, images=1):
        return meter.finish(images)["gpu_busy_unavailable"]

    assert why(nvml_meter.Meter(reason=nvml_meter.CPU_RUN)) == nvml_meter.CPU_RUN
    install_nvml(init_error="Driver Not Loaded")
    assert why(nvml_meter.open_meter(0, BUS)) == "NVML failed to initialise: Driver Not Loaded"
    monkeypatch.setitem(sys.modules, "pynvml", None)
    assert why(nvml_meter.open_meter(0, BUS)) == nvml_meter.NO_MODULE
    install_nvml(FakeGpu(0, BUS, utilization=Buffer()))
    assert why(nvml_meter.open_meter(0, BUS), images=0) == "no step was timed"
    assert why(nvml_meter.open_meter(0, "00000000:AF:00.0")).startswith("NVML found no GPU at 00000000:AF:00.0")


def test_the_period_between_samples_is_the_median_gap_within_each_span():
    spans = [[(0, 1), (200_000, 1), (400_000, 1)], [(9_000_000, 1)], [(20_000_000, 1), (20_100_000, 1)]]
    assert nvml_meter.sample_period_s(spans) == 0.2
    assert nvml_meter.sample_period_s([[(5, 1)], []]) is None
