"""Energy per image and the GPU's busy share from the command line: a CPU run records neither
and says why, the table and the CSV as before but for the CSV's last columns; a run whose GPU a
made-up NVML reads records both over its timed steps alone, evaluations left out, and the table
shows them."""
import csv
import json
import sys
import time

from conftest import FakeGpu, fake_nvml, run_main
from utils.measure import nvml_meter
from utils.results import files
from utils.training import loop
from utils.training.curve import AccuracyCurve

SMALL = ["--model", "squeezenet1_1", "-b", "16", "--warmup", "2", "--no-progress", "--allow-unverified"]
EVERY_2_STEPS = 2 / 340  # epochs: the subset's 5,438 images are 340 batches of 16


def test_a_cpu_run_records_no_energy_and_says_why(subset, tmp_path):
    result = run_main(*SMALL, "-n", "4", "--data-dir", subset, "--modes", "fp32,amp-bf16", "--json",
                      tmp_path / "r.json", "--csv", tmp_path / "r.csv")
    assert result.returncode == 0, result.stderr
    runs = json.loads((tmp_path / "r.json").read_text())["runs"]
    assert [(run["energy"], run["energy_unavailable"]) for run in runs] == [(None, nvml_meter.CPU_RUN)] * 2
    assert [(run["gpu_busy"], run["gpu_busy_unavailable"]) for run in runs] == [(None, nvml_meter.CPU_RUN)] * 2
    assert "J/img" not in result.stdout and "energy" not in result.stdout and "GPU busy" not in result.stdout
    header, *rows = list(csv.reader((tmp_path / "r.csv").open()))
    assert header == files.CSV_COLUMNS and header[-4:] == ["joules_per_image", "energy_ratio_vs_baseline",
                                                           "energy_ratio_ci95_low", "energy_ratio_ci95_high"]
    assert [row[-4:] for row in rows] == [[""] * 4] * 2


def test_a_csv_with_the_columns_before_energy_is_refused(tmp_path):
    path = tmp_path / "old.csv"
    path.write_text(",".join(files.CSV_COLUMNS[:-4]) + "\n")
    result = run_main(*SMALL, "--data", "synthetic", "-n", "3", "--csv", path)
    assert result.returncode == 2 and "has other columns than ampbench writes" in result.stderr


def test_the_gpu_readings_cover_the_timed_steps_and_leave_the_evaluations_out(subset, tmp_path, monkeypatch):
    """A counter that gains 1 J at each reading, and a million joules at each evaluation; a GPU
    80% busy at each utilization sample, idle in each evaluation: the run's energy is the spans'
    joules alone, over the images of its 4 timed steps, and its busy share the spans' 80%."""
    counter = {"mj": 0}
    driver = {"until": time.time(), "busy": 80}  # the newest sample's stamp, in seconds, and what it reads
    buffered = []

    def reading():
        counter["mj"] += 1000
        return counter["mj"]

    def utilization():  # a sample every 0.5 ms, stamped by the host's clock, the driver's buffer holding 2000
        while driver["until"] + 0.0005 <= time.time():
            driver["until"] += 0.0005
            buffered.append((int(driver["until"] * 1e6), driver["busy"]))
        return buffered[-2000:]

    monkeypatch.setitem(sys.modules, "pynvml",
                        fake_nvml(FakeGpu(0, "00000000:3B:00.0", energy=reading, utilization=utilization)))
    monkeypatch.setattr(loop, "gpu_meter", lambda device, read: nvml_meter.open_meter(0, "00000000:3B:00.0"))
    evaluate = AccuracyCurve.take

    def costly_evaluation(curve, step, train_s):
        counter["mj"] += 10 ** 9
        utilization()
        driver["busy"] = 0
        try:
            return evaluate(curve, step, train_s)
        finally:
            utilization()  # the samples of the evaluation read idle
            driver["busy"] = 80

    monkeypatch.setattr(AccuracyCurve, "take", costly_evaluation)
    result = run_main(*SMALL, "-n", "6", "--data-dir", subset, "--modes", "fp32,amp-bf16", "--eval-every",
                      EVERY_2_STEPS, "--json", tmp_path / "r.json")
    assert result.returncode == 0, result.stderr
    for run in json.loads((tmp_path / "r.json").read_text())["runs"]:
        assert run["energy_unavailable"] is None and len(run["accuracy_curve"]) >= 2
        found = run["energy"]
        assert found["source"] == nvml_meter.COUNTER and found["images"] == 4 * 16 and 1.0 <= found["joules"] < 1000
        assert found["joules_per_image"] == found["joules"] / 64 and 0 < found["seconds"]
        assert found["window_too_short"] is (found["seconds"] < 10)
        busy = run["gpu_busy"]
        assert run["gpu_busy_unavailable"] is None and busy["share"] == 0.8
        assert busy["samples"] >= nvml_meter.MIN_BUSY_SAMPLES
        assert busy["source"] == nvml_meter.UTILIZATION_SAMPLES and busy["window_s"] == found["seconds"]
    assert "J/img" in result.stdout and "energy vs base" in result.stdout and "nvml-energy-counter" in result.stdout
    assert "GPU busy" in result.stdout and "80%" in result.stdout
