"""The busy-host warning (utils/measure/host_load.py): decided from made-up readings, combined
over a resumed run's segments, and recorded in each run's record and the JSON by a real run."""
import json

import pytest

from conftest import run_main
from utils.measure import host_load
from utils.measure.host_load import Reading


def host(load, busy_cores, cores=2, threads=2, seconds=10.0):
    """runs[].host over `seconds` in which this process used `busy_cores` and the load was `load`."""
    return host_load.over(Reading(0.0, 0.0, load), Reading(seconds, busy_cores * seconds, load), cores, threads)


def test_the_reading_is_the_process_cpu_over_the_wall_time():
    found = host(load=1.5, busy_cores=1.5)
    assert found["process_cpu_cores"] == pytest.approx(1.5) and found["process_cpu_share"] == pytest.approx(0.75)
    assert found["load_avg_1m_start"] == found["load_avg_1m_end"] == 1.5 and found["wall_s"] == 10.0


@pytest.mark.parametrize("load, busy, device, share, expected", [
    (2.0, 2.0, "cpu", 0.0, None),  # this process alone on both cores
    (0.3, 0.9, "cpu", 0.0, None),  # a one-minute load still catching up with a short run
    (3.4, 1.9, "cpu", 0.0, "another process competes"),  # another process took a core
    (5.0, 0.5, "cpu", 0.0, "another process competes"),  # threads starved: 3,450 ms steps instead of 300
    (1.9, 0.7, "cpu", 0.0, "another process competes"),  # starved, with others running, below the core count
    (1.2, 1.0, "cuda", 0.05, None),  # a GPU run: one core feeding the GPU
    (1.2, 1.0, "cuda", 0.6, "cannot keep the GPU fed"),  # most of each step waits for its batch
    (1.2, 1.0, "cpu", 0.6, None),  # on a CPU the data wait is the host's own work: no GPU to feed
    (None, 0.5, "cpu", 0.0, None),  # no load average on this platform: no evidence of others
])
def test_the_warning_names_what_distorted_the_timing(load, busy, device, share, expected):
    text = host_load.warning([host(load, busy)], device, share)
    assert (text is None) if expected is None else (expected in text), text


def test_a_busy_host_on_a_gpu_is_named_before_the_data_wait():
    text = host_load.warning([host(6.0, 1.0)], "cuda", 0.6)
    assert "another process competes" in text and "load average 6.0 on 2 cores" in text


def test_the_segments_of_a_resumed_run_combine_weighted_by_their_wall_time():
    # 10 s on 1.5 of 2 cores at load 1.5, then 30 s on 2.0 cores at load 3.0 (started at 2.5):
    # (15 + 60) CPU s over 40 s is 1.875 cores, 0.9375 of 2; the highest loads are 2.5 and 3.0
    first = host(load=1.5, busy_cores=1.5, seconds=10.0)
    second = host_load.over(Reading(100.0, 0.0, 2.5), Reading(130.0, 60.0, 3.0), 2, 2)
    found = host_load.combined([first, second])
    assert found["wall_s"] == 40.0 and found["segments"] == 2
    assert found["process_cpu_cores"] == pytest.approx(1.875) and found["process_cpu_share"] == pytest.approx(0.9375)
    assert found["load_avg_1m_start"] == 2.5 and found["load_avg_1m_end"] == 3.0
    assert host_load.combined([first]) == dict(first, segments=1)


def test_a_busy_segment_warns_though_quiet_ones_outweigh_it():
    """A short segment whose threads were starved (load 1.9, this process at 0.7 of 2 cores) before a
    long quiet one: their combined CPU use, (7 + 2000) / 1010 = 1.99 cores, leaves no load beyond this
    process, so each segment is judged on its own and the busy one named with its own figures."""
    quiet = host(load=0.3, busy_cores=2.0, seconds=1000.0)
    starved = host(load=1.9, busy_cores=0.7, seconds=10.0)
    assert host_load.warning([host_load.combined([starved, quiet])], "cpu", 0.0) is None
    text = host_load.warning([starved, quiet], "cpu", 0.0)
    assert text.startswith("the host was busy in 1 of this run's 2 checkpoint segments: load average 1.9 on 2 cores "
                           "while this process used 0.7 of them"), text
    assert host_load.warning([quiet, quiet], "cpu", 0.0) is None and host_load.warning([], "cpu", 0.0) is None


@pytest.mark.parametrize("reading", [
    None, {}, dict(host(1.0, 1.0), wall_s=0.0), dict(host(1.0, 1.0), cores=True), dict(host(1.0, 1.0), cores=1.5),
    dict(host(1.0, 1.0), process_cpu_share=float("nan")), dict(host(1.0, 1.0), load_avg_1m_end=-1.0),
    dict(host(1.0, 1.0), extra=1),
])
def test_a_reading_a_run_never_writes_is_malformed(reading):
    assert host_load.malformed(reading)
    assert not host_load.malformed(host(1.0, 1.0)) and not host_load.malformed(host(None, 1.0))


def test_each_run_records_the_host_in_the_json(tmp_path):
    result = run_main("--data", "synthetic", "-n", "3", "--warmup", "1", "--model", "squeezenet1_1", "-b", "4",
                      "--modes", "fp32", "--no-progress", "--json", tmp_path / "r.json")
    assert result.returncode == 0, result.stderr
    recorded = json.loads((tmp_path / "r.json").read_text())["runs"][0]["host"]
    assert recorded["cores"] >= 1 and recorded["torch_threads"] >= 1 and recorded["wall_s"] > 0
    assert recorded["process_cpu_cores"] >= 0 and "warning" in recorded
    assert (recorded["warning"] is None) == ("the host was busy" not in result.stdout)
