"""Energy per image in the comparison, the table, its notes, the CSV and the checks of a
result file, from made-up runs (runs[].energy as utils/measure/nvml_meter.py writes it): the
ratio only from windows that resolve it, each run's on its own."""
import json

import pytest

from conftest import ROOT, fake_run, read_results
from utils.results import compare, files, summary, validate

LEARNING = [2.3 - 0.03 * i for i in range(30)]


def with_energy(run, joules_per_image, device="cuda:0", seconds=12.0):
    """`run` on a GPU, with runs[].energy at `joules_per_image` over `seconds` of timed steps
    (None: the reason instead)."""
    joules = 64 * joules_per_image if joules_per_image is not None else None
    found = None if joules is None else {
        "joules_per_image": joules_per_image, "mean_watts": joules / seconds, "joules": joules, "seconds": seconds,
        "images": 64, "source": "nvml-energy-counter", "power_samples": None, "nvml_index": 0,
        "window_too_short": seconds < 10.0}
    return dict(run, device=device, steps=30, energy=found,
                energy_unavailable=None if found else "NVML failed to initialise: Driver Not Loaded")


def runs_of(figures, seconds=None):
    """{mode: [J/img of each repeat]} as runs, the same step times for all; `seconds` {mode:
    [the window of each repeat]}, 12 s unless given."""
    return [with_energy(fake_run(mode, 100.0, LEARNING, 0.4, repeat), value,
                        seconds=(seconds or {}).get(mode, [12.0] * len(values))[repeat])
            for mode, values in figures.items() for repeat, value in enumerate(values)]


def printed(runs):
    """The table and the energy notes under it that `runs` give."""
    document = {"config": {"baseline": "fp32"}, "runs": runs, "comparison": compare.compare_modes(runs)}
    return summary.comparison_table(document["comparison"]) + "\n" + " ".join(summary.energy_notes(document))


def test_the_energy_ratio_has_an_interval_over_three_runs_per_mode():
    comparison = compare.compare_modes(runs_of({"fp32": [0.4, 0.42, 0.41], "amp-bf16": [0.2, 0.21, 0.19]}))
    row = comparison["amp-bf16"]
    assert row.joules_per_image == 0.2 and row.energy_ratio_vs_baseline == pytest.approx(0.2 / 0.41)
    low, high = row.energy_ratio_ci95
    assert low <= row.energy_ratio_vs_baseline <= high and high < 1.0
    assert comparison["fp32"].energy_ratio_vs_baseline == 1.0 and comparison["fp32"].energy_ratio_ci95 is None


def test_one_run_per_mode_gives_the_ratio_without_an_interval():
    row = compare.compare_modes(runs_of({"fp32": [0.4], "amp-bf16": [0.3]}))["amp-bf16"]
    assert row.energy_ratio_vs_baseline == pytest.approx(0.75) and row.energy_ratio_ci95 is None


def test_no_ratio_without_the_baselines_energy():
    comparison = compare.compare_modes(runs_of({"fp32": [None], "amp-bf16": [0.3]}))
    assert comparison["fp32"].joules_per_image is None and comparison["amp-bf16"].joules_per_image == 0.3
    assert comparison["amp-bf16"].energy_ratio_vs_baseline is None


def test_the_table_and_notes_show_the_energy_and_say_what_it_rests_on():
    text = printed(runs_of({"fp32": [0.4, 0.42, 0.41], "amp-bf16": [0.2, 0.21, 0.19]}))
    table = text.split("\n\n")[2].splitlines()
    assert table[0].split() == ["mode", "J/img", "energy", "vs", "base"]
    assert table[2].split()[:2] == ["fp32", "0.41"] and table[3].split()[:3] == ["amp-bf16", "0.2", "0.49"]
    assert "J/img: the GPU's energy over the timed steps per image trained" in text
    assert "(nvml-energy-counter; runs[].energy)" in text


def test_a_gpu_run_without_energy_says_why_and_shows_no_column():
    text = printed(runs_of({"fp32": [None], "amp-bf16": [None]}))
    assert "J/img not shown: NVML failed to initialise: Driver Not Loaded." in text and "energy vs base" not in text


def test_a_mode_without_energy_beside_others_is_named():
    text = printed(runs_of({"fp32": [0.4], "amp-bf16": [None]}))
    assert "J/img of amp-bf16 not measured: NVML failed to initialise: Driver Not Loaded." in text


def test_cpu_runs_say_nothing_of_energy():
    runs = [with_energy(fake_run(mode, 100.0, LEARNING, 0.4), None, device="cpu") for mode in ("fp32", "amp-bf16")]
    text = printed(runs)
    assert "J/img" not in text and "energy" not in text


def test_the_csv_row_ends_with_the_energy_and_its_ratio(tmp_path):
    document = genuine_with_energy()
    document["runs"][1]["energy"] = with_energy({}, 0.2)["energy"]
    (tmp_path / "r.json").write_text(json.dumps(document))
    rows = [dict(zip(files.CSV_COLUMNS, row)) for row in files.csv_rows(read_results(tmp_path / "r.json"))]
    assert [(row["mode"], row["joules_per_image"], row["energy_ratio_vs_baseline"], row["energy_ratio_ci95_low"])
            for row in rows] == [("fp32", 0.25, 1.0, None), ("amp-fp16", 0.2, 0.8, None)]


def genuine_with_energy(**changed):
    """The genuine result file of tests/unit/results/data, its first run given an energy block."""
    document = json.loads((ROOT / "tests" / "unit" / "results" / "data" / "explained.json").read_text())
    document["runs"][0]["energy"] = dict(with_energy({}, 0.25)["energy"], **changed)
    return document


def test_a_result_file_with_energy_is_checked_field_by_field():
    validate.check(genuine_with_energy())
    validate.check(genuine_with_energy(source="nvml-power-samples", power_samples=12))
    with pytest.raises(validate.Invalid, match=r"runs\[0\].energy.joules_per_image is -0.25, not a number above 0"):
        validate.check(genuine_with_energy(joules_per_image=-0.25))
    with pytest.raises(validate.Invalid, match=r"runs\[0\].energy.images is 1.5, not a whole number"):
        validate.check(genuine_with_energy(images=1.5))
    with pytest.raises(validate.Invalid,
                       match=r"runs\[0\].energy.mean_watts is 12.0, not what its joules give \(1.33333\)"):
        validate.check(genuine_with_energy(mean_watts=12.0))
    with pytest.raises(validate.Invalid, match=r"runs\[0\].energy.joules_per_image is 0.5, not what its joules give"):
        validate.check(genuine_with_energy(joules_per_image=0.5))


def test_energy_that_went_back_or_a_flag_its_window_contradicts_is_refused():
    with pytest.raises(validate.Invalid, match=r"runs\[0\].energy.mean_watts is 16000.0, beyond any GPU's draw "
                                               r"\(5000 W\): a counter that went back"):
        validate.check(genuine_with_energy(mean_watts=16000.0, seconds=0.001))
    with pytest.raises(validate.Invalid, match=r"runs\[0\].energy.window_too_short is false, but its window of 4 s "
                                               r"is under the 10 s an energy figure needs"):
        validate.check(genuine_with_energy(seconds=4, mean_watts=4.0, window_too_short=False))
    with pytest.raises(validate.Invalid, match=r"runs\[0\].energy.window_too_short is true, but its window of 12.0 s "
                                               r"is at least the 10 s"):
        validate.check(genuine_with_energy(window_too_short=True))
    with pytest.raises(validate.Invalid, match=r"runs\[0\].energy.window_too_short is 1, not true or false"):
        validate.check(genuine_with_energy(window_too_short=1))


def test_a_window_too_short_records_its_joules_but_gives_no_ratio_and_says_so():
    runs = runs_of({"fp32": [0.4], "amp-bf16": [0.2]}, seconds={"amp-bf16": [4.0]})
    comparison = compare.compare_modes(runs)
    row = comparison["amp-bf16"]
    assert (row.joules_per_image, row.energy_window_too_short, row.energy_ratio_vs_baseline) == (0.2, True, None)
    assert comparison["fp32"].energy_window_too_short is False and comparison["fp32"].energy_ratio_vs_baseline == 1.0
    text = printed(runs)
    table = text.split("\n\n")[2].splitlines()
    assert table[3].split() == ["amp-bf16", "0.2", "window", "too", "short"]
    assert "window too short: the energy of amp-bf16 was read over timed steps under 10 s (the longest 4 s)" in text
    assert "run more steps (-n) so that each run's timed steps last 10 s or more." in text


def test_a_baseline_whose_window_is_too_short_gives_no_ratio_to_any_mode():
    comparison = compare.compare_modes(runs_of({"fp32": [0.4], "amp-bf16": [0.2]}, seconds={"fp32": [9.99]}))
    assert [row.energy_ratio_vs_baseline for row in comparison.values()] == [None, None]
    assert (comparison["fp32"].energy_window_too_short, comparison["amp-bf16"].energy_window_too_short) == (True, False)


def test_short_windows_pooled_across_repeats_still_give_no_ratio():
    """Three repeats of 4 s add up to 12 s, but each window still has its own two ends."""
    row = compare.compare_modes(runs_of({"fp32": [0.4] * 3, "amp-bf16": [0.2] * 3},
                                        seconds={"amp-bf16": [4.0] * 3}))["amp-bf16"]
    assert row.energy_window_too_short and row.energy_ratio_vs_baseline is None and row.energy_ratio_ci95 is None


def test_the_runs_whose_windows_resolve_their_energy_alone_give_a_modes_figures():
    runs = runs_of({"fp32": [0.4, 0.42, 0.41, 0.9], "amp-bf16": [0.2, 0.21, 0.19]},
                   seconds={"fp32": [12.0, 12.0, 12.0, 2.0]})
    comparison = compare.compare_modes(runs)
    fp32, bf16 = comparison["fp32"], comparison["amp-bf16"]
    assert (fp32.joules_per_image, fp32.energy_window_too_short) == (0.41, False)
    assert bf16.energy_ratio_vs_baseline == pytest.approx(0.2 / 0.41) and bf16.energy_ratio_ci95[1] < 1.0
    assert "J/img of fp32 leaves out 1 of its 4 runs: their timed steps lasted under 10 s." in printed(runs)
