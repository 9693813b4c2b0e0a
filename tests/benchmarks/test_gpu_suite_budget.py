"""benchmarks/gpu_suite.py --budget: the estimates it spends by, the refusal of a budget that fits
nothing, two short passes that share the work, and README's merge of suites of several dates."""
import argparse
import datetime
import json
import re
import shlex
import shutil
import subprocess
import sys
import time

import pytest

from benchmarks import gpu_suite
from benchmarks.suite import estimate as suite_estimate
from benchmarks.suite import ledger, plan, render, tables
from benchmarks.suite.device import DataFacts
from benchmarks.suite.estimate import Estimator
from benchmarks.suite.history import CHANGES, SavedSuite
from benchmarks.suite.main_run import main_run
from conftest import ROOT, SUBSET
from tests.benchmarks.words import Words
from utils import spellings
from utils.measure import estimate as run_estimate

H100 = "NVIDIA H100 80GB HBM3"
SAVED = ROOT / "results" / "NVIDIA-H100-80GB-HBM3" / "2026-11-22"  # an older commit's suite, committed


def write_suite(folder, date, steps, quick=False):
    folder.mkdir(parents=True)
    (folder / "suite.json").write_text(json.dumps({"device": H100, "quick": quick, "date": date, "steps_run": steps}))


def no_data():
    raise AssertionError("no run here evaluates or counts epochs")


def step(name, **settings):
    """A step of one main.py command, as the plan adds it."""
    return plan.Step(name, "headline", (plan.Command(name, main_run(**settings)),))


def recorded(folder="results/NVIDIA-H100-80GB-HBM3/2026-11-21", **settings):
    """A command as suite.json records it, run by another machine's python into another folder."""
    run = main_run(**settings, json=f"{folder}/headline-resnet18.json")
    return shlex.join(["/usr/bin/python3", *run.argv()[1:]]).replace(str(ROOT) + "/", "")


def test_the_estimate_is_the_newest_time_the_same_step_took_on_this_device(tmp_path):
    command = {"gpu": True, "model": "resnet18", "batch_size": 256, "steps": 50, "no_eval": True}
    write_suite(tmp_path / "2026-11-20", "2026-11-20", [
        {"name": "headline-resnet18", "rc": 0, "elapsed_s": 50.0, "command": recorded(**command)},
        *[{"name": name, "rc": 143 if name == "resume-stopped" else 0, "elapsed_s": 10.5}
          for name in plan.RESUME_PROCESSES]])
    write_suite(tmp_path / "2026-11-21", "2026-11-21", [
        {"name": "headline-resnet18", "rc": 0, "elapsed_s": 40.0, "command": recorded(**command)},
        {"name": "overhead", "rc": 1, "elapsed_s": 3.0}])
    write_suite(tmp_path / "2026-11-22", "2026-11-22", [
        {"name": "headline-resnet18", "rc": 0, "elapsed_s": 7.0, "command": recorded(**command)}],
        quick=True)  # another plan: not this one's time
    write_suite(tmp_path / "2026-11-23", "2026-11-23", [  # other steps, their energy window's: not this one's time
        {"name": "headline-resnet18", "rc": 0, "elapsed_s": 400.0,
         "command": recorded(**{**command, "steps": 1400})}])
    estimator = Estimator(tmp_path, H100, False, no_data)

    estimate = estimator.estimate(step("headline-resnet18", **command, json=tmp_path / "headline-resnet18.json"))
    assert (estimate.seconds, estimate.source) == (40.0, "measured on 2026-11-21")
    resume = estimator.estimate(plan.Step("resume", "resume", tuple(plan.Command(name, Words())
                                                                    for name in plan.RESUME_PROCESSES)))
    assert (resume.seconds, resume.source) == (42.0, "measured on 2026-11-20")  # its four processes together
    assert estimator.estimate(step("overhead", **command)).source == "FLOPs"  # a failed step's time says nothing


def test_the_estimate_adds_the_start_to_the_runs_measured_in_saved_result_files(tmp_path, monkeypatch):
    from benchmarks.suite import history

    # the runs' figures alone, read as they are: the reader's own checks are tested with whole files
    monkeypatch.setattr(suite_estimate, "upgraded", lambda folder, name: history.readable(folder / f"{name}.json"))
    write_suite(tmp_path / "2026-11-21", "2026-11-21", [])
    runs = [{"mode": "fp32", "batch_size": 256, "channels_last": True, "compiled": False, "device": "cuda",
             "step_time_ms": {"median": median}, "first_step_s": first}
            for median, first in ((30.0, 2.03), (32.0, 0.05))]
    (tmp_path / "2026-11-21" / "resnet18-cl.json").write_text(json.dumps(
        {"config": {"model": "resnet18", "stem": "cifar"}, "runs": runs}))
    estimator = Estimator(tmp_path, H100, False, no_data)

    estimate = estimator.estimate(step("headline-resnet18", gpu=True, model="resnet18", batch_size=256, steps=50,
                                       modes="fp32", repeats=2, channels_last=True, no_eval=True))
    # the start, then 50 steps at the median of the medians (31 ms), the first run's extra first step (2.0 s) once
    assert estimate.source == "runs measured"
    assert estimate.seconds == pytest.approx(run_estimate.START_S + (50 * 0.031 + 2.0) + 50 * 0.031)


def test_without_a_measurement_the_estimate_is_the_flops_at_the_share_of_the_peak_measured_on_the_h100(tmp_path):
    from models import factory
    from utils.measure import flops

    estimator = Estimator(tmp_path / "nothing saved", H100, False, no_data)
    estimate = estimator.estimate(step("headline-resnet18", gpu=True, model="resnet18", batch_size=256, steps=50,
                                       modes="fp32,amp-bf16", no_eval=True))
    flops_per_step = flops.training_flops_per_step(factory.build_model("resnet18"), 256)
    rates = [67.0e12 * run_estimate.UTILISATION["fp32"], 989.4e12 * run_estimate.UTILISATION["bf16"]]
    assert estimate.source == "FLOPs"
    assert estimate.seconds == pytest.approx(
        run_estimate.START_S + sum(run_estimate.FIRST_RUN_S + 50 * flops_per_step / rate for rate in rates))


def planned_steps(out, quick):
    """Every step a plan makes (the CIFAR-10 subset there, every feature of main.py present)."""
    sizes = plan.Plan(quick)
    suite = plan.Planner(out, str(SUBSET), sizes, plan.MODES, plan.available_flags(), plan.TRANSFORMER_MODES,
                         lambda line: None)
    return sizes, plan.planned_steps(suite, list(plan.SECTIONS))


@pytest.mark.parametrize("quick", [True, False])
def test_the_suites_main_py_commands_type_the_current_spellings_but_the_classic_one(quick, tmp_path):
    """--timing-warmup and --modes, never an earlier spelling (utils/spellings.py): only classic-fp16
    types the tutorial's `--fp16 -s`, which must keep working as typed."""
    earlier = {word for row in spellings.EARLIER for word in row.typed.split() if word.startswith("-")}
    typed = {}
    for step in planned_steps(tmp_path, quick)[1]:
        for command in step.commands:
            if command.run is not None:
                typed[command.name] = earlier & set(command.argv)
    assert {"plain-1", "torchrun-1", "resume-stopped", "classic-cpu"} <= set(typed)
    assert {name: flags for name, flags in typed.items() if flags} == {"classic-fp16": {"--fp16", "-s"}}


def test_every_step_is_described_once_in_a_section_that_plans_it():
    """STEPS is the one list of the suite's steps: no two descriptions make the same step, and each
    names a section of SECTIONS (what --only takes)."""
    for quick in (True, False):
        names = plan.priority(plan.Plan(quick))
        assert len(names) == len(set(names)), names
    assert {described.section for described in plan.STEPS} == set(plan.SECTIONS)


@pytest.mark.parametrize("quick", [True, False])
def test_the_plan_runs_its_steps_in_the_order_of_their_descriptions_the_headline_first(quick, tmp_path):
    sizes, steps = planned_steps(tmp_path, quick)
    order, names = plan.priority(sizes), [step.name for step in steps]
    assert names == [name for name in order if name in names]
    assert quick or set(names) == set(order)  # --quick leaves out what compiles or takes epochs
    headline = [step.name for step in steps if step.section == "headline"]
    assert names[:len(headline)] == headline == ["headline-resnet18" if quick else "headline-resnet50",
                                                 *([] if quick else ["headline-resnet18"]), "headline-vit", "overhead"]
    described = {name: entry for entry in plan.STEPS for name, _ in entry.instances(sizes)}
    assert all(step.quick_s == described[step.name].quick_s for step in steps)
    if quick:  # a CPU's estimate, before it has measured a step, is its known --quick time: each step has one
        assert {name for name in order if described[name].quick_s is not None} == set(names)


def test_after_the_headline_a_slice_goes_to_the_size_people_train_then_what_lifts_a_host_bound_row():
    """The order a lent slice spends in: the headline, resnet50 at 224 and the adviser's answer for
    it, the recipes that lift a host-bound row (compile, CUDA graphs), the compiled transformers,
    vit_b_16 at 224, convergence."""
    order = plan.priority(plan.Plan(False))
    assert order[:order.index("convergence") + 1] == [
        "headline-resnet50", "headline-resnet18", "headline-vit", "overhead", "native-synthetic", "advise",
        "recipe-compile",
        "recipe-cudagraphs", "recipe-eager", "transformers-compile", "transformers-vit_b_16", "convergence"]


def test_the_headline_takes_about_2_5_minutes_of_an_h100_by_the_estimate_and_the_suite_about_42(tmp_path):
    """From the H100 suite saved at an older commit: the convnets' runs measured there, the ViT by
    its FLOPs, the overhead benchmark as it took then; the advise step at its budget."""
    _, steps = planned_steps(tmp_path / "out", False)
    shutil.copytree(SAVED, tmp_path / "NVIDIA-H100-80GB-HBM3" / "2026-11-22")
    estimator = Estimator(tmp_path / "NVIDIA-H100-80GB-HBM3", H100, False, lambda: DataFacts(None, 5438, 1017))
    headline = {step.name: estimator.estimate(step) for step in steps if step.section == "headline"}
    assert headline["overhead"].source == "measured on 2026-11-22"
    assert headline["headline-resnet50"].source == "runs measured" and headline["headline-vit"].source == "FLOPs"
    assert 2 * 60 < sum(estimate.seconds for estimate in headline.values()) < 3 * 60  # docs/benchmarks.md's figures
    every = sum(estimator.estimate(step).seconds for step in steps)
    assert 40 * 60 < every < 44 * 60


def options(tmp_path, **values):
    (tmp_path / "README.md").write_text("# ampbench\n\n## Results\n")  # the suite proves it usable first
    defaults = {"quick": True, "data_dir": str(SUBSET), "results_root": str(tmp_path / "results"),
                "readme": str(tmp_path / "README.md"), "commit": None, "render": None, "only": None, "budget": None}
    return argparse.Namespace(**dict(defaults, **values))


def test_a_budget_that_fits_no_step_is_refused_before_any_step_with_the_least_that_fits(tmp_path):
    with pytest.raises(gpu_suite.SuiteRefusal) as refusal:
        gpu_suite.run_suite(options(tmp_path, budget=0.1), time.perf_counter())
    assert not (tmp_path / "results").exists()  # nothing ran, nothing was written
    least = re.search(r"^--budget 0.1 fits no step; the least that fits is ([\d.]+) minutes, for "
                      r"(\S+) \(estimated (\d+) s, known --quick time\)\.$", str(refusal.value))
    assert least, refusal.value
    known = {step.name: step.quick_s for step in planned_steps(tmp_path / "plan", True)[1]}
    assert int(least[3]) == min(known.values()) == known[least[2]]
    assert float(least[1]) * 60 >= int(least[3])


def saved_folder(folder, date, commit, models, changes, names):
    """A results folder with a suite.json and the saved H100 files `names` ({saved name: name here})."""
    folder.mkdir(parents=True)
    for name, here in names.items():
        shutil.copy(SAVED / name, folder / here)
    record = json.loads((SAVED / "suite.json").read_text())
    record.update(date=date, commit=commit, models=models)
    if changes is not None:
        record["changes_in_code"] = changes
    (folder / "suite.json").write_text(json.dumps(record))


def test_readme_gives_each_model_its_newest_row_labelled_with_its_commit_day_and_age(tmp_path):
    """Two suites of one device: resnet18's row is the newer suite's headline, resnet50's the older
    suite's comparison, which its own page shows in full; a row measured by code older than a
    change that moves a figure it shows says so, and its page keeps the older suite's overhead line."""
    device = tmp_path / "results" / "NVIDIA-H100-80GB-HBM3"
    saved_folder(device / "2026-11-22", "2026-11-22", "88b28c54fb11f7c8c0067dc5da6daa24de73b947",
                 ["resnet50", "resnet18"], None, {"resnet50-cl.json": "resnet50-cl.json",
                                                  "resnet18-cl.json": "resnet18-cl.json",
                                                  "overhead.log": "overhead.log"})
    newer = device / "2026-12-01"
    saved_folder(newer, "2026-12-01", "abcdef0123456789abcdef0123456789abcdef01", ["resnet18"],
                 [change.commit for change in CHANGES], {"resnet18-cl.json": "headline-resnet18.json"})
    readme = tmp_path / "README.md"
    readme.write_text("# ampbench\n\n## Results\n\nafter\n")
    render.render_readme(device / "2026-11-22", readme)  # the older one's page, for its link
    render.render_readme(newer, readme)

    text = readme.read_text()
    rows = [line for line in text.splitlines() if line.startswith("| resnet")]
    assert [row.split(" | ")[:2] for row in rows] == [["| resnet50", "32"], ["| resnet18", "32"]]
    # the label is the commit the suite names, claimed: these files record no digest of the files that ran
    assert rows[1].endswith("| 2 x 50 steps, CIFAR-10 subset, `abcdef0` claimed, "
                            "[2026-12-01](results/NVIDIA-H100-80GB-HBM3/2026-12-01/README.md) |")
    twelve = next(change for change in CHANGES if "memory" in change.moves).commit[:7]
    assert rows[0].endswith(f"| 2 x 50 steps, CIFAR-10 subset, `88b28c5` claimed, older than `{twelve}`, "
                            "[2026-11-22](results/NVIDIA-H100-80GB-HBM3/2026-11-22/README.md) |")
    assert "its files name `4aab8c8fb1bd-dirty` and it recorded no digest of the files that ran" in text
    assert "`older than`: measured before a change that moves a figure shown" in text
    assert "overhead" not in text.split(render.BEGIN)[1]  # the books are on the run pages
    assert "throughput ratio ampbench/bare: 0.935" in (device / "2026-11-22" / "README.md").read_text()
    assert text.endswith("after\n") and text.count(render.BEGIN) == 1


def test_the_section_says_what_each_pass_ran():
    record = {"date": "2026-11-26", "passes": [
        {"budget_min": 2, "elapsed_s": 110.0, "ran": [{"step": "headline-resnet18"}, {"step": "overhead"}],
         "waiting": [{"step": "convergence", "section": "convergence", "estimate_s": 60.0}]},
        {"budget_min": 1.5, "elapsed_s": 80.0, "ran": [{"step": "convergence"}], "waiting": []}]}
    assert render.budget_lines(record) == [
        "This run's passes (2026-11-26):", "",
        "* pass 1 (`--budget 2`, 1.8 min): ran `headline-resnet18`, `overhead`",
        "* pass 2 (`--budget 1.5`, 1.3 min): ran `convergence`", ""]


def test_the_docs_say_what_is_due_on_each_device_in_priority_order():
    """What the last pass left waiting was its code's order and its code's steps: docs/benchmarks.md's
    block lists instead what this code finds due on each device, in priority order, and why."""
    from benchmarks.suite import docblocks

    lines = docblocks.due(ROOT / "results", ROOT / "docs")
    line = next(line for line in lines if line.startswith("* NVIDIA H200 ("))
    named = re.findall(r"(?:: |\), )`([a-z0-9_-]+)` \(", line)
    assert named[:3] == ["headline-resnet50", "headline-resnet18", "headline-vit"]
    assert named == sorted(named, key=plan.priority(plan.Plan(False)).index)
    assert "`native-synthetic` (never ran on this device)" in line and "2 of 3 repeats" in line
    busy = next(change for change in CHANGES if "busy" in change.moves)
    assert f"* `{busy.commit[:7]}` (busy): before it, {busy.before}." in lines


def on_the_day(day):
    """The command `python benchmarks/gpu_suite.py` with today being `day`: the suite files a pass
    under the day it starts on (results/<device>/<date>), so passes that must share a folder are
    given one day, or a test that runs past midnight would start its second pass anew."""
    code = ("import datetime, sys, types; from benchmarks import gpu_suite; "
            f"gpu_suite.datetime = types.SimpleNamespace(date=types.SimpleNamespace(today=lambda: {day!r}), "
            "datetime=datetime.datetime, timezone=datetime.timezone); sys.exit(gpu_suite.console.run(gpu_suite.NAME, "
            "gpu_suite.main))")
    return [sys.executable, "-c", code]


@pytest.mark.gpu_suite
def test_two_short_budgets_share_the_quick_suite_and_readme_merges_both(tmp_path):
    """The least budget that fits, plus a minute, twice: each pass stops within its budget give or
    take its last step, the second runs what the first left waiting, and README lists both."""
    readme = tmp_path / "README.md"
    readme.write_text((ROOT / "README.md").read_text())
    suite = [*on_the_day(datetime.date.today()), "--quick", "--results-root", str(tmp_path / "results"), "--readme",
             str(readme), "--data-dir", str(SUBSET)]
    refused = subprocess.run([*suite, "--budget", "0.1"], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert refused.returncode == 2, refused.stderr
    budget = float(re.search(r"the least that fits is ([\d.]+) minutes", refused.stderr)[1]) + 1

    for _ in range(2):
        done = subprocess.run([*suite, "--budget", f"{budget:g}"], cwd=ROOT, capture_output=True, text=True,
                              timeout=900)
        assert done.returncode == 0, done.stdout + done.stderr
        (out,) = (tmp_path / "results").glob("CPU*/*")
        this = json.loads((out / "suite.json").read_text())["passes"][-1]
        assert this["ran"] and this["waiting"]  # the quick suite takes several minutes
        # a step starts only while its estimate fits what is left: a pass ends within its budget but for its last step
        assert this["elapsed_s"] <= budget * 60 + max(step["elapsed_s"] for step in this["ran"])
        assert "waiting for the next budget, in the plan's order: " in done.stdout
    first, second = json.loads((out / "suite.json").read_text())["passes"]
    waited = [entry["step"] for entry in first["waiting"]]
    again = [step["step"] for step in second["ran"]]
    assert set(again) <= set(waited) and again == sorted(again, key=waited.index)  # what waited, in its order

    text, page = readme.read_text(), (out / "README.md").read_text()
    section = text[text.index(render.BEGIN):text.index(render.END)]
    for number, entry in enumerate((first, second), 1):
        assert f"* pass {number} (`--budget {budget:g}`" in page
        assert "ran " + ", ".join(f"`{step['step']}`" for step in entry["ran"]) in page
    assert "benchmarks/lease.py" not in section  # a CPU's --quick suite checks the plumbing: no lease re-measures it
    if "headline-resnet18" in [step["step"] for step in first["ran"]] + again:
        assert "| resnet18 | 32 |" in section  # README's verdict, from the headline section


def test_the_headline_table_gives_no_energy_ratio_from_windows_too_short():
    """The H200 suite of 2026-11-26 read its GPU's energy counter over a few seconds of timed
    steps per run, under the window an energy figure needs (nvml_meter.MIN_ENERGY_WINDOW_S):
    README's headline row shows no amp-fp16 energy ratio for them."""
    from utils.measure.nvml_meter import MIN_ENERGY_WINDOW_S

    folder = ROOT / "results" / "NVIDIA-H200" / "2026-11-26"
    suite = SavedSuite(folder, json.loads((folder / "suite.json").read_text()))
    lines = tables.headline([suite], lambda saved, figures, step: "label")
    assert "| amp-fp16 memory / fp32 | amp-fp16 energy / fp32 | timings | measured |" in lines[0]
    runs = json.loads((folder / "headline-resnet18.json").read_text())["runs"]
    assert all(0 < run["energy"]["seconds"] < MIN_ENERGY_WINDOW_S for run in runs)
    row = next(line for line in lines if line.startswith("| resnet18 |"))
    assert row.split(" | ")[-3] == "window too short", row


def test_a_budgeted_pass_runs_the_due_steps_in_their_order_and_plans_anew_when_none_is_due():
    planned = [plan.Step(name, "transformers", ()) for name in ("ran", "skipped", "waits", "new")]
    earlier = {"steps_run": [{"name": "ran", "section": "transformers", "rc": 0},
                             {"name": "skipped", "section": "transformers", "skipped": "no torchao"}],
               "passes": [{"waiting": [{"step": "waits", "section": "transformers", "estimate_s": 60}]}]}
    due = {"new": ["never ran on this device"], "skipped": ["never ran on this device"],
           "ran": ["2 of 3 repeats"]}
    pending, kept, carried = ledger.this_pass_steps(planned, earlier, ["transformers"], True, due)
    assert [step.name for step in pending] == ["ran", "skipped", "new"]  # the planned order, the due ones alone
    assert kept == earlier["steps_run"] and carried == []
    pending, _, _ = ledger.this_pass_steps(planned, earlier, ["transformers"], True, {})
    assert pending == planned  # nothing is due: the sections are planned anew


def test_each_row_names_the_commit_of_the_pass_that_ran_its_step():
    suite = SavedSuite(SAVED, {"commit": "c" * 40, "passes": [
        {"commit": "a" * 40, "ran": [{"step": "headline-resnet50"}]},
        {"commit": "b" * 40, "ran": [{"step": "transformers-eager"}, {"step": "headline-resnet50"}]}]})
    assert suite.commit_of("headline-resnet50") == "b" * 40  # the latest pass that ran it
    assert suite.commit_of("transformers-eager") == "b" * 40
    assert suite.commit_of("overhead") == "c" * 40  # no pass names it: the suite's commit


# Every main.py and study command a plan makes, by process, as command_words reads it: suite.json
# records each command, and the estimates and due steps match its words against the committed
# results, so a command renders word for word as it did when those were measured.
COMMAND_WORDS = json.loads((ROOT / "tests" / "benchmarks" / "suite_command_words.json").read_text())


@pytest.mark.parametrize("quick", [True, False])
@pytest.mark.parametrize("data_dir", [None, "/data/cifar"])
def test_every_planned_command_renders_the_words_the_committed_results_were_measured_with(quick, data_dir, tmp_path):
    planner = plan.Planner(tmp_path, data_dir, plan.Plan(quick), plan.MODES, plan.available_flags(),
                           plan.TRANSFORMER_MODES, lambda line: None, DataFacts(None, 50_000, 10_000))
    words = {command.name: list(suite_estimate.command_words(command.argv))
             for step in plan.planned_steps(planner, list(plan.SECTIONS)) for command in step.commands}
    assert words == COMMAND_WORDS[("quick" if quick else "gpu") + (" --data-dir" if data_dir else "")]
