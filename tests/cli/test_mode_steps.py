"""--mode-steps: each named mode trains for its own steps, so that every mode's timed steps can
last the same seconds (an energy window), and what it cannot honestly go with is refused."""
import json

import pytest

from conftest import assert_user_error, run_main
from utils.config import RunConfig
from utils.measure.estimate import training_runs
from utils.results.record import setup_of

SMALL = ["--model", "resnet18", "--stem", "imagenet", "-b", "4", "--timing-warmup", "1", "--no-progress",
         "--data", "synthetic", "--no-eval"]


def test_each_named_mode_trains_its_own_steps_and_the_others_train_the_steps(tmp_path):
    result = run_main(*SMALL, "-n", "5", "--modes", "fp32,amp-bf16", "--repeats", "2", "--mode-steps", "fp32=3",
                      "--json", tmp_path / "r.json")
    assert result.returncode == 0, result.stderr
    document = json.loads((tmp_path / "r.json").read_text())
    assert document["config"]["mode_steps"] == "fp32=3" and document["config"]["steps"] == 5
    assert {(run["mode"], run["repeat"], run["steps"], run["timed_steps"]) for run in document["runs"]} == {
        ("fp32", 0, 3, 2), ("fp32", 1, 3, 2), ("amp-bf16", 0, 5, 4), ("amp-bf16", 1, 5, 4)}
    assert "5 steps (1 warm-up, fp32 3 by --mode-steps)" in result.stdout
    assert document["comparison"]["amp-bf16"]["speedup_vs_baseline"] is not None


def test_a_modes_schedule_spans_its_own_steps():
    config = RunConfig.build(steps=200, modes="fp32,amp-bf16", mode_steps="amp-bf16=60", no_eval=True)
    plan = config.plan(batch_norm=True, world_size=1)
    assert config.plan_of(plan, "fp32") is plan
    own = config.plan_of(plan, "amp-bf16")
    assert (own.steps, own.timing_warmup, own.recipe.lr_warmup_steps) == (60, 10, 3)
    assert (plan.steps, plan.recipe.lr_warmup_steps) == (200, 10)
    assert own.recipe.lr == plan.recipe.lr


def test_the_entries_are_kept_in_the_modes_order():
    config = RunConfig.build(modes="fp32,tf32,amp-bf16", mode_steps="amp-bf16=60, fp32=20", no_eval=True)
    assert config.precision.mode_steps == "fp32=20,amp-bf16=60"


@pytest.mark.parametrize("given, phrase", [
    (["--mode-steps", "fp32:3"], "--mode-steps takes MODE=N entries"),
    (["--mode-steps", "fp32=0"], "--mode-steps takes MODE=N entries"),
    (["--mode-steps", "fp32=-3"], "--mode-steps takes MODE=N entries"),
    (["--mode-steps", "fp32=3,"], "got an empty one"),
    (["--mode-steps", "fp32=3,fp32=4"], "--mode-steps names fp32 twice"),
    (["--mode-steps", "tf32=3"], "--mode-steps names tf32, which this run does not train (fp32, amp-bf16)"),
    (["--mode-steps", "fp32=1"], "must be smaller than the 1 steps"),
])
def test_a_mode_steps_that_cannot_run_is_refused_before_training(given, phrase):
    assert_user_error(run_main(*SMALL, "-n", "5", "--modes", "fp32,amp-bf16", *given), phrase)


@pytest.mark.parametrize("given, phrase", [
    (["--epochs", "1"], "--mode-steps sets each mode's steps, and --epochs sets one length for every mode"),
    (["--checkpoint", "c.pt"], "--mode-steps sets each mode's steps, and --checkpoint resumes one run of --steps"),
])
def test_mode_steps_is_refused_with_one_length_for_every_mode(given, phrase, tmp_path):
    argv = [str(tmp_path / word) if word == "c.pt" else word for word in given]
    assert_user_error(run_main(*SMALL, "--modes", "fp32", *argv, "--mode-steps", "fp32=3"), phrase)


def test_mode_steps_needs_no_eval_as_the_modes_accuracies_would_compare_runs_of_other_lengths():
    flags = [flag for flag in SMALL if flag != "--no-eval"]
    assert_user_error(run_main(*flags, "--modes", "fp32,amp-bf16", "--mode-steps", "fp32=3"),
                      "add --no-eval (step times, memory and energy still compare)")


def test_the_adviser_chooses_the_steps_of_its_phases_itself():
    assert_user_error(run_main("--advise", "-m", "resnet18", "--mode-steps", "fp32=3"), "drop --mode-steps")


def test_runs_of_other_mode_steps_never_pool_into_one_comparison():
    document = {"config": {"model": "resnet18", "steps": 5, "mode_steps": "fp32=3"},
                "env": {"world_size": 1, "device": "cpu"}, "data": {"name": "synthetic"},
                "runs": [{"optimizer_impl": "fused"}]}
    other = dict(document, config=dict(document["config"], mode_steps=None))
    assert setup_of(document) != setup_of(other)


def test_the_estimate_counts_each_modes_own_steps():
    runs = training_runs("resnet18", "cifar", ["fp32", "amp-bf16"], 256, 500, repeats=2, mode_steps={"fp32": 140})
    assert [(run.mode, run.steps, run.first) for run in runs] == [
        ("fp32", 140, True), ("amp-bf16", 500, True), ("fp32", 140, False), ("amp-bf16", 500, False)]
