"""What a GPU lease runs first, and what it yields: the steps due on a device by each rule (never
ran, older code, fewer repeats, no busy share, a missing FP32 baseline, no interval, an energy
window too short), the headline's 3 repeats and energy window, `--plan`'s dry run on the
committed results, and a lease on a new commit, with a made-up NVML and made-up runs, that
reruns the headline into figures README prints with their intervals."""
import copy
import itertools
import json
import math
import re
import shutil

import made_up_lease
import pytest
from test_gpu_suite_batch import suite_main

from benchmarks import gpu_suite
from benchmarks.suite import due, estimate, plan, slices
from benchmarks.suite.history import CHANGES, SavedSuite
from benchmarks.suite.main_run import main_run
from conftest import ROOT, SUBSET
from tests.benchmarks.words import Words
from utils.measure import nvml_meter
from utils.measure.estimate import MeasuredRun, Run

RESULTS = ROOT / "results"
H200 = RESULTS / "NVIDIA-H200" / "2026-11-26"
HEADLINE = H200 / "headline-resnet18.json"  # 2 repeats of fp32, tf32, amp-fp16, amp-bf16, before the busy share


def headline_step(repeats=3):
    """The headline's resnet18 step as the GPU plan types it."""
    return plan.Step("headline-resnet18", "headline", (plan.Command("headline-resnet18", main_run(
        gpu=True, model="resnet18", batch_size=256, steps=1400, warmup=10, modes="fp32,tf32,amp-fp16,amp-bf16",
        repeats=repeats, channels_last=True, no_progress=True, no_eval=True, json="headline-resnet18.json")),))


def current_document():
    """The H200's resnet18 headline as this code would write it: 3 repeats, every run with a busy
    share of enough samples and an energy window long enough."""
    document = json.loads(HEADLINE.read_text())
    document["schema"] = "ampbench.result/5"
    third = [dict(copy.deepcopy(run), repeat=2) for run in document["runs"][:4]]
    document["runs"] += third
    for run in document["runs"]:
        run["gpu_busy"] = {"share": 0.9, "source": nvml_meter.UTILIZATION_SAMPLES, "window_s": 12.0, "samples": 70,
                           "sample_period_s": 0.167}
        run["gpu_busy_unavailable"] = None
        run["energy"] = energy_over(run["energy"], 12.0, too_short=False)
    document["config"]["repeats"] = 3
    return document


def energy_over(energy, seconds, too_short):
    """`energy`'s joules drawn over a window of `seconds`, its mean power as they give it."""
    return dict(energy, seconds=seconds, mean_watts=energy["joules"] / seconds, window_too_short=too_short)


def device_with(tmp_path, document, changes=tuple(change.commit for change in CHANGES)):
    """A device folder whose one suite ran the headline's resnet18 step into `document`."""
    folder = tmp_path / "NVIDIA-H200" / "2026-12-01"
    folder.mkdir(parents=True)
    (folder / "headline-resnet18.json").write_text(json.dumps(document))
    record = {"device": "NVIDIA H200", "quick": False, "date": "2026-12-01", "changes_in_code": list(changes),
              "steps_run": [{"name": "headline-resnet18", "section": "headline", "rc": 0, "elapsed_s": 300.0}]}
    (folder / "suite.json").write_text(json.dumps(record))
    return [SavedSuite(folder, record)]


def test_a_step_measured_as_this_code_measures_it_is_not_due(tmp_path):
    assert due.reasons(headline_step(), device_with(tmp_path, current_document()), energy_window=True) == []


def test_a_step_that_never_ran_on_the_device_is_due(tmp_path):
    suites = device_with(tmp_path, current_document())
    other = plan.Step("headline-resnet50", "headline", (plan.Command("headline-resnet50", Words()),))
    assert due.reasons(other, suites, energy_window=True) == ["never ran on this device"]


def test_a_step_measured_by_code_older_than_a_change_that_moves_its_figures_is_due(tmp_path):
    """The suite predates the busy share's rule: the headline shows a busy share, so it is due;
    a change that moves no figure of the step (the overhead benchmark's) does not make it so."""
    without_busy = [change.commit for change in CHANGES if "busy" not in change.moves]
    busy_change = next(change for change in CHANGES if "busy" in change.moves)
    suites = device_with(tmp_path, current_document(), changes=without_busy)
    assert due.reasons(headline_step(), suites, energy_window=True) == [
        f"measured by code older than `{busy_change.commit[:7]}` (busy)"]
    overhead_only = [change.commit for change in CHANGES if "overhead" not in change.moves]
    assert due.reasons(headline_step(), device_with(tmp_path / "b", current_document(), overhead_only),
                       energy_window=True) == []


def test_a_step_with_fewer_repeats_than_planned_is_due_and_without_an_interval_says_so(tmp_path):
    document = json.loads(HEADLINE.read_text())  # 2 repeats: no interval over runs
    found = due.reasons(headline_step(), device_with(tmp_path, document), energy_window=True)
    assert "2 of 3 repeats" in found and "no interval" in found
    assert due.reasons(headline_step(repeats=2), device_with(tmp_path / "b", document), energy_window=False) == [
        "no busy share"]  # a plan of 2 asks no interval


def test_a_step_without_a_busy_share_this_code_would_record_is_due(tmp_path):
    document = current_document()
    for run in document["runs"]:
        run.update(gpu_busy=None, gpu_busy_unavailable=nvml_meter.NO_MODULE)
    assert due.reasons(headline_step(), device_with(tmp_path, document), energy_window=True) == ["no busy share"]
    for run in document["runs"]:  # a GPU that gives no samples: a rerun would not give one either
        run["gpu_busy_unavailable"] = "this GPU reports no utilization samples to NVML"
    assert due.reasons(headline_step(), device_with(tmp_path / "b", document), energy_window=True) == []


def test_a_step_without_one_of_its_two_fp32_baselines_is_due(tmp_path):
    document = current_document()
    document["runs"] = [run for run in document["runs"] if run["mode"] != "tf32"]
    assert due.reasons(headline_step(), device_with(tmp_path, document), energy_window=True) == ["no tf32 baseline"]


def test_a_step_without_an_energy_window_long_enough_is_due_where_the_plan_times_one(tmp_path):
    document = current_document()
    for run in document["runs"]:
        run["energy"] = energy_over(run["energy"], 3.5, too_short=True)
    suites = device_with(tmp_path, document)
    assert due.reasons(headline_step(), suites, energy_window=True) == ["energy window too short"]
    assert due.reasons(headline_step(), suites, energy_window=False) == []


def planned_gpu_steps(tmp_path):
    sizes = plan.Plan(False)
    planner = plan.Planner(tmp_path, str(SUBSET), sizes, plan.MODES, plan.available_flags(), plan.TRANSFORMER_MODES,
                           lambda line: None)
    return sizes, plan.planned_steps(planner, ["headline"])


def test_the_headline_plans_three_repeats_on_a_gpu(tmp_path):
    """README's rows need an interval on every ratio: 3 repeats of each convnet mode on a GPU."""
    sizes, steps = planned_gpu_steps(tmp_path)
    assert sizes.headline_repeats == 3
    for model in sizes.models:
        (step,) = [step for step in steps if step.name == f"headline-{model}"]
        assert due.planned_repeats(step) == 3 and "-p" in step.commands[0].argv


def test_the_headline_times_each_mode_for_its_own_window_by_its_fastest_run_measured(tmp_path):
    """On the H200, resnet18's fp32 step took 28.8 ms and amp-bf16's 7.9 ms: each mode's steps give
    its own timed steps the window an energy figure needs and a tenth, fp32 a quarter of
    amp-bf16's steps, and the step's command and its estimate carry them."""
    shutil.copytree(H200, tmp_path / "NVIDIA-H200" / "2026-11-26")
    estimator = estimate.Estimator(tmp_path / "NVIDIA-H200", "NVIDIA H200", False, lambda: None)
    sizes = plan.Plan(False)
    planner = plan.Planner(tmp_path, str(SUBSET), sizes, plan.MODES, plan.available_flags(), plan.TRANSFORMER_MODES,
                           lambda line: None)
    runs = plan.window_runs(planner)
    assert sorted(runs) == ["headline-resnet18", "headline-resnet50", "headline-vit"]
    window = estimate.window_steps(estimator, sizes, runs["headline-resnet18"])
    fastest = {}
    for run in json.loads(HEADLINE.read_text())["runs"]:
        fastest[run["mode"]] = min(fastest.get(run["mode"], 1e9), run["step_time_ms"]["median"] / 1000)
    needed = estimate.WINDOW_MARGIN * nvml_meter.MIN_ENERGY_WINDOW_S
    for mode, steps in window.steps.items():
        assert (steps - sizes.warmup) * fastest[mode] >= needed > (steps - sizes.warmup - 1) * fastest[mode]
    assert window.source == dict.fromkeys(plan.HEADLINE_MODES, estimate.THIS_DEVICE)
    assert window.steps["fp32"] * 3 < window.steps["amp-bf16"]
    most = max(window.steps.values())
    assert window.settings() == {"steps": most, "mode_steps": ",".join(
        f"{mode}={steps}" for mode, steps in window.steps.items() if steps < most)}
    _, steps = planned_gpu_steps(tmp_path)
    step = next(step for step in steps if step.name == "headline-resnet18")
    assert step.commands[0].run.values()["steps"] == 50  # a Plan of its own: no window set
    sizes.window_settings = {"headline-resnet18": window.settings()}
    step = next(step for step in plan.planned_steps(planner, ["headline"]) if step.name == "headline-resnet18")
    assert step.commands[0].run.values()["mode_steps"] == window.settings()["mode_steps"]
    planned_runs = estimate.runs_of(step.commands[0], lambda: None)
    assert {(run.mode, run.steps) for run in planned_runs} == set(window.steps.items())
    assert estimator.estimate(step).source == "runs measured"  # the saved 50-step time is another command's


def test_the_headline_vit_row_plans_three_repeats_each_mode_timed_for_its_window(tmp_path):
    """README's FP8 row on the H200: amp-bf16 at 37.6 ms a step and fp8 at 164 ms, each timed for
    its own window, 3 repeats, so that its busy share and energy stand and its ratios get an interval."""
    shutil.copytree(H200, tmp_path / "NVIDIA-H200" / "2026-11-26")
    estimator = estimate.Estimator(tmp_path / "NVIDIA-H200", "NVIDIA H200", False, lambda: None)
    sizes = plan.Plan(False)
    planner = plan.Planner(tmp_path, str(SUBSET), sizes, plan.MODES, plan.available_flags(), plan.TRANSFORMER_MODES,
                           lambda line: None)
    window = estimate.window_steps(estimator, sizes, plan.window_runs(planner)["headline-vit"])
    assert window.source == dict.fromkeys(plan.HEADLINE_FP8_MODES, estimate.THIS_DEVICE)
    needed = estimate.WINDOW_MARGIN * nvml_meter.MIN_ENERGY_WINDOW_S
    assert all((steps - sizes.warmup) * window.step_s[mode] >= needed for mode, steps in window.steps.items())
    sizes.window_settings = {"headline-vit": window.settings()}
    (step,) = [step for step in plan.planned_steps(planner, ["headline"]) if step.name == "headline-vit"]
    assert due.planned_repeats(step) == 3
    assert step.commands[0].run.values()["steps"] == window.steps["amp-bf16"]


def test_a_mode_this_gpu_never_ran_is_timed_by_another_gpus_runs_of_it_scaled_not_by_its_flops(tmp_path):
    """The H100 never ran the fp8 modes, the H200 did, beside amp-bf16, fp32, tf32 and amp-fp16 in
    the same process (transformers-eager), and the H100 ran those four too: its fp8 steps are the
    H200's times the two GPUs' ratio over the four, about 180 ms, where vit_s4's FLOPs at amp-bf16's
    rate said 40 ms, a window four times too long for a lease. The step's estimate says so, and
    a lease's margin, learned from estimates on a device's own measurements, leaves it out."""
    from utils.measure.estimate import document_runs

    shutil.copytree(RESULTS / "NVIDIA-H100-80GB-HBM3", tmp_path / "NVIDIA-H100-80GB-HBM3")
    shutil.copytree(H200, tmp_path / "NVIDIA-H200" / "2026-11-26")
    sizes = plan.Plan(False)
    planner = plan.Planner(tmp_path, str(SUBSET), sizes, plan.MODES, plan.available_flags(), plan.TRANSFORMER_MODES,
                           lambda line: None)
    vit = plan.window_runs(planner)["headline-vit"]
    h100 = tmp_path / "NVIDIA-H100-80GB-HBM3"
    alone = estimate.Estimator(h100, "NVIDIA H100 80GB HBM3", False, lambda: None)
    beside = estimate.Estimator(h100, "NVIDIA H100 80GB HBM3", False, lambda: None, [tmp_path / "NVIDIA-H200", h100])
    by_flops, scaled = (estimate.window_steps(estimator, sizes, vit) for estimator in (alone, beside))
    assert by_flops.source == {"amp-bf16": estimate.THIS_DEVICE, "fp8": "FLOPs", "fp8-rowwise": "FLOPs"}
    assert scaled.source == {"amp-bf16": estimate.THIS_DEVICE, "fp8": "NVIDIA H200", "fp8-rowwise": "NVIDIA H200"}
    assert scaled.steps["amp-bf16"] == by_flops.steps["amp-bf16"] and by_flops.step_s["fp8"] < 0.045
    there = document_runs(json.loads((H200 / "transformers-eager.json").read_text()))
    shared = [key for key in there if key in beside.runs]
    assert sorted(key[2] for key in shared) == ["amp-bf16", "amp-fp16", "fp32", "tf32"]
    ratio = (math.prod(beside.runs[key].fastest_s / there[key].fastest_s for key in shared)) ** (1 / len(shared))
    fp8 = next(key for key in there if key[2] == "fp8")
    assert scaled.step_s["fp8"] == pytest.approx(there[fp8].fastest_s * ratio) and 0.15 < scaled.step_s["fp8"] < 0.2
    assert scaled.describe(sizes.warmup).endswith(
        "each step measured on this device, fp8, fp8-rowwise's scaled from NVIDIA H200's runs")
    sizes.window_settings = {"headline-vit": scaled.settings()}
    (step,) = [step for step in plan.planned_steps(planner, ["headline"]) if step.name == "headline-vit"]
    assert beside.estimate(step).source == "runs scaled from NVIDIA H200's"
    assert alone.estimate(step).source == "FLOPs"
    assert not beside.estimate(step).source.startswith(slices.MEASURED)  # the lease's margin leaves it out


def test_another_gpus_runs_scale_by_the_modes_measured_on_both_in_the_same_process_the_first_document_first():
    def key(mode, model="vit_s4"):
        return Run(model, "cifar", mode, 256, 0).key

    here = {key("fp32"): MeasuredRun(0.080, 2.0, 0.078), key("amp-bf16"): MeasuredRun(0.020, 1.0, 0.019)}
    newest = {key("fp32"): MeasuredRun(0.040, 3.0, 0.039), key("amp-bf16"): MeasuredRun(0.040, 3.0, 0.038),
              key("fp8"): MeasuredRun(0.160, 5.0, 0.150)}
    older = {key("amp-bf16"): MeasuredRun(0.020, 1.0, 0.019), key("fp8"): MeasuredRun(0.500, 5.0, 0.500),
             key("fp8-rowwise"): MeasuredRun(0.200, 4.0, 0.190), key("fp8", "vit_t4"): MeasuredRun(0.1, 1.0, 0.1)}
    found = estimate.scaled_runs(here, [("GPU A", newest), ("GPU B", older)])
    assert set(found) == {key("fp8"), key("fp8-rowwise")}  # vit_t4 shares no mode measured here
    fp8 = found[key("fp8")]
    assert fp8.device == "GPU A" and fp8.run.first_extra_s == 5.0
    assert fp8.run.median_s == pytest.approx(0.160 * math.sqrt(0.080 / 0.040 * 0.020 / 0.040))
    assert fp8.run.fastest_s == pytest.approx(0.150 * math.sqrt(0.078 / 0.039 * 0.019 / 0.038))
    assert found[key("fp8-rowwise")].device == "GPU B" and found[key("fp8-rowwise")].run.median_s == pytest.approx(0.2)
    assert estimate.scaled_runs(here, [("GPU A", {**newest, key("fp32"): here[key("fp32")]})])[key("fp8")].run \
        .median_s == pytest.approx(0.160 * math.sqrt(0.020 / 0.040))
    assert key("fp32") not in estimate.scaled_runs({}, [("GPU A", newest)])  # nothing shared: nothing to scale by


def plan_of(out, device):
    """The lines `--plan` printed for `device`."""
    return out.split(f"{device} (no GPU here: ", 1)[1].split("\nNVIDIA ", 1)[0].splitlines()


@pytest.mark.parametrize("budget, planned", [(8, ["headline-resnet50", "headline-resnet18"]),
                                             (9, ["headline-resnet50", "headline-resnet18", "headline-vit"])])
def test_the_plan_on_the_committed_results_times_the_h200s_headline_mode_by_mode(budget, planned, monkeypatch):
    """No GPU here: --plan plans a pass for each device saved under results/, on its newest
    software. On the H200 the headline's steps run first, 3 repeats, each mode timed for its own
    window: 8 minutes hold both convnets (6.4 by their measured steps and first-step costs), 9
    the FP8 row too (2.2 more: its fp8 steps take four to five times amp-bf16's, and each mode's
    window is the same 11 s); nothing is trained or written."""
    import torch

    if torch.cuda.is_available():
        pytest.skip("this machine has a GPU: --plan plans for it")
    before = sorted((str(path), path.stat().st_mtime_ns) for path in RESULTS.rglob("*"))
    status, out, err = suite_main(monkeypatch, "--plan", "--budget", budget, "--data-dir", SUBSET)
    assert status == 0 and err == "", err
    assert sorted((str(path), path.stat().st_mtime_ns) for path in RESULTS.rglob("*")) == before
    busy = next(change for change in CHANGES if "busy" in change.moves).commit[:7]
    lines = plan_of(out, "NVIDIA H200")
    assert lines[1].startswith(f"the pass would run, in order (a budget of {budget} min, ")
    for number, name in enumerate(planned, 1):
        line = lines[1 + number]
        assert line.startswith(f"  {number}. {name}: about "), line
        assert "each mode timed for its own window, at least 11 s (the energy window and a tenth)" in line
        assert line.endswith(f"due: measured by code older than `{busy}` (busy); 2 of 3 repeats; no busy share; no "
                             "interval; energy window too short")
    if "headline-vit" not in planned:
        assert any(line.startswith("  headline-vit: about 2.") for line in lines)


def lease_pass(tmp_path, monkeypatch, *args):
    """A pass into a copy of the H200's folder on a new commit, its runs made up (made_up_lease):
    (exit status, stdout, stderr, the folder it continued, the made-up lease)."""
    shutil.copytree(H200, tmp_path / "results" / "NVIDIA-H200" / "2026-11-26")
    readme = tmp_path / "README.md"
    readme.write_text("# ampbench\n\n## Results\n")
    lease = made_up_lease.install(monkeypatch)
    monkeypatch.setattr(gpu_suite, "device_facts", lambda quick, modes: ("NVIDIA H200", {}))
    monkeypatch.setattr(gpu_suite, "software", lambda: dict(made_up_lease.SOFTWARE))
    status, out, err = suite_main(monkeypatch, *args, "--commit", "c" * 40, "--results-root", tmp_path / "results",
                                  "--readme", readme)
    return status, out, err, tmp_path / "results" / "NVIDIA-H200" / "2026-11-26", lease


def test_a_lease_on_a_new_commit_reruns_the_headline_into_figures_readme_prints(tmp_path, monkeypatch):
    """A 9-minute lease on the H200, on a new commit, with a made-up NVML (a sample every 0.5 s)
    and made-up runs at the H200's measured step times: the pass continues its folder, runs the
    headline first, each of its steps 3 times per mode, each mode over its own energy window:
    every run has its energy and busy share, and README's rows give 3 repeats and J/image with its
    interval."""
    status, out, err, folder, lease = lease_pass(tmp_path, monkeypatch, "--only", "headline", "--budget", 9)
    assert status == 0, out + err  # the folder continued: the same software
    readme = tmp_path / "README.md"
    ran = json.loads((folder / "suite.json").read_text())["passes"][-1]["ran"]
    assert [entry["step"] for entry in ran][:3] == ["headline-resnet50", "headline-resnet18", "headline-vit"]
    assert "  1. headline-resnet50: about " in out and "due: measured by code older than" in out
    for step in ("headline-resnet50", "headline-resnet18", "headline-vit"):
        document = json.loads((folder / f"{step}.json").read_text())
        assert document["config"]["repeats"] == 3
        assert all(run["energy"]["seconds"] >= nvml_meter.MIN_ENERGY_WINDOW_S and not run["energy"]["window_too_short"]
                   and run["gpu_busy"]["samples"] >= nvml_meter.MIN_BUSY_SAMPLES for run in document["runs"]), step
    page = (folder / "README.md").read_text()
    for model in ("resnet50", "resnet18"):
        row = next(line for line in page.splitlines() if line.startswith(f"| {model} | synthetic | 256 | 3 |"))
        cells = row.strip("| ").split(" | ")
        assert cells[-5] == "95% / 70% / 70% / 70%", row  # the busy share of every mode
        ratio = 500 / 600 * lease.medians[model, "amp-fp16"] / lease.medians[model, "fp32"]
        assert cells[-3].split(" ")[0] == f"{ratio:.2f}" and " [" in cells[-3], row  # J/image, with its interval
        verdict = next(line for line in readme.read_text().splitlines() if line.startswith(f"| {model} | 32 |"))
        cells = verdict.strip("| ").split(" | ")
        assert " [" in cells[3] and " [" in cells[4] and cells[6] == "GPU (70% busy)", verdict  # intervals, bound
        assert cells[7].startswith("3 x ") and "synthetic, `ccccccc` claimed" in cells[7], verdict


@pytest.mark.parametrize("data, large", [
    ({"data": "synthetic", "image_size": 224}, True), ({"data": "synthetic", "image_size": 112}, True),
    ({"data": "synthetic", "image_size": 111}, False), ({"data": "synthetic"}, False),
    ({"data": "cifar10", "image_size": 224}, False)])
def test_only_synthetic_runs_whose_images_outweighed_cifar10_are_older_than_the_shared_buffer(data, large):
    """Synthetic data held all its images side by side until 1771c88: from 112 pixels up that was
    more than the one buffer of CIFAR-10's bytes they share now, and it weighed in their memory."""
    step = plan.Step("native", "native", (plan.Command("native", main_run(gpu=True, model="resnet50", **data)),))
    assert ("synthetic-memory" in due.figures_of(step)) == large
    (change,) = [change for change in CHANGES if "synthetic-memory" in change.moves]
    assert change.commit.startswith("1771c88")


def test_a_pass_that_continues_a_folder_leaves_its_earlier_passes_rows_as_old_as_their_code(tmp_path, monkeypatch):
    """A new pass into the H200's folder reruns resnet50's headline alone: the FP8 row an earlier
    pass measured, before the busy share's rule, is still older than it, and still due for it."""
    status, out, err, folder, _ = lease_pass(tmp_path, monkeypatch, "--only", "headline", "--budget", 4)
    assert status == 0, out + err
    record = json.loads((folder / "suite.json").read_text())
    assert [entry["step"] for entry in record["passes"][-1]["ran"]] == ["headline-resnet50"]
    assert record["passes"][-1]["changes_in_code"] == list(dict.fromkeys(change.commit for change in CHANGES))
    suite = SavedSuite(folder, record)
    busy = next(change for change in CHANGES if "busy" in change.moves)
    assert suite.older_than(("busy",), "headline-vit") == [busy]
    assert suite.older_than(("busy",), "headline-resnet50") == []
    reasons = due.reasons(next(step for step in planned_gpu_steps(tmp_path / "plan")[1] if step.name == "headline-vit"),
                          [suite], energy_window=True)
    assert f"measured by code older than `{busy.commit[:7]}` (busy)" in reasons


def test_the_passs_closing_line_names_what_waits_as_its_plan_did(tmp_path, monkeypatch):
    """A pass of the headline section alone: what it says waits at its end is what its plan said
    would wait, in the plan's order and words, never the other sections' steps an earlier pass
    left waiting (suite.json still keeps those)."""
    status, out, err, folder, _ = lease_pass(tmp_path, monkeypatch, "--only", "headline", "--budget", 4)
    assert status == 0, out + err
    after = out.split("and leave waiting for a later pass, in order:\n", 1)[1].splitlines()
    planned = list(itertools.takewhile(lambda line: re.match(r"\[ *\d+ s\]   \S", line), after))
    waits = [re.sub(r"^\[ *\d+ s\]   ", "", line).split(";")[0] for line in planned]
    assert waits[:2] == ["headline-resnet18: about 2.8 min", "headline-vit: about 2.2 min"]
    closing = next(line for line in out.splitlines() if line.startswith("waiting for the next budget"))
    assert closing == ("waiting for the next budget, in the plan's order: " + ", ".join(waits)
                       + f"; the next --budget run into {folder} runs them"), closing
    assert "resnet50-cl" not in closing  # another section's, left waiting by an earlier pass
    record = json.loads((folder / "suite.json").read_text())
    assert "resnet50-cl" in [entry["step"] for entry in record["passes"][-1]["waiting"]]

