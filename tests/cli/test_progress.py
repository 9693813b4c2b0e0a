"""Progress a user sees: a batch job's log has a line per phase and every --log-every steps;
the terminal bar fits 80 columns, shows one speed and the loss as soon as it is known."""
import fcntl
import os
import re
import struct
import subprocess
import sys
import termios

import pytest

import main
from conftest import ROOT

QUICK = ["--model", "resnet18", "--stem", "imagenet", "-b", "16", "--warmup", "2", "-n", "8"]


def test_a_batch_job_log_has_phase_lines_and_a_line_every_n_steps(subset, capsys):
    status = main.main([*QUICK, "--data-dir", str(subset), "--allow-unverified", "--log-every", "3", "--modes",
                        "fp32,amp-bf16"])
    err = capsys.readouterr().err
    assert status == 0, err
    assert "\r" not in err
    lines = [line for line in err.splitlines() if re.match(r"\[\d\d:\d\d:\d\d\] ", line)]
    for phase in ["model resnet18 built: 11.2 M parameters", "data loaded: cifar10, 5438 training images",
                  "fp32: training steps 1 to 8", "fp32: evaluating on 1017 test images", "fp32: test accuracy",
                  "amp-bf16: training steps 1 to 8"]:
        assert any(phase in line for line in lines), (phase, err)
    steps = [line for line in lines if re.search(r"fp32 step \d+/8 ", line)]
    assert [re.search(r"step (\d+)/8", line).group(1) for line in steps] == ["3", "6", "8"]
    assert all(re.search(r"loss \d+\.\d{4}  step \d+\.\d ms \(median so far\)  \d+ img/s  ETA \d:\d\d:\d\d$", line)
               for line in steps), steps


def test_the_loss_scale_is_in_the_log_of_a_scaled_mode(capsys):
    # float16 convolutions are some 50x slower than FP32 on a CPU: a small model and batch
    small = [word for word in QUICK if word not in ("--stem", "imagenet")]  # squeezenet has no ResNet stem
    status = main.main([*small, "-m", "squeezenet1_1", "-b", "4", "--data", "synthetic", "--log-every", "4",
                        "--modes", "fp16-master", "--allow-slow-fp16"])
    err = capsys.readouterr().err
    assert status == 0, err
    assert re.search(r"fp16-master step 4/8  .* loss scale 128  ETA", err), err


def test_no_progress_lines_with_no_progress(capsys):
    assert main.main([*QUICK, "--data", "synthetic", "--log-every", "1", "--no-progress"]) == 0
    assert "step 1/8" not in capsys.readouterr().err


@pytest.mark.whole_runs
def test_the_terminal_bar_fits_80_columns_shows_one_speed_and_evaluation(subset):
    """The bars are drawn on a pseudo-terminal as wide as a default one (80 columns)."""
    leader, follower = os.openpty()
    fcntl.ioctl(follower, termios.TIOCSWINSZ, struct.pack("HHHH", 24, 80, 0, 0))  # rows, columns
    process = subprocess.Popen([sys.executable, str(ROOT / "main.py"), *QUICK, "-n", "12", "--data-dir", str(subset),
                                "--allow-unverified"], cwd=ROOT, stdout=subprocess.DEVNULL, stderr=follower)
    os.close(follower)
    output = b""
    while True:
        try:
            chunk = os.read(leader, 65536)
        except OSError:  # the process closed the terminal
            break
        if not chunk:
            break
        output += chunk
    assert process.wait(120) == 0
    text = re.sub(r"\x1b\[[0-9;]*[A-Za-z]", "", output.decode())
    frames = [frame for frame in re.split(r"[\r\n]", text) if frame.strip()]
    bars = [frame for frame in frames if "|" in frame and "/" in frame]
    assert bars and max(len(frame) for frame in bars) <= 80, bars
    assert any(frame.startswith("fp32 eval:") for frame in bars), bars
    assert not any("s/it" in frame or "it/s" in frame or "step_ms" in frame for frame in bars), bars
    assert any(re.search(r"loss \d+\.\d{3}, \d+ img/s", frame) for frame in bars), bars


def test_a_batch_job_log_shows_the_evaluation_going_on(subset, capsys, monkeypatch):
    """A line whenever the log interval has passed during the evaluation (here: every batch)."""
    from utils.measure import progress
    monkeypatch.setattr(progress, "LOG_INTERVAL_S", 0.0)
    status = main.main([*QUICK, "-b", "256", "-n", "3", "--warmup", "1", "--data-dir", str(subset),
                        "--allow-unverified", "--modes", "fp32"])
    err = capsys.readouterr().err
    assert status == 0, err
    batches = re.findall(r"\] fp32 evaluation batch (\d+)/4  ETA \d:\d\d:\d\d$", err, re.MULTILINE)
    assert batches == ["1", "2", "3", "4"], err
