"""--baseline: every ratio, interval and verdict against the mode the user names; merges keep
files of different baselines from pooling silently."""
import csv
import json

import pytest
from test_compare import run_cli_module

from conftest import assert_user_error, fake_run, read_results, run_main
from utils.results import compare, files

SMALL = ["--model", "squeezenet1_1", "-b", "8", "-n", "4", "--warmup", "1", "--no-progress", "--data", "synthetic"]


def test_every_figure_is_against_the_baseline_mode():
    """fp32 at 100 ms and 1 MiB, amp-bf16 at 50 ms and 0.5 MiB: against amp-bf16, fp32 is 0.5x
    as fast, uses 2x the memory and is 3 points more accurate."""
    learning = [2.3 - 0.03 * i for i in range(30)]
    fp32 = fake_run("fp32", 100.0, learning, 0.43)
    bf16 = dict(fake_run("amp-bf16", 50.0, learning, 0.40), peak_memory_bytes=1 << 19)
    comparison = compare.compare_modes([fp32, bf16], baseline="amp-bf16")
    row, base = comparison["fp32"], comparison["amp-bf16"]
    assert row.speedup_vs_baseline == pytest.approx(0.5) and base.speedup_vs_baseline == 1.0
    assert row.memory_ratio_vs_baseline == 2.0 and base.memory_ratio_vs_baseline == 1.0
    assert row.accuracy_delta_vs_baseline == pytest.approx(0.03) and base.accuracy_delta_vs_baseline == 0.0
    low, high = row.speedup_ci95
    assert low <= 0.5 <= high < 1.0 and row.speedup_significant is True
    assert base.speedup_ci95 is None  # the baseline has no interval against itself
    default = compare.compare_modes([fp32, bf16])  # fp32 unless told
    assert default["amp-bf16"].speedup_vs_baseline == pytest.approx(2.0)


def test_the_verdict_over_seeds_pairs_each_mode_with_the_baseline():
    learning = [2.3 - 0.03 * i for i in range(30)]
    runs = [dict(fake_run(mode, ms, learning, accuracy + 0.001 * seed), seed=seed)
            for seed in range(3) for mode, ms, accuracy in (("fp32", 100.0, 0.40), ("amp-bf16", 50.0, 0.30))]
    comparison = compare.compare_modes(runs, baseline="amp-bf16")
    assert comparison["fp32"].accuracy_mean_delta == pytest.approx(0.10)
    assert comparison["fp32"].accuracy_verdict == "differs"


def test_a_baseline_that_is_not_run_is_refused_before_training():
    assert_user_error(run_main(*SMALL, "--modes", "fp32,amp-bf16", "--baseline", "fp16-master"),
                      "--baseline fp16-master is not among the modes this run trains (fp32, amp-bf16)")
    assert_user_error(run_main(*SMALL, "--bf16", "--baseline", "fp32"), "--baseline fp32 is not among the modes")


@pytest.fixture(scope="module")
def against_bf16(tmp_path_factory):
    folder = tmp_path_factory.mktemp("baseline")
    result = run_main(*SMALL, "--modes", "fp32,amp-bf16", "--baseline", "amp-bf16", "--json", folder / "r.json",
                      "--csv", folder / "r.csv")
    assert result.returncode == 0, result.stderr
    return result, folder


def test_a_run_records_its_baseline_and_compares_fp32_with_it(against_bf16):
    result, folder = against_bf16
    document = json.loads((folder / "r.json").read_text())
    assert document["config"]["baseline"] == "amp-bf16"
    medians = {run["mode"]: run["step_time_ms"]["median"] for run in document["runs"]}
    row = document["comparison"]["fp32"]
    assert row["speedup_vs_baseline"] == pytest.approx(medians["amp-bf16"] / medians["fp32"])
    assert document["comparison"]["amp-bf16"]["speedup_vs_baseline"] == 1.0
    assert "baseline: amp-bf16 (--baseline)" in result.stdout
    rows = list(csv.DictReader((folder / "r.csv").open()))
    assert [(row["mode"], row["baseline"]) for row in rows] == [("fp32", "amp-bf16"), ("amp-bf16", "amp-bf16")]


def test_the_default_baseline_is_fp32_and_is_recorded(tmp_path):
    result = run_main(*SMALL, "--modes", "fp32,amp-bf16", "--json", tmp_path / "r.json")
    assert result.returncode == 0, result.stderr
    document = json.loads((tmp_path / "r.json").read_text())
    assert document["config"]["baseline"] == "fp32" and "(--baseline)" not in result.stdout


def test_merges_refuse_to_pool_different_baselines_unless_one_is_chosen(against_bf16, tmp_path):
    own = against_bf16[1] / "r.json"
    other = json.loads(own.read_text())
    other["config"]["baseline"] = "fp32"
    for run in other["runs"]:
        run["finished_utc"] += "-again"  # measured again: other runs
    (tmp_path / "fp32.json").write_text(json.dumps(other))
    refused = run_cli_module("utils.report", own, tmp_path / "fp32.json")
    assert refused.returncode == 2 and "Traceback" not in refused.stderr
    assert "compare against different baselines (amp-bf16, fp32); choose the one to compare with" in refused.stderr
    chosen = run_cli_module("utils.report", own, tmp_path / "fp32.json", "--baseline", "fp32", "--json",
                            tmp_path / "m.json", "--csv", tmp_path / "m.csv")
    assert chosen.returncode == 0, chosen.stderr
    (merged,) = json.loads((tmp_path / "m.json").read_text())
    assert merged["config"]["baseline"] == "fp32" and len(merged["runs"]) == 4
    assert merged["comparison"]["fp32"]["speedup_vs_baseline"] == 1.0
    assert {row["baseline"] for row in csv.DictReader((tmp_path / "m.csv").open())} == {"fp32"}
    missing = run_cli_module("utils.report", own, "--baseline", "fp16-master")
    assert missing.returncode == 2 and "--baseline fp16-master is not among the modes these files hold" \
        in missing.stderr


def test_the_same_runs_against_another_baseline_are_new_csv_rows(against_bf16, tmp_path):
    document = read_results(against_bf16[1] / "r.json")
    path = tmp_path / "r.csv"
    assert files.append_csv(path, document) == 2 and files.append_csv(path, document) == 0
    document["config"]["baseline"] = "fp32"
    document["comparison"] = compare.compare_modes(document["runs"], baseline="fp32")
    assert files.append_csv(path, document) == 2
