"""main.py --advise as a user runs it: its refusals (one sentence, exit 2), `--advise --from` on
saved results (the report, its status's exit code, advice.json written and resolving), and, under
the long marker, a CPU run end to end within --budget 2 whose advised command runs."""
import json
import re
import shlex
from collections import Counter

import pytest

from conftest import ROOT, assert_user_error, run_cli, run_main
from utils.advice import document
from utils.advice.evidence import reader, unresolved
from utils.modes import MODES
from utils.results.compare import MIN_RUNS
from utils.training import cpu_arithmetic

H200_RESNET18 = ROOT / "results" / "NVIDIA-H200" / "2026-11-26" / "headline-resnet18.json"
FAST = ["--model", "resnet18", "--stem", "imagenet", "-b", "16", "--no-progress"]  # conftest's, less its warm-up
SENTENCE = re.compile(r"^ ?\d+\. .+ \[E\d+(, E\d+)*\]\.$")


@pytest.mark.parametrize("args,phrase", [
    (["--budget", "3"], "--budget applies to --advise, which is not given"),
    (["--advice-dir", "x"], "--advice-dir applies to --advise"),
    (["--from", "r.json"], "--from applies to --advise"),
    (["--advise", "--fp16"], "drop --fp16"),
    (["--advise", "--modes", "fp32,amp-bf16"], "drop --modes"),
    (["--advise", "--json", "r.json"], "drop --json"),
    (["--advise", "--repeats", "5"], "drop --repeats"),
    (["--advise", "--from", str(H200_RESNET18), "--budget", "2"], "--from measures nothing: drop --budget"),
])
def test_flags_the_adviser_owns_or_that_need_it_are_refused(args, phrase):
    assert_user_error(run_main(*args), phrase)


def test_a_file_that_is_no_results_file_is_refused(tmp_path):
    assert_user_error(run_main("--advise", "--from", str(tmp_path / "missing.json")), "cannot read result file")
    other = tmp_path / "other.json"
    other.write_text(json.dumps({"schema": "something else"}))
    assert_user_error(run_main("--advise", "--from", str(other)), "is not an ampbench result file")


def test_advice_from_saved_results_is_printed_each_sentence_with_its_evidence(tmp_path):
    result = run_main("--advise", "--from", str(H200_RESNET18), "--advice-dir", str(tmp_path / "advice"))
    # amp-fp16's two repeats there lie 34% apart: no ranking of them can be trusted
    assert result.returncode == document.STATUSES["unsteady"], result.stderr
    sentences = [line for line in result.stdout.splitlines() if re.match(r"^ ?\d+\. ", line)]
    assert sentences and all(SENTENCE.match(line) for line in sentences), sentences
    assert sentences[0].startswith(" 1. No advice yet: these timings are unsteady")
    assert "Train with" not in result.stdout and "here: python main.py --advise " in result.stdout
    advice = json.loads((tmp_path / "advice" / "advice.json").read_text())
    document.check(advice)
    assert advice["results"] == shlex.split(advice["results"])[0] and advice["results"].endswith(H200_RESNET18.name)
    assert unresolved(advice, reader(str(tmp_path / "advice"))) == []
    assert (tmp_path / "advice" / "report.txt").read_text().startswith("Which precision should resnet18 train with")


def test_advice_from_an_advice_file_is_decided_again_and_a_damaged_one_refused(tmp_path):
    run_main("--advise", "--from", str(H200_RESNET18), "--advice-dir", str(tmp_path / "advice"))
    saved = tmp_path / "advice" / "advice.json"
    again = run_main("--advise", "--from", str(saved))
    assert again.returncode == 5 and again.stdout.startswith((tmp_path / "advice" / "report.txt").read_text())
    advice = json.loads(saved.read_text())
    cited = advice["claims"][0]["evidence"][0]
    advice["evidence"] = [entry for entry in advice["evidence"] if entry["id"] != cited]
    saved.write_text(json.dumps(advice))
    assert_user_error(run_main("--advise", "--from", str(saved)), f"cites {cited}, which the evidence lacks")


def test_a_budget_below_one_comparison_is_refused_with_what_it_needs(tmp_path):
    """18 s: well over the preflight's second or so, even on a busy host, and under the comparison's 23 s."""
    result = run_main("--advise", *FAST, "--budget", "0.3", "--advice-dir", str(tmp_path / "advice"))
    assert_user_error(result, "--budget 0.3 is less than one comparison needs here", "give --budget")
    assert not (tmp_path / "advice").exists()


def test_the_adviser_runs_as_one_process(monkeypatch, tmp_path):
    monkeypatch.setenv("WORLD_SIZE", "2")
    monkeypatch.setenv("RANK", "0")
    assert_user_error(run_main("--advise", *FAST, "--advice-dir", str(tmp_path)), "launch it without torchrun")


@pytest.mark.long
def test_a_cpu_run_gives_valid_advice_within_its_budget_and_the_advised_command_runs(subset, tmp_path):
    folder = tmp_path / "advice"
    data = ["--data-dir", str(subset), "--allow-unverified"]
    result = run_cli("--advise", *FAST, *data, "-n", "30", "--budget", "2", "--advice-dir", folder, timeout=240)
    # a busy 2-core host (the CI's lanes side by side) may leave the advice at "measure again"
    assert result.returncode in [document.STATUSES[status] for status in ("cpu-only", "unsteady", "too-few-runs")], \
        result.stderr
    advice = json.loads((folder / "advice.json").read_text())
    document.check(advice)
    assert advice["budget"]["spent_s"] <= 2 * 60 + 10
    # the CPU's flags decide amp-fp16: timed where it has fast float16 (Sapphire Rapids), else refused
    fp16 = {"amp-fp16"} if cpu_arithmetic.slow_on_this_cpu(MODES["amp-fp16"]) is None else set()
    (compare,) = [phase for phase in advice["plan"] if phase["name"] == "compare"]
    assert set(compare["modes"]) == {"fp32", "amp-bf16"} | fp16 and compare["runs"]
    ran = Counter(run["mode"] for run in json.loads((folder / "results.json").read_text())[0]["runs"])
    if "compare" in advice["cut_short"]:  # its deadline stopped it: the runs it finished, fp32's first
        assert ran["fp32"] and set(ran) <= set(compare["modes"])
    else:
        assert ran == dict.fromkeys(compare["modes"], MIN_RUNS)
    assert unresolved(advice, reader(str(folder))) == []
    assert all(SENTENCE.match(f"1. {claim['text']} [{', '.join(claim['evidence'])}].") for claim in advice["claims"])
    if advice["recommendation"] is None:
        again = shlex.split(advice["measure_again"]["here"])
        assert again[:3] == ["python", "main.py", "--advise"] and "--allow-unverified" in again and "30" in again
        return
    command = advice["recommendation"]["command"]
    assert command[:2] == ["python", "main.py"] and "--allow-unverified" in command and "30" in command
    trained = run_cli(*command[2:], "--json", tmp_path / "advised.json", timeout=240)
    assert trained.returncode == 0, trained.stderr
    ran = json.loads((tmp_path / "advised.json").read_text())
    assert {run["mode"] for run in ran["runs"]} == {advice["recommendation"]["mode"]}


def test_the_advice_the_docs_show_is_valid_and_every_figure_resolves():
    folder = ROOT / "docs" / "samples" / "advice"
    advice = document.load(str(folder / "advice.json"))
    assert advice["status"] == "cpu-only" and unresolved(advice, reader(str(folder))) == []
