"""benchmarks/scaling.py end to end on the CPU: world sizes 1 and 2, two modes, two --grad-comm."""
import json
import os
import signal
import subprocess
import sys
import time

import pytest

from benchmarks import scaling
from conftest import ROOT
from utils.children import Child, alive

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


@pytest.mark.long  # three launches of torch: about 80 s on 2 cores
def test_the_study_launches_every_size_and_writes_table_json_and_plot(tmp_path, subset):
    out = tmp_path / "study"
    result = subprocess.run(
        [sys.executable, "benchmarks/scaling.py", "--world-sizes", "1,2", "--modes", "fp32,amp-bf16", "--grad-comm",
         "fp32,bf16", "--out", str(out), "--", "-m", "squeezenet1_1", "-b", "8", "-n", "6", "--warmup", "2",
         "--explain-steps", "1", "--data-dir", str(subset), "--allow-unverified"],
        cwd=ROOT, capture_output=True, text=True, timeout=600, env={**os.environ, "OMP_NUM_THREADS": "1"})
    assert result.returncode == 0, result.stderr
    assert sorted(path.name for path in out.iterdir()) == [
        "logs", "plan.json", "round1-ranks1.json", "round1-ranks2-bf16.json", "round1-ranks2-fp32.json",
        "scaling.json", "scaling.png"]
    assert (out / "scaling.png").read_bytes().startswith(PNG_MAGIC)
    study = json.loads((out / "scaling.json").read_text())
    rows = {(row["mode"], row["world_size"], row["grad_comm"]): row for row in study["rows"]}
    assert list(rows) == [("fp32", 1, None), ("fp32", 2, "fp32"), ("fp32", 2, "bf16"), ("amp-bf16", 1, None),
                          ("amp-bf16", 2, "fp32"), ("amp-bf16", 2, "bf16")]
    base = rows[("fp32", 1, None)]
    assert base["efficiency"] == 1.0 and base["comm_exposed_ms"] == 0.0
    for (mode, ranks, comm), row in rows.items():
        document = json.loads((out / f"round1-ranks{ranks}{f'-{comm}' if comm else ''}.json").read_text())
        assert document["env"]["world_size"] == ranks and document["config"]["batch_size"] == 8
        assert row["images_per_sec"] == pytest.approx(document["comparison"][mode]["images_per_sec"])
        ideal = ranks * rows[(mode, 1, None)]["images_per_sec"]
        assert row["efficiency"] == pytest.approx(row["images_per_sec"] / ideal)
        assert (row["amp_speedup"] is None) == (mode == "fp32")
        assert ranks == 1 or (row["efficiency_ci95"] is not None and row["comm_share"] is not None)
    lines = result.stdout.splitlines()
    assert any(line.split()[:3] == ["amp-bf16", "2", "bf16"] and "%" in line for line in lines), result.stdout
    assert "efficiency 95% CI: block bootstrap over the timed steps" in result.stdout
    assert "Accuracy with 16-bit gradients: test accuracy against --grad-comm fp32" in result.stdout
    assert rows[("amp-bf16", 2, "bf16")]["accuracy_vs_fp32_comm"] is not None
    assert rows[("amp-bf16", 2, "fp32")]["accuracy_vs_fp32_comm"] is None


def study_processes(out):
    """The processes whose command line names `out`: torchrun and the ranks of a launch."""
    found = []
    for proc in os.listdir("/proc"):
        try:
            with open(f"/proc/{proc}/cmdline", "rb") as f:
                if str(out).encode() in f.read() and int(proc) != os.getpid():
                    found.append(int(proc))
        except (OSError, ValueError):
            continue
    return found


@pytest.mark.long  # two and a half launches of torch per signal: about 90 s on 2 cores
@pytest.mark.parametrize("stop", [signal.SIGTERM, signal.SIGINT])
def test_a_stopped_study_keeps_its_finished_launches_and_the_same_command_continues_it(stop, tmp_path, subset):
    out = tmp_path / "study"
    command = [sys.executable, "benchmarks/scaling.py", "--world-sizes", "1,2", "--modes", "fp32", "--out", str(out),
               "--", "-m", "squeezenet1_1", "-b", "8", "-n", "6", "--warmup", "2", "--explain-steps", "1",
               "--data-dir", str(subset), "--allow-unverified"]
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    study = subprocess.Popen(command, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    second_log = out / "logs" / "round1-ranks2-fp32.log"
    deadline = time.monotonic() + 300
    while not second_log.exists() and study.poll() is None and time.monotonic() < deadline:
        time.sleep(0.2)
    assert second_log.exists(), study.communicate()
    first = (out / "round1-ranks1.json").read_bytes()
    time.sleep(2)  # the second launch's torchrun and ranks are starting
    study.send_signal(stop)  # to the study alone, as a scheduler's time limit or Ctrl-C reaches it
    _, err = study.communicate(timeout=300)
    assert study.returncode == 128 + stop, err
    assert err.splitlines()[-1] == (
        f"scaling.py: stopped by {signal.Signals(stop).name} after 1 of 2 launches: kept their results in {out} and "
        "no table yet (it needs the 1-process launch and a larger one); run the same command again to run the "
        "other 1."), err
    assert "Traceback" not in err
    assert study_processes(out) == []  # torchrun and its ranks ended with the launch, before the study
    assert not (out / "round1-ranks2-fp32.json").exists()

    again = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=600, env=env)
    assert again.returncode == 0, again.stderr
    assert "scaling study: 2 launches of fp32 on 1, 2 ranks (1 finished before, kept)" in again.stderr
    assert (out / "round1-ranks1.json").read_bytes() == first
    study_json = json.loads((out / "scaling.json").read_text())
    assert [(row["mode"], row["world_size"]) for row in study_json["rows"]] == [("fp32", 1), ("fp32", 2)]
    assert [(launch["json"], launch.get("finished_before")) for launch in study_json["launches"]] == [
        (str(out / "round1-ranks1.json"), True), (str(out / "round1-ranks2-fp32.json"), None)]


# A stand-in for torchrun: it starts its "rank" in a session of its own, as torchrun does, writes
# the rank's pid, and waits.
TORCHRUN = ("import subprocess, sys, time\n"
            "rank = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(600)'], start_new_session=True)\n"
            "open(sys.argv[1] + '.tmp', 'w').write(str(rank.pid))\n"
            "__import__('os').replace(sys.argv[1] + '.tmp', sys.argv[1])\n"
            "time.sleep(600)\n")


def test_a_second_signal_kills_the_ranks_torchrun_started_in_sessions_of_their_own(tmp_path, capsys):
    torchrun = Child([sys.executable, "-c", TORCHRUN, str(tmp_path / "rank")])  # as the study starts its launches
    rank = None
    try:
        deadline = time.monotonic() + 60
        while not (tmp_path / "rank").exists() and time.monotonic() < deadline:
            time.sleep(0.05)
        rank = int((tmp_path / "rank").read_text())
        stop = scaling.StudyStop()
        stop.handler(signal.SIGINT, None)  # the first: forwarded to torchrun alone
        stop.launch = torchrun
        with pytest.raises(SystemExit) as stopped:
            stop.handler(signal.SIGINT, None)  # the second
        assert stopped.value.code == 130
        torchrun.process.wait(timeout=10)
        assert not alive(rank)
    finally:
        for pid in (torchrun.pid, rank):
            if pid and alive(pid):
                os.kill(pid, signal.SIGKILL)
    assert "a second signal (SIGINT) arrived: stopping now" in capsys.readouterr().err


@pytest.mark.long  # one launch of torch: about 20 s on 2 cores
def test_a_second_ctrl_c_ends_the_study_with_every_rank_and_leaves_no_partial_point(tmp_path):
    out = tmp_path / "study"
    study = subprocess.Popen(
        [sys.executable, "benchmarks/scaling.py", "--world-sizes", "1,2", "--modes", "fp32", "--out", str(out), "--",
         "-m", "squeezenet1_1", "-b", "8", "-n", "100000", "--warmup", "2", "--data", "synthetic"],
        cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env={**os.environ, "OMP_NUM_THREADS": "1"})
    try:
        deadline = time.monotonic() + 300
        while len(study_processes(out)) < 3 and study.poll() is None and time.monotonic() < deadline:
            time.sleep(0.2)  # the study, torchrun and the rank
        time.sleep(5)  # the rank has its stop handlers and builds or trains
        study.send_signal(signal.SIGINT)
        time.sleep(0.3)  # an impatient user's second Ctrl-C
        study.send_signal(signal.SIGINT)
        _, err = study.communicate(timeout=60)
        left = study_processes(out)
        time.sleep(2)
    finally:
        for pid in study_processes(out):
            os.kill(pid, signal.SIGKILL)
    assert study.returncode == 130, err
    assert "a second signal (SIGINT) arrived: stopping now" in err and "Traceback" not in err
    assert left == []  # torchrun and its rank ended before the study
    assert sorted(path.name for path in out.iterdir()) == ["logs", "plan.json"]  # no partial point written later
