import numpy as np
import pytest

from utils.measure.step_stats import outliers, summarize
from utils.results.summary import outlier_notes


def test_summarize_matches_numpy():
    values = [5.0, 1.0, 3.0, 2.0, 4.0, 100.0]
    stats = summarize(values)
    assert stats["median"] == 3.5 and stats["min"] == 1.0 and stats["max"] == 100.0
    assert stats["p10"] == pytest.approx(np.percentile(values, 10)) and stats["mean"] == pytest.approx(115 / 6)


def test_a_paused_step_is_an_outlier_and_the_table_says_the_median_ignores_it():
    """A SIGSTOP of 6 s in a run of 62 ms steps (the mean became 187 ms, unflagged)."""
    times = [62.0] * 40 + [6057.0] + [61.0, 63.0, 620.0]  # 620 ms: exactly 10x, not an outlier
    assert outliers(times) == [{"timed_step": 41, "ms": 6057.0}]
    assert outliers([]) == [] and outliers([5.0, 5.0]) == []
    document = {"runs": [{"mode": "fp32", "outlier_steps": outliers(times)}, {"mode": "amp-bf16", "outlier_steps": []},
                         {"mode": "fp32", "outlier_steps": [{"timed_step": 3, "ms": 900.0}]}]}
    assert outlier_notes(document) == [
        "outliers: 2 timed steps of fp32 took over 10x the median (longest 6,057 ms: a pause, e.g. SIGSTOP, swapping "
        "or a busy node); the medians above are robust to them, means are not (runs[].outlier_steps)."]


@pytest.mark.long
def test_a_sigstop_pause_is_flagged_as_an_outlier_step(tmp_path):
    """SIGSTOP for 3 s in the middle of the timed steps, then SIGCONT: the step that held the
    pause is in outlier_steps, the table says the medians ignore it."""
    import json
    import signal
    import subprocess
    import sys
    import time

    from conftest import ROOT
    out = tmp_path / "r.json"
    process = subprocess.Popen([sys.executable, str(ROOT / "main.py"), "-m", "squeezenet1_1", "-b", "4", "-n", "30",
                                "--warmup", "2", "--data", "synthetic", "--log-every", "1", "--json", str(out)],
                               cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    for line in process.stderr:  # the batch log's lines: pause once step 10 is logged
        if "fp32 step 10/30" in line:
            process.send_signal(signal.SIGSTOP)
            time.sleep(3)
            process.send_signal(signal.SIGCONT)
            break
    stdout, stderr = process.communicate(timeout=300)
    assert process.returncode == 0, stderr
    (run,) = json.loads(out.read_text())["runs"]
    assert len(run["outlier_steps"]) == 1 and run["outlier_steps"][0]["ms"] >= 3000
    assert "outliers: 1 timed step of fp32 took over 10x the median" in " ".join(stdout.split())
