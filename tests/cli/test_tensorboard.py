"""--tensorboard DIR and --jsonl PATH: the run as it happens. TensorBoard gets every curve of
every run against one global step (the optimizer step) while training, and no extra runs;
the JSON lines stream each phase, log interval and run, so a killed run leaves its story."""
import json
import os
import shutil
import signal
import subprocess
import sys
import time

import pytest

import main
from conftest import ROOT, assert_user_error, run_cli, run_main
from utils.errors import WriteFailed
from utils.results import live

TINY = ["--model", "squeezenet1_1", "-b", "8", "-n", "6", "--warmup", "2", "--no-progress", "--data", "synthetic"]


def scalars(folder):
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
    events = EventAccumulator(str(folder))
    events.Reload()
    return {tag: [(event.step, event.value) for event in events.Scalars(tag)] for tag in events.Tags()["scalars"]}


def test_tensorboard_logs_every_curve_of_every_run_against_the_optimizer_step(tmp_path, capsys):
    pytest.importorskip("tensorboard")
    status = main.main([*TINY, "--modes", "fp32,amp-fp16", "--allow-slow-fp16", "--log-every", "4",
                        "--tensorboard", str(tmp_path / "tb"), "--json", str(tmp_path / "r.json")])
    assert status == 0, capsys.readouterr().err
    (folder,) = (tmp_path / "tb").iterdir()
    assert folder.name.startswith("squeezenet1_1-b8-") and not folder.name.startswith(".")
    assert sorted(path.name for path in folder.iterdir()) == ["amp-fp16", "fp32"]  # no hparams-* runs
    runs = {run["mode"]: run for run in json.loads((tmp_path / "r.json").read_text())["runs"]}
    for mode, run in runs.items():
        logged = scalars(folder / mode)
        assert [step for step, _ in logged["train/loss"]] == [1, 2, 3, 4, 5, 6]  # every step, one axis
        assert [value for _, value in logged["train/loss"]] == pytest.approx(run["loss_curve"])
        assert [value for _, value in logged["train/lr"]] == pytest.approx(run["lr_curve"])
        assert [step for step, _ in logged["time/step_ms"]] == [3, 4, 5, 6]  # the timed steps, by their step
        assert [value for _, value in logged["time/step_ms"]] == pytest.approx(run["step_times_ms"])
    scale = runs["amp-fp16"]["loss_scale_curve"]
    assert scalars(folder / "amp-fp16")["train/loss_scale"] == [(4, pytest.approx(scale[3])),
                                                                 (6, pytest.approx(scale[5]))]  # at the cadence
    assert "train/loss_scale" not in scalars(folder / "fp32") and runs["fp32"]["loss_scale_curve"] is None
    status = main.main([*TINY, "--tensorboard", str(tmp_path / "tb")])  # a rerun never mixes its curves in
    assert status == 0 and len(list((tmp_path / "tb").iterdir())) == 2


@pytest.mark.whole_runs
def test_the_json_lines_tell_the_run_as_it_happens(tmp_path, subset):
    out = tmp_path / "r.jsonl"
    result = run_cli("--model", "squeezenet1_1", "-b", "64", "-n", "6", "--warmup", "1", "--no-progress",
                     "--data-dir", subset, "--allow-unverified", "--eval-every", "0.05", "--log-every", "3",
                     "--jsonl", out)
    assert result.returncode == 0, result.stderr
    events = [json.loads(line) for line in out.read_text().splitlines()]
    assert [event["event"] for event in events if event["event"] != "phase"] == \
        ["train", "eval", "train", "eval", "run"]  # lines at steps 3 and 6; 0.05 epochs is 4 steps of 64
    train = [event for event in events if event["event"] == "train"]
    assert [event["step"] for event in train] == [3, 6] and all(event["run"] == "fp32" for event in train)
    assert events[-1]["completed_steps"] == 6 and 0 <= events[-1]["test_accuracy"] <= 1
    assert "data loaded: cifar10, 5438 training images" in [event.get("text", "") for event in events][1]


@pytest.mark.long  # a process of its own, killed or limited: the long stage keeps the main suite short
def test_a_killed_run_leaves_its_lines_and_its_curves(tmp_path):
    """SIGKILL (the OOM killer) gives no chance to write: what was streamed is all there is."""
    pytest.importorskip("tensorboard")
    out, logs = tmp_path / "r.jsonl", tmp_path / "tb"
    process = subprocess.Popen([sys.executable, str(ROOT / "main.py"), *TINY, "-n", "2000", "--log-every", "2",
                                "--jsonl", str(out), "--tensorboard", str(logs)], cwd=ROOT,
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    # each interval's JSON line is written before its TensorBoard scalars are flushed: the third
    # line (step 6) proves that the scalars of steps 1 to 4 are on disk
    deadline = time.time() + 240
    while time.time() < deadline and not (out.exists() and out.read_text().count('"event": "train"') >= 3):
        time.sleep(0.5)
    os.kill(process.pid, signal.SIGKILL)
    process.wait()
    events = [json.loads(line) for line in out.read_text().splitlines()]
    steps = [event["step"] for event in events if event["event"] == "train"]
    assert steps[:2] == [2, 4]
    (folder,) = logs.iterdir()
    assert [step for step, _ in scalars(folder / "fp32")["train/loss"]][:4] == [1, 2, 3, 4]


def test_tensorboard_without_the_package_is_refused_before_training(tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "torch.utils.tensorboard", None)  # None in sys.modules: the import fails
    result = run_main(*TINY, "--tensorboard", tmp_path / "tb")
    assert_user_error(result, "--tensorboard needs the tensorboard package, which is not installed: "
                              "pip install tensorboard")
    assert not (tmp_path / "tb").exists()


def logging_one_run(tmp_path, warned):
    """A live log whose run fp32 has logged steps 1 and 2 under tmp_path/tb/m-b8-T/fp32."""
    pytest.importorskip("tensorboard")
    stream = live.LiveLog(None, str(tmp_path / "tb"), "m-b8-T", warned.append)
    stream.begin_run("fp32")
    stream.train(1, [1.0, 0.9], [0.1, 0.1], None, 1.0, 2.0)
    return stream


def event_files(folder):
    return list(folder.glob("events.out.tfevents.*"))


def assert_deletion_is_said_at_the_end(stream, deleted):
    with pytest.raises(WriteFailed) as closing:
        stream.close()
    assert str(closing.value).startswith(f"--tensorboard logs were deleted during the run ({deleted}) and written "
                                         "anew from ")
    assert str(closing.value).endswith(f"so {stream.tensorboard} holds only the logs from then on.")


@pytest.mark.parametrize("deleted, named", [  # what is deleted, and the deleted log the closing sentence names
    pytest.param(lambda tb: tb, lambda tb: tb / "m-b8-T", id="the-tensorboard-folder"),
    pytest.param(lambda tb: tb / "m-b8-T", lambda tb: tb / "m-b8-T", id="this-invocations-folder"),
    pytest.param(lambda tb: tb / "m-b8-T" / "fp32", lambda tb: tb / "m-b8-T" / "fp32", id="the-runs-folder"),
    pytest.param(lambda tb: event_files(tb / "m-b8-T" / "fp32")[0], None, id="the-event-file"),
])
def test_logs_deleted_during_a_run_are_written_anew_as_the_jsonl_file_is(deleted, named, tmp_path):
    warned = []
    stream = logging_one_run(tmp_path, warned)
    path = deleted(tmp_path / "tb")
    shutil.rmtree(path) if path.is_dir() else path.unlink()
    stream.train(3, [0.8, 0.7], [0.1, 0.1], None, 1.0, 2.0)
    stream.evaluation(4, 0.5)
    stream.close_writer()
    assert warned == []  # the logs go on: nothing ended
    logged = scalars(tmp_path / "tb" / "m-b8-T" / "fp32")
    assert [step for step, _ in logged["train/loss"]] == [3, 4] and logged["eval/test_accuracy"] == [(4, 0.5)]
    assert_deletion_is_said_at_the_end(stream, named(tmp_path / "tb") if named else path)


def test_logs_deleted_while_a_write_is_made_get_that_write_once_more(tmp_path):
    """The writer's thread fails on the deleted file and says so at the next write or flush."""
    warned, deletions = [], [tmp_path / "tb"]
    stream = logging_one_run(tmp_path, warned)

    def delete_then_write():
        if deletions:
            shutil.rmtree(deletions.pop())
        stream.writer.add_scalar("train/loss", 0.8, 3)
        stream.writer.flush()
    stream.board(delete_then_write)
    stream.close_writer()
    assert warned == [] and scalars(tmp_path / "tb" / "m-b8-T" / "fp32")["train/loss"] == [(3, pytest.approx(0.8))]
    assert_deletion_is_said_at_the_end(stream, tmp_path / "tb" / "m-b8-T")


def test_logs_deleted_between_runs_or_before_the_comparison_are_said_at_the_end(tmp_path):
    for before in ("the next run", "the comparison"):
        warned = []
        stream = logging_one_run(tmp_path / before, warned)
        stream.close_writer()
        shutil.rmtree(tmp_path / before / "tb")
        if before == "the next run":
            stream.begin_run("amp-bf16")
            stream.train(1, [1.0], [0.1], None, 1.0, 2.0)
            stream.close_writer()
            assert [step for step, _ in scalars(tmp_path / before / "tb" / "m-b8-T" / "amp-bf16")["train/loss"]] == [1]
        stream.comparison("the table")
        assert warned == []
        assert_deletion_is_said_at_the_end(stream, tmp_path / before / "tb" / "m-b8-T")


def test_a_run_whose_tensorboard_folder_is_deleted_logs_on_and_exits_1(tmp_path, capsys, monkeypatch):
    pytest.importorskip("tensorboard")
    logs, train = tmp_path / "tb", live.LiveLog.train

    def train_then_delete(stream, first_step, *rest):
        train(stream, first_step, *rest)
        if first_step == 1:
            shutil.rmtree(logs)
    monkeypatch.setattr(live.LiveLog, "train", train_then_delete)
    status = main.main([*TINY, "--log-every", "2", "--tensorboard", str(logs), "--json", str(tmp_path / "r.json")])
    err = capsys.readouterr().err
    assert status == 1 and "main.py: error: --tensorboard logs were deleted during the run (" in err, err
    assert "its logs end" not in err
    (folder,) = logs.iterdir()
    logged = scalars(folder / "fp32")
    assert [step for step, _ in logged["train/loss"]] == [3, 4, 5, 6]
    assert [step for step, _ in logged["time/step_ms"]] == [3, 4, 5, 6]  # the run's summary, after the loop
    assert json.loads((tmp_path / "r.json").read_text())["runs"][0]["completed_steps"] == 6


def test_runs_started_in_the_same_second_never_share_a_folder(tmp_path):
    """Both are started before either writes: a look for a free name would give both the same."""
    pytest.importorskip("tensorboard")
    streams = [live.LiveLog(None, str(tmp_path / "tb"), "m-b8-T") for _ in range(3)]
    for stream in streams:
        stream.begin_run("fp32")
        stream.train(1, [1.0], [0.1], None, 1.0, 2.0)
        stream.close_writer()
    assert [stream.tensorboard for stream in streams] == \
        [str(tmp_path / "tb" / name) for name in ("m-b8-T", "m-b8-T-2", "m-b8-T-3")]
    assert all(len(event_files(tmp_path / "tb" / name / "fp32")) == 1 for name in ("m-b8-T", "m-b8-T-2", "m-b8-T-3"))
