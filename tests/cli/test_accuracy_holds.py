"""Does accuracy hold? Curves on a cadence, seeds paired across modes, the verdict and the
time to a target accuracy, from the command line; and the refusals of their flags."""
import json

import pytest

from conftest import FAST, SUBSET, assert_user_error, run_main

SYNTHETIC = ["--data", "synthetic", "-n", "3", "--warmup", "1", "--model", "squeezenet1_1", "-b", "4"]
EVERY_4_STEPS = 4 / 340  # epochs: the subset's 5,438 images are 340 batches of 16


@pytest.mark.whole_runs
def test_curves_seeds_verdict_and_time_to_target(subset, tmp_path):
    out = tmp_path / "r.json"
    result = run_main(*FAST, "-n", "12", "--data-dir", subset, "--allow-unverified", "--modes", "fp32,amp-bf16",
                      "--seeds", "2", "--eval-every", EVERY_4_STEPS, "--target-accuracy", "0.05", "--json", out)
    assert result.returncode == 0, result.stderr
    document = json.loads(out.read_text())
    runs = document["runs"]
    assert [(run["seed"], run["mode"]) for run in runs] == [(0, "fp32"), (0, "amp-bf16"), (1, "fp32"), (1, "amp-bf16")]
    for run in runs:
        curve = run["accuracy_curve"]
        assert [point["step"] for point in curve] == [4, 8, 12] and run["timed_steps"] == 10
        times = [point["train_s"] for point in curve]
        assert times == sorted(times) and len(set(times)) == 3 and run["eval_time_s"] > 0
        assert times[-1] >= sum(run["step_times_ms"]) / 1000  # the timed steps, and the warm-up besides
        assert curve[-1]["accuracy"] == run["test_accuracy"]
        first = next(point for point in curve if point["accuracy"] >= 0.05)  # 5%: reached at once
        assert (run["time_to_target_s"], run["steps_to_target"]) == (first["train_s"], first["step"])
        assert run["epochs_to_target"] == pytest.approx(first["step"] / 340)
    for key in ("initial_weights_sha256", "first_batch_sha256"):  # paired within a seed, not across
        assert runs[0][key] == runs[1][key] and runs[2][key] == runs[3][key] and runs[0][key] != runs[2][key]
    row = document["comparison"]["amp-bf16"]
    learned = {mode: {run["seed"] for run in runs if run["mode"] == mode and run["learned"] is not False}
               for mode in ("fp32", "amp-bf16")}  # a run at chance after 12 steps is left out
    assert row["seeds"] == len(learned["amp-bf16"])
    assert (row["accuracy_verdict"] in ("holds", "differs", "inconclusive")) == bool(learned["amp-bf16"] &
                                                                                     learned["fp32"])
    assert row["target_reached_share"] == 1.0 and row["time_to_target_speedup_vs_baseline"] > 0
    text = " ".join(result.stdout.split())
    assert "verdict" in text and "time to target 5%" in text


def test_stop_at_target_ends_the_run_at_the_evaluation_that_reached_it(subset, tmp_path):
    out = tmp_path / "r.json"
    result = run_main(*FAST, "-n", "12", "--data-dir", subset, "--allow-unverified", "--eval-every", EVERY_4_STEPS,
                      "--target-accuracy", "0.05", "--stop-at-target", "--json", out)
    assert result.returncode == 0, result.stderr
    (run,) = json.loads(out.read_text())["runs"]
    assert run["completed_steps"] == 4 and not run["incomplete"] and run["steps_to_target"] == 4


def test_a_resumed_run_keeps_its_accuracy_curve(subset, tmp_path):
    common = [*FAST, "--data-dir", subset, "--allow-unverified", "--eval-every", EVERY_4_STEPS, "--checkpoint",
              tmp_path / "c.pt"]
    assert run_main(*common, "-n", "8").returncode == 0
    result = run_main(*common, "-n", "12", "--resume", "--json", tmp_path / "r.json")
    assert result.returncode == 0, result.stderr
    (run,) = json.loads((tmp_path / "r.json").read_text())["runs"]
    assert [point["step"] for point in run["accuracy_curve"]] == [4, 8, 12] and run["resumed_from_step"] == 8
    times = [point["train_s"] for point in run["accuracy_curve"]]
    assert times == sorted(times)


@pytest.mark.parametrize("argv, phrase", [
    pytest.param(["--target-accuracy", "1.5", "--eval-every", "1"], "--target-accuracy: must be a fraction",
                 id="target>1"),
    pytest.param(["--eval-every", "0"], "--eval-every: must be a positive number", id="eval-every-0"),
    pytest.param(["--seeds", "0"], "--seeds: must be a positive integer", id="seeds-0"),
    pytest.param(["--stop-at-target"], "--stop-at-target needs --target-accuracy", id="stop-without-target"),
    pytest.param(["--target-accuracy", "0.5"], "--target-accuracy needs --eval-every", id="target-without-cadence"),
    pytest.param(["--no-eval", "--eval-every", "1"], "--no-eval skips the evaluations that --eval-every needs",
                 id="no-eval"),
    pytest.param(["--eval-every", "100", "--data", "cifar10", "--data-dir", SUBSET, "--allow-unverified"],
                 "--eval-every 100 epochs is", id="cadence-longer-than-the-run"),
    pytest.param(["--seeds", "2", "--checkpoint", "c.pt"], "--checkpoint works with one precision mode",
                 id="checkpoint-with-seeds"),
])
def test_bad_accuracy_flags_are_refused_in_one_sentence(argv, phrase):
    assert_user_error(run_main(*SYNTHETIC, *argv), phrase)
