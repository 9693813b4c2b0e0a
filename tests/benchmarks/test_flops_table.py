"""benchmarks/suite/flops.json, the FLOPs the GPU suite's --plan estimates by without torch: it
holds every model the plans train, as torch counts it now, and the estimates read it."""
import json
import subprocess
import sys

import pytest

from benchmarks.suite import estimate
from conftest import ROOT


@pytest.mark.whole_runs  # every planned model counted again with torch: about 20 s
def test_the_table_is_what_the_plans_and_torch_count_now():
    """After a change to the suite's steps or to how FLOPs are counted, the table is written again
    (python -m benchmarks.suite.generate_flops)."""
    checked = subprocess.run([sys.executable, "-m", "benchmarks.suite.generate_flops", "--check"], cwd=ROOT,
                             capture_output=True, text=True, timeout=600)
    assert checked.returncode == 0 and checked.stdout == "", checked.stderr


def test_a_step_s_flops_are_the_table_s_image_times_the_batch_as_torch_counts_them():
    table = json.loads((ROOT / "benchmarks" / "suite" / "flops.json").read_text())
    for model, stem, size, batch in [("resnet18", "cifar", 32, 256), ("vit-blocks-64", "cifar", 32, 2)]:
        image = next(entry["image_flops"] for entry in table["models"]
                     if (entry["model"], entry["stem"], entry["image_size"]) == (model, stem, size))
        assert estimate.train_flops(model, stem, batch, size) == image * batch
        assert estimate.counted_flops(model, stem, batch, size) == image * batch


def test_a_model_the_table_lacks_is_counted_by_torch():
    assert ("resnet34", "cifar", 32) not in estimate.image_flops()
    assert estimate.train_flops("resnet34", "cifar", 4) == estimate.counted_flops("resnet34", "cifar", 4) > 0
