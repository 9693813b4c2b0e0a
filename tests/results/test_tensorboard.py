"""--tensorboard DIR: each run's curves as scalars and the comparison as text and
hparams, in a folder of its own per invocation; refused before training without the package."""
import json

import pytest

import main
from conftest import assert_user_error, run_cli

TINY = ["--model", "squeezenet1_1", "-b", "8", "-n", "6", "--warmup", "2", "--no-progress", "--data", "synthetic"]


def scalars(folder):
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
    events = EventAccumulator(str(folder))
    events.Reload()
    return {tag: [(event.step, event.value) for event in events.Scalars(tag)] for tag in events.Tags()["scalars"]}


def test_tensorboard_logs_every_curve_of_every_run(tmp_path, capsys):
    pytest.importorskip("tensorboard")
    status = main.main([*TINY, "--modes", "fp32,amp-fp16", "--allow-slow-fp16", "--tensorboard", str(tmp_path / "tb"), "--json",
                        str(tmp_path / "r.json")])
    assert status == 0, capsys.readouterr().err
    (folder,) = (tmp_path / "tb").iterdir()
    assert folder.name.startswith("squeezenet1_1-b8-") and not folder.name.startswith(".")
    runs = {run["mode"]: run for run in json.loads((tmp_path / "r.json").read_text())["runs"]}
    for mode, run in runs.items():
        logged = scalars(folder / mode)
        assert [value for _, value in logged["train/loss"]] == pytest.approx(run["loss_curve"])
        assert [value for _, value in logged["train/lr"]] == pytest.approx(run["lr_curve"])
        assert [step for step, _ in logged["time/step_ms"]] == [1, 2, 3, 4]  # the timed steps
        assert [value for _, value in logged["time/step_ms"]] == pytest.approx(run["step_times_ms"])
    scale = runs["amp-fp16"]["loss_scale_curve"]
    assert [value for _, value in scalars(folder / "amp-fp16")["train/loss_scale"]] == pytest.approx(scale)
    assert "train/loss_scale" not in scalars(folder / "fp32") and runs["fp32"]["loss_scale_curve"] is None
    # the scale halves at every skipped step (the curve recorded on the device)
    drops = sum(later < earlier for earlier, later in zip([65536.0] + scale, scale))
    assert drops == runs["amp-fp16"]["skipped_steps"]
    assert {path.name for path in folder.iterdir() if path.is_dir()} >= {"fp32", "amp-fp16", "hparams-amp-fp16"}
    status = main.main([*TINY, "--tensorboard", str(tmp_path / "tb")])  # a rerun never mixes its curves in
    assert status == 0 and len(list((tmp_path / "tb").iterdir())) == 2


def test_tensorboard_without_the_package_is_refused_before_training(tmp_path):
    fake = tmp_path / "fake" / "tensorboard"
    fake.mkdir(parents=True)
    (fake / "__init__.py").write_text("raise ImportError('no tensorboard here')\n")
    result = run_cli(*TINY, "--tensorboard", tmp_path / "tb", env={"PYTHONPATH": str(tmp_path / "fake")})
    assert_user_error(result, "--tensorboard needs the tensorboard package, which is not installed: "
                              "pip install tensorboard")
    assert not (tmp_path / "tb").exists()
