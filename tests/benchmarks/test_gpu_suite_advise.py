"""Which precision for model X on GPU Y: the suite's advise step (main.py --advise on resnet50 at
224 within a budget) and README's table across devices of every advice.json it left."""
import json
import shutil

from benchmarks.suite import advice, estimate, plan, render
from benchmarks.suite.device import DataFacts
from conftest import ROOT, SUBSET, run_main

RESULTS = ROOT / "results"
H200 = "NVIDIA-H200/2026-11-26"
H100 = "NVIDIA-H100-80GB-HBM3/2026-11-26"


def planner(tmp_path, quick=False):
    return plan.Planner(tmp_path, str(SUBSET), plan.Plan(quick), plan.MODES, plan.available_flags(),
                        plan.TRANSFORMER_MODES, lambda line: None, DataFacts(None, 5438, 1017))


def test_the_advise_step_asks_main_py_which_precision_resnet50_at_224_trains_with_within_its_budget(tmp_path):
    from main import build_parser
    from utils.config import RunConfig

    steps = plan.planned_steps(planner(tmp_path), list(plan.SECTIONS))
    names = [step.name for step in steps]
    assert names.index("advise") == names.index("native-synthetic") + 1
    (command,) = next(step for step in steps if step.name == "advise").commands
    program, *arguments = command.argv[1:]
    config = RunConfig.from_args(build_parser().parse_args(arguments))  # a command main.py takes
    assert program.endswith("/main.py") and config.advice.advise and config.precision.gpu
    assert (config.training.model, config.data.image_size, config.advice.budget) == ("resnet50", 224,
                                                                                      plan.ADVISE_MINUTES)
    assert config.advice.advice_dir == str(tmp_path / plan.ADVICE_DIR) and command.timeout > 60 * plan.ADVISE_MINUTES
    found = estimate.Estimator(tmp_path / "nothing saved", "NVIDIA H200", False, lambda: None).estimate(
        next(step for step in steps if step.name == "advise"))
    assert (found.seconds, found.source) == (estimate.START_S + 60 * plan.ADVISE_MINUTES, "its --budget")


def test_a_cpus_quick_suite_skips_the_adviser_saying_why(tmp_path):
    suite = planner(tmp_path, quick=True)
    assert "advise" not in [step.name for step in plan.planned_steps(suite, ["advise"])]
    why = "the adviser's phases take many minutes of a 2-core CPU; the GPU suite runs it"
    assert suite.records == [{"name": "advise", "section": "advise", "skipped": why}]


def advise_from(results, folder, step):
    """`main.py --advise --from` on a committed results file, into its run's advise/ folder, as
    the advise step leaves it."""
    result = run_main("--advise", "--from", results / folder / f"{step}.json", "--advice-dir",
                      results / folder / plan.ADVICE_DIR)
    assert result.returncode in (0, 3, 4, 5, 6, 7), result.stderr
    return json.loads((results / folder / plan.ADVICE_DIR / "advice.json").read_text())


def section(results):
    return render.render_summary(results, results.parent)


def rows_of(text):
    table = text.split("| model | image | GPU | advised | rests on | report |", 1)
    return [line.strip("| ").split(" | ") for line in table[1].splitlines()[2:] if line.startswith("|")] \
        if len(table) > 1 else []


def test_the_advice_table_has_a_row_for_each_device_with_advice_and_none_for_one_without(tmp_path):
    """From --advise --from on the committed files: the H200's headline, 2 repeats a mode, is
    unsteady, so its row says there is no advice yet and which way its figures lean; the H100,
    without an advice.json, has no row, until it has one."""
    results = tmp_path / "results"
    shutil.copytree(RESULTS, results)
    assert rows_of(section(results)) == []  # no advice anywhere: no table at all
    found = advise_from(results, H200, "headline-resnet50")
    (row,) = rows_of(section(results))
    assert row[:4] == ["resnet50", "32", "NVIDIA H200", f"none yet ({found['status']}; leans {found['lean']})"]
    assert row[4].startswith("amp-bf16's speedup over fp32, each paired repeat: 3.98, 3.09 (2 runs)")
    assert row[5] == f"[report](results/{H200}/advise/report.txt)"
    advise_from(results, H100, "headline-resnet18")
    assert [row[:3] for row in rows_of(section(results))] == [["resnet18", "32", "NVIDIA H100 80GB HBM3"],
                                                              ["resnet50", "32", "NVIDIA H200"]]


def test_an_advised_mode_shows_with_its_levers_and_the_interval_it_rests_on(tmp_path):
    """A made-up advice that advised: the mode and its levers, and the speedup it rests on with
    its interval and runs."""
    results = tmp_path / "results"
    shutil.copytree(RESULTS / "NVIDIA-H200", results / "NVIDIA-H200")
    made_up = json.loads((ROOT / "docs" / "samples" / "advice" / "advice.json").read_text())
    made_up["recommendation"]["settings"] = {"channels_last": True, "compile": False}
    (results / H200 / plan.ADVICE_DIR).mkdir()
    (results / H200 / plan.ADVICE_DIR / "advice.json").write_text(json.dumps(made_up))
    (row,) = rows_of(section(results))
    (speedup,) = [entry for entry in made_up["evidence"] if entry["what"] == "amp-bf16's speedup over fp32"]
    low, high = speedup["interval"]
    assert row[:5] == ["resnet18", "32", "NVIDIA H200", "amp-bf16, channels last",
                       f"amp-bf16's speedup over fp32: {speedup['value']:.2f} [{low:.2f}, {high:.2f}] (3 runs)"]


def test_an_advice_file_that_fails_its_checks_is_left_out_with_a_warning(tmp_path, capsys, monkeypatch):
    from benchmarks.suite import history

    monkeypatch.setattr(history, "WARNED", set())
    results = tmp_path / "results"
    shutil.copytree(RESULTS / "NVIDIA-H200", results / "NVIDIA-H200")
    (results / H200 / plan.ADVICE_DIR).mkdir()
    damaged = results / H200 / plan.ADVICE_DIR / "advice.json"
    damaged.write_text(json.dumps({"schema": "ampbench.advice/2", "status": "complete"}))
    assert advice.saved_advice(results) == [] and rows_of(section(results)) == []
    assert f"gpu_suite.py: warning: {damaged}: " in capsys.readouterr().err


def test_a_lease_runs_the_advise_step_into_its_folder_and_readme_shows_its_advice(tmp_path, monkeypatch):
    """A pass of the advise section on the made-up H200: the adviser's files land in the run's
    advise/ folder, and README's table gives its advice for resnet50 at 224 on the H200."""
    from test_gpu_suite_due import lease_pass

    status, out, err, folder, _ = lease_pass(tmp_path, monkeypatch, "--only", "advise", "--budget", 7)
    assert status == 0, out + err
    assert "  1. advise: about 6.2 min (its --budget); due: never ran on this device" in out
    found = json.loads((folder / plan.ADVICE_DIR / "advice.json").read_text())
    assert (found["setup"]["model"], found["setup"]["image_size"]) == ("resnet50", 224)
    (row,) = rows_of((tmp_path / "README.md").read_text())
    assert row[:3] == ["resnet50", "224", "NVIDIA H200"] and row[5] == "[report](results/NVIDIA-H200/2026-11-26/" \
        "advise/report.txt)"
    assert row[3] == (found["recommendation"]["mode"] if found["recommendation"] else
                      f"none yet ({found['status']}; leans {found['lean']})")
