"""Nothing lost at the edges of a run: results at its end, resumes that would change the
question, flags that would be silently ignored, and the live streams under a deleted file or a
full disk. Each case is a user's command (main.main in this process, as `python main.py` runs
it, or a process of its own where a file-size limit stands for a full disk)."""
import errno
import json
import os
import resource
import shutil
import signal
import subprocess
import sys

import pytest

import main
from conftest import ROOT, SUBSET, assert_user_error, run_main
from utils import fileio
from utils.data import dataset
from utils.training import loop
from utils.training.checkpoint import read

TINY = ["--model", "squeezenet1_1", "-b", "32", "--lr", "0.01", "--no-progress"]
SYNTHETIC = ["--model", "squeezenet1_1", "-b", "4", "-n", "4", "--warmup", "1", "--no-progress", "--data", "synthetic"]


def subset_args():
    """The CIFAR-10 subset, as --data cifar10 (never a silent fall-back to synthetic images)."""
    return ["--data", "cifar10", "--data-dir", str(SUBSET), "--allow-unverified"]


def at_step(monkeypatch, number, action):
    """Run `action()` just before training step `number` (1-based) of the process."""
    original, calls = loop.train_step, []

    def train_step(*args, **kwargs):
        calls.append(1)
        if len(calls) == number:
            action()
        return original(*args, **kwargs)
    monkeypatch.setattr(loop, "train_step", train_step)


def lines_of(path):
    """Every line of a JSON-lines file, each parsed (a half or glued line fails the test)."""
    text = open(path, encoding="utf-8").read()
    assert text.endswith("\n"), text[-200:]
    return [json.loads(line) for line in text.splitlines()]


def limited_run(args, file_size):
    """main.py in a process whose files cannot grow past `file_size` bytes: a disk that fills."""
    def limit():
        resource.setrlimit(resource.RLIMIT_FSIZE, (file_size, file_size))
    return subprocess.run([sys.executable, str(ROOT / "main.py"), *map(str, args)], cwd=ROOT, capture_output=True,
                          text=True, preexec_fn=limit, timeout=300)


# 1. Results lost at the end of a run

def test_a_target_reached_during_the_warm_up_still_times_steps_and_writes_every_output(tmp_path):
    out = {name: tmp_path / name for name in ("r.json", "r.csv", "r.svg")}
    result = run_main(*TINY, *subset_args(), "-n", "6", "--warmup", "3", "--eval-every", "0.0006",
                      "--target-accuracy", "0.01", "--stop-at-target", "--json", out["r.json"], "--csv", out["r.csv"],
                      "--plot", out["r.svg"])
    assert result.returncode == 0, result.stderr
    run = json.loads(out["r.json"].read_text())["runs"][0]
    assert run["completed_steps"] == 4 and run["timed_steps"] == 1 and not run["incomplete"]
    assert run["accuracy_curve"][0]["step"] == 1  # the target was reached at the first evaluation
    assert out["r.csv"].is_file() and out["r.svg"].is_file()


def test_a_signal_during_the_final_evaluation_is_resumed_by_the_evaluation_alone(tmp_path, monkeypatch, capsys):
    argv = [*TINY, *subset_args(), "-n", "3", "--warmup", "1", "--checkpoint", str(tmp_path / "c.pt"),
            "--json", str(tmp_path / "r.json")]
    original = dataset.eval_batches

    def eval_batches(*args, **kwargs):
        for index, batch in enumerate(original(*args, **kwargs)):
            if index == 1:
                os.kill(os.getpid(), signal.SIGTERM)
            yield batch
    monkeypatch.setattr(dataset, "eval_batches", eval_batches)
    monkeypatch.setattr(sys, "argv", ["main.py", *argv])
    assert main.main(argv) == 128 + signal.SIGTERM
    assert "resume with: python main.py" in capsys.readouterr().err
    monkeypatch.setattr(dataset, "eval_batches", original)
    saved = read(tmp_path / "c.pt", "cpu")["stats"]
    result = run_main(*argv, "--resume")
    assert result.returncode == 0, result.stderr
    run = json.loads((tmp_path / "r.json").read_text())["runs"][0]
    assert run["completed_steps"] == 3 and run["test_accuracy"] is not None and not run["incomplete"]
    assert [point["step"] for point in run["accuracy_curve"]] == [3]
    assert run["step_times_ms"] == saved["step_ms"] and run["peak_memory_bytes"] == saved["peak_memory_bytes"]
    assert read(tmp_path / "c.pt", "cpu")["stats"]["accuracy_curve"][-1]["step"] == 3
    again = run_main(*argv, "--resume")  # now complete: nothing left to do, and the sentence says so
    assert_user_error(again, "already reaches the 3 steps asked for")


def test_a_disk_that_fills_during_checkpoint_saves_ends_with_a_sentence_and_the_results(tmp_path, monkeypatch):
    def full(fd):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
    monkeypatch.setattr(fileio.os, "fsync", full)
    result = run_main(*SYNTHETIC, "--checkpoint", tmp_path / "c.pt", "--checkpoint-every", "1",
                      "--jsonl", tmp_path / "r.jsonl")
    assert result.returncode == 1 and "Traceback" not in result.stderr
    closing = result.stderr.strip().splitlines()[-1]
    assert closing.startswith("main.py: error: 4 of this run's checkpoint saves failed") and "No space left" in closing
    assert "rows" not in closing and "median ms" in result.stdout
    assert not (tmp_path / "c.pt").exists()


# 2. Resumes that silently change the question

@pytest.mark.parametrize("changed", [["--seed", "7"], ["--eval-every", "0.0012"], ["--dropout", "0.2"],
                                     ["--channels-last"], ["--on-nan", "skip"], ["--optimizer-impl", "foreach"]])
def test_a_resume_refuses_a_setting_that_changes_the_answer(changed, tmp_path):
    first = [*TINY, *subset_args(), "--warmup", "1", "--checkpoint", tmp_path / "c.pt", "--eval-every", "0.0006"]
    assert run_main(*first, "-n", "2").returncode == 0
    result = run_main(*first, "-n", "4", "--resume", *changed)  # argparse: the last value given wins
    assert_user_error(result, f"holds a run with {changed[0]} ")


def test_the_last_seed_must_be_a_seed():
    result = run_main(*SYNTHETIC, "--seed", str(2 ** 63 - 1), "--seeds", "2")
    assert_user_error(result, "--seed 9223372036854775807 with --seeds 2 runs seeds up to 9223372036854775808")


# 3. Flags that would be silently ignored

@pytest.mark.parametrize("flags, phrase", [
    (["--amp-dtype", "bfloat16"], "--amp-dtype sets the dtype of --amp"),
    (["--amp-dtype", "float16", "--bf16"], "--amp-dtype sets the dtype of --amp"),
    (["--tf32", "--bf16"], "--tf32 is the FP32 mode with TF32 tensor cores"),
    (["--tf32", "--amp"], "--tf32 is the FP32 mode with TF32 tensor cores"),
    (["--eval-every", "1"], "--eval-every measures test accuracy, and synthetic data has no test images"),
    (["--eval-every", "1", "--target-accuracy", "0.5"], "synthetic data has no test images"),
    (["--eval-every", "1", "--target-accuracy", "0.5", "--stop-at-target"], "synthetic data has no test images"),
])
def test_flags_that_would_change_nothing_are_refused(flags, phrase):
    assert_user_error(run_main(*SYNTHETIC, *flags), phrase)


def test_the_loss_scaling_warning_is_true_for_bfloat16_through_amp():
    result = run_main(*SYNTHETIC, "-n", "2", "--amp", "--amp-dtype", "bfloat16", "-s")
    assert result.returncode == 0, result.stderr
    assert "-s/--loss_scaling is ignored with --amp --amp-dtype bfloat16: bfloat16 has" in result.stderr
    assert "without --fp16" not in result.stderr


# 4. Streams

def test_jsonl_appended_to_a_file_without_a_final_newline_keeps_both_lines_apart(tmp_path):
    path = tmp_path / "r.jsonl"
    path.write_text('{"event": "earlier"}')
    assert run_main(*SYNTHETIC, "--jsonl", path).returncode == 0
    events = lines_of(path)
    assert events[0] == {"event": "earlier"} and events[-1]["event"] == "run"


def test_jsonl_deleted_mid_run_is_written_anew_and_the_closing_sentence_says_so(tmp_path, monkeypatch):
    path = tmp_path / "r.jsonl"
    at_step(monkeypatch, 2, lambda: os.unlink(path))
    result = run_main(*SYNTHETIC, "--jsonl", path, "--log-every", "1", "--json", tmp_path / "r.json")
    assert result.returncode == 1 and "Traceback" not in result.stderr
    assert "was deleted during the run" in result.stderr.strip().splitlines()[-1]
    assert "appended" not in result.stdout and (tmp_path / "r.json").is_file()
    assert lines_of(path)[-1]["event"] == "run"  # the lines after the deletion are kept


@pytest.mark.long  # a process of its own: the long stage keeps the main suite short
def test_jsonl_on_a_full_disk_leaves_whole_lines_and_a_closing_sentence(tmp_path):
    path = tmp_path / "r.jsonl"
    path.write_text('{"event": "earlier", "pad": "' + "x" * 300000 + '"}\n')
    limit = path.stat().st_size + 700  # a few lines fit, then one is cut by the limit
    result = limited_run([*SYNTHETIC, "--jsonl", path, "--log-every", "1", "--json", tmp_path / "r.json"], limit)
    assert result.returncode == 1 and "Traceback" not in result.stderr, result.stderr
    assert "could not append to --jsonl" in result.stderr.strip().splitlines()[-1]
    assert len(lines_of(path)) >= 2 and (tmp_path / "r.json").is_file()


@pytest.fixture
def read_only(tmp_path):
    """A file nobody may write, root included (chattr +i where the tests run as root)."""
    path = tmp_path / "ro.jsonl"
    path.write_text('{"event": "kept"}\n')
    path.chmod(0o444)
    if os.geteuid() == 0 and subprocess.run(["chattr", "+i", str(path)], capture_output=True).returncode != 0:
        pytest.skip("running as root on a file system without chattr +i: no file is read-only here")
    yield path
    if os.geteuid() == 0:
        subprocess.run(["chattr", "-i", str(path)], capture_output=True)


def test_a_read_only_jsonl_is_refused_before_training(read_only, monkeypatch):
    at_step(monkeypatch, 1, lambda: pytest.fail("training started"))
    result = run_main(*SYNTHETIC, "--jsonl", read_only)
    assert_user_error(result, f"cannot append to --jsonl {read_only}")
    assert read_only.read_text() == '{"event": "kept"}\n'


def test_tensorboard_removed_mid_run_warns_and_ends_with_a_sentence(tmp_path, monkeypatch):
    pytest.importorskip("tensorboard")
    board = tmp_path / "tb"
    at_step(monkeypatch, 2, lambda: shutil.rmtree(board))
    result = run_main(*SYNTHETIC, "--modes", "fp32,amp-bf16", "--tensorboard", board, "--log-every", "1",
                      "--json", tmp_path / "r.json")
    assert result.returncode == 1 and "Traceback" not in result.stderr, result.stderr
    assert "--tensorboard" in result.stderr.strip().splitlines()[-1]
    assert len(json.loads((tmp_path / "r.json").read_text())["runs"]) == 2


def test_tensorboard_on_a_full_disk_warns_and_ends_with_a_sentence(tmp_path, monkeypatch):
    pytest.importorskip("tensorboard")
    from tensorboard.summary.writer import record_writer

    def full(self, data):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
    monkeypatch.setattr(record_writer.RecordWriter, "write", full)
    result = run_main(*SYNTHETIC, "--tensorboard", tmp_path / "tb", "--log-every", "1", "--json", tmp_path / "r.json")
    assert result.returncode == 1 and "Traceback" not in result.stderr, result.stderr
    assert "could not write --tensorboard" in result.stderr.strip().splitlines()[-1]
    assert json.loads((tmp_path / "r.json").read_text())["runs"][0]["completed_steps"] == 4


def test_a_resume_that_only_evaluates_still_gives_the_checkpoint_warning(monkeypatch, capsys):
    """The evaluation-only resume passes the same checks and warnings as any other resume."""
    from utils import app
    from utils.config import RunConfig
    from utils.training import checkpoint

    config = RunConfig.build(model="squeezenet1_1", steps=4, checkpoint="c.pt", resume=True)
    monkeypatch.setattr(checkpoint, "check_compatible", lambda *_: "the schedule was stretched.")
    monkeypatch.setattr(checkpoint, "lacks_final_evaluation", lambda *_: True)
    app.check_resume(checkpoint.Resumed("c.pt", {"step": 4}), config, config.plan(True, 1), None, evaluates=True)
    assert "the schedule was stretched." in capsys.readouterr().err
