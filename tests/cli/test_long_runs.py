"""Checkpoints, preemption, divergence, clipping, accumulation and bad inputs."""
import errno
import json
import math
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch
from torch import nn

import main
from conftest import ROOT, copy_subset, run_cli, run_main
from utils import fileio, modes
from utils.app import run_mode
from utils.config import RunConfig
from utils.data.dataset import Data
from utils.errors import UserError, WriteFailed
from utils.training import checkpoint, checkpoint_format, precision
from utils.training.context import RunContext
from utils.training.step import make_optimizer, train_step

CPU = torch.device("cpu")
QUICK = ["--model", "squeezenet1_1", "-b", "16", "--warmup", "2", "--no-progress", "--lr", "0.02"]


def real_data(subset):
    return ["--data-dir", subset, "--allow-unverified"]


def start_cli(*args):
    return subprocess.Popen([sys.executable, str(ROOT / "main.py"), *map(str, args)], cwd=ROOT,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def wait_for(path, process, timeout=120):
    deadline = time.time() + timeout
    while not os.path.exists(path):
        assert process.poll() is None, process.communicate()
        assert time.time() < deadline, "no checkpoint appeared"
        time.sleep(0.05)


@pytest.mark.compat
def test_sigterm_then_resume_ends_with_the_same_weights_as_an_uninterrupted_run(subset, tmp_path):
    common = [*QUICK, *real_data(subset), "-n", "30", "--lr-schedule", "cosine", "--warmup-lr-steps", "3"]
    full = run_cli(*common, "--checkpoint", tmp_path / "full.pt")
    assert full.returncode == 0, full.stderr

    resumable = [*common, "--checkpoint", tmp_path / "run.pt", "--checkpoint-every", "5", "--json", tmp_path / "r.json"]
    process = start_cli(*resumable)
    wait_for(tmp_path / "run.pt", process)
    process.send_signal(signal.SIGTERM)
    out, err = process.communicate(timeout=120)
    assert process.returncode == 143, err
    assert "resume with: python main.py" in err and err.strip().endswith("--resume")
    partial = json.loads((tmp_path / "r.json").read_text())
    assert partial["incomplete"] and partial["runs"][0]["stopped_by"] == "SIGTERM"
    stopped_at = partial["runs"][0]["completed_steps"]
    assert 5 <= stopped_at < 30

    resumed = run_cli(*resumable, "--resume")
    assert resumed.returncode == 0, resumed.stderr
    a = checkpoint.read(tmp_path / "full.pt", "cpu")
    b = checkpoint.read(tmp_path / "run.pt", "cpu")
    assert a["step"] == b["step"] == 30
    for name in a["model"]:
        assert torch.equal(a["model"][name], b["model"][name]), name  # bitwise, on the CPU
    run = json.loads((tmp_path / "r.json").read_text())["runs"][0]
    assert not run["incomplete"] and run["resumed_from_step"] == stopped_at and run["segments"] == 2
    assert len(run["loss_curve"]) == 30


def test_sigint_writes_partial_results_and_exits_130(tmp_path):
    # --data auto without a copy of CIFAR-10 prints its warning while loading the data, once the
    # stop handlers are in place: the signal arrives then, not after a guessed sleep
    process = start_cli(*QUICK, "--data-dir", tmp_path / "none", "-n", "100000", "--json", tmp_path / "r.json")
    assert "USING SYNTHETIC DATA" in process.stderr.readline()
    process.send_signal(signal.SIGINT)
    out, err = process.communicate(timeout=120)
    assert process.returncode == 130, err
    assert "Traceback" not in err and "no --checkpoint was given, so a rerun starts over" in err
    document = json.loads((tmp_path / "r.json").read_text())
    assert document["incomplete"] and document["runs"][0]["stopped_by"] == "SIGINT"


@pytest.mark.parametrize("umask, mode", [(0o022, 0o644), (0o007, 0o660)])
def test_written_files_respect_the_umask(umask, mode, tmp_path):
    """Colleagues on a shared project filesystem can read results and checkpoints as the umask allows."""
    from utils.fileio import atomic_write
    previous = os.umask(umask)
    try:
        atomic_write(tmp_path / "r.json", lambda f: f.write(b"{}"))
    finally:
        os.umask(previous)
    assert (tmp_path / "r.json").stat().st_mode & 0o777 == mode


def test_a_failed_save_keeps_the_previous_checkpoint(tmp_path, monkeypatch):
    path = tmp_path / "c.pt"
    model = nn.Linear(2, 2)
    checkpoint.save(path, {"step": 1}, model)

    def disk_full(fd):
        raise OSError(errno.ENOSPC, "No space left on device")
    monkeypatch.setattr(fileio.os, "fsync", disk_full)
    with pytest.raises(WriteFailed, match="No space left on device"):
        checkpoint.save(path, {"step": 2}, model)
    monkeypatch.undo()
    assert checkpoint.read(path, CPU)["step"] == 1
    assert os.listdir(tmp_path) == ["c.pt"]


def test_a_checkpoint_never_holds_non_finite_weights(tmp_path):
    model = nn.Linear(2, 2)
    with torch.no_grad():
        model.weight[0, 0] = float("nan")
    with pytest.raises(checkpoint.NonFiniteWeights):
        checkpoint.save(tmp_path / "c.pt", {"step": 1}, model)
    assert not (tmp_path / "c.pt").exists()


def test_divergence_stops_with_the_step_and_writes_no_checkpoint(tmp_path):
    result = run_main(*QUICK, "--data", "synthetic", "-n", "20", "--lr", "1e4", "--checkpoint", tmp_path / "c.pt",
                     "--json", tmp_path / "r.json")
    assert result.returncode == 1 and "Traceback" not in result.stderr
    assert "training diverged: the loss became nan at step" in result.stderr and "--modes amp-fp16" in result.stderr
    assert not (tmp_path / "c.pt").exists()
    assert json.loads((tmp_path / "r.json").read_text())["incomplete"]


def test_on_nan_skip_skips_the_steps(tmp_path):
    result = run_main(*QUICK, "--data", "synthetic", "-n", "6", "--lr", "1e4", "--on-nan", "skip",
                     "--json", tmp_path / "r.json", "--checkpoint", tmp_path / "c.pt")
    assert result.returncode == 0, result.stderr
    run = json.loads((tmp_path / "r.json").read_text())["runs"][0]
    non_finite = len(run["loss_curve_nonfinite"])  # strict JSON: each written as null, marked beside
    assert non_finite >= 1 and run["skipped_steps"] == non_finite  # each such step skipped, no other
    weights = torch.load(tmp_path / "c.pt", weights_only=True)["model"]
    assert all(torch.isfinite(tensor).all() for tensor in weights.values() if tensor.is_floating_point())


def test_clipping_sees_unscaled_gradients(monkeypatch):
    seen = []
    real_clip = nn.utils.clip_grad_norm_

    def recording_clip(params, max_norm):
        params = list(params)
        seen.append(torch.norm(torch.stack([p.grad.norm() for p in params])).item())
        return real_clip(params, max_norm)
    monkeypatch.setattr(nn.utils, "clip_grad_norm_", recording_clip)
    torch.manual_seed(0)
    model, x, y = nn.Linear(8, 10), torch.randn(16, 8), torch.randint(0, 10, (16,))
    reference = model.weight.detach().clone()
    nn.functional.cross_entropy(model(x), y).backward()
    true_norm = torch.norm(torch.stack([p.grad.norm() for p in model.parameters()])).item()
    model.zero_grad()

    mode = modes.MODES["amp-fp16"]
    params, scaler = precision.prepare_model(model, mode, CPU, 128)
    optimizer, _ = make_optimizer(params, lr=0.1, momentum=0.0, weight_decay=0.0)
    train_step(model, [(x, y)], nn.CrossEntropyLoss(), optimizer, scaler, mode, CPU, clip_grad=1e-3)
    assert scaler.get_scale() > 1000  # the loss really was scaled
    assert seen and seen[0] == pytest.approx(true_norm, rel=2e-2)
    assert (model.weight - reference).norm().item() <= 0.1 * 1e-3 * 1.01  # lr x clipped norm


def test_accumulation_matches_one_big_batch_in_fp32():
    torch.manual_seed(0)
    big = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 10))
    small = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 10))
    small.load_state_dict(big.state_dict())
    x, y = torch.randn(32, 8), torch.randint(0, 10, (32,))
    mode = modes.MODES["fp32"]
    for model, batches in ((big, [(x, y)]), (small, [(x[i:i + 8], y[i:i + 8]) for i in range(0, 32, 8)])):
        params, scaler = precision.prepare_model(model, mode, CPU, 128)
        optimizer, _ = make_optimizer(params, lr=0.1)
        loss = train_step(model, batches, nn.CrossEntropyLoss(), optimizer, scaler, mode, CPU)
        if model is big:
            big_loss = loss
    assert loss.item() == pytest.approx(big_loss.item(), abs=1e-6)
    for a, b in zip(big.parameters(), small.parameters()):
        assert torch.allclose(a, b, atol=1e-6)


def test_accumulation_holds_one_micro_batch_at_a_time():
    """--accum-steps K draws each micro-batch when the step reaches it, so memory holds one at a
    time however large K is."""
    import weakref

    from utils.training.step import MicroBatches
    alive, most = [0], [0]

    def gone():
        alive[0] -= 1

    def loader():
        while True:
            images = torch.randn(8, 8)
            alive[0] += 1
            most[0] = max(most[0], alive[0])
            weakref.finalize(images, gone)
            yield images, torch.randint(0, 10, (8,))
            del images

    stream = loader()
    model = nn.Sequential(nn.Linear(8, 10))
    mode = modes.MODES["fp32"]
    params, scaler = precision.prepare_model(model, mode, CPU, 128)
    optimizer, _ = make_optimizer(params, lr=0.1)
    train_step(model, MicroBatches(next(stream), stream, 16), nn.CrossEntropyLoss(), optimizer, scaler, mode, CPU)
    assert most[0] == 1, f"{most[0]} micro-batches were held at once"


class PoisonOnce(nn.Module):
    """A small conv net whose second forward pass produces an inf loss (and inf gradients)."""

    def __init__(self):
        super().__init__()
        self.net = nn.Sequential(nn.Conv2d(3, 4, 3), nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(4, 10))
        self.calls = 0

    def forward(self, x):
        self.calls += 1
        out = self.net(x)
        return out * float("inf") if self.calls == 2 else out


@pytest.mark.parametrize("impl", ["fused", "foreach"])
def test_the_lr_schedule_counts_skipped_steps_like_the_others(impl):
    """The fused kernel skips on the device, where the host cannot see it without a sync: in
    both implementations the schedule advances at every step, skipped or not."""
    images, labels = torch.randint(0, 256, (64, 3, 32, 32), dtype=torch.uint8), torch.randint(0, 10, (64,))
    data = Data("synthetic", images, labels, None, None, {})
    config = RunConfig.build(steps=4, warmup=1, batch_size=8, lr=0.1, lr_schedule="cosine", no_progress=True,
                             no_eval=True, optimizer_impl=impl)
    result = run_mode(PoisonOnce(), modes.MODES["amp-fp16"], data, config, config.plan(True, 1), RunContext(CPU)).record
    assert result.skipped_steps == 1
    assert result.lr_curve == pytest.approx([0.1 * 0.5 * (1 + math.cos(math.pi * step / 4)) for step in range(4)])


def test_epochs_set_the_number_of_steps(subset, tmp_path):
    result = run_main(*QUICK, *real_data(subset), "--epochs", "0.05", "--no-eval", "--json", tmp_path / "r.json")
    assert result.returncode == 0, result.stderr
    run = json.loads((tmp_path / "r.json").read_text())["runs"][0]
    assert run["steps"] == math.ceil(0.05 * math.ceil(5438 / 16)) and run["epochs_seen"] >= 0.05


def test_amp_resume_of_an_fp32_checkpoint_starts_a_fresh_scaler_and_the_reverse_ignores_it(tmp_path):
    # A gentle --lr: at 0.1 the FP32 continuation of these FP16 steps diverges under torch 2.3.1.
    common = ["--model", "squeezenet1_1", "-b", "4", "--warmup", "1", "--no-progress", "--data", "synthetic",
              "--lr", "0.01", "--checkpoint", tmp_path / "c.pt"]
    assert run_main(*common, "-n", "3").returncode == 0
    amp = run_main(*common, "-n", "5", "--fp16", "-s", "--allow-slow-fp16", "--resume", "--json", tmp_path / "amp.json")
    assert amp.returncode == 0, amp.stderr
    assert "written in mode fp32; continuing in amp-fp16: a fresh GradScaler starts" in amp.stderr
    assert json.loads((tmp_path / "amp.json").read_text())["runs"][0]["final_loss_scale"] is not None
    back = run_main(*common, "-n", "7", "--resume")
    assert back.returncode == 0, back.stderr
    assert "its GradScaler state is ignored" in back.stderr


@pytest.fixture(scope="module")
def small_checkpoint(tmp_path_factory):
    path = tmp_path_factory.mktemp("ckpt") / "c.pt"
    result = run_cli("--model", "squeezenet1_1", "-b", "4", "-n", "3", "--warmup", "1", "--data", "synthetic",
                     "--no-progress", "--checkpoint", path)
    assert result.returncode == 0, result.stderr
    return path


class Case:
    """What a catalogue entry builds its argv from: a scratch folder, the subset, a small
    checkpoint of a finished 3-step fp32 run, and the flags of a tiny synthetic run."""
    SYNTHETIC = ["--data", "synthetic", "-n", "3", "--warmup", "1", "--model", "squeezenet1_1", "-b", "4"]

    def __init__(self, tmp_path, subset, small_checkpoint):
        self.tmp_path, self.subset, self.checkpoint = tmp_path, subset, small_checkpoint

    def resume(self, path, *flags):
        return [*self.SYNTHETIC, "-n", "6", *flags, "--checkpoint", path, "--resume"]

    def damaged_batch(self, name, content):
        folder = copy_subset(self.subset, self.tmp_path)
        (folder / name).write_bytes(content)
        return ["--data-dir", folder, "--allow-unverified", "--data", "cifar10"]

    def written(self, name, write):
        path = self.tmp_path / name
        write(path)
        return path

    def copied(self):
        return Path(shutil.copy(self.checkpoint, self.tmp_path / "c.pt"))


def spoiled_momentum(optimizer):
    optimizer["state"][0]["momentum_buffer"] = "abc"
    return optimizer


class Crafted:
    def __reduce__(self):
        return os.system, ("touch /tmp/ampbench-catalogue",)


def flipped(path, tmp_path):
    """A copy of checkpoint `path` with 64 bytes inverted inside its largest tensor record."""
    import zipfile
    with zipfile.ZipFile(path) as archive:
        record = max(archive.infolist(), key=lambda info: info.file_size)
    data = bytearray(path.read_bytes())
    start = data.index(record.filename.encode(), record.header_offset) + len(record.filename) + 200
    data[start:start + 64] = bytes(b ^ 0xFF for b in data[start:start + 64])
    copy = tmp_path / "flipped.pt"
    copy.write_bytes(bytes(data))
    return copy


def tampered(path, tmp_path, **changes):
    """A re-saved copy of checkpoint `path` with entries replaced (a value), transformed (a
    function of the old value) or removed (None)."""
    state = checkpoint.read(path, "cpu")
    for key, change in changes.items():
        if change is None:
            del state[key]
        else:
            state[key] = change(state[key]) if callable(change) else change
    copy = tmp_path / "tampered.pt"
    torch.save(state, copy)
    return copy


# (argv built from a Case, the phrase the one-sentence refusal must hold)
CATALOGUE = [
    pytest.param(lambda c: ["--epochs", "0"], "--epochs: must be a positive number", id="epochs"),
    pytest.param(lambda c: ["-n", "5", "--epochs", "1"], "either --steps/-n or --epochs", id="steps-and-epochs"),
    pytest.param(lambda c: c.damaged_batch("data_batch_2", os.urandom(5000)), "data_batch_2 is not a readable",
                 id="corrupted-batch"),
    pytest.param(lambda c: c.damaged_batch("test_batch", b"cos\nsystem\n(S'touch /tmp/ampbench-catalogue'\ntR."),
                 "refusing to load 'os.system'", id="code-pickle"),
    pytest.param(lambda c: c.resume(c.written("broken.pt", lambda p: p.write_bytes(c.checkpoint.read_bytes()[:3000]))),
                 "is not a readable ampbench checkpoint", id="truncated-checkpoint"),
    pytest.param(lambda c: c.resume(c.written("notes.pt", lambda p: p.write_text("just some text\n"))),
                 "is not a readable ampbench checkpoint", id="not-a-checkpoint"),
    pytest.param(lambda c: c.resume(c.written("weights.pt", lambda p: torch.save({"weight": torch.zeros(2)}, p))),
                 "is not an ampbench checkpoint", id="foreign-torch-file"),
    pytest.param(lambda c: c.resume(flipped(c.checkpoint, c.tmp_path)), "fails its CRC-32 check",
                 id="flipped-bytes"),  # 64 flipped bytes inside a weight tensor's record
    pytest.param(lambda c: c.resume(c.written("crafted.pt", lambda p: torch.save(
        {"format": checkpoint.FORMAT, "evil": Crafted()}, p))), "which a checkpoint never holds",
        id="crafted-checkpoint"),  # the forbidden name, never torch's weights_only=False hint
    pytest.param(lambda c: c.resume(c.written("empty.pt", lambda p: p.write_bytes(b""))), "not a complete zip",
                 id="empty-checkpoint"),
    pytest.param(lambda c: c.resume(tampered(c.checkpoint, c.tmp_path, step="3")), "its entry 'step' is a str",
                 id="wrong-entry-type"),
    pytest.param(lambda c: c.resume(tampered(c.checkpoint, c.tmp_path, optimizer=None)),
                 "it has no entry 'optimizer'", id="missing-entry"),
    pytest.param(lambda c: c.resume(tampered(c.checkpoint, c.tmp_path, model=lambda m: {
        **m, "classifier.1.weight": torch.zeros(3, 3)})), "does not fit this run", id="wrong-shape"),
    pytest.param(lambda c: c.resume(tampered(c.checkpoint, c.tmp_path, optimizer=spoiled_momentum)),
                 "its optimizer momentum_buffer of parameter 0 is not a tensor of the parameter's shape",
                 id="wrong-optimizer-state"),  # it loaded, then the first step crashed
    pytest.param(lambda c: c.resume(c.checkpoint, "--lr-schedule", "constant"),
                 "holds a run with --lr-schedule cosine, not constant", id="other-schedule"),
    pytest.param(lambda c: c.resume(c.checkpoint, "--loader", "torchvision"),
                 "holds a run with --loader device, not torchvision", id="other-loader"),
    pytest.param(lambda c: [*Case.SYNTHETIC[2:], "--data-dir", c.subset, "--allow-unverified", "-n", "6",
                            "--checkpoint", c.checkpoint, "--resume"],
                 "was trained on synthetic (50000 training images), and this run loaded cifar10 (5438)",
                 id="other-data"),
    pytest.param(lambda c: c.resume(c.checkpoint, "--lr", "0.5"), "holds a run with --lr 0.00125, not 0.5",
                 id="other-lr"),
    pytest.param(lambda c: c.resume(c.checkpoint, "--momentum", "0.5"), "holds a run with --momentum 0.9, not 0.5",
                 id="other-momentum"),
    pytest.param(lambda c: c.resume(c.checkpoint, "--label-smoothing", "0.1"),
                 "holds a run with --label-smoothing 0.0, not 0.1", id="other-label-smoothing"),
    pytest.param(lambda c: c.resume(tampered(c.checkpoint, c.tmp_path, setup=lambda s: {**s, "world_size": 2})),
                 "was written by a job of 2 rank(s), and this one has 1", id="other-world-size"),
    pytest.param(lambda c: c.resume(tampered(c.checkpoint, c.tmp_path, setup=lambda s: {**s, "world_size": "2"})),
                 "its setup entry is not the one a run saves", id="wrong-setup-type"),
    pytest.param(lambda c: c.resume(tampered(c.checkpoint, c.tmp_path, stats=lambda s: {
        **s, "host_readings": [dict(s["host_readings"][0], wall_s=0.0)]})),
        "its host readings are not the ones a run saves", id="zero-wall-host-reading"),  # the record divides by it
    pytest.param(lambda c: c.resume(tampered(c.checkpoint, c.tmp_path, config=lambda s: {**s, "lr": torch.ones(2)})),
                 "its optimizer settings are not plain values", id="tensor-lr"),
    pytest.param(lambda c: c.resume(c.copied(), "--model", "resnet18"),
                 "holds a run with --model squeezenet1_1, not resnet18", id="other-model"),
    pytest.param(lambda c: c.resume(c.checkpoint, "--modes", "fp16-master", "--allow-slow-fp16"),
                 "was written in mode fp32, whose weights cannot continue in mode fp16-master",
                 id="other-weights-mode"),
    pytest.param(lambda c: [*Case.SYNTHETIC, "--compare", "--checkpoint", c.tmp_path / "c.pt"],
                 "--checkpoint works with one precision", id="checkpoint-with-compare"),
    pytest.param(lambda c: [*Case.SYNTHETIC, "--checkpoint", c.tmp_path / "none.pt", "--resume"],
                 "--resume: no checkpoint at", id="resume-without-file"),
    pytest.param(lambda c: [*Case.SYNTHETIC, "--resume"], "--resume needs --checkpoint",
                 id="resume-without-checkpoint"),
    pytest.param(lambda c: [*Case.SYNTHETIC, "--checkpoint", c.checkpoint, "--resume"], "already reaches the 3 steps",
                 id="already-complete"),
    pytest.param(lambda c: [*Case.SYNTHETIC, "--checkpoint", "/proc/nope/c.pt"], "cannot write --checkpoint",
                 id="unwritable-checkpoint"),
    pytest.param(lambda c: [*Case.SYNTHETIC, "--checkpoint", c.tmp_path], "is a folder", id="checkpoint-is-a-folder"),
    pytest.param(lambda c: [*Case.SYNTHETIC, "--nesterov", "--momentum", "0"], "--nesterov needs a non-zero --momentum",
                 id="nesterov"),
]


@pytest.mark.parametrize("build, phrase", CATALOGUE)
def test_bad_input_catalogue(build, phrase, tmp_path, subset, small_checkpoint):
    """Run in this process (main.main, as `python main.py` runs it): a traceback would fail the test."""
    argv = build(Case(tmp_path, subset, small_checkpoint))
    before = small_checkpoint.read_bytes()
    result = run_main(*argv)
    status, err = result.returncode, result.stderr
    assert status == 2 and phrase in err, err
    assert "weights_only" not in err and " ();" not in err
    assert small_checkpoint.read_bytes() == before, "a refused run must not touch an existing checkpoint"
    assert not os.path.exists("/tmp/ampbench-catalogue")


def test_a_checkpoint_of_an_earlier_release_resumes_as_one_of_this_release(small_checkpoint, tmp_path):
    """Without what later releases added to a checkpoint (the setup, the optimizer, the warm-up's
    and reserved peaks, the accuracy curve's statistics), it is read as this release's
    (checkpoint_format.upgrade): SGD, no ranks or data to check, those statistics at their start."""
    earlier = tampered(small_checkpoint, tmp_path, setup=None,
                       config=lambda config: {key: value for key, value in config.items() if key != "optimizer"},
                       stats=lambda stats: {key: value for key, value in stats.items()
                                            if key not in checkpoint_format.STATS_ADDED})
    state = checkpoint.load(earlier, "cpu")
    assert state["setup"] is None and state["config"]["optimizer"] == "sgd"
    assert state["stats"]["accuracy_curve"] == [] and state["stats"]["train_time_s"] == 0.0
    assert state["stats"]["host_readings"] == []
    result = run_main(*Case.SYNTHETIC, "-n", "6", "--checkpoint", earlier, "--resume", "--json", tmp_path / "r.json")
    assert result.returncode == 0, result.stderr
    run = json.loads((tmp_path / "r.json").read_text())["runs"][0]
    assert run["resumed_from_step"] == 3 and run["segments"] == 2
    assert run["host"]["segments"] == 1  # the earlier segment's host was never read into its checkpoint


def test_the_host_reading_covers_every_segment_of_a_resumed_run(small_checkpoint, tmp_path):
    """runs[].host combines the reading the checkpoint carries (here made busy: load 50 on this
    machine's cores while the process used 0.1 of them) with the resumed process's own."""
    earlier = checkpoint.read(small_checkpoint, "cpu")["stats"]["host_readings"]
    assert len(earlier) == 1 and earlier[0]["wall_s"] > 0
    busy = dict(earlier[0], wall_s=2.0, process_cpu_cores=0.1, load_avg_1m_start=50.0, load_avg_1m_end=50.0)
    path = tampered(small_checkpoint, tmp_path, stats=lambda stats: {**stats, "host_readings": [busy]})
    result = run_main(*Case.SYNTHETIC, "-n", "6", "--checkpoint", path, "--resume", "--json", tmp_path / "r.json")
    assert result.returncode == 0, result.stderr
    host = json.loads((tmp_path / "r.json").read_text())["runs"][0]["host"]
    readings = checkpoint.read(path, "cpu")["stats"]["host_readings"]  # the final checkpoint: both segments'
    assert len(readings) == 2 and readings[0] == busy and host["segments"] == 2
    assert host["wall_s"] == pytest.approx(2.0 + readings[1]["wall_s"]) and host["load_avg_1m_start"] == 50.0
    # this machine may be busy too (the second segment's own reading), but the made-up load is the highest
    assert re.match(rf"the host was busy in [12] of this run's 2 checkpoint segments: load average 50\.0 on "
                    rf"{busy['cores']} cores while this process used 0\.1 of them", host["warning"]), host


def test_fp16_master_checkpoint_cannot_continue_in_fp32():
    state = {"config": {"model": "m", "stem": "cifar", "image_size": 32, "batch_size": 4, "accum_steps": 1,
                        "lr_schedule": "cosine", "loader": "device", "steps": 3}, "mode": "fp16-master",
             "scaler": {"scale": 128.0}, "setup": None}
    config = RunConfig.build(model="m", stem="cifar", batch_size=4, accum_steps=1)
    with pytest.raises(UserError, match="whose weights cannot continue in mode fp32"):
        checkpoint.check_compatible(state, config.record(config.plan(True, 1)), modes.MODES["fp32"], "c.pt", None)


@pytest.mark.parametrize("typed, said", [
    (["--lr-warmup-steps", "2"], "holds a run with --lr-warmup-steps 1, not 2"),
    (["--warmup-lr-steps", "2"], "holds a run with --warmup-lr-steps 1, not 2"),
    (["-b", "8"], "holds a run with -b 4, not 8"),
    (["--batch-size", "8"], "holds a run with --batch-size 4, not 8"),
])
def test_a_checkpoint_refusal_names_the_flag_as_the_user_typed_it(typed, said):
    from main import build_parser

    state = {"config": {"model": "resnet18", "stem": "cifar", "image_size": 32, "batch_size": 4, "accum_steps": 1,
                        "lr_schedule": "cosine", "loader": "device", "steps": 3, "warmup_lr_steps": 1},
             "mode": "fp32", "setup": None}
    config = RunConfig.from_args(build_parser().parse_args(["-m", "resnet18", "-b", "4", "-n", "3", *typed]))
    with pytest.raises(UserError, match=re.escape(said)):
        checkpoint.check_compatible(state, config.record(config.plan(True, 1)), modes.MODES["fp32"], "c.pt", None,
                                    config.flag)


def test_the_torchvision_loader_resumes_exactly_with_workers_0(subset, tmp_path):
    """Replaying the cut epoch runs the transforms in this process, which draw from the global
    RNG: the loader is restored before the RNG, so the resumed run is bitwise the same."""
    # a constant lr: the cut run's own schedule is over its 4 steps (a cosine one would differ)
    common = [*QUICK, *real_data(subset), "--loader", "torchvision", "--workers", "0", "--no-eval",
              "--lr-schedule", "constant"]
    for argv in (["-n", "8", "--checkpoint", tmp_path / "full.pt", "--json", tmp_path / "full.json"],
                 ["-n", "4", "--checkpoint", tmp_path / "cut.pt"],
                 ["-n", "8", "--checkpoint", tmp_path / "cut.pt", "--resume", "--json", tmp_path / "cut.json"]):
        assert main.main([str(arg) for arg in [*common, *argv]]) == 0  # in this process, as main.py runs it
    curve = json.loads((tmp_path / "full.json").read_text())["runs"][0]["loss_curve"]
    assert json.loads((tmp_path / "cut.json").read_text())["runs"][0]["loss_curve"] == curve
    a, b = checkpoint.read(tmp_path / "full.pt", "cpu"), checkpoint.read(tmp_path / "cut.pt", "cpu")
    assert all(torch.equal(a["model"][name], b["model"][name]) for name in a["model"])


class PoisonWeightsAfter(nn.Module):
    """A small linear net whose weights turn NaN after its `calls`-th forward pass (the loss stays finite)."""

    def __init__(self, calls):
        super().__init__()
        self.net = nn.Sequential(nn.Flatten(), nn.Linear(3 * 32 * 32, 10))
        self.calls, self.poison_at = 0, calls

    def forward(self, x):
        self.calls += 1
        if self.calls == self.poison_at:
            with torch.no_grad():
                self.net[1].bias[0] = float("nan")
        return self.net(x).nan_to_num()


def test_weights_gone_nan_cost_the_checkpoint_but_not_the_run(tmp_path):
    """The checkpoint keeps its last finite state; the run's results are still measured and returned."""
    images, labels = torch.randint(0, 256, (64, 3, 32, 32), dtype=torch.uint8), torch.randint(0, 10, (64,))
    data = Data("synthetic", images, labels, None, None, {})
    path = tmp_path / "c.pt"
    config = RunConfig.build(steps=4, warmup=1, batch_size=8, lr=0.1, no_progress=True, no_eval=True,
                             checkpoint=str(path), checkpoint_every=2)
    run = run_mode(PoisonWeightsAfter(3), modes.MODES["fp32"], data, config, config.plan(True, 1), RunContext(CPU))
    assert run.record.completed_steps == 4 and not run.record.incomplete
    assert run.checkpoint_step == 2 and checkpoint.read(path, CPU)["step"] == 2
    assert len(run.failures) == 1 and "inf/NaN by step 4" in run.failures[0] and "holds step 2" in run.failures[0]
