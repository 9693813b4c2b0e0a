"""The decider of --advise on every committed GPU results file (H100 and H200, both dates) and on
fixtures made from them: no advice from unsteady timings or from too few repeats, and one-mode
files refused; else the fastest mode whose interval lies clear of the runner-up's, or a tie decided
for the mode that changes the numbers least; never a mode whose accuracy differs; the memory of
tied modes, and none called steady where the peaks include the warm-up; the host-bound sentence;
levers and compile's pay-back; settings never compared left out of the command; every claim's
evidence resolving to a field of the saved results, and every figure of a sentence in the evidence
it cites. No torch, no GPU."""
import copy
import dataclasses
import json
import math
import re

import pytest

from conftest import ROOT, third_repeat
from utils.advice import document, session, why
from utils.advice.decide import Context
from utils.advice.decision import Decision, holds_one
from utils.advice.evidence import reader, unresolved
from utils.advice.figures import numbers_in, unsupported
from utils.errors import UserError
from utils.explain.categories import NAMES as CATEGORIES
from utils.modes import MODES
from utils.results.compare import group_by_mode
from utils.results.merge import load_result, merge
from utils.results.validate import Invalid

H100_22, H100_26, H200 = (ROOT / "results" / "NVIDIA-H100-80GB-HBM3" / "2026-11-22",
                          ROOT / "results" / "NVIDIA-H100-80GB-HBM3" / "2026-11-26",
                          ROOT / "results" / "NVIDIA-H200" / "2026-11-26")


def committed_results():
    """Every results file under results/ (the suite's own records and the FP8 sweep's aside)."""
    found = []
    for path in sorted((ROOT / "results").rglob("*.json")):
        content = json.loads(path.read_text())
        if isinstance(content, dict) and "runs" in content and "env" in content:
            found.append(path)
    return found


RESULTS = committed_results()


def modes_of(path):
    return {run["mode"] for run in json.loads(path.read_text())["runs"]}


COMPARED = [path for path in RESULTS if len(modes_of(path)) > 1]
ONE_MODE = [path for path in RESULTS if len(modes_of(path)) == 1]


def advice_of(path, documents=None):
    """advice.json for a results file, as `--advise --from PATH --advice-dir ITS FOLDER` makes it."""
    documents = documents if documents is not None else load_result(str(path))
    return session.advice_document(documents, Context(path.name), None, None, [])


def test_every_gpu_folder_is_among_the_fixtures():
    folders = {path.parent for path in RESULTS}
    assert {H100_22, H100_26, H200, H200 / "by-hand"} <= folders
    assert len(RESULTS) >= 20 and len(ONE_MODE) >= 8


@pytest.mark.parametrize("path", ONE_MODE, ids=lambda path: str(path.relative_to(ROOT / "results")))
def test_results_of_one_mode_are_refused_with_the_command_that_compares(path):
    (mode,) = modes_of(path)
    with pytest.raises(UserError, match=f"these results time one mode, {mode}, so they compare nothing") as refused:
        advice_of(path)
    assert "--modes fp32," in str(refused.value) and "--repeats 3" in str(refused.value)
    assert str(refused.value).count(".") <= 3 + str(refused.value).count("main.py")  # one sentence


def repeated(path, repeats):
    """The committed file's documents, with a third repeat where `repeats` is 3."""
    documents = load_result(str(path))
    return third_repeat(documents) if repeats == 3 else documents


def ranked(path, documents):
    (merged,) = [found for found in merge(documents, None) if len(group_by_mode(found["runs"])) > 1]
    groups, rows = group_by_mode(merged["runs"]), merged["comparison"]
    advisable = [mode for mode in groups if not MODES[mode].never_advised]
    return sorted(advisable, key=lambda mode: rows[mode].median_step_ms)


def interval(documents, faster, slower):
    """The interval of `faster` over `slower` as utils.report FILE --baseline SLOWER prints it."""
    (against,) = [found for found in merge(documents, slower) if len(group_by_mode(found["runs"])) > 1]
    return against["comparison"][faster].speedup_ci95


@pytest.mark.parametrize("path", COMPARED, ids=lambda path: str(path.relative_to(ROOT / "results")))
@pytest.mark.parametrize("repeats", [2, 3])
def test_the_advice_is_the_fastest_clear_of_the_runner_up_else_a_tie_else_none_yet(path, repeats):
    documents = repeated(path, repeats)
    advice = advice_of(path, documents)
    eligible = ranked(path, documents)
    fastest, runner_up = eligible[0], eligible[1]
    lead = interval(documents, fastest, runner_up)
    if advice["unsteady"]:
        assert advice["status"] == "unsteady" and advice["recommendation"] is None
        assert advice["claims"][0]["text"].startswith("No advice yet: these timings are unsteady")
        return
    if lead is None:
        assert advice["status"] == "too-few-runs" and advice["recommendation"] is None
        assert advice["claims"][0]["text"].startswith(f"No advice yet: {fastest} is fastest")
        assert "python main.py --advise" in advice["measure_again"]["here"]
        return
    recommendation = advice["recommendation"]
    if lead[0] > 1:
        assert (recommendation["decision"], recommendation["mode"]) == ("fastest", fastest)
        return
    tied = recommendation["tied"]
    assert recommendation["decision"] == "tie" and fastest in tied and runner_up in tied
    assert recommendation["mode"] == min(tied, key=lambda mode: MODES[mode].rank)
    for mode in eligible:
        assert (mode in tied) == holds_one(interval(documents, fastest, mode))


# What --advise --from says of each committed comparison, read off its numbers by hand.
EXPECTED = {
    H100_22 / "resnet18-cl.json": "too-few-runs",  # amp-bf16 over tf32: 1.24x and 1.29x, two repeats
    H100_22 / "resnet18.json": "too-few-runs",  # amp-bf16 over amp-fp16: 1.02x and 1.21x
    H100_22 / "resnet50.json": "too-few-runs",  # amp-fp16 over amp-bf16: 1.14x and 1.18x
    H100_22 / "resnet50-cl.json": "unsteady",  # amp-bf16's two repeats 21% apart
    H100_26 / "headline-resnet18.json": "too-few-runs",
    H100_26 / "headline-resnet50.json": "too-few-runs",
    H100_26 / "resnet18.json": "unsteady",
    H100_26 / "transformers-eager.json": "unsteady",
    H200 / "headline-resnet18.json": "unsteady",  # amp-fp16's repeats 34% apart; amp-bf16/tf32 1.22x, then 0.95x
    H200 / "headline-resnet50.json": "unsteady",
    H200 / "transformers-eager.json": "unsteady",
    H200 / "by-hand" / "native-synthetic.json": "partial-results",  # one run each: amp-fp16 1.29x over amp-bf16
}


def test_every_committed_comparison_has_its_expected_status():
    assert set(EXPECTED) == set(COMPARED)


@pytest.mark.parametrize("path", sorted(EXPECTED), ids=lambda path: str(path.relative_to(ROOT / "results")))
def test_the_advice_on_the_committed_comparisons(path):
    advice = advice_of(path)
    assert advice["status"] == EXPECTED[path]
    assert advice["exit_code"] == document.STATUSES[EXPECTED[path]]
    first = advice["claims"][0]["text"]
    assert first.startswith("No advice yet") == (EXPECTED[path] in document.NO_ADVICE)
    assert ("Train with" in first) == (EXPECTED[path] not in document.NO_ADVICE)


def test_the_h200_headline_is_unsteady_and_never_train_with_tf32():
    advice = advice_of(H200 / "headline-resnet18.json")
    first = advice["claims"][0]["text"]
    assert "amp-fp16's speedup over fp32 spread 34% between its repeats (2.35x to 3.32x), over 20%" in first
    assert not any("Train with" in claim["text"] for claim in advice["claims"])
    assert "--advise" in advice["measure_again"]["here"] and "Measure again" in session.report(advice)
    assert "Train with:" not in session.report(advice)


def test_two_repeats_are_said_as_their_ratios_never_as_an_interval():
    advice = advice_of(H100_22 / "resnet18-cl.json")
    first = advice["claims"][0]["text"]
    assert "rests on 2 paired repeats (1.24x and 1.29x), and an interval needs 3 or more" in first
    assert not any("95% interval" in claim["text"] for claim in advice["claims"])


def stopped_run_documents():
    """The committed H100 resnet18 headline with a third repeat, whose amp-bf16 run a SIGTERM
    stopped after 1 of its timed steps, far slower than its whole runs."""
    documents = third_repeat(load_result(str(H100_26 / "headline-resnet18.json")))
    run = next(run for run in documents[0]["runs"] if run["mode"] == "amp-bf16" and run["repeat"] == 2)
    slow = run["step_times_ms"][0] * 5
    run.update(stopped_by="SIGTERM", completed_steps=run["warmup"] + 1, timed_steps=1, incomplete=True,
               step_times_ms=[slow], step_time_ms=dict.fromkeys(("median", "mean", "p10", "p90", "min", "max"), slow))
    documents[0]["incomplete"] = True
    return documents


def test_a_run_stopped_after_one_timed_step_never_weighs_like_a_whole_one():
    documents = stopped_run_documents()
    (merged,) = merge(documents)
    row = merged["comparison"]["amp-bf16"]
    assert row.runs == 2 and row.cut_short_runs == 1 and row.cut_short is False
    assert len([run for run in merged["runs"] if run["mode"] == "amp-bf16"]) == 3  # kept in the file
    (whole,) = merge(load_result(str(H100_26 / "headline-resnet18.json")))
    assert row.median_step_ms == whole["comparison"]["amp-bf16"].median_step_ms
    assert len(row.repeat_speedups) == 2 and row.speedup_ci95 is None
    from utils.results.summary import notes
    said = "\n".join(notes(merged))
    assert "cut short: 1 run of amp-bf16 (repeat 2 stopped by SIGTERM after 1 of" in said and "left out" in said


def test_runs_of_a_mode_all_cut_short_are_unsteady():
    documents = load_result(str(H100_26 / "headline-resnet18.json"))
    for run in documents[0]["runs"]:
        if run["mode"] == "amp-fp16":
            run.update(stopped_by="SIGTERM", completed_steps=run["warmup"] + 3)
    advice = advice_of(H100_26 / "headline-resnet18.json", documents)
    assert advice["status"] == "unsteady" and "every run of amp-fp16 was cut short by a stop signal" in \
        advice["claims"][0]["text"]


def with_busy_host(documents):
    changed = copy.deepcopy(documents)
    for run in changed[0]["runs"]:
        run["host"] = dict(run.get("host") or {}, warning="the host was busy: load average 3.9 on 2 cores while this "
                                                         "process used 0.6 of them (another process competes for "
                                                         "the cores); its step times are slower than a quiet "
                                                         "machine's, rerun alone")
    return changed


def test_a_busy_host_is_the_first_sentence_and_the_status():
    path = H100_26 / "headline-resnet18.json"
    advice = advice_of(path, with_busy_host(third_repeat(load_result(str(path)))))
    assert advice["status"] == "unsteady" and advice["exit_code"] == 5
    assert "another process competed for the cores while 12 of these's runs were timed" not in \
        advice["claims"][0]["text"]
    assert "another process competed for the cores while 12 of these runs were timed" in advice["claims"][0]["text"]
    assert unresolved(advice, lambda file, baseline: merge(with_busy_host(third_repeat(load_result(str(path)))),
                                                           baseline)) == []


def test_the_memory_of_runs_whose_peaks_include_the_warm_up_is_never_called_steady():
    for path in [path for path in COMPARED if path.parent == H100_22]:
        advice = advice_of(path, third_repeat(load_result(str(path))))
        texts = " ".join(claim["text"] for claim in advice["claims"])
        assert "steady" not in texts.replace("unsteady", "") and "Memory is not compared" in texts
        assert "peak memory" not in texts.lower()


def test_the_memory_of_the_modes_tied_with_the_advised_one_is_said():
    path = H100_26 / "headline-resnet18.json"
    advice = advice_of(path, third_repeat(load_result(str(path))))
    recommendation = advice["recommendation"]
    assert recommendation["decision"] == "tie" and {"amp-fp16", "amp-bf16"} <= set(recommendation["tied"])
    (said,) = [claim["text"] for claim in advice["claims"] if claim["text"].startswith("Steady-state peak memory")]
    assert "amp-bf16's" in said and "amp-fp16's" in said


def test_on_the_h200_resnet18_rows_amp_fp16_slower_than_tf32_is_never_advised():
    path = H200 / "headline-resnet18.json"
    (merged,) = merge(load_result(str(path)))
    assert merged["comparison"]["amp-fp16"].median_step_ms > merged["comparison"]["tf32"].median_step_ms
    for documents in (load_result(str(path)), third_repeat(load_result(str(path)))):
        assert not any("Train with amp-fp16" in claim["text"] for claim in advice_of(path, documents)["claims"])


def with_busy_share(documents, share, modes=None):
    """The documents with the runs' GPU busy share set (of `modes`, every mode unless told), as
    NVML reports it (runs[].gpu_busy)."""
    changed = copy.deepcopy(documents)
    for run in (run for found in changed for run in found["runs"]):
        if modes is None or run["mode"] in modes:
            run["gpu_busy"] = {"share": share, "source": "nvml utilization samples", "window_s": 2.0, "samples": 20,
                               "sample_period_s": 0.1}
            run.pop("gpu_busy_unavailable", None)
    return changed


def test_when_every_mode_is_host_bound_the_advice_says_precision_is_not_what_limits_the_step():
    path = H100_26 / "headline-resnet18.json"
    documents = third_repeat(load_result(str(path)))
    advice = advice_of(path, with_busy_share(documents, 0.45))
    said = [claim["text"] for claim in advice["claims"] if "host-bound" in claim["text"]]
    assert len(said) == 1 and "precision is not what limits this step" in said[0]
    assert "CUDA graphs" in said[0] and "--compile" in said[0] and "larger -b" in said[0]
    gpu_bound = advice_of(path, with_busy_share(documents, 0.97))
    assert not any("host-bound" in claim["text"] for claim in gpu_bound["claims"])
    assert any("GPU-bound" in claim["text"] for claim in gpu_bound["claims"])


def test_the_busy_sentence_speaks_for_every_tied_mode_and_names_the_lever_of_one_that_waits():
    path = H100_26 / "headline-resnet18.json"
    documents = with_busy_share(with_busy_share(third_repeat(load_result(str(path))), 0.97, ["tf32", "fp32"]),
                                0.75, ["amp-fp16", "amp-bf16"])
    advice = advice_of(path, documents)
    (said,) = [claim["text"] for claim in advice["claims"] if claim["text"].startswith("GPU busy")]
    mode = advice["recommendation"]["mode"]
    for tied in advice["recommendation"]["tied"]:
        assert f"{tied} " in said
    assert "keep the GPU busy under 90%" in said or "keeps the GPU busy under 90%" in said
    assert "CUDA graphs" in said and mode in said


def accuracy_check_of(documents, modes, deltas):
    """An accuracy check beside `documents`' comparison: `modes` over three paired seeds, evaluated,
    each mode's accuracy fp32's plus its delta in `deltas` (points) and a little noise."""
    check = copy.deepcopy(documents[0])
    check["config"] = dict(check["config"], steps=400, seeds=3)
    template = next(run for run in check["runs"] if run["mode"] == "fp32")
    check["runs"] = []
    for seed in range(3):
        for mode in modes:
            noise = [0.0, 0.1, -0.1][seed]
            check["runs"].append(dict(copy.deepcopy(template), mode=mode, seed=seed, repeat=0, data="cifar10",
                                      test_accuracy=(80.0 + deltas.get(mode, 0.0) + noise) / 100,
                                      finished_utc=f"2026-11-26T00:00:0{seed}+00:00"))
    check["data"] = dict(check["data"], name="cifar10")
    return documents + [check]


def steady_headline():
    """The H100 resnet18 headline with a third repeat: amp-fp16 and amp-bf16 tie, amp-bf16 advised."""
    return third_repeat(load_result(str(H100_26 / "headline-resnet18.json")))


def test_a_mode_whose_accuracy_differs_is_never_advised():
    path = H100_26 / "headline-resnet18.json"
    assert advice_of(path, steady_headline())["recommendation"]["mode"] == "amp-bf16"
    documents = accuracy_check_of(steady_headline(), ["fp32", "amp-bf16"], {"amp-bf16": -3.0})
    advice = advice_of(path, documents)
    assert advice["recommendation"]["mode"] == "amp-fp16"
    (rejected,) = [entry for entry in advice["rejected"] if entry["mode"] == "amp-bf16"]
    assert "accuracy differs" in rejected["why"]


def test_an_accuracy_that_holds_is_said_with_its_interval_and_completes_the_advice():
    path = H100_26 / "headline-resnet18.json"
    documents = accuracy_check_of(steady_headline(), ["fp32", "amp-bf16"], {"amp-bf16": 0.05})
    advice = advice_of(path, documents)
    assert advice["recommendation"]["mode"] == "amp-bf16" and advice["accuracy_verdict"] == "holds"
    (said,) = [claim["text"] for claim in advice["claims"] if claim["text"].startswith("Accuracy holds")]
    assert "over 3 paired seeds" in said and "95% interval" in said
    assert advice["status"] == "complete" and advice["exit_code"] == 0


def test_results_without_an_accuracy_check_give_partial_results_never_a_budget_that_never_was():
    advice = advice_of(H100_26 / "headline-resnet18.json", steady_headline())
    assert advice["accuracy_verdict"] == "inconclusive" and advice["status"] == "partial-results"
    assert advice["exit_code"] == 7 and advice["budget"] is None
    assert "--seeds 3" in advice["accuracy_check"]["lines"]["here"]
    assert "--data synthetic" not in advice["accuracy_check"]["lines"]["here"]  # synthetic images have no test set


def test_a_lever_whose_interval_lies_above_one_is_kept_in_the_advised_command():
    documents = third_repeat(load_result(str(H100_22 / "resnet18.json"))) + \
        third_repeat(load_result(str(H100_22 / "resnet18-cl.json")))
    advice = advice_of(H100_22 / "resnet18.json", documents)
    recommendation = advice["recommendation"]
    (said,) = [claim["text"] for claim in advice["claims"] if claim["text"].startswith("Speed levers")]
    assert "channels-last" in said and "kept" in said
    assert recommendation["settings"] == {"channels_last": True}
    assert "--channels-last" in recommendation["command"]



@pytest.mark.parametrize("side", ["on", "off"])
def test_a_lever_whose_runs_moved_between_repeats_is_not_judged_whatever_its_interval(side):
    """A trial's runs are compared with the comparison's as two processes' samples: where one
    side's runs spread over 20% of their median, the interval judges the host, not the lever."""
    steady, with_lever = (third_repeat(load_result(str(H100_22 / name))) for name in ("resnet18.json",
                                                                                      "resnet18-cl.json"))
    moved = with_lever if side == "on" else steady
    for run in moved[0]["runs"]:
        if run["repeat"] == 2:
            run["step_time_ms"] = {key: value * 1.3 for key, value in run["step_time_ms"].items()}
            run["step_times_ms"] = [ms * 1.3 for ms in run["step_times_ms"]]
    advice = advice_of(H100_22 / "resnet18.json", steady + with_lever)
    said = [claim["text"] for claim in advice["claims"] if claim["text"].startswith("Speed levers")]
    assert said and "channels-last" in said[0] and f"not judged: with it {side}, " in said[0]
    assert "% of their median, over 20%" in said[0] and ", kept" not in said[0]
    assert "channels_last" not in ((advice["recommendation"] or {}).get("settings") or {})
    assert unsupported(advice) == []
    document.check(advice)

def test_settings_the_results_never_compared_are_left_out_of_the_command_and_said():
    path = H100_22 / "resnet50.json"  # ampbench.result/1: foreach SGD, the only one there was
    advice = advice_of(path, third_repeat(load_result(str(path))))
    command = advice["recommendation"]["command"]
    assert "--optimizer-impl" not in command and "foreach" not in command
    (said,) = [claim["text"] for claim in advice["claims"] if claim["text"].startswith("These runs used")]
    assert "--optimizer-impl foreach" in said and "never compared" in said


def compiled_twin(documents, speedup, compile_s):
    """The comparison again as a compiled run would give it: `speedup` times as fast, its first
    step `compile_s` long."""
    twin = copy.deepcopy(documents[0])
    twin["config"] = dict(twin["config"], compile=True, compile_mode="default")
    for run in twin["runs"]:
        run["step_times_ms"] = [ms / speedup for ms in run["step_times_ms"]]
        run["step_time_ms"] = {key: value / speedup for key, value in run["step_time_ms"].items()}
        run.update(compiled=True, compile_mode="default", compile_time_s=compile_s, first_step_s=compile_s,
                   finished_utc=run["finished_utc"] + "c")
    return documents + [twin]


def test_compile_is_said_with_the_steps_after_which_it_pays_for_itself():
    path = H100_26 / "headline-resnet18.json"
    documents = compiled_twin(steady_headline(), 1.25, 60.0)
    advice = advice_of(path, documents)
    (said,) = [claim["text"] for claim in advice["claims"] if claim["text"].startswith("Speed levers")]
    mode = advice["recommendation"]["mode"]
    (merged,) = merge(steady_headline())
    first = min(run["first_step_s"] for run in merged["runs"] if run["mode"] == mode)
    saved_s = merged["comparison"][mode].median_step_ms / 1000 * (1 - 1 / 1.25)
    assert f"pay back after {math.ceil((60.0 - first) / saved_s)} steps" in said and "compile 1.25x" in said
    assert advice["recommendation"]["settings"] == {"compile": True, "compile_mode": "default"}
    assert unresolved(advice, lambda file, baseline: merge(documents, baseline)) == []


def with_profiles(documents, share, tensor_speedup, rest_speedup, findings=()):
    """The documents with --explain's profile on every run: conv+matmul `share` of fp32's step,
    `tensor_speedup` and `rest_speedup` as fast in the other modes, and `findings` on amp-bf16's."""
    changed = copy.deepcopy(documents)
    for run in changed[0]["runs"]:
        fp32 = run["mode"] == "fp32"
        conv, rest = 100 * share, 100 * (1 - share)
        categories = {name: {"ms": 0.0, "share": 0.0} for name in CATEGORIES}
        categories["conv"]["ms"] = conv if fp32 else conv / tensor_speedup
        categories["elementwise"]["ms"] = rest if fp32 else rest / rest_speedup
        run["profile"] = {"categories": categories, "steps": 3, "diagnosis": list(findings)
                          if run["mode"] == "amp-bf16" else []}
    return changed


def test_a_speedup_beyond_the_amdahl_limit_says_the_rest_of_the_step_sped_up_too():
    path = H100_26 / "headline-resnet18.json"
    documents = with_profiles(steady_headline(), 0.5, 3.0, 2.0)
    advice = advice_of(path, documents)
    (said,) = [claim["text"] for claim in advice["claims"] if claim["text"].startswith("Why")]
    assert "beyond even the 2.00x that free convolutions and matmuls would give" in said
    assert "the rest of the step sped up too (elementwise " in said and "in half precision elementwise moves" in said
    assert unsupported(advice) == []


def test_a_finding_with_no_time_at_stake_is_never_the_largest():
    path = H100_26 / "headline-resnet18.json"
    advice = advice_of(path, with_profiles(steady_headline(), 0.8, 3.0, 1.0))
    (merged,) = merge(with_profiles(steady_headline(), 0.8, 3.0, 1.0))
    (nothing,) = merged["comparison"]["amp-bf16"].diagnosis  # tf32 is already faster: 0 ms at stake
    assert nothing["at_stake_ms"] == 0 and nothing["rule"] == "TF32 already uses tensor cores"
    assert not any("TF32 already uses tensor cores" in claim["text"] for claim in advice["claims"])
    decision = Decision(with_profiles(steady_headline(), 0.8, 3.0, 1.0), Context(path.name))
    some = dict(nothing, rule="an example rule", at_stake_ms=2.5, evidence="it took 2.5 ms more", remedy="--compile")
    decision.rows["amp-bf16"] = dataclasses.replace(decision.rows["amp-bf16"], diagnosis=[nothing, some])
    why.finding_claim(decision, "amp-bf16")
    (said,) = [claim["text"] for claim in decision.claims]
    assert said == "amp-bf16, an example rule, 2.5 ms a step at stake: it took 2.5 ms more; try --compile"


@pytest.mark.parametrize("path", COMPARED, ids=lambda path: str(path.relative_to(ROOT / "results")))
@pytest.mark.parametrize("repeats", [2, 3])
def test_every_claim_cites_evidence_that_resolves_and_holds_every_figure_it_prints(path, repeats):
    documents = repeated(path, repeats)
    advice = advice_of(path, documents)
    document.check(advice)
    assert unsupported(advice) == []
    assert all(claim["evidence"] for claim in advice["claims"])
    cited = {ident for claim in advice["claims"] for ident in claim["evidence"]}
    assert cited <= {entry["id"] for entry in advice["evidence"]}
    assert unresolved(advice, lambda file, baseline: merge(documents, baseline)) == []


def test_a_figure_no_cited_entry_holds_is_caught():
    advice = advice_of(H100_22 / "resnet18-cl.json")
    forged = copy.deepcopy(advice)
    forged["claims"][0]["text"] += ", and +277.8 ms"
    assert unsupported(forged) == ["claims[0] prints +277.8"]
    with pytest.raises(Invalid, match="claims.0. prints .277.8, which none of the evidence it cites holds"):
        document.check(forged)
    assert numbers_in("fp32, resnet18, H100 80GB, 16-bit, 1.83-2.10, 34%, +0.12 points") == \
        ["1.83", "2.10", "34", "+0.12"]


def test_a_missing_or_altered_evidence_entry_is_caught():
    path = H100_22 / "resnet18-cl.json"
    advice = advice_of(path)
    cited = advice["claims"][0]["evidence"][0]
    without = dict(advice, evidence=[entry for entry in advice["evidence"] if entry["id"] != cited])
    with pytest.raises(Invalid, match=f"cites {cited}, which the evidence lacks"):
        document.check(without)
    altered = copy.deepcopy(advice)
    entry = next(entry for entry in altered["evidence"] if isinstance(entry["value"], float))
    original = entry["value"]
    entry["value"] *= 1.1
    assert unresolved(altered, reader(str(path.parent))) == [
        f"{entry['id']} ({entry['what']}) says {entry['value']!r}, its source holds {original!r}"]
    elsewhere = copy.deepcopy(advice)
    next(item for item in elsewhere["evidence"] if "field" in item["source"])["source"]["field"][-1] = "no_such_field"
    assert "its source has no field" in unresolved(elsewhere, reader(str(path.parent)))[0]


def larger_batch(documents, factor, step_factor, memory_factor):
    """The comparison's amp-bf16 runs again as a trial at `factor` times the batch, each step
    `step_factor` times as long, its peak `memory_factor` times as high."""
    trial = copy.deepcopy(documents[0])
    batch = trial["config"]["batch_size"] * factor
    trial["config"] = dict(trial["config"], batch_size=batch)
    trial["runs"] = []
    for run in documents[0]["runs"]:
        if run["mode"] == "amp-bf16":
            again = copy.deepcopy(run)
            again.update(batch_size=batch, global_batch_size=batch, effective_batch_size=batch,
                         finished_utc=run["finished_utc"] + "b", peak_memory_bytes=int(run["peak_memory_bytes"] *
                                                                                        memory_factor),
                         step_times_ms=[ms * step_factor for ms in run["step_times_ms"]],
                         step_time_ms={key: value * step_factor for key, value in run["step_time_ms"].items()})
            trial["runs"].append(again)
    return documents + [trial]


@pytest.mark.parametrize("step_factor,verdict", [(1.5, "a larger batch trains faster here"),
                                                 (2.0, "a larger batch is not shown to train faster here")])
def test_a_larger_batch_is_said_in_images_a_second_with_its_memory(step_factor, verdict):
    path = H100_26 / "headline-resnet18.json"
    documents = larger_batch(steady_headline(), 2, step_factor, 1.9)
    advice = advice_of(path, documents)
    (said,) = [claim["text"] for claim in advice["claims"] if claim["text"].startswith("At -b 512")]
    assert f"amp-bf16 trained {2 / step_factor:.2f}x the images a second of -b 256" in said
    assert "with 1.90x the peak memory" in said and verdict in said
    assert unsupported(advice) == [] and unresolved(advice, lambda file, baseline: merge(documents, baseline)) == []


def test_a_gpus_advice_gives_the_nsight_systems_line_of_its_command():
    advice = advice_of(H200 / "by-hand" / "native-synthetic.json")
    recommendation = advice["recommendation"]
    assert recommendation["nsys"] == "nsys profile --trace=cuda,nvtx,osrt,cudnn,cublas --output=advised " + \
        " ".join(recommendation["command"])
    assert "Its timeline under Nsight Systems:" in session.report(advice)


def streamed(documents, workers, loader_rate, speedup=1.0):
    """The comparison as streamed data would give it, each run's loader (`workers` of them)
    delivering `loader_rate` images a second, its steps `speedup` times as fast."""
    found = copy.deepcopy(documents[0])
    found["config"] = dict(found["config"], loader="stream", workers=workers)
    found["data"] = dict(found["data"], name="imagefolder", decode="cpu", fingerprint="f" * 16)
    batch = found["config"]["batch_size"]
    for run in found["runs"]:
        run["step_times_ms"] = [ms / speedup for ms in run["step_times_ms"]]
        run["step_time_ms"] = {key: value / speedup for key, value in run["step_time_ms"].items()}
        step_rate = batch * 1000.0 / run["step_time_ms"]["median"]
        run["feed"] = {"loader": "stream", "workers": workers, "decode": "cpu", "cores": 8,
                       "loader_images_per_sec": loader_rate, "loader_batches": 8, "step_images_per_sec": 3 * step_rate,
                       "step_steps": 4, "train_images_per_sec": step_rate, "bound": "input", "contended": False,
                       "levers": [{"lever": "more workers", "flags": "--workers 8", "why": "2 of the 8 cores decode"},
                                  {"lever": "a pre-resized copy", "flags": "ampbench-shards DIR SHARDS --resize 36",
                                   "why": "smaller files decode faster"}]}
        run["finished_utc"] += f"w{workers}"
    return [found]


def test_a_loader_that_bounds_the_advised_mode_is_said_and_more_workers_are_tried_as_a_lever():
    path = H100_26 / "headline-resnet18.json"
    base = streamed(steady_headline(), 2, 400.0)
    documents = base + streamed(steady_headline(), 8, 1500.0, speedup=1.3)
    advice = advice_of(path, documents)
    mode = advice["recommendation"]["mode"]
    (said,) = [claim["text"] for claim in advice["claims"] if claim["text"].startswith("The input pipeline bounds")]
    assert said.startswith(f"The input pipeline bounds {mode}: its step alone could take ")
    assert "the loader alone delivers 400 with 2 workers" in said and "under 90% of the step's" in said
    assert said.endswith("the loader's levers: more workers (--workers 8), a pre-resized copy (ampbench-shards DIR "
                         "SHARDS --resize 36)")
    (levers,) = [claim["text"] for claim in advice["claims"] if claim["text"].startswith("Speed levers")]
    assert "more workers 1.30x" in levers and "kept" in levers
    assert advice["recommendation"]["settings"] == {"workers": 8}
    assert "--workers 8" in " ".join(advice["recommendation"]["command"])
    assert unsupported(advice) == [] and unresolved(advice, lambda file, baseline: merge(documents, baseline)) == []


def test_a_loader_that_keeps_up_is_said_to_and_no_lever_of_it_is_named():
    documents = streamed(steady_headline(), 8, 1e6)
    for run in documents[0]["runs"]:
        run["feed"]["bound"] = "step"
    advice = advice_of(H100_26 / "headline-resnet18.json", documents)
    texts = [claim["text"] for claim in advice["claims"]]
    mode = advice["recommendation"]["mode"]
    assert any(text.startswith(f"The input pipeline keeps up with {mode}: ") for text in texts)
    assert not any("bounds" in text or "loader's levers" in text for text in texts)
    assert unsupported(advice) == []


def test_every_figure_of_a_findings_remedy_is_in_the_evidence_it_cites():
    from types import SimpleNamespace

    from utils.explain.diagnose import input_bound
    run = SimpleNamespace(feed=None, device="cpu", loader="torchvision", mode="amp-bf16")
    profile = SimpleNamespace(total_ms=80.0, categories={"data": {"ms": 60.0}})
    found = input_bound(run, profile, workers=7, cpu_count=8)  # as a run on a busy 8-core host records it
    assert found is not None and found["remedy"].endswith("or more --workers than 7")
    path = H100_26 / "headline-resnet18.json"
    decision = Decision(steady_headline(), Context(path.name))
    decision.rows["amp-bf16"] = dataclasses.replace(decision.rows["amp-bf16"], diagnosis=[found])
    why.finding_claim(decision, "amp-bf16")
    (said,) = [claim["text"] for claim in decision.claims]
    assert said.startswith("amp-bf16, input-bound, 60.0 ms a step at stake") and said.endswith(
        "try --loader device (the dataset on the device, augmented a whole batch at a time), or more --workers than 7")
    assert unsupported({"claims": decision.claims, "evidence": decision.ledger.entries}) == []


@pytest.mark.parametrize("spread", [0.4, 3.0])  # points between seeds: a few more seeds would settle it, or none
def test_an_inconclusive_accuracy_cites_the_seeds_it_says_would_settle_it(spread):
    path = H100_26 / "headline-resnet18.json"
    documents = accuracy_check_of(steady_headline(), ["fp32", "amp-bf16", "amp-fp16"], {})
    for run in documents[-1]["runs"]:
        if run["mode"] != "fp32":
            run["test_accuracy"] += [0.0, spread, -spread][run["seed"]] / 100
    advice = advice_of(path, documents)
    said = [claim["text"] for claim in advice["claims"] if claim["text"].startswith("Accuracy is inconclusive")]
    assert said and "seeds with this spread" in said[0]
    assert unsupported(advice) == []


def test_a_lever_trial_without_an_interval_is_never_said_to_have_one_that_holds_1():
    path = H100_26 / "headline-resnet18.json"  # two repeats: a trial of two runs against two has no interval
    documents = compiled_twin(load_result(str(path)), 1.5, 4.0)
    advice = advice_of(path, documents)
    (said,) = [claim["text"] for claim in advice["claims"] if claim["text"].startswith("Speed levers")]
    assert "compile 1.50x (no interval), not kept: without an interval nothing shows it faster" in said
    assert "holds 1" not in said
    assert unsupported(advice) == []


def test_a_tiny_speedup_of_convolutions_is_printed_in_digits_never_in_e_notation():
    path = H100_26 / "headline-resnet18.json"
    documents = with_profiles(steady_headline(), 1e-6, 2e-5, 2.0)  # fp32's convolutions barely there, slower after
    advice = advice_of(path, documents)
    (said,) = [claim["text"] for claim in advice["claims"] if claim["text"].startswith("Why")]
    assert "convolutions and matmuls are 0% of fp32's profiled step and ran 0.0000" in said and "e-0" not in said
    assert unsupported(advice) == []


def test_the_1_an_interval_holds_is_cited_whatever_the_interval_rounds_to():
    path = H100_26 / "headline-resnet18.json"
    documents = compiled_twin(steady_headline(), 1.0, 4.0)
    for run in documents[-1]["runs"]:  # compiled runs that scatter, though under the unsteady threshold
        factor = [0.92, 1.0, 1.08][run["repeat"]]
        run["step_times_ms"] = [ms / factor for ms in run["step_times_ms"]]
        run["step_time_ms"] = {key: value / factor for key, value in run["step_time_ms"].items()}
    advice = advice_of(path, documents)
    (said,) = [claim for claim in advice["claims"] if claim["text"].startswith("Speed levers")]
    assert re.search(r"compile 1\.0\dx \(0\.9\d-1\.0\d\), not kept: its interval holds 1;", said["text"]), said
    entries = {entry["id"]: entry for entry in advice["evidence"]}
    assert any(entries[ident]["source"] == {"rule": "no_change"} and entries[ident]["value"] == 1
               for ident in said["evidence"])
    assert unsupported(advice) == []
