"""The GPU suite's figures as a user can trust them: which commit measured each row (proved by
the digest of the files that ran, else claimed), which FP32 each speedup is against, how busy each mode kept
the GPU, how steady its timings were, and a budgeted pass that continues an earlier day's folder
only on the same software."""
import json
import shutil
import subprocess
import sys
import time

import pytest

from benchmarks import gpu_suite
from benchmarks.suite import ledger, plan, render, tables
from benchmarks.suite.history import BadResults, SavedSuite
from conftest import ROOT
from tests.benchmarks.words import Words

H200 = ROOT / "results" / "NVIDIA-H200" / "2026-11-26"
H100_OLD = ROOT / "results" / "NVIDIA-H100-80GB-HBM3" / "2026-11-22"
GPU_SUITE = [sys.executable, str(ROOT / "benchmarks" / "gpu_suite.py")]
SOFTWARE = {"torch": "2.11.0+cu130", "cuda": "13.0", "driver": "580.159.04"}


def suite_folder(folder, record, files=()):
    """A results folder: its suite.json and copies of the H200's files `files` ({name: name here})."""
    folder.mkdir(parents=True)
    for name, here in dict(files).items():
        shutil.copy(H200 / name, folder / here)
    (folder / "suite.json").write_text(json.dumps(record))
    return SavedSuite(folder, record)


def test_the_h200_rows_name_the_commit_their_pass_claims_as_claimed():
    """The H200's files of 2026-11-26 record no digest of the source files that ran (before
    ampbench.result/5), so no commit is proved: each row shows the pass's commit as claimed, and
    says where the files name another (the device's stale .git: 9412504-dirty)."""
    suite = SavedSuite(H200, json.loads((H200 / "suite.json").read_text()))
    assert render.commit_label(suite, "headline-resnet50") == (
        "`e4b76bf9d53c` claimed (its files record `9412504d8443-dirty`; no digest of the files that ran)")
    assert render.commit_label(suite, "overhead") == "`e4b76bf9d53c` claimed (no digest of the files that ran)"
    assert render.commit_label(suite, "transformers-eager") == \
        "`bd15ebfd9008` claimed (no digest of the files that ran)"


def test_a_row_whose_file_and_suite_json_name_other_commits_says_so(tmp_path):
    suite = suite_folder(tmp_path / "2026-11-26", {"commit": "f" * 40, "passes": [
        {"commit": "a" * 40, "started_utc": "2026-11-27T08:00:00+00:00", "ran": [{"step": "headline-resnet18"}]}]},
        {"headline-resnet18.json": "headline-resnet18.json"})
    assert render.commit_label(suite, "headline-resnet18") == \
        "`aaaaaaaaaaaa` claimed (its files record `9412504d8443-dirty`; no digest of the files that ran)"
    assert suite.date_of("headline-resnet18") == "2026-11-27"  # the day of the pass that ran it
    assert suite.date_of("overhead") == "2026-11-26"  # no pass names it: the folder's


def head_commit():
    done = subprocess.run(["git", "rev-parse", "HEAD"], cwd=ROOT, capture_output=True, text=True)
    if done.returncode:
        pytest.skip("this copy of the checkout has no .git to check a commit's tree with")
    return done.stdout.strip()


@pytest.mark.parametrize("commit, digest, label", [
    ("head", "head's", "`{head}`"),
    ("head-dirty", "head's", "`{head}`"),  # dirty elsewhere than the source files: still head's code
    ("head", "another", "`{head}` claimed (the files that ran are not its tree)"),
    ("deadbeef", "head's", "`deadbeef` claimed (a commit this checkout's git does not have)"),
    ("head", None, "`{head}` claimed (no digest of the files that ran)"),
])
def test_a_row_names_a_commit_as_proven_only_where_the_files_that_ran_are_its_tree(commit, digest, label, tmp_path):
    """The digest of the source files a run recorded, checked against the commit's tree: a
    --commit that names other code (or a commit nobody has) shows as claimed, never as proven."""
    from utils.provenance import tree_digest

    head = head_commit()
    named = commit.replace("head", head)
    recorded = {"head's": tree_digest(head), "another": "0" * 64, None: None}[digest]
    suite = suite_folder(tmp_path / "2026-12-01", {"commit": named, "passes": [
        {"commit": named, "source_sha256": recorded, "ran": [{"step": "headline-resnet18"}, {"step": "overhead"}]}]},
        {"headline-resnet18.json": "headline-resnet18.json"})
    document = json.loads((suite.folder / "headline-resnet18.json").read_text())
    document["env"].update(git_commit=named, source_sha256=recorded)
    (suite.folder / "headline-resnet18.json").write_text(json.dumps(document))
    expected = label.format(head=head[:12])
    assert render.commit_label(suite, "headline-resnet18") == expected
    assert render.commit_label(suite, "overhead") == expected  # no file: its pass's digest


def test_the_coverage_table_labels_a_step_of_several_processes_by_the_steps_own_file():
    """The resume step's four processes write resume.json, which records the commit its files
    name: the H100's row says so, as resume.json's label does, not the pass's alone."""
    suite = SavedSuite(H100_OLD, json.loads((H100_OLD / "suite.json").read_text()))
    row = next(line for line in render.coverage(ROOT / "results", ROOT / "docs").splitlines()
               if line.startswith("| `resume` |"))
    assert row.split(" | ")[1].endswith(render.commit_label(suite, "resume"))
    assert "its files record `4aab8c8fb1bd-dirty`" in row


def test_a_step_file_without_a_commit_is_refused_with_the_file_named(tmp_path):
    folder = tmp_path / "results" / "NVIDIA-H200" / "2026-11-26"
    suite_folder(folder, json.loads((H200 / "suite.json").read_text()),
                 {"headline-resnet18.json": "headline-resnet18.json"})
    document = json.loads((folder / "headline-resnet18.json").read_text())
    document["env"]["git_commit"] = None
    (folder / "headline-resnet18.json").write_text(json.dumps(document))
    readme = tmp_path / "README.md"
    readme.write_text("# x\n\n## Results\n")
    result = subprocess.run([*GPU_SUITE, "--render", str(folder), "--readme", str(readme)], cwd=ROOT,
                            capture_output=True, text=True, timeout=300)
    assert result.returncode == 2 and "Traceback" not in result.stderr, result.stderr
    assert result.stderr == (f"gpu_suite.py: error: {folder / 'headline-resnet18.json'} records no commit "
                             "(env.git_commit), so no label can say which code measured it; rerun the step, or restore "
                             "the file as the run wrote it.\n")
    assert readme.read_text() == "# x\n\n## Results\n" and not (folder / "README.md").exists()  # nothing written


@pytest.mark.parametrize("commit", ["main", "HEAD~1", "e4b76b", "E4B76BF9", "e4b76bf9 ; rm -rf ~", ""])
def test_a_commit_that_is_not_one_is_refused_before_anything(commit, tmp_path):
    result = subprocess.run([*GPU_SUITE, "--quick", "--commit", commit, "--results-root", str(tmp_path)], cwd=ROOT,
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 2 and "Traceback" not in result.stderr
    assert "gpu_suite.py: error: argument --commit: takes a commit as `git rev-parse HEAD` prints it" in result.stderr
    assert not any(tmp_path.iterdir())


def test_without_a_commit_to_record_the_suite_refuses_to_start(tmp_path, monkeypatch):
    import argparse

    monkeypatch.setattr(gpu_suite.provenance, "commit", lambda: (None, "git describe"))
    options = argparse.Namespace(quick=True, data_dir=None, results_root=str(tmp_path), readme=None, commit=None,
                                 render=None, only=None, budget=None)
    with pytest.raises(gpu_suite.SuiteRefusal, match="no commit names the code that runs"):
        gpu_suite.run_suite(options, time.perf_counter())
    assert not any(tmp_path.iterdir())


def test_every_command_of_a_pass_runs_with_the_suites_commit(tmp_path):
    commit = "e4b76bf9d53ceca0cfca12dcb09beaafd96b800d"
    runner = ledger.Runner(tmp_path, [], lambda line: None, commit, ledger.Stop())
    command = plan.Command("probe", Words((sys.executable, "-c", "import os; print(os.environ['AMPBENCH_COMMIT'])")))
    assert runner.run("headline", command) == 0
    assert (tmp_path / "probe.log").read_text() == commit + "\n"


def planned(names):
    return [plan.Step(name, "headline", ()) for name in names]


def passed(date, ran, waiting, software=SOFTWARE):
    return {"started_utc": f"{date}T10:00:00+00:00", "commit": "a" * 40, "software": software, "budget_min": 10,
            "elapsed_s": 60.0, "ran": [{"step": name} for name in ran],
            "waiting": [{"step": name, "section": "headline"} for name in waiting]}


def device_folder(tmp_path, *passes, date="2026-11-26"):
    folder = tmp_path / "NVIDIA-H200"
    ran = [name for entry in passes for name in (step["step"] for step in entry["ran"])]
    suite_folder(folder / date, {"device": "NVIDIA H200", "date": date, "models": [], "passes": list(passes),
                                 "steps_run": [{"name": name, "section": "headline", "rc": 0} for name in ran]})
    return folder


DUE = {"b": ["never ran on this device"]}


def test_a_budgeted_pass_continues_an_earlier_days_folder_on_the_same_software(tmp_path):
    folder = device_folder(tmp_path, passed("2026-11-26", ["a"], ["b"]))
    out, why = ledger.choose_folder(folder, "2026-11-28", DUE, SOFTWARE, budgeted=True)
    assert out == folder / "2026-11-26" and why.startswith(f"continuing {folder / '2026-11-26'} (from 2026-11-26)")
    out, why = ledger.choose_folder(folder, "2026-11-28", DUE, SOFTWARE, budgeted=False)
    assert (out, why) == (folder / "2026-11-28", None)  # a run without --budget runs every step anew


def test_a_pass_on_other_software_or_with_nothing_left_starts_todays_folder_and_says_why(tmp_path):
    folder = device_folder(tmp_path, passed("2026-11-26", ["a"], ["b"]))
    newer = dict(SOFTWARE, torch="2.12.0+cu130")
    out, why = ledger.choose_folder(folder, "2026-11-28", DUE, newer, budgeted=True)
    assert out == folder / "2026-11-28"
    assert why == (f"starting {folder / '2026-11-28'}: steps are due, but the passes of {folder / '2026-11-26'} ran "
                   "torch 2.11.0+cu130, CUDA 13.0, driver 580.159.04 and this machine has torch 2.12.0+cu130, CUDA "
                   "13.0, driver 580.159.04")
    out, why = ledger.choose_folder(folder, "2026-11-28", {}, SOFTWARE, budgeted=True)
    assert out == folder / "2026-11-28"
    assert why.endswith("nothing is due on this device, its newest figures are current")


def test_a_folder_whose_passes_ran_different_software_is_refused(tmp_path):
    folder = device_folder(tmp_path, passed("2026-11-26", ["a"], ["b"]),
                           passed("2026-11-27", ["b"], [], dict(SOFTWARE, driver="590.10")))
    with pytest.raises(BadResults, match="its passes ran different software"):
        ledger.choose_folder(folder, "2026-11-28", DUE, SOFTWARE, budgeted=True)


def test_the_headline_gives_both_fp32s_the_busy_share_and_the_steadiness_of_each_row(tmp_path):
    """The H200's resnet18 headline, its runs given busy shares: amp-fp16 waits for the host."""
    document = json.loads((H200 / "headline-resnet18.json").read_text())
    shares = {"fp32": 0.97, "tf32": 0.9, "amp-fp16": 0.41, "amp-bf16": 0.55}
    for run in document["runs"]:
        run["gpu_busy"] = {"share": shares[run["mode"]], "source": "nvml-utilization-samples", "window_s": 2.2,
                           "samples": 12, "sample_period_s": 0.167}
        run["gpu_busy_unavailable"] = None
    folder = tmp_path / "2026-11-26"
    folder.mkdir()
    (folder / "headline-resnet18.json").write_text(json.dumps(document))
    suite = SavedSuite(folder, {"models": ["resnet18"], "date": "2026-11-26"})
    lines = tables.headline([suite], lambda saved, figures, step: "label")
    header, row = lines[0].strip("| ").split(" | "), next(line for line in lines if line.startswith("| resnet18"))
    cells = dict(zip(header, row.strip("| ").split(" | ")))
    # two paired repeats: each one's ratio, no interval
    assert cells["amp-fp16 vs fp32"] == "2 runs: 2.35x, 3.32x" and cells["amp-fp16 vs tf32"] == "2 runs: 0.67x, 1.05x"
    assert cells["amp-bf16 vs tf32"] == "2 runs: 1.02x, 1.16x" and cells["repeats"] == "2"
    assert cells["GPU busy fp32 / tf32 / amp-fp16 / amp-bf16"] == "97% / 90% / 41% / 55%"
    assert cells["timings"] == "unsteady: spread over 20% (amp-fp16 34%)"
    assert cells["amp-fp16 energy / fp32"] == "window too short"
    notes = "\n".join(lines)
    assert "what the ThetaGPU tutorial's FP32 run measures on a current torch" in notes
    assert "A mode busy under 70% is host-bound" in notes


def test_the_run_page_says_where_amp_bf16_loses_to_amp_fp16_from_the_profiles(tmp_path):
    """The H200's transformers-eager ran --explain for every mode: its profiles standing in for the
    native step's, the page's line names the categories and ops whose time grew."""
    shutil.copy(H200 / "transformers-eager.json", tmp_path / "native-synthetic.json")
    (line, blank) = render.mode_gap(tmp_path, "native-synthetic", "amp-bf16", "amp-fp16")
    assert line.startswith("Where amp-bf16 loses to amp-fp16 in `native-synthetic` (profiled, ms per step: ")
    assert " by category " in line and " by op `" in line and blank == ""
    assert render.mode_gap(tmp_path, "native-synthetic", "amp-bf16", "no-such-mode") == []


def test_the_h200_page_shows_no_refusal_a_later_pass_overcame_and_no_machine_path(tmp_path):
    shutil.copytree(H200, tmp_path / "2026-11-26")
    page = render.render(tmp_path / "2026-11-26")
    assert "`mode fp8`: skipped" not in page and "/work/main" not in page  # fp8 ran in pass 3, torchao carried
    assert "no usable CIFAR-10 in ./data/cifar-10-batches-py (give --data-dir)" in page
    assert "| synthetic | 224 | 256 | 1 | 30 | " in page  # resnet50 at 224, by hand: one repeat of 30 steps
    assert "by hand, `bd15ebfd9008` claimed (no digest of the files that ran), 2026-11-26" in page


def test_a_commit_that_names_other_code_is_said_before_the_pass(tmp_path, monkeypatch, capsys):
    """--commit e4b76bf on today's files: the suite says at its start that its rows will show the
    commit as claimed (the recipes section: skipped on a CPU, so no step runs)."""
    import argparse

    from utils.provenance import tree_digest

    if tree_digest("e4b76bf9d53ceca0cfca12dcb09beaafd96b800d") is None:
        pytest.skip("this copy of the checkout has no .git that holds e4b76bf")
    (tmp_path / "README.md").write_text("# x\n\n## Results\n")
    options = argparse.Namespace(quick=True, data_dir=None, results_root=str(tmp_path / "results"),
                                 readme=str(tmp_path / "README.md"), commit="e4b76bf9d53ceca0cfca12dcb09beaafd96b800d",
                                 render=None, only=["recipes"], budget=None, plan=False)
    assert gpu_suite.run_suite(options, time.perf_counter()) == 0
    assert ("gpu_suite.py: warning: --commit e4b76bf9d53ceca0cfca12dcb09beaafd96b800d is not the code here (these "
            "source files are not its tree): every row this pass measures will show it as claimed.") \
        in capsys.readouterr().err


def test_a_mode_whose_runs_had_too_few_samples_shows_the_count_never_a_share(tmp_path):
    """The H200's resnet18 headline, its fp32 runs read with 12 samples, amp-fp16's with 2 and 3:
    amp-fp16's cell says too few samples with the larger count, and no share."""
    from utils.measure.nvml_meter import too_few_samples

    document = json.loads((H200 / "headline-resnet18.json").read_text())
    for run in document["runs"]:
        if run["mode"] == "fp32":
            run["gpu_busy"] = {"share": 0.97, "source": "nvml-utilization-samples", "window_s": 2.2, "samples": 12,
                               "sample_period_s": 0.167}
            run["gpu_busy_unavailable"] = None
        else:
            run["gpu_busy"] = None
            run["gpu_busy_unavailable"] = too_few_samples(2 + run["repeat"], 0.5, 0.167) \
                if run["mode"] == "amp-fp16" else "nvidia-ml-py (pynvml) is not installed"
    (tmp_path / "headline-resnet18.json").write_text(json.dumps(document))
    suite = SavedSuite(tmp_path, {"models": ["resnet18"], "date": "2026-11-26"})
    row = next(line for line in tables.headline([suite], lambda saved, figures, step: "label")
               if line.startswith("| resnet18"))
    assert "| 97% / - / too few samples (3) / - |" in row


def test_the_coverage_table_says_which_steps_ran_a_flag_and_which_ran_by_hand_alone():
    """--explain ran in the transformers' eager step on both GPUs and --numerics in the H100's
    resnet18 comparison; the H200's by-hand runs stand in the rows of the steps they stand for,
    and the sentence of steps no GPU has run leaves them out and names them apart."""
    table = render.coverage(ROOT / "results", ROOT / "docs")
    rows = {line.split(" | ")[0].strip("| `"): line.split(" | ")[1:] for line in table.splitlines()
            if line.startswith("| `")}
    h100, h200 = (cell.strip(" |") for cell in rows["--explain"])
    assert h100.startswith("in `resnet18`, [2026-11-26]") and h200.startswith("in `transformers-eager`, [2026-11-26]")
    assert rows["--numerics"][0].startswith("in `resnet18`, ")
    assert rows["native-synthetic"][1].startswith("by hand, [2026-11-26](../results/NVIDIA-H200/2026-11-26/by-hand/")
    assert rows["transformers-sweep"][1].startswith("by hand, [2026-11-26]")
    never = next(line for line in table.splitlines() if line.startswith("No GPU has run: "))
    assert "native-synthetic" not in never and "--explain" not in never and "`--max-batch`" in never
    assert "Run by hand alone, never as the suite's step: `native-synthetic`, `transformers-sweep`." in table


def test_the_fp8_row_carries_the_repeats_intervals_and_spread_the_headline_carries():
    """The H200's ViT timings spread 22% to 30% between repeats: its FP8 row says so, as a
    headline row would, beside its repeats."""
    suite = SavedSuite(H200, json.loads((H200 / "suite.json").read_text()))
    lines = tables.fp8_headline([suite], lambda saved, figures, step: "label")
    header, row = lines[0].strip("| ").split(" | "), lines[2].strip("| ").split(" | ")
    cells = dict(zip(header, row))
    assert cells["repeats"] == "2" and cells["fp8 vs amp-bf16"] == "2 runs: 0.14x, 0.25x"  # no interval: each ratio
    assert cells["timings"] == "unsteady: spread over 20% (amp-bf16 30%, fp8 22%)"
