"""The scaling study's arithmetic against hand-computed figures, and its refusals."""
import importlib.util
import json
from dataclasses import replace

import pytest

from conftest import ROOT
from utils.config import DEFAULT_MARGIN_POINTS
from utils.errors import UserError
from utils.grad_comm import GRAD_COMM
from utils.results import scaling


def study_script():
    spec = importlib.util.spec_from_file_location("scaling_study", ROOT / "benchmarks" / "scaling.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def runs(ranks, medians_ms, batch=16, exposed_ms=None, wall_ms=None):
    """Runs of `ranks` processes of `batch` images whose median steps took `medians_ms`."""
    return [{"images_per_sec": batch * ranks * 1000.0 / ms, "step_time_ms": {"median": ms}, "step_times_ms": [ms] * 5,
             "profile": None if exposed_ms is None else {"comm_exposed_ms": exposed_ms, "wall_ms": wall_ms}}
            for ms in medians_ms]


def test_efficiency_is_the_rate_over_n_times_the_one_process_rate():
    # 1 process: 16 images in 10 ms, 1600 img/s; 4 processes: 64 images in 12.5 ms, 5120 img/s = 0.8 x 4 x 1600
    value, interval, rests_on = scaling.efficiency(runs(1, [10, 10, 10]), runs(4, [12.5, 12.5, 12.5]), 4)
    assert value == pytest.approx(0.8) and interval == pytest.approx([0.8, 0.8])
    assert rests_on == "bootstrap over the runs' medians (repeats and seeds)"
    assert scaling.efficiency(runs(1, [10]), runs(1, [10]), 1) == (1.0, None, "the baseline")


def test_the_efficiency_interval_spans_the_medians_a_resample_can_take():
    # a resample of three 1-process medians {10, 11, 12} has median 10 with chance 7/27 and 12 alike,
    # far above 2.5%: the 95% interval of 10..12 ms / 20 ms is [0.5, 0.6], around median 11 / 20
    value, interval, _ = scaling.efficiency(runs(1, [10, 11, 12]), runs(2, [20, 20, 20]), 2)
    assert value == pytest.approx(0.55) and interval == pytest.approx([0.5, 0.6])


def test_two_runs_give_no_interval_and_say_why():
    _, interval, rests_on = scaling.efficiency(runs(1, [10, 11]), runs(2, [20, 21]), 2)
    assert interval is None and rests_on.startswith("none with 2 runs per mode")


def test_with_an_even_number_of_runs_the_efficiency_is_the_statistic_its_interval_resamples():
    # 1 process: medians 10, 10, 12, 12 ms (median 11); 2 ranks: 20, 20, 30, 30 ms (median 25): 11 / 25 = 0.44,
    # the ratio bootstrap_ratio resamples. The median of per-run images/s, 1333.3 img/s over 2 x 1466.7,
    # gave 0.4545: a figure of another statistic than the interval's
    base, pair = runs(1, [10, 10, 12, 12]), runs(2, [20, 20, 30, 30])
    value, interval, rests_on = scaling.efficiency(base, pair, 2)
    assert value == pytest.approx(0.44) and rests_on == "bootstrap over the runs' medians (repeats and seeds)"
    assert interval[0] < value < interval[1]


def timed_launch(ranks, medians_ms, grad_comm=None, bucket_mb=None, hour=17):
    """launch_of's file with its fp32 runs' median steps set to `medians_ms` (and the other modes' dropped)."""
    document = launch_of(ranks, grad_comm, bucket_mb)
    document["runs"] = [run for run in document["runs"] if run["mode"] == "fp32"]
    for run, ms in zip(document["runs"], medians_ms):
        run["global_batch_size"] = run["batch_size"] * ranks
        run["images_per_sec"] = run["global_batch_size"] * 1000.0 / ms
        run["step_time_ms"] = dict(run["step_time_ms"], median=ms, mean=ms, p10=ms, p90=ms, min=ms, max=ms)
        run["step_times_ms"] = [ms] * len(run["step_times_ms"])
        run["finished_utc"] = f"2026-11-25T{hour}:{ranks:02d}:{run['repeat']:02d}+00:00"  # one run, one time
    return document


def test_the_study_row_gives_images_per_sec_and_efficiency_from_the_median_step(tmp_path, capsys):
    # two launches of 3 runs each: 1 process 10, 10, 10 and 12, 12, 12 ms (median 11), 2 ranks 20 x 3 and 30 x 3
    # (median 25); batch 32 per process: 64,000 / 25 = 2560 img/s on 2 ranks, 32,000 / 11 = 2909.1 on one,
    # scaling 2560 / 2909.1 = 0.88, efficiency 0.44
    status, written = study_from(tmp_path, timed_launch(1, [10] * 3), timed_launch(1, [12] * 3, hour=18),
                                 timed_launch(2, [20] * 3, "fp32", 25.0),
                                 timed_launch(2, [30] * 3, "fp32", 25.0, hour=18))
    assert status == 0, capsys.readouterr().err
    one, two = written["rows"]
    assert one["runs"] == two["runs"] == 6 and one["median_step_ms"] == 11.0 and two["median_step_ms"] == 25.0
    assert one["images_per_sec"] == pytest.approx(32000 / 11) and two["images_per_sec"] == pytest.approx(2560.0)
    assert two["scaling"] == pytest.approx(0.88) and two["efficiency"] == pytest.approx(0.44)
    assert two["efficiency"] == pytest.approx(two["images_per_sec"] / (2 * one["images_per_sec"]))
    assert two["efficiency_ci95"][0] < two["efficiency"] < two["efficiency_ci95"][1]


def test_the_communication_share_is_the_median_exposed_time_over_the_median_profiled_step():
    # exposed 5 and 9 ms of profiled steps of 50 and 70 ms: 7 of 60 ms, 11.7% (the median of the per-run
    # shares, 10% and 12.9%, is 11.4%)
    profiled = runs(2, [50]) + runs(2, [50], exposed_ms=5.0, wall_ms=50.0) + runs(2, [50], exposed_ms=9.0,
                                                                                wall_ms=70.0)
    assert scaling.comm_share(profiled) == (pytest.approx(7.0), pytest.approx(7.0 / 60.0))
    assert scaling.comm_share(runs(2, [50])) == (None, None)


def test_the_study_and_the_summary_give_one_communication_share():
    from utils.results.summary import communication_lines

    profiled = runs(2, [50], exposed_ms=5.0, wall_ms=50.0) + runs(2, [50], exposed_ms=9.0, wall_ms=70.0)
    for run in profiled:
        run.update(mode="fp32", world_size=2, grad_comm="fp32")
    exposed_ms, share = scaling.comm_share(profiled)
    line, = communication_lines(profiled, ["fp32"])
    assert f"{exposed_ms:.2f} ms of the 60.0 ms profiled step ({100 * share:.0f}%)" in line, line
    assert "(12%)" in line


@pytest.mark.parametrize("asked, gpu, visible, sizes", [
    (None, True, 8, [1, 2, 4, 8]), (None, True, 6, [1, 2, 4, 6]), ("2,1", False, 0, [1, 2]),
    ("1,2,4", True, 4, [1, 2, 4]),
])
def test_the_world_sizes_run(asked, gpu, visible, sizes):
    assert study_script().world_sizes(asked, gpu, visible) == sizes


@pytest.mark.parametrize("asked, gpu, visible, sentence", [
    (None, True, 1, "1 GPU is visible, so there is nothing to scale to: the study needs 2 or more."),
    (None, False, 0, "on the CPU give --world-sizes (e.g. 1,2)"),
    ("2,4", True, 4, "--world-sizes needs 1 (the baseline) and at least one larger size; got 2,4."),
    ("1", False, 0, "--world-sizes needs 1 (the baseline)"),
    ("1,x", False, 0, "--world-sizes is a comma list of whole numbers"),
    ("1,8", True, 4, "--world-sizes asks for 8 ranks and 4 GPUs are visible"),
])
def test_world_sizes_that_cannot_run_are_refused(asked, gpu, visible, sentence):
    with pytest.raises(UserError, match=sentence.replace("(", r"\(").replace(")", r"\)")):
        study_script().world_sizes(asked, gpu, visible)


def test_the_launches_interleave_sizes_and_run_one_process_once_per_round():
    assert study_script().launches([1, 2], ["fp32", "bf16"], 2) == [
        (1, 1, None), (1, 2, "fp32"), (1, 2, "bf16"), (2, 1, None), (2, 2, "fp32"), (2, 2, "bf16")]


@pytest.mark.parametrize("argv, sentence", [
    (["--world-sizes", "1,2", "--grad-comm", "fp8"], "--grad-comm is a comma list from fp32, fp16, bf16"),
    (["--world-sizes", "1,2", "--", "--json", "x.json"], "--json is set by the study in every launch"),
    (["--world-sizes", "1,2", "--modes", "fp64"], "unknown precision mode 'fp64'"),
])
def test_the_study_refuses_in_one_sentence_before_launching(argv, sentence, tmp_path, capsys):
    assert study_script().main(["--out", str(tmp_path / "study"), *argv]) == 2
    err = capsys.readouterr().err
    assert err.startswith("scaling.py: error: ") and sentence in err and err.count("\n") == 1
    assert not (tmp_path / "study").exists()


def group(ranks, grad_comm, accuracies):
    """A merged group of runs of fp32 on `ranks` ranks, one per seed, with these test accuracies."""
    return {"env": {"world_size": ranks}, "config": {"grad_comm": grad_comm, "accuracy_margin": DEFAULT_MARGIN_POINTS},
            "runs": [{"mode": "fp32", "seed": seed, "test_accuracy": accuracy, "data": "cifar10", "loss_curve": [1.0],
                      "step_time_ms": {"median": 10.0}} for seed, accuracy in enumerate(accuracies)]}


def test_16_bit_gradients_get_the_paired_accuracy_verdict_against_fp32_communication():
    # paired differences 0.1, 0.2, 0.3 points: mean 0.2, sd 0.1, t(2) 4.303 -> 0.2 +- 0.248 = [-0.048, 0.448]
    # points, within the default 0.5-point margin: holds
    fp32, bf16 = group(2, "fp32", [0.500, 0.520, 0.540]), group(2, "bf16", [0.501, 0.522, 0.543])
    groups = [group(1, None, [0.5, 0.5, 0.5]), fp32, bf16]
    found = scaling.accuracy_against_fp32_comm(groups, bf16, "fp32", bf16["runs"])
    assert found["seeds"] == 3 and found["accuracy_verdict"] == "holds"
    assert found["accuracy_mean_delta"] == pytest.approx(0.002)
    assert found["accuracy_delta_ci95"] == pytest.approx([0.002 - 0.0024843, 0.002 + 0.0024843], abs=1e-6)
    assert scaling.accuracy_against_fp32_comm(groups, fp32, "fp32", fp32["runs"]) is None
    one_seed = group(2, "fp16", [0.6])
    found = scaling.accuracy_against_fp32_comm([fp32, one_seed], one_seed, "fp32", one_seed["runs"])
    assert found["accuracy_verdict"] == "inconclusive" and "one seed gives no interval" in found["accuracy_verdict_why"]


def test_the_accuracy_table_shows_each_compressed_row_in_points():
    row = scaling.StudyRow(
        mode="amp-bf16", world_size=4, grad_comm="fp16", bucket_mb=25.0, batch_size=32, runs=3, median_step_ms=100.0,
        images_per_sec=1280.0, scaling=3.2, efficiency=0.8, efficiency_ci95=[0.75, 0.85],
        efficiency_interval="3 launches", amp_speedup=1.5, amp_speedup_ci95=[1.4, 1.6], comm_exposed_ms=5.0,
        comm_share=0.05, accuracy_vs_fp32_comm={"seeds": 3, "accuracy_mean_delta": 0.002,
                                                "accuracy_delta_ci95": [-0.0005, 0.0045], "accuracy_verdict": "holds",
                                                "accuracy_verdict_why": None})
    lines = scaling.accuracy_table([replace(row, grad_comm=None, accuracy_vs_fp32_comm=None), row])
    assert lines[0].startswith("Accuracy with 16-bit gradients") and len(lines) == 2
    assert lines[1].splitlines()[-1].split() == ["amp-bf16", "4", "fp16", "3", "+0.20", "pt", "[-0.05,", "+0.45]",
                                                 "holds"]
    assert scaling.accuracy_table([replace(row, accuracy_vs_fp32_comm=None)]) == []


def test_merging_a_folder_without_results_is_refused(tmp_path, capsys):
    assert study_script().main(["--from", str(tmp_path), "--out", str(tmp_path / "study")]) == 2
    assert capsys.readouterr().err == (f"scaling.py: error: --from {tmp_path} holds no result files (*.json) "
                                       "of main.py.\n")


def test_a_figure_matplotlib_cannot_draw_is_a_write_failure_not_a_traceback(tmp_path, monkeypatch):
    from utils.errors import WriteFailed

    def broken(rows, title):
        raise ValueError("no such font")

    monkeypatch.setattr(scaling, "study_figure", broken)
    with pytest.raises(WriteFailed, match=r"could not draw .*scaling.png .*ValueError: no such font"):
        scaling.draw(str(tmp_path / "scaling.png"), [], "title")
    assert list(tmp_path.iterdir()) == []


def launch_of(ranks, grad_comm=None, bucket_mb=None, **config):
    """A launch's result file, built from the sample run of docs/samples (one process): on
    `ranks` ranks with this --grad-comm and --bucket-mb, and these config values changed."""
    document = json.loads((ROOT / "docs" / "samples" / "reading-the-numbers.json").read_text())
    document["env"]["world_size"] = ranks
    document["config"].update(grad_comm=grad_comm, bucket_mb=bucket_mb, **config)
    for run in document["runs"]:
        run.update(world_size=ranks, grad_comm=grad_comm, bucket_mb=bucket_mb,
                   finished_utc=f"2026-11-25T16:{ranks:02d}:{GRAD_COMM.index(grad_comm or 'fp32'):02d}+00:00",
                   images_per_sec=run["images_per_sec"] * ranks * 0.9)
    return document


def study_from(tmp_path, *documents):
    """benchmarks/scaling.py --from a folder holding `documents`: (exit status, stderr, scaling.json or None)."""
    folder = tmp_path / "launches"
    folder.mkdir()
    for index, document in enumerate(documents):
        (folder / f"launch{index}.json").write_text(json.dumps(document))
    status = study_script().main(["--from", str(folder), "--out", str(tmp_path / "study")])
    written = tmp_path / "study" / "scaling.json"
    return status, written.exists() and json.loads(written.read_text())


@pytest.mark.parametrize("changed, sentence", [
    ({"model": "resnet34"}, "the 2-rank runs have model resnet34 and the 1-process runs resnet18"),
    ({"batch_size": 64}, "the 2-rank runs have batch_size 64 and the 1-process runs 32"),
    ({"steps": 80}, "the 2-rank runs have steps 80 and the 1-process runs 40"),
    ({"lr": 0.07}, "the 2-rank runs have lr 0.07 and the 1-process runs 0.025"),
])
def test_a_folder_of_launches_of_other_setups_is_refused_not_compared(changed, sentence, tmp_path, capsys):
    status, written = study_from(tmp_path, launch_of(1), launch_of(2, "fp32", 25.0, **changed))
    assert status == 2 and not written
    err = capsys.readouterr().err
    assert sentence in err and "not one study" in err and err.count("\n") == 1


def test_the_recipe_s_lr_for_the_larger_global_batch_is_one_study(tmp_path, capsys):
    # the sample's SGD lr is 0.1 x 32 / 128 = 0.025 in one process; the same flags on 2 ranks give 0.05
    status, written = study_from(tmp_path, launch_of(1), launch_of(2, "fp32", 25.0, lr=0.05))
    assert status == 0, capsys.readouterr().err
    assert [row["world_size"] for row in written["rows"]] == [1, 2, 1, 2]


def test_two_bucket_sizes_are_refused_as_rows_nothing_tells_apart(tmp_path, capsys):
    status, written = study_from(tmp_path, launch_of(1), launch_of(2, "fp32", 25.0), launch_of(2, "bf16", 50.0))
    assert status == 2 and not written
    assert "--bucket-mb 25 and 50, which the study's table cannot tell apart" in capsys.readouterr().err


def test_the_study_records_the_rounds_its_folder_holds(tmp_path, capsys):
    second = launch_of(2, "fp32", 25.0)
    for run in second["runs"]:
        run["finished_utc"] = "2026-11-25T17:00:00+00:00"
    status, written = study_from(tmp_path, launch_of(1), launch_of(2, "fp32", 25.0), second)
    assert status == 0, capsys.readouterr().err
    assert written["rounds"] == 2
    assert {row["runs"] for row in written["rows"] if row["world_size"] == 2} == {6}


def test_a_study_against_another_baseline_says_so_in_its_header_and_notes(tmp_path, capsys):
    status, written = study_from(tmp_path, launch_of(1, baseline="amp-bf16"),
                                 launch_of(2, "fp32", 25.0, baseline="amp-bf16"))
    out = capsys.readouterr().out
    assert status == 0
    assert "speedup vs amp-bf16 [95% CI]" in out and "AMP speedup" not in out
    assert "speedup vs amp-bf16: against amp-bf16 at the same size and --grad-comm" in " ".join(written["notes"])
    rows = {(row["mode"], row["world_size"]): row for row in written["rows"]}
    assert rows[("amp-bf16", 2)]["amp_speedup"] is None and rows[("fp32", 2)]["amp_speedup"] is not None
    (tmp_path / "fp32").mkdir()
    status, written = study_from(tmp_path / "fp32", launch_of(1), launch_of(2, "fp32", 25.0))
    assert "AMP speedup: against fp32 at the same size" in " ".join(written["notes"])


@pytest.mark.parametrize("argv, sentence", [
    (["--world-sizes", "1,2", "--rounds", "2000000000"], "--rounds must be from 1 to 100; got 2000000000."),
    (["--world-sizes", "1,2", "--rounds", "0"], "--rounds must be from 1 to 100; got 0."),
    (["--world-sizes", "1,100000"], "--world-sizes asks for 100000 CPU processes and this machine has"),
    (["--world-sizes", "1,2", "--", "--grad-comm", "bf16"], "--grad-comm is set by the study in every launch"),
    (["--world-sizes", "1,2", "--", "--bf16"], "--bf16 is set by the study in every launch"),
    (["--world-sizes", "1,2", "--", "--grad", "bf16"], "main.py refuses the flags the study would launch it with: "
     "unrecognized arguments: --grad bf16; did you mean --grad-comm?"),
    (["--world-sizes", "1,2", "--", "--lr", "-1"],
     "main.py refuses the flags the study would launch it with: argument --lr: must be a positive number"),
    (["--world-sizes", "1,2", "--", "--bucket-mb", "50"],
     "main.py refuses the flags the study would launch it with: --bucket-mb 50 sets how DDP sends gradients between "
     "processes, and this run is a single process"),
    (["--world-sizes", "1,2", "--modes", "fp32,fp8", "--", "-m", "vit_t4"],
     "main.py refuses the flags the study would launch it with: mode fp8 needs a GPU with FP8 tensor cores (-p); on "
     "the CPU add --fp8-emulate"),
    (["--world-sizes", "1,2", "--", "--baseline", "amp-fp16"],
     "main.py refuses the flags the study would launch it with: --baseline amp-fp16 is not among the modes"),
])
def test_the_study_bounds_and_checks_every_flag_before_launching(argv, sentence, tmp_path, capsys):
    assert study_script().main(["--out", str(tmp_path / "study"), *argv]) == 2
    err = capsys.readouterr().err
    assert err.startswith("scaling.py: error: ") and sentence in err and err.count("\n") == 1
    assert not (tmp_path / "study").exists()


@pytest.mark.whole_runs
def test_an_out_folder_of_another_study_is_refused(tmp_path, capsys):
    out = tmp_path / "study"
    out.mkdir()
    (out / "plan.json").write_text(json.dumps({"main_flags": ["-m", "resnet50"]}))
    assert study_script().main(["--out", str(out), "--world-sizes", "1,2", "--", "-m", "resnet18"]) == 2
    assert "holds another study" in capsys.readouterr().err
    assert sorted(path.name for path in out.iterdir()) == ["plan.json"]


def test_a_study_stopped_before_any_launch_finished_says_so_without_a_traceback(tmp_path, capsys):
    import signal

    assert study_script().stopped(tmp_path / "study", [], [], 3, signal.SIGTERM) == 143
    err = capsys.readouterr().err
    assert err.splitlines()[-1] == (
        f"scaling.py: stopped by SIGTERM after 0 of 3 launches: kept their results in {tmp_path / 'study'} and no "
        "table yet (it needs the 1-process launch and a larger one); run the same command again to run the other 3.")
