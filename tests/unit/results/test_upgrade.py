"""Result files of every release are read as this release's (utils/results/upgrade.py): /1, /2
written before --baseline (its comparison against fp32 alone, under keys /3 renamed), /2 written
after it (/3's keys under /2's name), /3 (before the GPU's busy share); the one upgrade() gives
each this release's keys and schema, and a file this release writes is read as it is."""
from __future__ import annotations

import copy
import csv
import json
import re
from pathlib import Path
from typing import Any, Dict, Set

import pytest
from test_comparison_row import schema_page_fields
from test_hostile_results import report

from conftest import ROOT
from utils.config import DEFAULT_MARGIN_POINTS
from utils.results.merge import load_result
from utils.results.record import SCHEMA
from utils.results.upgrade import BUSY_NOT_YET_MEASURED, RENAMED_IN_COMPARISON, upgrade

EARLIER = ROOT / "results" / "NVIDIA-H100-80GB-HBM3" / "2026-11-22" / "resnet18.json"  # ampbench.result/1
# ampbench.result/2 as written before --baseline: *_vs_fp32 in its comparison, no config.baseline
BEFORE_BASELINE = ROOT / "tests" / "unit" / "results" / "data" / "explained.json"
AFTER_BASELINE = ROOT / "docs" / "samples" / "why.json"  # ampbench.result/2 as written after --baseline
BEFORE_BUSY = ROOT / "results" / "NVIDIA-H200" / "2026-11-26" / "headline-resnet18.json"  # ampbench.result/3, a GPU's
ERAS = {"/1": EARLIER, "/2 before --baseline": BEFORE_BASELINE, "/2 after --baseline": AFTER_BASELINE,
        "/3": BEFORE_BUSY}


def comparison_keys(document: Dict[str, Any]) -> Set[str]:
    return {key for row in document["comparison"].values() for key in row}


def releases_page_renames() -> Dict[str, str]:
    """{earlier key: /3 key} as docs/results-schema.md's table of renamed comparison keys lists them."""
    page = (ROOT / "docs" / "results-schema.md").read_text()
    section = page.split("\n## Releases of the schema\n", 1)[1].split("\n## ", 1)[0]
    return dict(re.findall(r"^ *\| `([a-z0-9_]+)` +\| `([a-z0-9_]+)` +\|$", section, re.MULTILINE))


def test_the_files_of_each_era_hold_what_the_page_says() -> None:
    before, after = (json.loads(path.read_text()) for path in (BEFORE_BASELINE, AFTER_BASELINE))
    assert before["schema"] == after["schema"] == "ampbench.result/2", "one schema name, two sets of keys"
    assert "baseline" not in before["config"] and after["config"]["baseline"] == "fp32"
    unlisted = comparison_keys(before) - schema_page_fields()
    assert unlisted and unlisted == {key for key in comparison_keys(before) if key.endswith("_vs_fp32")}
    assert unlisted <= set(releases_page_renames())
    assert comparison_keys(after) <= schema_page_fields()


def test_the_renamed_keys_are_the_ones_the_page_lists_and_upgrade_renames() -> None:
    renamed = releases_page_renames()
    assert renamed == RENAMED_IN_COMPARISON
    assert set(renamed.values()) <= schema_page_fields() and not set(renamed) & schema_page_fields()


@pytest.mark.parametrize("era", ERAS)
def test_a_file_of_each_earlier_release_is_upgraded_to_this_release_form(era: str) -> None:
    document = json.loads(ERAS[era].read_text())
    as_read = copy.deepcopy(document)
    upgraded = upgrade(document)
    assert document == as_read, "the document read is left as it was: upgrade() returns a copy"
    assert upgraded["schema"] == SCHEMA and upgraded["upgraded_from"] == document["schema"]
    assert upgraded["config"]["baseline"] == "fp32"
    assert comparison_keys(upgraded) <= schema_page_fields(), "the comparison has this release's keys and no other"
    assert [[RENAMED_IN_COMPARISON.get(key, key) for key in row] for row in document["comparison"].values()] == \
        [list(row) for row in upgraded["comparison"].values()], "renamed, in the order the file holds them"
    assert [list(row.values()) for row in document["comparison"].values()] == \
        [list(row.values()) for row in upgraded["comparison"].values()]
    assert upgrade(upgraded) == upgraded, "a document in this release's form is left as it is"


@pytest.mark.parametrize("era", ERAS)
def test_utils_report_reads_and_reports_a_file_of_each_earlier_release(era: str, tmp_path: Path) -> None:
    written = json.loads(ERAS[era].read_text())["schema"]
    status, out, err = report(ERAS[era], "--json", tmp_path / "m.json", "--csv", tmp_path / "m.csv")
    assert status == 0 and "median ms" in out and "speedup [95% CI]" in out and err == "", err
    peak = "peak mem: warm-up included (ampbench.result/1" if era == "/1" else "peak mem: the steady state"
    assert peak in out, out
    (merged,) = json.loads((tmp_path / "m.json").read_text())
    assert merged["schema"] == SCHEMA and merged["upgraded_from"] == written
    assert comparison_keys(merged) <= schema_page_fields() and "speedup_vs_baseline" in comparison_keys(merged)
    assert {row["schema"] for row in csv.DictReader((tmp_path / "m.csv").open())} == {written}, \
        "a CSV row names the schema its runs were written in"
    status, again, err = report(tmp_path / "m.json")  # the merged file, read back: the same table
    assert status == 0 and out.startswith(again), err  # out goes on to say which CSV rows it appended


def test_runs_of_a_release_whose_peak_held_the_warm_up_never_pool_with_later_ones(tmp_path: Path) -> None:
    earlier = upgrade(json.loads(EARLIER.read_text()))
    later = dict(upgrade(json.loads(EARLIER.read_text())), upgraded_from="ampbench.result/2")
    for run in later["runs"]:
        run["finished_utc"] = "2026-12-01T00:00:00Z"  # measured again: other runs
    paths = [tmp_path / "a.json", tmp_path / "b.json"]
    for path, document in zip(paths, (earlier, later)):
        path.write_text(json.dumps(document))
    status, out, err = report(*paths)
    assert status == 0 and "setup: schema ampbench.result/1" in out and "setup: schema ampbench.result/2" in out, err


def test_a_document_of_an_earlier_release_gets_what_its_runs_did() -> None:
    document = json.loads(EARLIER.read_text())
    del document["env"]["world_size"]  # as before DDP
    upgraded = upgrade(document)
    assert upgraded["env"]["world_size"] == 1
    assert {key: upgraded["config"][key] for key in ("optimizer", "optimizer_impl", "baseline", "accuracy_margin",
                                                     "grad_comm")} == \
        {"optimizer": "sgd", "optimizer_impl": "foreach", "baseline": "fp32", "accuracy_margin": DEFAULT_MARGIN_POINTS,
         "grad_comm": "fp32"}
    assert all(run["optimizer_impl"] == "foreach" and run["finished_utc"] == document["env"]["timestamp_utc"]
               for run in upgraded["runs"])
    assert load_result(str(EARLIER)) == [upgrade(json.loads(EARLIER.read_text()))], "load_result upgrades what it reads"


def test_a_profile_of_an_earlier_release_spent_no_time_in_a_later_category() -> None:
    (document,) = load_result(str(BEFORE_BASELINE))
    profiled = [run for run in document["runs"] if run.get("profile")]
    assert profiled and all(run["profile"]["categories"]["float8"] == {"ms": 0.0, "share": 0.0} for run in profiled)


@pytest.mark.parametrize("era", ERAS)
def test_runs_of_an_earlier_release_say_they_were_recorded_before_the_busy_share(era: str) -> None:
    upgraded = upgrade(json.loads(ERAS[era].read_text()))
    assert {(run["gpu_busy"], run["gpu_busy_unavailable"]) for run in upgraded["runs"]} == \
        {(None, BUSY_NOT_YET_MEASURED)}


def test_the_energy_of_an_earlier_release_is_flagged_by_its_window() -> None:
    """The H200's headline runs read their counter over 0.25 to 8 s of timed steps: every one
    too short for the rule, their joules kept."""
    document = json.loads(BEFORE_BUSY.read_text())
    upgraded = upgrade(document)
    energies = [(run["energy"], before["energy"]) for run, before in zip(upgraded["runs"], document["runs"])]
    assert energies and all(energy == dict(before, window_too_short=before["seconds"] < 10.0)
                            for energy, before in energies)
    assert all(energy["window_too_short"] for energy, _ in energies)


@pytest.mark.parametrize("era", ERAS)
def test_a_file_of_an_earlier_release_records_no_digest_of_the_files_that_ran(era: str) -> None:
    """Before /5 no result recorded its source files' digest: read as null, no commit it names is proved."""
    document = json.loads(ERAS[era].read_text())
    assert "source_sha256" not in document["env"] and upgrade(document)["env"]["source_sha256"] is None


def test_a_busy_share_of_fewer_samples_than_the_minimum_reads_as_too_few() -> None:
    """/4 averaged any count of samples; read now, a share of fewer than the minimum is none, and
    the reason gives the count; one at the minimum is kept."""
    from utils.measure.nvml_meter import MIN_BUSY_SAMPLES, too_few_count

    document = json.loads(BEFORE_BUSY.read_text())
    document["schema"] = "ampbench.result/4"
    for index, run in enumerate(document["runs"]):
        run["gpu_busy"] = {"share": 0.5, "source": "nvml-utilization-samples", "window_s": 1.2,
                           "samples": MIN_BUSY_SAMPLES - 1 + index % 2, "sample_period_s": 0.167}
        run["gpu_busy_unavailable"] = None
    upgraded = upgrade(document)
    counts = [too_few_count(run["gpu_busy_unavailable"]) for run in upgraded["runs"]]
    assert counts == [MIN_BUSY_SAMPLES - 1 if index % 2 == 0 else None for index in range(len(counts))]
    assert all((run["gpu_busy"] is None) == (index % 2 == 0) for index, run in enumerate(upgraded["runs"]))


def test_a_file_of_the_release_before_your_own_model_and_data_trained_a_torchvision_model_on_ten_classes() -> None:
    """/5 had no --model-factory, --num-classes or --data imagefolder: read as a torchvision model
    (its class unrecorded) on CIFAR-10's ten classes or synthetic images, no folder's fingerprint."""
    from utils.results.record import setup_of

    fifth = upgrade(json.loads(BEFORE_BUSY.read_text()))
    for key in ("model_factory", "model_class", "num_classes"):
        del fifth["config"][key]
    del fifth["data"]["num_classes"], fifth["upgraded_from"]
    fifth["schema"] = "ampbench.result/5"
    upgraded = upgrade(fifth)
    assert {key: upgraded["config"][key] for key in ("model_factory", "model_class", "num_classes")} == \
        {"model_factory": None, "model_class": None, "num_classes": 10}
    assert upgraded["data"]["num_classes"] == 10 and upgraded["upgraded_from"] == "ampbench.result/5"
    assert setup_of(upgraded)["data_fingerprint"] is None


def test_runs_on_two_image_folders_never_pool_into_one_comparison() -> None:
    from utils.results.merge import merge

    documents = []
    for fingerprint in ("a" * 16, "b" * 16):
        document = upgrade(json.loads(BEFORE_BUSY.read_text()))
        document["data"] = {"name": "imagefolder", "num_classes": 10, "fingerprint": fingerprint}
        documents.append(document)
    assert len(merge(documents)) == 2 and len(merge(documents[:1] * 2)) == 1
