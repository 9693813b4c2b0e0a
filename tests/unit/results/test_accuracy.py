"""Does accuracy hold? The paired verdict over seeds and the time to a target accuracy."""
import statistics

import pytest

from utils.results import accuracy
from utils.training.curve import AccuracyCurve

MARGIN = 0.005  # half a point, as fractions


def test_identical_accuracies_hold():
    found = accuracy.verdict([0.0, 0.0, 0.0], MARGIN)
    assert found["verdict"] == "holds" and found["ci95"] == [0.0, 0.0]


def test_a_five_point_shift_with_a_small_spread_differs():
    found = accuracy.verdict([-0.051, -0.049, -0.050, -0.052], MARGIN)
    assert found["verdict"] == "differs" and found["ci95"][1] < -MARGIN
    assert found["mean"] == pytest.approx(-0.0505)


def test_two_seeds_with_a_large_spread_are_inconclusive_and_say_how_many_would_settle_it():
    found = accuracy.verdict([0.03, -0.01], MARGIN)
    assert found["verdict"] == "inconclusive" and found["ci95"][0] < -MARGIN < MARGIN < found["ci95"][1]
    assert found["seeds_needed"] > 2 and f"about {found['seeds_needed']} seeds" in found["why"]
    # the mean (one point) is beyond the margin: settling it means excluding 0, a half-width under
    # the mean, which that many seeds of this spread reach and one fewer does not
    spread, needed = statistics.stdev([0.03, -0.01]), found["seeds_needed"]
    half_width = lambda count: accuracy.critical_t(count - 1) * spread / count ** 0.5  # noqa: E731
    assert half_width(needed) < 0.01 <= half_width(needed - 1)


def test_one_seed_gives_no_interval():
    found = accuracy.verdict([0.01], MARGIN)
    assert found["verdict"] == "inconclusive" and found["ci95"] is None and "--seeds 3" in found["why"]


def test_the_interval_is_students_t_over_the_seeds():
    mean, (low, high) = accuracy.paired_interval([0.01, 0.02, 0.03])
    assert mean == pytest.approx(0.02) and high - mean == pytest.approx(4.3026527 * 0.01 / 3 ** 0.5)


# Student's t two-sided 95% quantiles, to the published seven decimals, by degrees of freedom
KNOWN_T = {1: 12.7062047, 2: 4.3026527, 3: 3.1824463, 5: 2.5705818, 10: 2.2281389, 11: 2.2009852, 14: 2.1447867,
           17: 2.1098156, 19: 2.0930241, 30: 2.0422725, 100: 1.9839715, 1000: 1.9623391}


@pytest.mark.parametrize("degrees", sorted(KNOWN_T))
def test_the_t_quantile_is_exact_for_every_degree_of_freedom(degrees):
    assert accuracy.critical_t(degrees) == pytest.approx(KNOWN_T[degrees], abs=5e-8)


def test_the_t_quantile_falls_to_the_normal_one_up_to_the_most_seeds_allowed():
    normal = statistics.NormalDist().inv_cdf(0.975)  # 1.9599640
    quantiles = [accuracy.critical_t(degrees) for degrees in (999, 1000, 10 ** 4, 10 ** 6, 2 ** 31 - 2)]
    assert quantiles == sorted(quantiles, reverse=True) and quantiles[-1] == pytest.approx(normal, abs=1e-8)
    assert quantiles[-1] > normal


def test_the_target_is_reached_at_the_first_evaluation_at_or_above_it():
    curve = [{"step": 10, "epoch": 0.5, "train_s": 2.0, "accuracy": 0.3},
             {"step": 20, "epoch": 1.0, "train_s": 4.0, "accuracy": 0.5},
             {"step": 30, "epoch": 1.5, "train_s": 6.0, "accuracy": 0.45}]
    assert AccuracyCurve(None, None, 20, target=0.5, points=curve).first_at_target["train_s"] == 4.0
    assert AccuracyCurve(None, None, 20, target=0.6, points=curve).first_at_target is None


def run(seed, mode, final, reached_at=None):
    return {"seed": seed, "mode": mode, "test_accuracy": final, "target_accuracy": 0.5,
            "time_to_target_s": reached_at, "epochs_to_target": reached_at / 2 if reached_at else None}


def test_time_to_target_is_the_median_over_the_seeds_that_reached_it_against_fp32():
    base = [run(0, "fp32", 0.6, 10.0), run(1, "fp32", 0.6, 12.0), run(2, "fp32", 0.6, 14.0)]
    amp = [run(0, "amp-bf16", 0.6, 5.0), run(1, "amp-bf16", 0.6, 7.0), run(2, "amp-bf16", 0.4)]
    figures = accuracy.target_figures(amp, base)
    assert figures["time_to_target_s"] == 6.0 and figures["target_reached_share"] == pytest.approx(2 / 3)
    assert figures["time_to_target_speedup_vs_baseline"] == pytest.approx(12.0 / 6.0)
    assert figures["epochs_to_target"] == 3.0 and figures["seconds_per_epoch"] == 2.0


def test_the_verdict_pairs_each_mode_with_fp32_of_the_same_seed():
    base = [run(0, "fp32", 0.60), run(1, "fp32", 0.70), run(2, "fp32", 0.50)]
    amp = [run(0, "amp-bf16", 0.601), run(1, "amp-bf16", 0.701), run(2, "amp-bf16", 0.501)]
    figures = accuracy.accuracy_figures(amp, base, MARGIN)  # seeds differ by 10 points, pairs by 0.1
    assert figures["accuracy_verdict"] == "holds" and figures["seeds"] == 3
    assert figures["accuracy_mean_delta"] == pytest.approx(0.001)
