"""The GPU's busy share (utils/measure/nvml_meter.py), read from a made-up NVML's utilization
samples (conftest.fake_nvml) over the same spans as the energy: the samples whose whole period
lies in the spans and no other, each once, only where there are enough of them, what a buffer that
overflowed leaves, and every reason there is no share."""
import sys
import threading
import time
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


class Clock:
    """The host's clock as the meter reads it, for its spans' seconds and for NVML's stamps alike
    (the wall clock, which NVML stamps its samples with): set by the test."""

    BASE = 1_000.0  # the clock's reading at the test's second 0

    def __init__(self):
        self.now = self.BASE

    def __call__(self):
        return self.now

    def stamp(self, at):
        """A sample's stamp at the test's second `at`, in NVML's microseconds."""
        return int(round((self.BASE + at) * 1e6))


def meter_on(install_nvml, buffer, clock, **gpu):
    """A meter of a made-up GPU with the utilization samples `buffer` holds, reading `clock`."""
    nvml = install_nvml(FakeGpu(0, BUS, utilization=buffer, **{"energy": lambda: 1000, **gpu}))
    return nvml, nvml_meter.open_meter(0, BUS, clock=clock, interval_s=NEVER, wall=clock)


def every(clock, start, end, period, busy):
    """Samples each `period` seconds from `start` to `end` (stamped at their period's end), each
    `busy` percent, or busy(i) for the i-th."""
    count = int(round((end - start) / period))
    return [(clock.stamp(start + period * (i + 1)), busy(i) if callable(busy) else busy) for i in range(count)]


def test_the_share_is_the_mean_of_the_samples_wholly_inside_the_spans_and_pauses_are_left_out(install_nvml):
    """Samples every 0.2 s: the warm-up's, the pause's (an evaluation: the GPU busy with no step)
    and those whose period straddles a span's opening are left out."""
    clock, buffer = Clock(), Buffer()
    nvml, meter = meter_on(install_nvml, buffer, clock)
    buffer.add(*every(clock, 0.0, 1.0, 0.2, 100))  # the warm-up's
    clock.now = 1_001.1
    meter.start()
    buffer.add(*every(clock, 1.0, 4.0, 0.2, lambda i: 100 if i == 0 else 40 if i % 2 else 60))  # the first straddles
    clock.now = 1_004.0
    meter.pause()
    buffer.add(*every(clock, 4.0, 6.0, 0.2, 100))
    clock.now = 1_006.1
    meter.resume()
    buffer.add(*every(clock, 6.0, 8.0, 0.2, lambda i: 100 if i == 0 else 20))
    clock.now = 1_008.0
    found = meter.finish(8)
    assert found["gpu_busy_unavailable"] is None and nvml.opened == 0
    # 14 of the first span (7 at 40%, 7 at 60%), 9 of the second at 20%
    assert found["gpu_busy"] == {"share": pytest.approx((7 * 40 + 7 * 60 + 9 * 20) / 23 / 100),
                                 "source": nvml_meter.UTILIZATION_SAMPLES, "window_s": pytest.approx(4.8),
                                 "samples": 23, "sample_period_s": 0.2}


@pytest.mark.parametrize("count", [nvml_meter.MIN_BUSY_SAMPLES - 1, nvml_meter.MIN_BUSY_SAMPLES])
def test_below_the_sample_minimum_there_is_no_share_and_the_reason_gives_the_count(count, install_nvml):
    """A run whose timed steps hold fewer whole sample periods than the minimum says so, with
    the count; at the minimum it gives its share."""
    clock, buffer = Clock(), Buffer()
    _, meter = meter_on(install_nvml, buffer, clock)
    buffer.add(*every(clock, 0.0, 1.0, 0.5, 100))
    clock.now = 1_001.0
    meter.start()
    buffer.add(*every(clock, 1.0, 1.0 + 0.5 * count, 0.5, 70))
    clock.now = 1_001.0 + 0.5 * count + 0.2  # closed before the next sample's period ends
    found = meter.finish(8)
    if count < nvml_meter.MIN_BUSY_SAMPLES:
        assert found["gpu_busy"] is None
        assert found["gpu_busy_unavailable"] == (
            f"too few samples: {count} of NVML's utilization samples lay wholly inside the {0.5 * count + 0.2:.3g} s "
            f"of timed steps (NVML takes one every 0.5 s on this GPU), and a share needs "
            f"{nvml_meter.MIN_BUSY_SAMPLES}; time more steps")
        assert nvml_meter.too_few_count(found["gpu_busy_unavailable"]) == count
    else:
        assert (found["gpu_busy"]["share"], found["gpu_busy"]["samples"]) == (pytest.approx(0.7), count)


def test_a_sample_seen_twice_counts_once(install_nvml):
    """NVML answers the samples stamped after the newest one taken; should it give one again, or
    one stamp twice in an answer, the meter keeps each stamp once."""
    clock = Clock()
    buffered = every(clock, 0.0, 1.0, 0.1, 10)  # the warm-up's
    nvml = install_nvml(FakeGpu(0, BUS, energy=lambda: 1000))
    nvml.nvmlDeviceGetSamples = lambda gpu, kind, last_seen: (1, [  # the whole buffer at every call
        types.SimpleNamespace(timeStamp=stamp, sampleValue=types.SimpleNamespace(uiVal=busy))
        for stamp, busy in buffered])
    meter = nvml_meter.open_meter(0, BUS, clock=clock, interval_s=NEVER, wall=clock)
    clock.now = 1_001.0
    meter.start()
    buffered += every(clock, 1.0, 2.0, 0.1, lambda i: 30 if i % 2 else 70)
    buffered += buffered[-3:]
    clock.now = 1_002.0
    busy = meter.finish(1)["gpu_busy"]
    assert (busy["samples"], busy["share"]) == (10, pytest.approx(0.5))


def test_a_buffer_that_overflowed_leaves_the_mean_of_the_samples_it_kept(install_nvml):
    """Twenty samples produced while the buffer holds twelve: the eight oldest are lost, the share
    is the twelve kept but the first (whose neighbour before it was lost), each counted once."""
    clock, buffer = Clock(), Buffer(holds=12)
    _, meter = meter_on(install_nvml, buffer, clock)
    meter.start()
    buffer.add(*every(clock, 0.0, 2.0, 0.1, lambda i: 5 * i))
    clock.now = 1_002.0
    busy = meter.finish(1)["gpu_busy"]
    kept = [5 * i for i in range(8, 20)]
    assert (busy["samples"], busy["share"], busy["sample_period_s"]) == \
        (12, pytest.approx(sum(kept) / 12 / 100), 0.1)


def test_samples_stamped_by_another_clock_give_no_share_and_say_so(install_nvml):
    """NVML stamps its samples with the host's wall clock; stamps that no span comes near (another
    clock) cannot be placed in the timed steps, and the reason says so rather than counting none."""
    clock, buffer = Clock(), Buffer()
    _, meter = meter_on(install_nvml, buffer, clock)
    meter.start()
    buffer.add(*[(100_000 * (i + 1), 50) for i in range(20)])  # seconds since boot, say
    clock.now = 1_002.0
    found = meter.finish(1)
    assert found["gpu_busy"] is None and "not stamped with this host's clock" in found["gpu_busy_unavailable"]


def test_the_sampler_thread_drains_the_buffer_while_a_span_is_open(install_nvml):
    """A buffer that holds two samples, one produced at each read, stamped by the host's clock:
    only a thread draining it as the span goes on keeps them all, each once."""
    produced = Buffer(holds=2)
    drained_enough = threading.Event()

    def utilization():
        produced.add((int(time.time() * 1e6), 50))
        if len(produced.produced) >= 30:
            drained_enough.set()
        return produced()

    install_nvml(FakeGpu(0, BUS, energy=lambda: 1000, utilization=utilization))
    meter = nvml_meter.open_meter(0, BUS, interval_s=0.001)
    meter.start()
    assert drained_enough.wait(60), "the sampler thread drained nothing"
    found = meter.finish(1)
    busy = found["gpu_busy"]
    assert busy["samples"] >= 20 and busy["share"] == 0.5 and not meter.sampler.is_alive()


def test_no_sample_in_the_window_gives_no_share_and_says_so(install_nvml):
    clock = Clock()
    install_nvml(FakeGpu(0, BUS, energy=lambda: 1000, utilization=lambda: []))
    meter = nvml_meter.open_meter(0, BUS, clock=clock, interval_s=NEVER, wall=clock)
    meter.start()
    clock.now += 0.05
    found = meter.finish(1)
    assert found["gpu_busy"] is None
    assert found["gpu_busy_unavailable"].startswith("NVML buffered no utilization sample in the 0.05 s of timed steps")


def test_one_sample_gives_no_share_and_no_period(install_nvml):
    clock, buffer = Clock(), Buffer()
    _, meter = meter_on(install_nvml, buffer, clock)
    meter.start()
    buffer.add((clock.stamp(0.4), 64))
    clock.now += 0.5
    found = meter.finish(1)
    assert found["gpu_busy"] is None and nvml_meter.too_few_count(found["gpu_busy_unavailable"]) == 0
    assert "(NVML takes one" not in found["gpu_busy_unavailable"]  # one sample has no period to give


def test_a_gpu_without_utilization_samples_still_reads_its_energy(install_nvml):
    clock = Clock()
    install_nvml(FakeGpu(0, BUS, energy=iter([0, 0, 5000]).__next__))
    meter = nvml_meter.open_meter(0, BUS, clock=clock, interval_s=NEVER, wall=clock)
    meter.start()
    clock.now += 1.0
    found = meter.finish(10)
    assert found["energy"]["joules"] == 5.0 and meter.sampler is None  # nothing for a thread to sample
    assert (found["gpu_busy"], found["gpu_busy_unavailable"]) == (None, "this GPU reports no utilization samples "
                                                                        "to NVML")


def test_a_gpu_without_energy_readings_still_reads_its_busy_share(install_nvml):
    clock, buffer = Clock(), Buffer()
    nvml = install_nvml(FakeGpu(0, BUS, utilization=buffer))
    meter = nvml_meter.open_meter(0, BUS, clock=clock, interval_s=NEVER, wall=clock)
    meter.start()
    buffer.add(*every(clock, 0.0, 2.0, 0.1, 80))
    clock.now += 2.0
    found = meter.finish(10)
    assert found["energy"] is None and "neither its energy nor its power" in found["energy_unavailable"]
    assert found["gpu_busy"]["share"] == 0.8 and nvml.opened == 0


def test_nvml_failing_to_give_samples_during_the_run_gives_no_share(install_nvml):
    clock, buffer = Clock(), Buffer()
    nvml, meter = meter_on(install_nvml, buffer, clock)
    meter.start()
    clock.now += 1.0

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


def test_the_period_between_samples_is_the_median_gap_between_neighbours():
    assert nvml_meter.sample_period_s([0, 200_000, 400_000, 9_000_000, 9_200_000]) == 0.2
    assert nvml_meter.sample_period_s([5]) is None and nvml_meter.sample_period_s([]) is None
