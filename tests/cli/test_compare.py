"""--compare: same start for every mode, consistent figures, CSV/PNG/JSON files, report merging."""
import copy
import csv
import json
import math
import sys
import types

import numpy as np
import pytest
import torch

from conftest import ROOT, assert_user_error, fake_run, read_results, run_cli, run_main
from utils.errors import WriteFailed
from utils.results import files, merge, summary

SMALL = ["--model", "squeezenet1_1", "-b", "8", "-n", "4", "--warmup", "1", "--no-progress"]
PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


@pytest.fixture(scope="module")
def compared(tmp_path_factory, subset_dir=None):
    from conftest import SUBSET
    folder = tmp_path_factory.mktemp("compare")
    result = run_cli(*SMALL, "--data-dir", SUBSET, "--allow-unverified", "--modes", "fp32,amp-bf16,fp16-master",
                     "--allow-slow-fp16", "--repeats", "2", "--json", folder / "r.json", "--csv", folder / "r.csv",
                     "--plot", folder / "r.png")
    return result, folder


def test_compare_prints_one_row_per_mode(compared):
    result, _ = compared
    assert result.returncode == 0, result.stderr
    rows = [line.split()[0] for line in result.stdout.splitlines()
            if line.strip().startswith(("fp32 ", "amp-bf16 ", "fp16-master "))]
    assert rows == ["fp32", "amp-bf16", "fp16-master"] * 3  # three blocks of 80 columns
    assert "speedup" in result.stdout and "MFU not shown: no peak figures for CPUs." in result.stdout


def test_every_mode_starts_from_the_same_weights_and_batches(compared):
    runs = json.loads((compared[1] / "r.json").read_text())["runs"]
    assert len(runs) == 6
    assert len({run["initial_weights_sha256"] for run in runs}) == 1
    assert len({run["first_batch_sha256"] for run in runs}) == 1


def test_repeats_alternate_the_order(compared):
    runs = json.loads((compared[1] / "r.json").read_text())["runs"]
    assert [(run["repeat"], run["mode"]) for run in runs] == [
        (0, "fp32"), (0, "amp-bf16"), (0, "fp16-master"), (1, "fp16-master"), (1, "amp-bf16"), (1, "fp32")]


def test_comparison_figures_are_consistent(compared):
    document = json.loads((compared[1] / "r.json").read_text())
    comparison = document["comparison"]
    assert list(comparison) == ["fp32", "amp-bf16", "fp16-master"]
    base = comparison["fp32"]
    assert base["speedup_vs_baseline"] == 1.0 and base["memory_ratio_vs_baseline"] == 1.0
    assert base["accuracy_delta_vs_baseline"] == (0.0 if base["learned"] else None)  # 4 steps: at chance
    for mode, row in comparison.items():
        runs = [run for run in document["runs"] if run["mode"] == mode]
        assert row["runs"] == 2 and row["repeat_medians_ms"] == [run["step_time_ms"]["median"] for run in runs]
        # two repeats run back to back, each a pair: the speedup is their ratios' geometric mean, no interval
        base_runs = [run for run in document["runs"] if run["mode"] == "fp32"]
        ratios = [one["step_time_ms"]["median"] / other["step_time_ms"]["median"]
                  for one, other in zip(base_runs, runs)]
        if mode != "fp32":
            assert row["repeat_speedups"] == pytest.approx(ratios) and row["speedup_ci95"] is None
            assert row["speedup_vs_baseline"] == pytest.approx(math.sqrt(ratios[0] * ratios[1]))
        assert row["images_per_sec"] == pytest.approx(8000 / row["median_step_ms"])
        assert row["tflops"] > 0 and row["mfu_pct"] is None
        if row["learned"] and base["learned"]:
            assert row["accuracy_delta_vs_baseline"] == pytest.approx(row["test_accuracy"] - base["test_accuracy"])
        else:
            assert row["accuracy_delta_vs_baseline"] is None
    assert comparison["fp16-master"]["final_loss_scale"] == 128.0
    assert comparison["amp-bf16"]["final_loss_scale"] is None
    for run in document["runs"]:
        assert len(run["step_times_ms"]) == run["timed_steps"] == 3
        assert run["train_flops_per_step"] > 0


def test_env_records_what_results_depend_on(compared):
    env = json.loads((compared[1] / "r.json").read_text())["env"]
    for key in ["device", "gpu_count", "driver", "cuda", "cudnn", "torch", "hostname", "git_commit", "command",
                "timestamp_utc", "tf32", "cudnn_benchmark", "source_sha256"]:
        assert key in env
    assert "--modes fp32,amp-bf16,fp16-master" in env["command"]


def test_a_run_writes_schema_6_with_the_comparison_keys_the_schema_page_lists(compared):
    from utils.results.upgrade import upgrade
    document = json.loads((compared[1] / "r.json").read_text())
    assert document["schema"] == "ampbench.result/7" and "upgraded_from" not in document
    page = (ROOT / "docs" / "results-schema.md").read_text()
    listed = page.split("* `comparison`: keyed by mode:", 1)[1].split("\n* ", 1)[0]
    keys = {key for row in document["comparison"].values() for key in row}
    assert keys and all(f"`{key}`" in listed for key in keys), sorted(key for key in keys if f"`{key}`" not in listed)
    assert upgrade(document) == document, "a file of this release is read as it is"


def test_a_file_of_this_release_and_one_of_each_earlier_era_are_read_and_reported_together(compared, tmp_path):
    """/1, /2 written before --baseline, /2 after it, and this run's /4: each its own table,
    each written back in /4's form."""
    eras = [ROOT / "results" / "NVIDIA-H100-80GB-HBM3" / "2026-11-22" / "resnet18.json",
            ROOT / "tests" / "unit" / "results" / "data" / "explained.json", ROOT / "docs" / "samples" / "why.json",
            compared[1] / "r.json"]
    result = run_cli_module("utils.report", *eras, "--json", tmp_path / "m.json")
    assert result.returncode == 0 and "Traceback" not in result.stderr, result.stderr
    merged = json.loads((tmp_path / "m.json").read_text())
    assert [document.get("upgraded_from") for document in merged] == \
        ["ampbench.result/1", "ampbench.result/2", "ampbench.result/2", None]
    assert {document["schema"] for document in merged} == {"ampbench.result/7"}
    assert all("speedup_vs_baseline" in row for document in merged for row in document["comparison"].values())
    assert result.stdout.count("setup: ") == 4 and result.stdout.count("median ms") == 4


def other_runs(document, tag):
    """The same document as if its runs had been measured again (another end time)."""
    document = copy.deepcopy(document)
    for run in document["runs"]:
        run["finished_utc"] = f"{run['finished_utc']}-{tag}"
    return document


def test_csv_has_one_row_per_mode_one_header_and_no_row_twice(compared, tmp_path):
    """Rows carry a run id (appending the same runs adds nothing),
    their runs' own time and the setup columns a reader filters on."""
    path = compared[1] / "r.csv"
    rows = list(csv.reader(path.open()))
    assert rows[0] == files.CSV_COLUMNS and len(rows) == 4
    document = read_results(compared[1] / "r.json")
    assert files.append_csv(path, document) == 0 and len(list(csv.reader(path.open()))) == 4
    assert files.append_csv(path, other_runs(document, "again")) == 3
    rows = list(csv.reader(path.open()))
    assert len(rows) == 7 and rows.count(files.CSV_COLUMNS) == 1
    table = [dict(zip(rows[0], row)) for row in rows[1:]]
    assert [row["mode"] for row in table] == ["fp32", "amp-bf16", "fp16-master"] * 2
    assert len({row["run_id"] for row in table}) == 6
    first = table[0]
    assert (first["channels_last"], first["compile"], first["loader"], first["lr"], first["warmup_lr_steps"],
            first["tf32"], first["world_size"]) == ("False", "False", "device", "0.0025", "0", "False", "1")
    assert first["torch"] == torch.__version__ and first["model"] == "squeezenet1_1"
    runs = [run for run in document["runs"] if run["mode"] == "fp32"]
    assert first["timestamp_utc"] == max(run["finished_utc"] for run in runs)
    bf16 = table[1]  # two repeats: a speedup, and no interval (two medians are a range)
    assert float(bf16["speedup_vs_baseline"]) > 0 and bf16["speedup_ci95_low"] == bf16["speedup_significant"] == ""


def test_plot_is_a_png(compared):
    data = (compared[1] / "r.png").read_bytes()
    assert data.startswith(PNG_MAGIC) and len(data) > 10_000


@pytest.mark.compat
def test_report_merges_separate_jobs_into_one_comparison(tmp_path):
    for mode_flag, name in [([], "fp32"), (["--bf16"], "bf16")]:
        result = run_main(*SMALL, "--data", "synthetic", *mode_flag, "--json", tmp_path / f"{name}.json")
        assert result.returncode == 0, result.stderr
    merged = tmp_path / "merged.json"
    result = run_cli_module("utils.report", tmp_path / "fp32.json", tmp_path / "bf16.json", "--json", merged,
                            "--plot", tmp_path / "merged.png", "--csv", tmp_path / "merged.csv")
    assert result.returncode == 0, result.stderr
    assert "amp-bf16" in result.stdout and "fp32" in result.stdout
    (document,) = json.loads(merged.read_text())
    assert list(document["comparison"]) == ["fp32", "amp-bf16"]
    assert document["comparison"]["amp-bf16"]["speedup_vs_baseline"] is not None
    assert (tmp_path / "merged.png").read_bytes().startswith(PNG_MAGIC)
    assert len(list(csv.reader((tmp_path / "merged.csv").open()))) == 3


def test_report_refuses_a_file_that_is_not_a_result(tmp_path):
    (tmp_path / "x.json").write_text('{"hello": 1}')
    assert_user_error(run_cli_module("utils.report", tmp_path / "x.json"), "not an ampbench result file")


def run_cli_module(module, *args):
    import subprocess
    import sys
    return subprocess.run([sys.executable, "-m", module, *map(str, args)], cwd=ROOT, capture_output=True, text=True)


@pytest.mark.parametrize("argv, phrase", [
    (["--modes", "fp32,fp6"], "unknown precision mode 'fp6'"),
    (["--modes", "fp32,fp32"], "lists a mode twice"),
    (["--modes", "tf32"], "mode tf32 only applies to CUDA GPUs"),
    (["--compare", "--fp16"], "--compare runs the modes listed in --modes; drop --fp16 and name the modes"),
    (["--tf32"], "mode tf32 only applies to CUDA GPUs"),
])
def test_bad_modes_exit_2(argv, phrase):
    assert_user_error(run_main(*argv, "--data", "synthetic"), phrase)


@pytest.mark.parametrize("fake, phrase", [
    (None, "pip install matplotlib"),  # None in sys.modules: the import fails
    (types.SimpleNamespace(__version__="3.3.4"), "--plot needs matplotlib 3.5 or newer, and this is 3.3.4"),
])
def test_plot_without_a_usable_matplotlib_is_refused_before_training(fake, phrase, tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "matplotlib", fake)  # NGC ships 3.5 and up
    result = run_main(*SMALL, "--data", "synthetic", "--plot", tmp_path / "p.png")
    assert_user_error(result, phrase)
    assert not (tmp_path / "p.png").exists()


def test_existing_csv_with_other_columns_is_refused_before_training(tmp_path):
    path = tmp_path / "other.csv"
    path.write_text("a,b\n1,2\n")
    assert_user_error(run_main(*SMALL, "--data", "synthetic", "--csv", path), "has other columns")
    assert path.read_text() == "a,b\n1,2\n"


# Outputs never overwrite each other, and CSV appends are all or nothing.
@pytest.mark.parametrize("outputs", [["--json", "X", "--checkpoint", "X"], ["--json", "X", "--csv", "X"],
                                     ["--plot", "X.png", "--json", "X.png"], ["--json", "X", "--csv", "LINK"]])
def test_outputs_that_are_one_file_are_refused_before_training(outputs, tmp_path):
    (tmp_path / "LINK").symlink_to(tmp_path / "X")
    argv = [str(tmp_path / a) if a in ("X", "X.png", "LINK") else a for a in outputs]
    result = run_main(*SMALL, "--data", "synthetic", *argv)
    assert_user_error(result, "name the same file")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["LINK"], "nothing was written"


def test_plot_suffix_picks_the_format_or_is_refused(compared, tmp_path):
    from utils.results import plot
    document = read_results(compared[1] / "r.json")
    plot.draw(tmp_path / "r.pdf", document)
    plot.draw(tmp_path / "r.svg", document)
    assert (tmp_path / "r.pdf").read_bytes().startswith(b"%PDF")
    assert b"<svg" in (tmp_path / "r.svg").read_bytes()[:500]
    assert_user_error(run_main(*SMALL, "--data", "synthetic", "--plot", tmp_path / "r.txt"), "must end in .png")


def test_writes_through_a_symlink_replace_its_target_and_keep_the_link(tmp_path):
    from utils.fileio import atomic_write
    (tmp_path / "target.json").write_text("old")
    (tmp_path / "link.json").symlink_to(tmp_path / "target.json")
    atomic_write(tmp_path / "link.json", lambda f: f.write(b"new"))
    assert (tmp_path / "link.json").is_symlink() and (tmp_path / "target.json").read_text() == "new"


def append_from_a_process(path, document, start):
    start.wait()
    files.append_csv(path, document)


def test_concurrent_appends_to_a_new_csv_write_one_header(compared, tmp_path):
    import multiprocessing
    document = read_results(compared[1] / "r.json")
    path = tmp_path / "shared.csv"
    start = multiprocessing.Barrier(4)
    workers = [multiprocessing.Process(target=append_from_a_process, args=(path, other_runs(document, i), start))
               for i in range(4)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join(60)
    rows = list(csv.reader(path.open()))
    assert rows.count(files.CSV_COLUMNS) == 1 and rows[0] == files.CSV_COLUMNS
    assert len(rows) == 1 + 4 * len(document["comparison"])


def test_a_full_disk_during_an_append_keeps_the_csv_whole(compared, tmp_path, monkeypatch):
    import errno
    import os
    document = read_results(compared[1] / "r.json")
    path = tmp_path / "r.csv"
    files.append_csv(path, document)
    before = path.read_bytes()

    def full(fd):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(os, "fsync", full)
    with pytest.raises(WriteFailed, match="No space left on device"):
        files.append_csv(path, other_runs(document, "new"))
    assert path.read_bytes() == before
    assert [p.name for p in tmp_path.iterdir() if p.name.endswith(".tmp")] == []


def test_merging_never_pools_runs_of_different_setups(compared):
    """A channels_last run and a plain one never merge into one row."""
    document = json.loads((compared[1] / "r.json").read_text())
    variants = []
    for change in [{}, {"channels_last": True}, {"compile": True, "compile_mode": "max-autotune"},
                   {"loader": "torchvision", "workers": 4}, {"lr": 0.2}, {"accum_steps": 2}]:
        variant = other_runs(document, "other")
        variant["config"].update(change)
        variants.append(variant)
    same_setup_other_mode = copy.deepcopy(document)
    same_setup_other_mode["config"].update(modes="amp-fp16")  # the modes asked for never split a setup
    merged = merge.merge(variants + [same_setup_other_mode])
    assert len(merged) == 6 and len(merged[0]["runs"]) == 2 * len(document["runs"])
    headers = [summary.summary(group).splitlines()[0] for group in merged]
    assert "channels_last" in headers[1] and "compile (max-autotune)" in headers[2]
    assert "loader torchvision (4 workers)" in headers[3] and "accum 2" in headers[5]
    differences = merge.setup_differences(merged)  # what utils.report prints above each table
    assert len(set(differences)) == 6 and "lr 0.2" in differences[4] and "channels_last True" in differences[1]


def test_report_that_cannot_write_its_json_is_refused_before_reading(compared, capsys):
    from utils import report as report_cli
    status = report_cli.main([str(compared[1] / "r.json"), "--json", "/proc/no/such/merged.json"])
    err = capsys.readouterr().err
    assert status == 2 and "utils.report: error: cannot write --json /proc/no/such/merged.json" in err, err


def test_report_reads_its_own_merged_json_and_merging_again_adds_nothing(compared, tmp_path):
    """utils.report reads the list it writes, and merging it again adds no row."""
    source = compared[1] / "r.json"
    first = run_cli_module("utils.report", source, "--json", tmp_path / "m.json", "--csv", tmp_path / "m.csv")
    assert first.returncode == 0, first.stderr
    again = run_cli_module("utils.report", tmp_path / "m.json", source, "--json", tmp_path / "m2.json",
                           "--csv", tmp_path / "m.csv")
    assert again.returncode == 0, again.stderr
    assert "0 of 3 rows appended" in again.stdout
    (merged,) = json.loads((tmp_path / "m2.json").read_text())
    assert len(merged["runs"]) == 6 and len(merged["sources"]) == 1
    assert merged["comparison"] == json.loads(source.read_text())["comparison"]
    assert len(list(csv.reader((tmp_path / "m.csv").open()))) == 4


def test_bootstrap_interval_holds_one_for_equal_samples_and_excludes_it_for_half_speed():
    """The 95% bootstrap interval of a ratio holds 1.0 for equal samples and excludes it for a copy 2x slower."""
    import numpy as np

    from utils.results import compare
    steps = list(np.random.default_rng(1).normal(100.0, 8.0, 200))
    low, high = compare.bootstrap_ratio(steps, list(steps))
    assert low < 1.0 < high
    low, high = compare.bootstrap_ratio([2 * value for value in steps], steps)
    assert 1.8 < low < 2.0 < high < 2.2


def timed_run(mode, steps_ms, repeat=0):
    times = {"median": float(np.median(steps_ms)), "p10": float(np.percentile(steps_ms, 10)),
             "p90": float(np.percentile(steps_ms, 90))}
    return dict(fake_run(mode, times["median"], [1.0] * 20, None, repeat), step_times_ms=list(steps_ms),
                step_time_ms=times)


def test_an_interval_says_what_it_rests_on_and_two_runs_give_none():
    """Three paired repeats: Student's t over their log ratios; one run per mode: a block
    bootstrap over the steps, wider than the independent one when the steps drift; two repeats:
    none, each repeat's ratio instead; three runs that do not pair: a bootstrap over their medians."""
    from utils.results import compare
    rng = np.random.default_rng(0)
    drift = 100.0 + np.cumsum(rng.normal(0.0, 1.0, 200))  # a random walk: neighbouring steps are alike
    one = compare.compare_modes([timed_run("fp32", drift), timed_run("amp-bf16", drift / 1.5)])["amp-bf16"]
    assert one.speedup_interval.startswith("block bootstrap over the timed steps of one run per mode (blocks of 6)")
    low, high = one.speedup_ci95
    naive_low, naive_high = compare.bootstrap_ratio(drift, drift / 1.5)
    assert low < 1.5 < high and high - low > 1.5 * (naive_high - naive_low)
    runs = [timed_run(mode, rng.normal(ms, 2.0, 30), repeat) for repeat in range(3)
            for mode, ms in (("fp32", 100.0), ("amp-bf16", 50.0))]
    three = compare.compare_modes(runs)["amp-bf16"]
    assert three.speedup_interval.startswith("Student's t over the 3 paired repeats' log ratios")
    assert three.speedup_significant is True and three.memory_ratio_ci95 is not None
    ratios = [base["step_time_ms"]["median"] / run["step_time_ms"]["median"]
              for base, run in zip(runs[::2], runs[1::2])]
    assert three.repeat_speedups == pytest.approx(ratios)
    assert three.speedup_vs_baseline == pytest.approx(math.exp(sum(map(math.log, ratios)) / 3))
    low, high = three.speedup_ci95
    assert low < min(ratios) and max(ratios) < high  # t with 2 degrees of freedom: wider than the three
    two = compare.compare_modes([run for run in runs if run["repeat"] < 2])["amp-bf16"]
    assert two.speedup_ci95 is None and two.speedup_significant is None and two.memory_ratio_ci95 is None
    assert two.speedup_interval == ("none from 2 paired repeats: an interval needs 3 (--repeats 3); each repeat's "
                                    "ratio is shown instead")
    assert two.repeat_speedups == pytest.approx(ratios[:2])
    unpaired = compare.speedup([run for run in runs if run["mode"] == "fp32"],
                               [run for run in runs if run["mode"] == "amp-bf16"], pair=False)
    assert unpaired.interval is not None and unpaired.per_repeat is None
    assert unpaired.rests_on == "bootstrap over the runs' medians (repeats and seeds)"


def test_a_spread_over_20_percent_is_warned_about():
    from utils.results import compare
    steady = [timed_run("fp32", [100.0, 101.0, 99.0] * 10, repeat) for repeat in range(2)]
    noisy = [timed_run("amp-bf16", [60.0] * 30), timed_run("amp-bf16", [93.0] * 30, 1)]  # 55% apart
    comparison = compare.compare_modes(steady + noisy)
    assert round(comparison["amp-bf16"].spread_pct) == 43 and comparison["fp32"].spread_pct == 0.0
    text = "\n".join(summary.spread_notes(comparison, "fp32"))
    assert "warning: the timings spread over 20% (amp-bf16 43%)" in text and "fp32 0%" not in text
    assert "every figure above is unsteady" in text and compare.unsteady_speedups(comparison, "fp32") != {}
    assert not any("warning" in line for line in summary.spread_notes(compare.compare_modes(steady), "fp32"))
    # both modes drift together within each repeat: the times are unsteady, the paired speedups are not
    drifting = [timed_run(mode, [ms * (1.0 if repeat == 0 else 1.5)] * 30, repeat) for repeat in range(2)
                for mode, ms in (("fp32", 100.0), ("amp-bf16", 50.0))]
    together = compare.compare_modes(drifting)
    text = "\n".join(summary.spread_notes(together, "fp32"))
    assert "warning: the timings spread over 20% (fp32 40%, amp-bf16 40%)" in text
    assert "the speedups, which rest on those pairs, stay within 20%" in text
    assert compare.unsteady_speedups(together, "fp32") == {} and together["amp-bf16"].repeat_speedups == [2.0, 2.0]


def test_a_run_that_did_not_learn_is_flagged_and_its_accuracy_not_compared():
    """A run at ln 10 and 10% gets a warning and no accuracy difference."""
    from utils.results import compare
    stuck = [2.3026 + 0.001 * (i % 3) for i in range(30)]
    runs = [fake_run("fp32", 100.0, [2.3 - 0.03 * i for i in range(30)], 0.41),
            fake_run("amp-bf16", 60.0, stuck, 0.103)]
    comparison = compare.compare_modes(runs)
    assert compare.run_learned(runs[0]) is True and compare.run_learned(runs[1]) is False
    assert comparison["amp-bf16"].learned is False and comparison["amp-bf16"].accuracy_delta_vs_baseline is None
    assert comparison["fp32"].accuracy_delta_vs_baseline == 0.0
    assert comparison["amp-bf16"].speedup_significant is True
    chance_accuracy = fake_run("fp32", 100.0, [1.5] * 20, 0.115)
    assert compare.run_learned(chance_accuracy) is False
    assert compare.run_learned(dict(chance_accuracy, data="synthetic")) is None
    document = {"env": {"torch": "x", "device_type": "cpu"}, "config": {"baseline": "fp32"},
                "runs": [dict(run, steps=30) for run in runs], "comparison": comparison}
    text = "\n".join(summary.notes(document))
    assert "warning: amp-bf16 did not learn" in text and "fp32 did not learn" not in text


def test_the_table_fits_80_columns_and_the_header_says_only_what_applies(compared):
    """The table fits 80 columns, and its header names only what applies (no stem for squeezenet, no TF32 on a CPU)."""
    result, folder = compared
    document = read_results(folder / "r.json")
    assert max(len(line) for line in result.stdout.splitlines()) <= 80
    assert "speedup [95% CI]" in result.stdout
    printed = " ".join(line.strip() for line in result.stdout.splitlines())
    assert "95% CI: none from 2 paired repeats: an interval needs 3 (--repeats 3); each repeat's ratio is" in printed
    assert "per repeat (speedup over fp32 of each repeat's pair of runs): amp-bf16 " in printed
    first_line = result.stdout.splitlines()[0]
    assert first_line.startswith("squeezenet1_1, batch 8") and "stem" not in first_line and "TF32" not in result.stdout
    assert document["env"]["cuda"] is None
    wide = summary.summary(document, wide=True).splitlines()
    assert sum(line.lstrip().startswith("mode ") for line in wide) == 1 and max(map(len, wide)) > 80
    assert sum(line.lstrip().startswith("mode ") for line in summary.summary(document).splitlines()) == 3

