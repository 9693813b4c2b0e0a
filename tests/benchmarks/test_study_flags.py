"""The studies in benchmarks/ type a setting they share with main.py as main.py does (its field's
flag, through utils.config.add_flag: the names, the range, the key its value is kept under), and
the GPU suite reads a step saved with a study's earlier spelling as the step it plans now."""
import argparse
import subprocess
import sys

import pytest

from benchmarks import diagnostics_overhead, fp8_sweep, loader, overhead, streaming
from benchmarks.suite import estimate
from benchmarks.suite.study_run import study_run
from conftest import ROOT
from utils.config import SETTINGS, flag_type

STUDIES = {"overhead.py": overhead, "diagnostics_overhead.py": diagnostics_overhead, "fp8_sweep.py": fp8_sweep,
           "loader.py": loader, "streaming.py": streaming}
MAIN_PY_NAMES = {name: key for key, setting in SETTINGS.items() for name in setting.flag.names}
# A study's own setting under one of main.py's names: overhead.py's and the sweep's --steps count
# the timed steps alone, where main.py's count the warm-up too.
OWN = {("overhead.py", "--steps"), ("fp8_sweep.py", "--steps")}


def taken(parse, text):
    """What an argparse type makes of `text`: its value, or its refusal's words."""
    try:
        return parse(text)
    except argparse.ArgumentTypeError as refusal:
        return str(refusal)


@pytest.mark.parametrize("study", sorted(STUDIES))
def test_a_study_types_each_setting_it_shares_with_main_py_by_main_pys_field(study):
    parser = STUDIES[study].build_parser()
    for action in parser._actions:
        shared = {MAIN_PY_NAMES[name] for name in action.option_strings if name in MAIN_PY_NAMES}
        if not shared or {(study, name) for name in action.option_strings} & OWN:
            continue
        assert shared == {action.dest}, (study, action.option_strings)
        flag = SETTINGS[action.dest].flag
        assert tuple(action.option_strings) == flag.names, (study, action.option_strings)
        if flag.range is not None:  # main.py's range, its values refused in main.py's words
            for text in (str(flag.range.low), str(flag.range.high), "-1", "1e999", "x"):
                assert taken(action.type, text) == taken(flag_type(flag.range), text), (study, action.dest, text)
    assert not set(estimate.EARLIER_STUDY_FLAGS.get(study, {})) & set(parser._option_string_actions)


def test_the_studies_take_a_comma_list_of_modes_and_refuse_an_unknown_one_at_parsing():
    assert overhead.build_parser().parse_args([]).modes == ["fp32"]
    assert diagnostics_overhead.build_parser().parse_args(["--modes", "amp-bf16,fp32"]).modes == ["amp-bf16", "fp32"]
    result = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "overhead.py"), "--modes", "fp32,fp64"],
                            cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert result.returncode == 2 and result.stderr == (
        "overhead.py: error: argument --modes: unknown precision mode 'fp64' in --modes; choose from fp32, tf32, "
        "amp-fp16, amp-fp16-noscale, amp-bf16, fp16-master, fp8, fp8-rowwise (python benchmarks/overhead.py -h "
        "lists the flags).\n"), result.stderr


def test_the_overhead_estimate_counts_each_modes_rounds():
    runs = estimate.overhead_runs(study_run("overhead.py", modes=["fp32", "amp-bf16"], rounds=2, timed_steps=3,
                                            warmup=1).options())
    assert [(run.mode, run.first, run.steps) for run in runs] == [
        (mode, loop == 0, 4) for mode in ("fp32", "amp-bf16") for loop in range(4)]  # two loops a round on the CPU


def test_a_step_saved_with_a_studys_earlier_flag_is_the_step_planned_with_its_name_now():
    """The committed suites ran overhead.py with --mode (results/*/*/suite.json): their time stays
    the overhead step's measured estimate."""
    saved = ["/opt/torch/.venv/bin/python3", "benchmarks/overhead.py", "-p", "--mode", "amp-fp16", "-b", "256"]
    planned = [sys.executable, str(ROOT / "benchmarks" / "overhead.py"), "-p", "--modes", "amp-fp16", "-b", "256"]
    assert estimate.command_words(saved) == estimate.command_words(planned)
    sweep = ["python", "benchmarks/fp8_sweep.py", "-p", "--batch", "64", "--warmup", "5"]
    assert estimate.command_words(sweep) == ("fp8_sweep.py", "-p", "--batch-size", "64", "--timing-warmup", "5")
    other = ["python", "benchmarks/loader.py", "--warmup", "5"]  # only the studies that were spelled so
    assert estimate.command_words(other) == ("loader.py", "--warmup", "5")


@pytest.mark.parametrize("quick", [True, False])
def test_each_study_step_types_the_options_the_estimator_reads(quick, tmp_path):
    """A study's command line is rendered from its typed run; its own parser reads back from the
    words exactly the options the estimator reads from the run."""
    from benchmarks.suite import plan
    from benchmarks.suite.device import DataFacts

    planner = plan.Planner(tmp_path, None, plan.Plan(quick), plan.MODES, plan.available_flags(),
                           plan.TRANSFORMER_MODES, lambda line: None, DataFacts(None, 50_000, 10_000))
    studies = [command.study for step in plan.planned_steps(planner, list(plan.SECTIONS))
               for command in step.commands if command.study is not None]
    assert {study.script for study in studies} == {"overhead.py", "loader.py", "fp8_sweep.py"}
    for study in studies:
        assert STUDIES[study.script].build_parser().parse_args(list(study.argv()[2:])) == study.options(), study
