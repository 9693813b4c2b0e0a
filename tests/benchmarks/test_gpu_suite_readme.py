"""README's Results answer before they keep the books: per GPU a verdict table whose legend says
what its cells show and nothing else, and run pages whose tables say each row's own data and
steps; tested on fixtures made from the H200's committed headline, with and without each kind
of cell."""
import copy
import json
import re

import pytest

from benchmarks.suite import render, tables, verdict
from benchmarks.suite.history import SavedSuite
from conftest import ROOT, third_repeat
from utils.measure import nvml_meter

H200 = ROOT / "results" / "NVIDIA-H200" / "2026-11-26"
RECORD = {"device": "NVIDIA H200", "quick": False, "date": "2026-12-01", "models": ["resnet18"], "steps_run": [
    {"name": "headline-resnet18", "section": "headline", "rc": 0, "elapsed_s": 100.0}]}


def headline_document():
    """The H200's resnet18 headline: 2 repeats of fp32, tf32, amp-fp16 and amp-bf16, no busy share,
    energy windows too short, synthetic images, 50 steps."""
    return json.loads((H200 / "headline-resnet18.json").read_text())


def three_repeats(document):
    return dict(third_repeat([document])[0], config=dict(document["config"], repeats=3))


def one_repeat(document):
    return dict(document, runs=[run for run in document["runs"] if run["repeat"] == 0],
                config=dict(document["config"], repeats=1))


def without(mode):
    return lambda document: dict(document, runs=[run for run in document["runs"] if run["mode"] != mode])


def busy(document):
    changed = copy.deepcopy(document)
    for run in changed["runs"]:
        run.update(gpu_busy={"share": 0.95 if run["mode"] == "fp32" else 0.5, "source": nvml_meter.UTILIZATION_SAMPLES,
                             "window_s": 12.0, "samples": 70, "sample_period_s": 0.167}, gpu_busy_unavailable=None)
    return changed


def long_windows(document):
    changed = copy.deepcopy(document)
    for run in changed["runs"]:
        energy = run["energy"]
        run["energy"] = dict(energy, seconds=12.0, mean_watts=energy["joules"] / 12.0, window_too_short=False)
    return changed


def own_steps(document):
    """Each mode timed for its own window: fp32 fewer steps than the others."""
    changed = copy.deepcopy(document)
    for run in changed["runs"]:
        run["steps"] = 140 if run["mode"] == "fp32" else 500
    return changed


def on_the_subset(document):
    changed = copy.deepcopy(document)
    changed["data"] = {"name": "cifar10", "folder": "data", "verified": False, "train_images": 5438,
                       "test_images": 1017}
    return changed


FIXTURES = {
    "two repeats": lambda document: document, "three repeats": three_repeats, "one repeat": one_repeat,
    "no fp32": without("fp32"), "no tf32": without("tf32"), "busy shares": busy,
    "energy with its interval": lambda document: long_windows(three_repeats(document)),
    "energy without an interval": long_windows,
    "three repeats and busy": lambda document: busy(three_repeats(document)),
}


def suite_of(tmp_path, document):
    folder = tmp_path / "NVIDIA-H200" / "2026-12-01"
    folder.mkdir(parents=True)
    (folder / "headline-resnet18.json").write_text(json.dumps(document))
    (folder / "suite.json").write_text(json.dumps(RECORD))
    return SavedSuite(folder, RECORD)


def split(lines):
    """(the table's cells, row by row, header first; its legend's lines)."""
    table = [line for line in lines if line.startswith("|") and not line.startswith("| ---")]
    return [line.strip("| ").split(" | ") for line in table], [line for line in lines if line.startswith("* ")]


def said(legend, phrase):
    return any(phrase in line for line in legend)


@pytest.mark.parametrize("fixture", FIXTURES)
def test_the_verdict_legend_says_what_its_cells_show_and_nothing_else(fixture, tmp_path):
    suite = suite_of(tmp_path, FIXTURES[fixture](headline_document()))
    lines = verdict.verdict_table([suite], lambda page, day: day, {})
    (header, *rows), legend = split(lines)
    column = {name: [row[index] for row in rows] for index, name in enumerate(header)}
    ratios = column["vs tf32"] + column["vs fp32"]
    assert said(legend, "Brackets: the 95% interval over the repeats") == any(" [" in cell for cell in ratios)
    assert said(legend, "`2 runs:`") == any(cell.startswith("2 runs: ") for cell in ratios)
    assert said(legend, "`1 run:`") == any(cell.startswith("1 run: ") for cell in ratios)
    assert said(legend, "`-`: the row ran no") == ("-" in ratios + column["memory vs fp32"])
    assert said(legend, "`step bound by`: by the fastest mode's GPU busy share") == any(
        cell != "-" for cell in column["step bound by"])
    assert said(legend, "`-` under step bound by: no busy share") == ("-" in column["step bound by"])
    assert said(legend, "`unsteady`") == any("(unsteady)" in cell for cell in column["fastest"])
    assert not said(legend, "`eager`") and not any("eager" in cell for cell in column["fastest"])
    assert lines.count("") == 3  # the table, its legend, the claimed sentence


@pytest.mark.parametrize("fixture", FIXTURES)
def test_the_headline_legend_on_a_run_page_says_what_its_cells_show_and_nothing_else(fixture, tmp_path):
    suite = suite_of(tmp_path, FIXTURES[fixture](headline_document()))
    (header, *rows), legend = split(tables.headline([suite], lambda saved, figures, step: "label"))
    column = {name: [row[index] for row in rows] for index, name in enumerate(header)}
    ratios = [cell for name, cells in column.items() if " vs " in name for cell in cells]
    busy_cells = column["GPU busy fp32 / tf32 / amp-fp16 / amp-bf16"]
    energy = column["amp-fp16 energy / fp32"]
    assert said(legend, "Brackets:") == any(" [" in cell for cell in ratios)
    assert said(legend, "`2 runs:`") == any(cell.startswith("2 runs: ") for cell in ratios)
    assert said(legend, "`1 run:`") == any(cell.startswith("1 run: ") for cell in ratios)
    assert said(legend, "`-`: the row ran no") == ("-" in ratios)
    assert said(legend, "GPU busy: the share") == any(cell != "-" for cell in busy_cells)
    assert said(legend, "`-` under GPU busy") == ("-" in busy_cells)
    assert said(legend, "`window too short`") == ("window too short" in energy)
    assert said(legend, "Energy: joules per image") == any(" [" in cell for cell in energy)
    assert said(legend, "`- (no interval)`") == ("- (no interval)" in energy)
    assert said(legend, "`-` under energy") == ("-" in energy)
    assert said(legend, "host-bound") == any(re.search(r"\b[1-6]\d%", cell) for cell in busy_cells)


def test_a_fixture_covers_each_kind_of_cell_both_ways(tmp_path):
    """The fixtures above render each kind of cell somewhere and leave it out somewhere."""
    seen = {}
    for name, fixture in FIXTURES.items():
        suite = suite_of(tmp_path / name.replace(" ", "-"), fixture(headline_document()))
        text = "\n".join(verdict.verdict_table([suite], lambda page, day: day, {})
                         + tables.headline([suite], lambda saved, figures, step: "label"))
        for kind in ("x [", "2 runs: ", "1 run: ", "| - |", "% busy", "window too short", "- (no interval)",
                     "(unsteady)"):
            seen.setdefault(kind, set()).add(kind in text)
    assert all(found == {True, False} for found in seen.values()), seen


def test_each_row_says_its_own_data_and_steps(tmp_path):
    """A folder whose first row ran synthetic images for 50 steps and whose second ran the subset,
    each mode for its own steps: each row says its own, on the run page and in README, and the
    page says nothing of the subset's accuracies where no row evaluated."""
    folder = tmp_path / "NVIDIA-H200" / "2026-12-01"
    folder.mkdir(parents=True)
    resnet50 = json.loads((H200 / "headline-resnet50.json").read_text())
    (folder / "headline-resnet50.json").write_text(json.dumps(resnet50))
    (folder / "headline-resnet18.json").write_text(json.dumps(on_the_subset(own_steps(headline_document()))))
    record = dict(RECORD, models=["resnet50", "resnet18"], batch=256, steps=50, elapsed_s=100.0, steps_run=[
        {"name": f"headline-{model}", "section": "headline", "rc": 0, "elapsed_s": 100.0}
        for model in ("resnet50", "resnet18")])
    (folder / "suite.json").write_text(json.dumps(record))
    page = render.render(folder)
    assert "| resnet50 | synthetic | 256 | 2 | 50 |" in page and "| resnet18 | CIFAR-10 subset | 256 | 2 | 140-500 |" \
        in page
    assert "Data: " not in page and "subset mean little" not in page
    (header, *rows), _ = split(verdict.verdict_table([SavedSuite(folder, record)], lambda page, day: day, {}))
    measured = {row[0]: row[header.index("measured")] for row in rows}
    assert measured["resnet50"].startswith("2 x 50 steps, synthetic, ")
    assert measured["resnet18"].startswith("2 x 140-500 steps, CIFAR-10 subset, ")


def test_the_h200_run_page_says_its_rows_data_and_nothing_of_the_subset():
    """The H200's headline ran on synthetic images and its transformers on the subset without an
    evaluation: each row says its data, and no sentence speaks of the subset's accuracies."""
    page = render.render(H200)
    assert "| resnet50 | synthetic | 256 | 2 | 50 |" in page and "| vit_s4 | 32 | CIFAR-10 subset |" in page
    assert "on the subset" not in page and "subset mean little" not in page
    assert page == (H200 / "README.md").read_text()
