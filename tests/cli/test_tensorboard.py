"""--tensorboard DIR and --jsonl PATH: the run as it happens. TensorBoard gets every curve of
every run against one global step (the optimizer step) while training, and no extra runs;
the JSON lines stream each phase, log interval and run, so a killed run leaves its story."""
import json
import os
import signal
import subprocess
import sys
import time

import pytest

import main
from conftest import ROOT, assert_user_error, run_cli, run_main

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
    deadline = time.time() + 240
    while time.time() < deadline and not (out.exists() and out.read_text().count('"event": "train"') >= 2):
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
