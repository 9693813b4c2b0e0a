"""benchmarks/scaling.py end to end on the CPU: world sizes 1 and 2, two modes, two --grad-comm."""
import json
import os
import subprocess
import sys

import pytest

from conftest import ROOT

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
        "logs", "round1-ranks1.json", "round1-ranks2-bf16.json", "round1-ranks2-fp32.json", "scaling.json",
        "scaling.png"]
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
