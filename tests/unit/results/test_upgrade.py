"""Result files of earlier releases are read as this release's (utils/results/upgrade.py), and
a file this release writes is read as it is."""
import copy
import json

import pytest

from conftest import ROOT
from utils.results.accuracy import DEFAULT_MARGIN_POINTS
from utils.results.merge import load_result
from utils.results.upgrade import upgrade

EARLIER = ROOT / "results" / "NVIDIA-H100-80GB-HBM3" / "2026-11-22" / "resnet18.json"  # ampbench.result/1


@pytest.mark.parametrize("name", ["why", "loss-scaling", "reading-the-numbers"])
def test_a_document_of_this_release_is_left_as_it_is(name):
    document = json.loads((ROOT / "docs" / "samples" / f"{name}.json").read_text())
    assert upgrade(document) == document


def test_a_document_of_an_earlier_release_gets_what_its_runs_did():
    document = json.loads(EARLIER.read_text())
    del document["env"]["world_size"]  # as before DDP
    as_read = copy.deepcopy(document)
    upgraded = upgrade(document)
    assert document == as_read, "the document read is left as it was: upgrade() returns a copy"
    assert upgraded["env"]["world_size"] == 1
    assert {key: upgraded["config"][key] for key in ("optimizer", "optimizer_impl", "baseline", "accuracy_margin",
                                                     "grad_comm")} == \
        {"optimizer": "sgd", "optimizer_impl": "foreach", "baseline": "fp32", "accuracy_margin": DEFAULT_MARGIN_POINTS,
         "grad_comm": "fp32"}
    assert all(run["optimizer_impl"] == "foreach" and run["finished_utc"] == document["env"]["timestamp_utc"]
               for run in upgraded["runs"])
    assert load_result(str(EARLIER)) == [upgrade(json.loads(EARLIER.read_text()))], "load_result upgrades what it reads"


def test_a_profile_of_an_earlier_release_spent_no_time_in_a_later_category():
    (document,) = load_result(str(ROOT / "tests" / "unit" / "results" / "data" / "explained.json"))
    profiled = [run for run in document["runs"] if run.get("profile")]
    assert profiled and all(run["profile"]["categories"]["float8"] == {"ms": 0.0, "share": 0.0} for run in profiled)
