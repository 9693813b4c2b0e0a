"""The GPU energy reader (utils/measure/nvml_meter.py), driven by a made-up NVML (conftest.fake_nvml)
and made-up clocks and counters: the counter, its wrap and stall, the power samples a GPU
without the counter falls back to, NVML failing, and several GPUs, each process reading its own."""
import sys
import threading
import types

import pytest

from conftest import FakeGpu
from utils import compat
from utils.measure import nvml_meter

BUS = "00000000:3B:00.0"


def readings(*values):
    """A function giving `values` one by one: a counter's, a power's or a clock's."""
    return iter(values).__next__


def energy_of(meter, images):
    """(runs[].energy, energy_unavailable) that the meter's finish() gives."""
    found = meter.finish(images)
    return found["energy"], found["energy_unavailable"]


def counter_run(install_nvml, counter, clock, images=100):
    """energy_of() a meter on a GPU whose counter reads `counter` (the first value is the probe
    open_meter takes), started and stopped once at the times `clock` gives, and the NVML it used."""
    nvml = install_nvml(FakeGpu(0, BUS, energy=readings(*counter)))
    meter = nvml_meter.open_meter(0, BUS, clock=readings(*clock))
    meter.start()
    return energy_of(meter, images), nvml


def test_the_counter_gives_the_joules_per_image_over_the_span_it_read(install_nvml):
    (found, why), nvml = counter_run(install_nvml, [1000, 5000, 25000], [1.0, 11.0])
    assert why is None and found == {"joules_per_image": 0.2, "mean_watts": 2.0, "joules": 20.0, "seconds": 10.0,
                                     "images": 100, "source": nvml_meter.COUNTER, "power_samples": None,
                                     "nvml_index": 0, "window_too_short": False}
    assert nvml.opened == 0  # NVML shut down again


def test_a_window_under_ten_seconds_keeps_its_joules_flagged(install_nvml):
    """100 of the counter's 0.1 s updates: a window of 9.99 s is flagged, one of 10 s is not."""
    (short, _), _ = counter_run(install_nvml, [0, 0, 20_000], [0.0, 9.99])
    (enough, _), _ = counter_run(install_nvml, [0, 0, 20_000], [0.0, 10.0])
    assert (short["joules"], short["window_too_short"]) == (20.0, True) and enough["window_too_short"] is False


def test_a_counter_that_wraps_past_64_bits_counts_on_from_zero(install_nvml):
    (found, why), _ = counter_run(install_nvml, [0, 2 ** 64 - 500, 1500], [0.0, 1.0])
    assert why is None and found["joules"] == 2.0
    assert nvml_meter.counter_joules(2 ** 64 - 1, 0) == 0.001


def test_a_counter_that_does_not_move_gives_no_figure_and_says_so(install_nvml):
    (found, why), _ = counter_run(install_nvml, [7000, 7000, 7000], [0.0, 5.0])
    assert found is None and "did not move" in why


def test_a_counter_that_goes_back_is_not_taken_for_a_wrap(install_nvml):
    (found, why), _ = counter_run(install_nvml, [0, 10 ** 9, 5], [0.0, 10.0])
    assert found is None and "went back" in why


def test_the_pauses_between_spans_are_left_out(install_nvml):
    nvml = install_nvml(FakeGpu(0, BUS, energy=readings(0, 0, 1000, 900_000, 901_000)))
    meter = nvml_meter.open_meter(0, BUS, clock=readings(0.0, 1.0, 50.0, 51.0))
    meter.start()
    meter.pause()  # an evaluation: 899 J and 49 s that no step took
    meter.pause()  # pausing twice reads nothing
    meter.resume()
    meter.resume()
    found, why = energy_of(meter, 10)
    assert why is None and (found["joules"], found["seconds"], found["joules_per_image"]) == (2.0, 2.0, 0.2)
    assert nvml.opened == 0


def test_a_meter_never_started_says_no_step_was_timed(install_nvml):
    install_nvml(FakeGpu(0, BUS, energy=readings(0)))
    assert energy_of(nvml_meter.open_meter(0, BUS), 0) == (None, "no step was timed")


def test_a_gpu_without_the_counter_falls_back_to_power_samples(install_nvml):
    install_nvml(FakeGpu(0, BUS, power=readings(250_000, 200_000, 300_000)))
    meter = nvml_meter.open_meter(0, BUS, clock=readings(2.0, 6.0), interval_s=3600.0)  # the sampler never wakes
    meter.start()
    found, why = energy_of(meter, 50)
    assert why is None and found["source"] == nvml_meter.POWER_SAMPLES and found["power_samples"] == 2
    assert (found["joules"], found["seconds"], found["mean_watts"]) == (1000.0, 4.0, 250.0)
    assert found["joules_per_image"] == 20.0


def test_the_sampler_thread_integrates_every_sample_it_took(install_nvml):
    """Power rising as 1 W per second of the clock: the trapezoids are exact, however many
    samples the thread took, so the joules follow from the span's ends alone."""
    clock = {"now": -1.0}
    enough = threading.Event()

    def tick():
        clock["now"] += 1.0
        return clock["now"]

    def power():
        if clock["now"] >= 5.0:
            enough.set()
        return 1000.0 * clock["now"]

    install_nvml(FakeGpu(0, BUS, power=power))
    meter = nvml_meter.open_meter(0, BUS, clock=tick, interval_s=0.001)
    meter.start()  # the span starts at 0 s
    assert enough.wait(60), "the sampler thread took no sample"
    found, why = energy_of(meter, 1)
    assert why is None and found["power_samples"] >= 5
    assert found["joules"] == pytest.approx(found["seconds"] ** 2 / 2) and not meter.sampler.is_alive()


def test_the_power_samples_integrate_as_trapezoids():
    assert nvml_meter.trapezoid_joules([(0.0, 100_000), (1.0, 300_000), (3.0, 300_000)]) == 200.0 + 600.0
    assert nvml_meter.trapezoid_joules([(0.0, 100_000)]) == 0.0


def test_a_gpu_with_neither_reading_says_so(install_nvml):
    nvml = install_nvml(FakeGpu(0, BUS))
    found, why = energy_of(nvml_meter.open_meter(0, BUS), 10)
    assert found is None and "neither its energy nor its power" in why and nvml.opened == 0


def test_nvml_that_fails_to_initialise_gives_its_error(install_nvml):
    install_nvml(init_error="Driver Not Loaded")
    found, why = energy_of(nvml_meter.open_meter(0, BUS), 10)
    assert found is None and why == "NVML failed to initialise: Driver Not Loaded"


def test_without_the_module_the_reason_says_how_to_install_it(monkeypatch):
    monkeypatch.setitem(sys.modules, "pynvml", None)  # import pynvml raises ImportError
    found, why = energy_of(nvml_meter.open_meter(0, BUS), 10)
    assert found is None and why == nvml_meter.NO_MODULE and "requirements-energy.txt" in why


def test_nvml_failing_during_the_run_gives_no_figure(install_nvml):
    nvml = install_nvml(FakeGpu(0, BUS, energy=readings(0, 0)))
    meter = nvml_meter.open_meter(0, BUS, clock=readings(0.0, 1.0))

    def failing(_):
        raise nvml.NVMLError("GPU is lost")

    meter.start()
    nvml.nvmlDeviceGetTotalEnergyConsumption = failing
    found, why = energy_of(meter, 10)
    assert found is None and why == "NVML failed reading the GPU's energy counter at the end of a span: GPU is lost"
    assert nvml.opened == 0


def test_each_process_reads_its_own_gpu_found_by_its_bus_id(install_nvml, monkeypatch):
    """Two GPUs, and CUDA_VISIBLE_DEVICES=1 making the second one cuda:0 to torch: the bus id
    finds it in NVML, where it is GPU 1."""
    first, second = "00000000:3B:00.0", "00000000:86:00.0"
    install_nvml(FakeGpu(0, first, energy=readings(0, 0, 9_000_000)), FakeGpu(1, second, energy=readings(0, 0, 3000)))
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "1")
    meter = nvml_meter.open_meter(0, second, clock=readings(0.0, 1.0))
    meter.start()
    found, _ = energy_of(meter, 1)
    assert found["nvml_index"] == 1 and found["joules"] == 3.0


def test_without_a_bus_id_the_index_is_taken_unless_the_gpus_are_renumbered(install_nvml, monkeypatch):
    install_nvml(FakeGpu(0, BUS, energy=readings(0, 0, 1000)),
                 FakeGpu(1, "00000000:86:00.0", energy=readings(0, 0, 4000)))
    meter = nvml_meter.open_meter(1, None, clock=readings(0.0, 1.0))
    meter.start()
    assert energy_of(meter, 1)[0]["joules"] == 4.0
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "1,0")
    found, why = energy_of(nvml_meter.open_meter(1, None), 1)
    assert found is None and "CUDA_VISIBLE_DEVICES renumbers the GPUs" in why


def test_a_bus_id_nvml_does_not_know_is_named(install_nvml):
    install_nvml(FakeGpu(0, BUS, energy=readings(0)))
    found, why = energy_of(nvml_meter.open_meter(0, "00000000:AF:00.0"), 1)
    assert found is None and why.startswith("NVML found no GPU at 00000000:AF:00.0 for cuda:0")


def test_the_bus_id_is_spelt_as_nvml_spells_it(monkeypatch):
    import torch
    monkeypatch.setattr(torch.cuda, "get_device_properties", lambda index: types.SimpleNamespace(
        pci_domain_id=0, pci_bus_id=0x3B, pci_device_id=index))
    assert compat.cuda_pci_bus_id(0) == "00000000:3B:00.0" and compat.cuda_pci_bus_id(1) == "00000000:3B:01.0"
    monkeypatch.setattr(torch.cuda, "get_device_properties", lambda index: types.SimpleNamespace(name="older torch"))
    assert compat.cuda_pci_bus_id(0) is None
