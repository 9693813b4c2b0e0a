"""benchmarks/streaming.py: a generated tree of JPEGs streamed by ampbench's folder and shard
paths and by a plain torchvision DataLoader, side by side with their peak memory, the ratios
printed last and the tree removed; its figures live in docs/data-and-models.md."""
import os
import re
import subprocess
import sys

import pytest

from benchmarks import streaming
from conftest import ROOT


def test_the_memory_of_a_process_tree_counts_this_process_and_what_it_started():
    alone = streaming.tree_memory(os.getpid())
    child = subprocess.Popen([sys.executable, "-c", "import time; data = bytearray(64 << 20); time.sleep(30)"])
    try:
        for _ in range(100):
            grown = streaming.tree_memory(os.getpid())
            if grown > alone + (48 << 20):
                break
            subprocess.run(["sleep", "0.1"])
        assert grown > alone + (48 << 20)
    finally:
        child.kill()
        child.wait()


@pytest.mark.long
def test_the_benchmark_prints_each_paths_rate_and_memory_then_the_ratios_and_leaves_no_tree(tmp_path):
    result = subprocess.run([sys.executable, "benchmarks/streaming.py", "--images", "200", "--batches", "2", "-b", "8",
                             "--workers", "1", "--image-size", "64", "--folder", str(tmp_path / "tree")], cwd=ROOT,
                            capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stderr
    lines = result.stdout.strip().splitlines()
    assert lines[0].startswith("200 JPEGs of 160 to 720 pixels a side in 10 classes")
    for label in ("torchvision ImageFolder + DataLoader", "ampbench streamed folder", "ampbench shards",
                  "ampbench streamed folder, 100 images"):
        assert any(re.match(rf"{re.escape(label)} +\d+ img/s +peak memory +\d+ MiB$", line) for line in lines), label
    assert re.match(r"shards/folder ratio: \d+\.\d\d$", lines[-2])
    assert re.match(r"throughput ratio ampbench/torchvision: \d+\.\d\d$", lines[-1])
    assert not (tmp_path / "tree").exists()
