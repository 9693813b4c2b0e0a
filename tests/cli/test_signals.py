"""SIGTERM, SIGINT, SIGHUP and SIGUSR1 stop a run the same way whenever
they arrive: checkpoint if a step was trained, partial JSON marked incomplete, a truthful
resume line, exit 128 + the signal. Each case sends the signal from inside the phase named,
in this process (main.main, as `python main.py` runs it), so that it lands exactly there."""
import json
import os
import signal

import pytest

import main
from conftest import copy_subset
from utils import compat
from utils.data import dataset
from utils.results import files
from utils.training import loop
from utils.training.checkpoint import read

SIGNALS = [signal.SIGTERM, signal.SIGINT, signal.SIGHUP, signal.SIGUSR1]
PHASES = ["startup", "model build", "data load", "training", "evaluation", "writing results"]


def signal_in(monkeypatch, phase, number):
    """Make `phase` send `number` to this process once, as a scheduler would."""
    def raise_signal():
        os.kill(os.getpid(), number)

    def before(module, name):
        original = getattr(module, name)

        def wrapper(*args, **kwargs):
            raise_signal()
            return original(*args, **kwargs)
        monkeypatch.setattr(module, name, wrapper)

    if phase == "startup":
        before(compat, "check_versions")
    elif phase == "model build":
        from models import factory
        before(factory, "build_model")
    elif phase == "data load":
        before(dataset, "load")
    elif phase == "writing results":
        before(files, "write_json")
    elif phase == "training":
        original = loop.train_step
        calls = []

        def train_step(*args, **kwargs):
            calls.append(1)
            if len(calls) == 3:
                raise_signal()
            return original(*args, **kwargs)
        monkeypatch.setattr(loop, "train_step", train_step)
    elif phase == "evaluation":
        original = dataset.eval_batches

        def eval_batches(*args, **kwargs):
            for index, batch in enumerate(original(*args, **kwargs)):
                if index == 1:
                    raise_signal()
                yield batch
        monkeypatch.setattr(dataset, "eval_batches", eval_batches)


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory):
    from conftest import SUBSET
    return copy_subset(SUBSET, tmp_path_factory.mktemp("data"))


@pytest.mark.parametrize("phase", PHASES)
@pytest.mark.parametrize("number", SIGNALS, ids=lambda n: signal.Signals(n).name)
def test_a_signal_stops_the_run_cleanly_in_every_phase(phase, number, tmp_path, monkeypatch, capsys, data_dir):
    argv = ["--model", "squeezenet1_1", "-b", "32", "-n", "6", "--warmup", "1", "--no-progress", "--lr", "0.01",
            "--data-dir", str(data_dir), "--allow-unverified", "--checkpoint", str(tmp_path / "c.pt"),
            "--json", str(tmp_path / "r.json")]
    signal_in(monkeypatch, phase, number)
    status = main.main(argv)
    err = capsys.readouterr().err
    name = signal.Signals(number).name
    assert status == 128 + number, err
    assert f"{name} received" in err and "Traceback" not in err
    document = json.loads((tmp_path / "r.json").read_text())
    run = document["runs"][0]
    if phase == "writing results":  # everything was measured: complete results, the signal's status
        assert not document["incomplete"] and run["test_accuracy"] is not None
        assert "arrived after the last step and evaluation" in err
        return
    assert document["incomplete"] and run["incomplete"] and run["stopped_by"] == name
    if phase == "evaluation":
        assert run["completed_steps"] == 6 and run["test_accuracy"] is None
        assert read(tmp_path / "c.pt", "cpu")["step"] == 6
        assert "during the test-set evaluation, after all 6 steps" in err
    elif phase == "training":
        assert run["completed_steps"] == 3 and read(tmp_path / "c.pt", "cpu")["step"] == 3
        current = " ".join(argv).replace("--warmup", "--timing-warmup")  # the command, in current spellings
        assert f"c.pt holds step 3; resume with: python main.py {current} --resume" in err
    else:  # before the first step: nothing trained, no checkpoint, and the line says so
        assert run["completed_steps"] == 0 and not (tmp_path / "c.pt").exists()
        assert "no step was trained, so no checkpoint was written: rerun the same command" in err


def test_a_second_signal_stops_at_once_and_says_so(tmp_path, monkeypatch, capsys):
    """The impatient user's second Ctrl-C: exit 130 at once, one closing sentence, and the
    checkpoint written before it stays whole."""
    argv = ["--model", "squeezenet1_1", "-b", "4", "-n", "8", "--warmup", "1", "--no-progress", "--data", "synthetic",
            "--checkpoint", str(tmp_path / "c.pt"), "--checkpoint-every", "2"]
    original, calls = loop.train_step, []

    def train_step(*args, **kwargs):
        calls.append(1)
        if len(calls) == 4:  # after the checkpoint of step 2: twice, as an impatient user presses Ctrl-C
            os.kill(os.getpid(), signal.SIGINT)
            os.kill(os.getpid(), signal.SIGINT)
        return original(*args, **kwargs)
    monkeypatch.setattr(loop, "train_step", train_step)
    with pytest.raises(SystemExit) as stopped:
        main.main(argv)
    err = capsys.readouterr().err
    assert stopped.value.code == 130
    assert "a second signal (SIGINT) arrived: stopping now, without saving" in err and "Traceback" not in err
    assert read(tmp_path / "c.pt", "cpu")["step"] == 2
