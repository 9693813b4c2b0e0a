"""The decider of --advise on every committed GPU results file (H100 and H200, both dates) and on
fixtures made from them: the fastest mode whose interval lies clear of the runner-up's, else a tie
decided for the mode that changes the numbers least; never a mode whose accuracy differs; the
host-bound sentence; levers and compile's pay-back; every claim's evidence resolving to a field
of the saved results, and a missing entry refused. No torch, no GPU."""
import copy
import json
import math

import pytest

from conftest import ROOT
from utils.advice import decide, document, session
from utils.advice.decide import SAFETY, Context, holds_one, interval_between
from utils.advice.evidence import reader, unresolved
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


def advice_of(path, documents=None):
    """advice.json for a results file, as `--advise --from PATH --advice-dir ITS FOLDER` makes it."""
    documents = documents if documents is not None else load_result(str(path))
    context = Context(path.name)
    return session.advice_document(documents, context, None, None, [])


def test_every_gpu_folder_is_among_the_fixtures():
    folders = {path.parent for path in RESULTS}
    assert {H100_22, H100_26, H200, H200 / "by-hand"} <= folders
    assert len(RESULTS) >= 20


@pytest.mark.parametrize("path", RESULTS, ids=lambda path: str(path.relative_to(ROOT / "results")))
def test_the_advice_is_the_fastest_mode_clear_of_the_runner_up_else_the_safest_of_a_tie(path):
    advice = advice_of(path)
    recommendation = advice["recommendation"]
    (merged,) = merge(load_result(str(path)), None)
    groups, rows = group_by_mode(merged["runs"]), merged["comparison"]
    eligible = sorted((mode for mode in groups if mode not in decide.NEVER), key=lambda mode: rows[mode].median_step_ms)
    fastest = eligible[0]
    if len(eligible) == 1:
        assert recommendation["decision"] == "only" and recommendation["mode"] == fastest
        return
    runner_up = eligible[1]
    interval, _ = interval_between(groups[runner_up], groups[fastest])
    if interval is not None and interval[0] > 1:
        assert (recommendation["decision"], recommendation["mode"]) == ("fastest", fastest)
    else:
        tied = recommendation["tied"]
        assert recommendation["decision"] == "tie" and fastest in tied and runner_up in tied
        assert recommendation["mode"] == min(tied, key=SAFETY.index)
        for mode in eligible:
            assert (mode in tied) == holds_one(interval_between(groups[mode], groups[fastest])[0])


# What the committed files say, read off their numbers by hand: (the decision, the mode advised).
EXPECTED = {
    H100_22 / "resnet18-cl.json": ("fastest", "amp-bf16"),  # amp-bf16 over tf32: both repeats 1.22-1.31x
    H100_22 / "resnet18.json": ("tie", "amp-bf16"),  # amp-fp16's second repeat is as fast: 1.00-1.24x
    H100_22 / "resnet50.json": ("fastest", "amp-fp16"),  # over amp-bf16: 1.12-1.18x in both repeats
    H100_26 / "headline-resnet18.json": ("tie", "amp-bf16"),  # amp-fp16 and amp-bf16 within 4%
    H200 / "headline-resnet18.json": ("tie", "tf32"),  # amp-bf16 over tf32: 0.90-1.32x
    H200 / "by-hand" / "native-synthetic.json": ("fastest", "amp-fp16"),  # one run each, 1.29x over amp-bf16
}


@pytest.mark.parametrize("path", sorted(EXPECTED), ids=lambda path: str(path.relative_to(ROOT / "results")))
def test_the_advice_on_the_committed_comparisons(path):
    recommendation = advice_of(path)["recommendation"]
    assert (recommendation["decision"], recommendation["mode"]) == EXPECTED[path]


def test_on_the_h200_resnet18_rows_amp_fp16_slower_than_tf32_is_never_advised():
    path = H200 / "headline-resnet18.json"
    (merged,) = merge(load_result(str(path)))
    assert merged["comparison"]["amp-fp16"].median_step_ms > merged["comparison"]["tf32"].median_step_ms
    advice = advice_of(path)
    assert advice["recommendation"]["mode"] != "amp-fp16"
    assert "Train with amp-fp16" not in advice["claims"][0]["text"]


def with_busy_share(documents, share):
    """The documents with every run's GPU busy share set, as NVML reports it (runs[].gpu_busy)."""
    changed = copy.deepcopy(documents)
    for run in (run for found in changed for run in found["runs"]):
        run["gpu_busy"] = {"share": share, "source": "nvml utilization samples", "window_s": 2.0, "samples": 20,
                           "sample_period_s": 0.1}
        run.pop("gpu_busy_unavailable", None)
    return changed


def test_when_every_mode_is_host_bound_the_advice_says_precision_is_not_what_limits_the_step():
    path = H100_26 / "headline-resnet18.json"
    advice = advice_of(path, with_busy_share(load_result(str(path)), 0.45))
    said = [claim["text"] for claim in advice["claims"] if "host-bound" in claim["text"]]
    assert len(said) == 1 and "precision is not what limits this step" in said[0]
    assert "CUDA graphs" in said[0] and "--compile" in said[0] and "larger -b" in said[0]
    gpu_bound = advice_of(path, with_busy_share(load_result(str(path)), 0.97))
    assert not any("host-bound" in claim["text"] for claim in gpu_bound["claims"])
    assert any("GPU-bound" in claim["text"] for claim in gpu_bound["claims"])


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


def test_a_mode_whose_accuracy_differs_is_never_advised():
    path = H100_26 / "headline-resnet18.json"  # amp-fp16 and amp-bf16 tie; amp-bf16 is advised
    assert advice_of(path)["recommendation"]["mode"] == "amp-bf16"
    documents = accuracy_check_of(load_result(str(path)), ["fp32", "amp-bf16"], {"amp-bf16": -3.0})
    advice = advice_of(path, documents)
    assert advice["recommendation"]["mode"] == "amp-fp16"
    (rejected,) = [entry for entry in advice["rejected"] if entry["mode"] == "amp-bf16"]
    assert "accuracy differs" in rejected["why"]


def test_an_accuracy_that_holds_is_said_with_its_interval_and_completes_the_advice():
    path = H100_26 / "headline-resnet18.json"
    documents = accuracy_check_of(load_result(str(path)), ["fp32", "amp-bf16"], {"amp-bf16": 0.05})
    advice = advice_of(path, documents)
    assert advice["recommendation"]["mode"] == "amp-bf16" and advice["accuracy_verdict"] == "holds"
    (said,) = [claim["text"] for claim in advice["claims"] if claim["text"].startswith("Accuracy holds")]
    assert "over 3 paired seeds" in said and "95% interval" in said
    assert advice["status"] == "complete" and advice["exit_code"] == 0


def test_without_an_accuracy_check_the_advice_is_inconclusive_and_partial():
    advice = advice_of(H100_22 / "resnet18-cl.json")
    assert advice["accuracy_verdict"] == "inconclusive" and advice["status"] == "partial-budget"
    assert advice["exit_code"] == 3
    assert "--seeds 3" in advice["accuracy_check"]["lines"]["here"]


def test_a_lever_whose_interval_lies_above_one_is_kept_in_the_advised_command():
    documents = load_result(str(H100_22 / "resnet18.json")) + load_result(str(H100_22 / "resnet18-cl.json"))
    advice = advice_of(H100_22 / "resnet18.json", documents)
    recommendation = advice["recommendation"]
    (said,) = [claim["text"] for claim in advice["claims"] if claim["text"].startswith("Speed levers")]
    assert "channels-last" in said and "kept" in said
    assert recommendation["settings"] == {"channels_last": True}
    assert "--channels-last" in recommendation["command"]


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
    documents = compiled_twin(load_result(str(path)), 1.25, 60.0)
    advice = advice_of(path, documents)
    (said,) = [claim["text"] for claim in advice["claims"] if claim["text"].startswith("Speed levers")]
    mode = advice["recommendation"]["mode"]
    (merged,) = [found for found in merge(load_result(str(path))) if found["config"]["steps"]]
    first = min(run["first_step_s"] for run in merged["runs"] if run["mode"] == mode)
    saved_s = merged["comparison"][mode].median_step_ms / 1000 * (1 - 1 / 1.25)
    assert f"pay back after {math.ceil((60.0 - first) / saved_s)} steps" in said and "compile 1.25x" in said
    assert advice["recommendation"]["settings"] == {"compile": True, "compile_mode": "default"}


@pytest.mark.parametrize("path", RESULTS, ids=lambda path: str(path.relative_to(ROOT / "results")))
def test_every_claim_cites_evidence_that_resolves_to_a_field_of_the_saved_results(path):
    advice = advice_of(path)
    document.check(advice)
    assert all(claim["evidence"] for claim in advice["claims"])
    cited = {ident for claim in advice["claims"] for ident in claim["evidence"]}
    assert cited <= {entry["id"] for entry in advice["evidence"]}
    assert unresolved(advice, reader(str(path.parent))) == []


def test_a_missing_or_altered_evidence_entry_is_caught():
    path = H100_22 / "resnet18-cl.json"
    advice = advice_of(path)
    cited = advice["claims"][0]["evidence"][0]
    without = dict(advice, evidence=[entry for entry in advice["evidence"] if entry["id"] != cited])
    with pytest.raises(Invalid, match=f"cites {cited}, which the evidence lacks"):
        document.check(without)
    altered = copy.deepcopy(advice)
    altered["evidence"][0]["value"] *= 1.1
    assert unresolved(altered, reader(str(path.parent))) == [
        f"E1 ({altered['evidence'][0]['what']}) says {altered['evidence'][0]['value']!r}, its source holds "
        f"{advice['evidence'][0]['value']!r}"]
    elsewhere = copy.deepcopy(advice)
    elsewhere["evidence"][0]["source"]["field"][-1] = "no_such_field"
    assert "its source has no field" in unresolved(elsewhere, reader(str(path.parent)))[0]
