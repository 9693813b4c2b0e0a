"""Outputs at the edges: every output path is proven before training (special files are never
replaced, names too long for the file system, links whose target cannot be written, a lock
that cannot be taken), a write that fails after training costs only its own file, and a
reader that goes away (`| head`) or an ASCII-only terminal costs none."""
import json
import os
import resource
import signal
import stat
import subprocess
import sys
import types

import pytest

from conftest import ROOT, assert_user_error, run_main
from main import build_parser
from utils import fileio
from utils.app import resume_line
from utils.config import RunConfig
from utils.launch import World

TINY = ["--data", "synthetic", "-n", "3", "--warmup", "1", "--model", "squeezenet1_1", "-b", "4", "--no-progress"]


def fifo(tmp_path):
    path = tmp_path / "pipe"
    os.mkfifo(path)
    return path


def link(tmp_path, target, name="link.json"):
    path = tmp_path / name
    os.symlink(target, path)
    return path


# (flag, the path a test folder gives, the phrase of the refusal)
BAD_OUTPUTS = [
    pytest.param("--json", fifo, "is not a regular file (a FIFO)", id="json-fifo"),
    pytest.param("--csv", fifo, "is not a regular file (a FIFO)", id="csv-fifo"),  # it used to hang reading it
    pytest.param("--checkpoint", fifo, "is not a regular file (a FIFO)", id="checkpoint-fifo"),
    pytest.param("--json", lambda t: link(t, os.devnull), "is not a regular file (a character device)",
                 id="json-link-to-dev-null"),
    pytest.param("--json", lambda t: link(t, t / "loop.json", "loop.json"), "is a symlink loop", id="symlink-loop"),
    pytest.param("--json", lambda t: t / ("r" * 256 + ".json"), "its name is longer than the 255 bytes",
                 id="name-too-long"),
    pytest.param("--json", lambda t: link(t, "/proc/self/r.json"), "cannot write --json", id="link-unwritable"),
    pytest.param("--csv", lambda t: (t / ".r.csv.lock").mkdir() or t / "r.csv", "cannot lock --csv",
                 id="csv-lock-is-a-folder"),
    pytest.param("--json", lambda t: "", "--json needs a path, and got an empty one", id="empty-json"),
    pytest.param("--checkpoint", lambda t: "", "--checkpoint needs a path", id="empty-checkpoint"),
]


@pytest.mark.parametrize("flag, make, phrase", BAD_OUTPUTS)
def test_an_output_that_cannot_be_written_as_a_file_is_refused_before_training(flag, make, phrase, tmp_path):
    path = make(tmp_path)
    before = {entry: os.lstat(tmp_path / entry) for entry in os.listdir(tmp_path)}
    result = run_main(*TINY, flag, path)
    assert_user_error(result, phrase)
    assert "data loaded" not in result.stdout + result.stderr  # refused before any data or training
    after = {entry: os.lstat(tmp_path / entry) for entry in os.listdir(tmp_path)}
    assert {k: (v.st_ino, stat.S_IFMT(v.st_mode)) for k, v in after.items()} == \
        {k: (v.st_ino, stat.S_IFMT(v.st_mode)) for k, v in before.items()}, "an existing file was replaced"


@pytest.mark.parametrize("argv, phrase", [
    pytest.param(["--modes", ""], "has an empty item", id="empty-modes"),
    pytest.param(["--modes", "fp32,,amp-bf16"], "has an empty item", id="empty-mode-item"),
    pytest.param(["--fp16", "--loss-scale", "1024"], "--loss-scale sets the static loss scale of fp16-master",
                 id="loss-scale-without-fp16-master"),
])
def test_flags_that_would_be_ignored_are_refused(argv, phrase):
    assert_user_error(run_main(*TINY, *argv), phrase)


def test_the_loss_scale_of_fp16_master_is_taken_and_defaults_to_128():
    assert RunConfig.build(modes="fp16-master", loss_scale=1024.0).precision.loss_scale == 1024.0
    assert RunConfig.build(modes="fp32,fp16-master").precision.loss_scale == 128.0


def test_the_longest_allowed_names_are_written(tmp_path):
    """Temporary files beside them have bounded names, so a 255-byte name works."""
    names = {"--checkpoint": "c" * 252 + ".pt", "--json": "r" * 250 + ".json", "--csv": "s" * 251 + ".csv"}
    argv = [arg for flag, name in names.items() for arg in (flag, tmp_path / name)]
    assert run_main(*TINY, *argv).returncode == 0
    assert all((tmp_path / name).is_file() for name in names.values())


def test_temporary_files_of_a_killed_checkpoint_save_are_removed_on_the_next_start(tmp_path):
    checkpoint = tmp_path / "c.pt"
    leftovers = [tmp_path / f"{fileio.temporary_prefix(checkpoint)}{tag}.tmp" for tag in ("a1b2c3", "d4e5f6")]
    for leftover in leftovers:
        leftover.write_bytes(b"\0" * 2 ** 20)
    unrelated = tmp_path / ".other.pt.x1.tmp"
    unrelated.write_bytes(b"keep")
    result = run_main(*TINY, "--checkpoint", checkpoint)
    assert result.returncode == 0, result.stderr
    assert "removed 2.0 MiB of temporary files that a killed save" in result.stderr
    assert not any(leftover.exists() for leftover in leftovers) and unrelated.exists()
    assert checkpoint.exists()


def test_no_rank_takes_another_ranks_write_probe_for_a_leftover(tmp_path, monkeypatch):
    """In a job every rank proves --checkpoint writable while rank 0 removes a killed save's
    leftovers beside it: here that removal runs while this rank's probe exists."""
    checkpoint, probes, mkstemp = str(tmp_path / "c.pt"), [], fileio.tempfile.mkstemp

    def probe_while_rank_0_cleans(**where):
        fd, name = mkstemp(**where)
        probes.append(name)
        fileio.remove_leftovers(checkpoint)
        return fd, name

    monkeypatch.setattr(fileio.tempfile, "mkstemp", probe_while_rank_0_cleans)
    fileio.ensure_writable(checkpoint, "--checkpoint")
    assert len(probes) == 1 and os.listdir(tmp_path) == []


def limit_file_size():
    """A file-size limit that the checkpoint exceeds and the JSON does not: writes past it
    fail with EFBIG, as a full disk fails them with ENOSPC."""
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    resource.setrlimit(resource.RLIMIT_FSIZE, (2 ** 20, 2 ** 20))


@pytest.mark.long  # a process of its own, killed or limited: the long stage keeps the main suite short
def test_a_checkpoint_that_cannot_be_saved_costs_neither_the_run_nor_its_results(tmp_path):
    result = subprocess.run([sys.executable, str(ROOT / "main.py"), *TINY, "--checkpoint", tmp_path / "c.pt",
                             "--json", tmp_path / "r.json"], cwd=ROOT, capture_output=True, text=True, timeout=300,
                            preexec_fn=limit_file_size)
    assert result.returncode == 1, result.stderr
    assert "Traceback" not in result.stderr
    assert "could not write" in result.stderr and "Training goes on; the results are still written" in result.stderr
    assert json.loads((tmp_path / "r.json").read_text())["runs"][0]["completed_steps"] == 3
    assert os.listdir(tmp_path) == ["r.json"]  # no checkpoint, no temporary file left


def test_a_failed_output_after_training_still_writes_the_others(tmp_path, monkeypatch):
    from utils.errors import WriteFailed
    from utils.results import files

    def full_disk(path, document):
        raise WriteFailed(f"could not write {path} (No space left on device); the file there before, if any, "
                          "is kept as it was.")
    monkeypatch.setattr(files, "write_json", full_disk)
    result = run_main(*TINY, "--json", tmp_path / "r.json", "--csv", tmp_path / "r.csv")
    assert result.returncode == 1
    assert "main.py: error: could not write" in result.stderr and "No space left on device" in result.stderr
    assert "1 rows appended to" in result.stdout and (tmp_path / "r.csv").exists()


@pytest.mark.long  # a process of its own, killed or limited: the long stage keeps the main suite short
def test_a_reader_that_goes_away_costs_no_output(tmp_path):
    """`main.py ... --csv b.csv | head -1`: the table is cut off, the files are all written."""
    process = subprocess.Popen([sys.executable, str(ROOT / "main.py"), *TINY, "--csv", tmp_path / "b.csv",
                                "--json", tmp_path / "b.json"], cwd=ROOT, stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, text=True)
    process.stdout.readline()
    process.stdout.close()  # as `head -1` does after its line
    err = process.stderr.read()
    assert process.wait(timeout=300) == 0, err
    assert "Traceback" not in err and "BrokenPipe" not in err
    assert (tmp_path / "b.csv").exists() and (tmp_path / "b.json").exists()


@pytest.mark.long  # a process of its own, killed or limited: the long stage keeps the main suite short
def test_a_non_ascii_path_on_an_ascii_only_terminal_costs_no_output(tmp_path):
    path = tmp_path / "résultats.json"
    result = subprocess.run([sys.executable, str(ROOT / "main.py"), *TINY, "--json", path], cwd=ROOT,
                            capture_output=True, timeout=300, env={**os.environ, "PYTHONIOENCODING": "ascii"})
    assert result.returncode == 0, result.stderr
    assert b"r\\xe9sultats.json" in result.stdout and path.exists()


@pytest.mark.parametrize("world, command", [
    (World(), "python main.py"),
    (World(1, 4, 1, 4, "torchrun"), "torchrun --nproc_per_node=4 main.py"),
    (World(0, 16, 0, 8, "torchrun"), "torchrun --nnodes=2 --nproc_per_node=8 main.py"),
    (World(0, 8, 0, 4, "mpirun"), "mpirun -n 8 python main.py"),
    (World(0, 8, 0, 4, "srun"), "srun -n 8 python main.py"),
])
def test_the_resume_line_repeats_the_launcher_that_ran_the_job(world, command):
    """...and the command line, in current spellings where the user typed earlier ones."""
    argv = ["-n", "100", "--bf16", "--checkpoint", "c.pt", "--warmup", "3"]
    config = RunConfig.from_args(build_parser().parse_args(argv))
    last = types.SimpleNamespace(completed_steps=40, steps=100, stopped_by="SIGTERM")
    line = resume_line(config, last, 40, False, world)
    assert line.endswith(f"resume with: {command} -n 100 --modes amp-bf16 --checkpoint c.pt --timing-warmup 3 "
                         "--resume")


@pytest.mark.parametrize("flag, make, phrase", [
    pytest.param("--json", fifo, "is not a regular file (a FIFO)", id="json-fifo"),
    pytest.param("--csv", fifo, "is not a regular file (a FIFO)", id="csv-fifo"),
    pytest.param("--json", lambda t: link(t, os.devnull), "is not a regular file (a character device)",
                 id="json-link-to-dev-null"),
    pytest.param("--csv", lambda t: (t / ".r.csv.lock").mkdir() or t / "r.csv", "cannot lock --csv",
                 id="csv-lock-is-a-folder"),
    pytest.param("--json", lambda t: "", "--json needs a file name", id="empty-json"),
])
def test_utils_report_proves_its_outputs_before_reading(flag, make, phrase, tmp_path, capsys):
    from utils import report
    path = make(tmp_path)
    before = {entry: os.lstat(tmp_path / entry).st_ino for entry in os.listdir(tmp_path)}
    assert report.main([str(ROOT / "tests" / "unit" / "results" / "data" / "explained.json"), flag, str(path)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("utils.report: error:") and phrase in err and len(err.strip().splitlines()) == 1
    assert {entry: os.lstat(tmp_path / entry).st_ino for entry in os.listdir(tmp_path)} == before


def test_a_trace_that_cannot_be_written_is_returned_with_the_findings_not_stashed(monkeypatch):
    """What is measured beside the loop comes back as new findings: the profile, the largest
    batch and a trace that could not be written; the final evaluation's findings stay as they were."""
    from utils import app
    from utils.results.record import SideMeasurements
    monkeypatch.setattr(app, "explain", lambda trainer, config, context, repeat: ("profile", "trace not written"))
    monkeypatch.setattr(app.max_batch, "largest_batch_of", lambda *settings: 512)
    config = types.SimpleNamespace(measurement=types.SimpleNamespace(explain=True, max_batch=True), training=None,
                                   precision=None, data=None)
    context = types.SimpleNamespace(reporter=types.SimpleNamespace(phase=lambda text: None), device="cpu")
    outcome = types.SimpleNamespace(ran_all_steps=lambda steps: True, diverged_at=None,
                                    stats=types.SimpleNamespace(step_ms=[10.0]))
    evaluation = SideMeasurements(test_accuracy=0.5)
    trainer = types.SimpleNamespace(mode=types.SimpleNamespace(name="fp32"), plan=types.SimpleNamespace(steps=3,
                                                                                                       recipe=None),
                                    loader=None)  # data held in memory: no feed to measure
    found = app.measure_beside_the_loop(None, trainer, config, context, None, outcome, 0, evaluation)
    assert (found.profile, found.max_batch, found.failures, found.test_accuracy) == \
        ("profile", 512, ["trace not written"], 0.5)
    assert evaluation == SideMeasurements(test_accuracy=0.5)
