"""The planner of --advise: capabilities, estimates and a budget give the phases, each estimated
by utils/measure/estimate.py; the comparison takes as many timed steps as its share of the
budget allows, within the device's bounds; a phase that does not fit is said not to. No torch."""
import itertools

import pytest

from utils.advice import plan
from utils.advice.levers import LEVERS
from utils.measure import estimate
from utils.measure.estimate import MeasuredRun
from utils.measure.nvml_meter import MIN_ENERGY_WINDOW_S
from utils.results.compare import MIN_RUNS

LEVER_SETTINGS = tuple((lever.name, lever.on) for lever in LEVERS if not lever.loader)  # the speed levers


def capabilities(device="cpu", modes=("fp32", "amp-bf16"), levers=LEVER_SETTINGS, accuracy=None):
    return plan.Capabilities(device, "a device", tuple(modes), {}, tuple(levers), {}, accuracy)


def estimates(step_s, on_cpu=True, measured=None, start_s=10.0):
    return plan.Estimates("resnet18", "cifar", 64, 32, on_cpu, start_s, dict(step_s), 90.0, 4.0, measured or {})


def test_a_phase_is_its_process_start_and_each_run_by_the_shared_estimator():
    found = estimates({"fp32": 2.0, "amp-bf16": 1.0})
    phase = plan.Phase("compare", ("fp32", "amp-bf16"), 8, 2, 3, explain_steps=1)
    per_run = {"fp32": 2.0 * (8 + 2), "amp-bf16": 1.0 * (8 + 2)}  # the profiled step and its warm-up on top
    assert plan.seconds(phase, found) == pytest.approx(10.0 + 2 * estimate.FIRST_RUN_S + 3 * sum(per_run.values()))


def test_a_measured_mode_is_estimated_by_its_median_and_first_step():
    found = estimates({"fp32": 2.0}, measured={"fp32": MeasuredRun(0.5, 1.5, 0.5)})
    phase = plan.Phase("channels-last", ("fp32",), 10, 2, 3, settings={"channels_last": True})
    assert plan.seconds(phase, found) == pytest.approx(10.0 + 1.5 + 3 * 10 * 0.5)


def test_a_compiled_phase_adds_its_compile_time_to_each_mode_once():
    found = estimates({"fp32": 1.0, "amp-bf16": 1.0}, measured={"fp32": MeasuredRun(1.0, 0.0, 1.0)})
    plain = plan.Phase("x", ("fp32", "amp-bf16"), 5, 2, 3)
    compiled = plan.Phase("compile", ("fp32", "amp-bf16"), 5, 2, 3, settings={"compile": True})
    # fp32's measured first step (no extra) says nothing of a compiled one, which starts as an unmeasured run
    assert plan.seconds(compiled, found) - plan.seconds(plain, found) == pytest.approx(2 * 90.0 + estimate.FIRST_RUN_S)


def test_the_accuracy_check_counts_its_seeds_and_an_evaluation_each():
    found = estimates({"fp32": 1.0, "amp-bf16": 0.5})
    phase = plan.accuracy_phase("amp-bf16", 200, found)
    assert phase.modes == ("fp32", "amp-bf16") and phase.repeats == plan.SEEDS
    assert phase.estimate_s == pytest.approx(10.0 + 2 * estimate.FIRST_RUN_S + 3 * (200 * 1.5 + 2 * 4.0))
    assert phase.flags() == ["--modes", "fp32,amp-bf16", "--seeds", "3"]


@pytest.mark.parametrize("device,step_s,left_s", list(itertools.product(
    ("cpu", "cuda"), (0.001, 0.05, 1.0, 3.0), (30.0, 180.0, 600.0, 3600.0))))
def test_the_comparison_takes_the_most_timed_steps_its_share_allows_within_the_bounds(device, step_s, left_s):
    caps = capabilities(device, ("fp32", "tf32", "amp-bf16", "amp-fp16") if device == "cuda" else ("fp32", "amp-bf16"))
    found = estimates(dict.fromkeys(caps.modes, step_s), on_cpu=device == "cpu")
    phase = plan.compare_phase(caps, found, left_s)
    timed = phase.steps - phase.warmup
    assert phase.repeats == MIN_RUNS and phase.warmup == plan.WARMUP[device] and phase.modes == caps.modes
    assert phase.explain_steps == plan.EXPLAIN_STEPS[device]
    assert plan.MIN_TIMED <= timed <= plan.MOST_TIMED[device]
    if device == "cuda":  # never longer than the energy window needs
        assert timed <= max(plan.MIN_TIMED, -(-MIN_ENERGY_WINDOW_S // step_s))
    if timed > plan.MIN_TIMED:
        assert phase.estimate_s <= plan.COMPARE_SHARE * left_s
    one_more = plan.estimated(plan.Phase("compare", caps.modes, phase.steps + 1, phase.warmup, MIN_RUNS,
                                         phase.explain_steps), found)
    at_most = min(plan.MOST_TIMED[device], max(plan.MIN_TIMED, -(-MIN_ENERGY_WINDOW_S // step_s))) \
        if device == "cuda" else plan.MOST_TIMED[device]
    assert timed == at_most or one_more.estimate_s > plan.COMPARE_SHARE * left_s


def test_the_plan_is_the_comparison_then_each_lever_on_the_leading_modes_then_the_accuracy_check():
    caps = capabilities("cuda", ("fp32", "tf32", "amp-bf16", "amp-fp16"))
    found = estimates({"fp32": 0.09, "tf32": 0.03, "amp-bf16": 0.02, "amp-fp16": 0.021}, on_cpu=False)
    phases = plan.plan(caps, found, 600.0, 200)
    assert [phase.name for phase in phases] == ["compare", *dict(LEVER_SETTINGS), "accuracy"]
    assert all(phase.modes == ("amp-bf16", "amp-fp16") for phase in phases[1:-1])  # by estimate until measured
    assert [phase.settings for phase in phases[1:-1]] == [on for _, on in LEVER_SETTINGS]
    assert phases[-1].modes == ("fp32", "amp-bf16") and phases[-1].steps == 200
    assert [phase.name for phase in plan.plan(caps, found, 600.0, 200, ("tf32", "amp-bf16"))[1:]][-1] == "accuracy"
    assert plan.plan(caps, found, 600.0, 200, ("fp32",))[-1].name != "accuracy"  # nothing to check fp32 against
    no_test_images = capabilities("cuda", caps.modes, accuracy="synthetic data has no test images")
    assert plan.plan(no_test_images, found, 600.0, 200)[-1].name != "accuracy"


def test_a_phase_that_does_not_fit_is_said_so_and_a_later_one_that_fits_still_runs():
    found = estimates({"fp32": 1.0})
    phases = [plan.Phase(name, ("fp32",), 1, 0, 1, estimate_s=seconds)
              for name, seconds in (("compare", 50.0), ("compile", 300.0), ("channels-last", 40.0))]
    run, not_run = plan.fitting(phases, 100.0)
    assert [phase.name for phase in run] == ["compare", "channels-last"] and list(not_run) == ["compile"]
    assert not_run["compile"] == "needs about 5.0 min, and 50 s of the budget was left"
    assert plan.seconds(phases[0], found) > 0


def test_the_leading_modes_before_any_ran_are_the_fastest_by_estimate_fp32_last_among_equals():
    caps = capabilities("cpu", ("fp32", "amp-bf16"))
    assert plan.leading_by_estimate(caps, estimates({"fp32": 1.0, "amp-bf16": 1.0})) == ("amp-bf16", "fp32")
    assert plan.leading_by_estimate(caps, estimates({"fp32": 0.5, "amp-bf16": 1.0})) == ("fp32", "amp-bf16")
