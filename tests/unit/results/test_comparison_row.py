"""The comparison row: one typed record per mode, built once, written as the dict the schema page lists."""
import dataclasses
import re

import pytest

from conftest import ROOT, fake_run
from utils.results import compare
from utils.results.comparison_row import TARGET_FIELDS, ComparisonRow


def schema_page_fields():
    """The field names the schema page lists for `comparison` (what its parentheses say left out)."""
    page = (ROOT / "docs" / "results-schema.md").read_text()
    bullet = page.split("* `comparison`: keyed by mode:", 1)[1].split("\n* ", 1)[0]
    return set(re.findall(r"`([a-z][a-z0-9_]*)`", re.sub(r"\([^)]*\)", "", bullet)))


def test_the_row_has_the_fields_the_schema_page_lists():
    assert {field.name for field in dataclasses.fields(ComparisonRow)} == schema_page_fields()


def compared(**extra):
    learning = [2.3 - 0.03 * i for i in range(30)]
    runs = [dict(fake_run(mode, ms, learning, 0.4), **extra) for mode, ms in (("fp32", 100.0), ("amp-bf16", 50.0))]
    return compare.compare_modes(runs)


def test_to_dict_holds_every_field_in_order_and_the_target_figures_only_with_a_target():
    names = [field.name for field in dataclasses.fields(ComparisonRow)]
    untargeted = compared()["amp-bf16"]
    assert list(untargeted.to_dict()) == [name for name in names if name not in TARGET_FIELDS]
    assert ComparisonRow(**dict.fromkeys(TARGET_FIELDS), **untargeted.to_dict()) == untargeted
    targeted = compared(target_accuracy=0.3, time_to_target_s=5.0, epochs_to_target=1.0)["amp-bf16"]
    assert list(targeted.to_dict()) == names and ComparisonRow(**targeted.to_dict()) == targeted
    assert targeted.time_to_target_s == 5.0 and targeted.time_to_target_speedup_vs_baseline == 1.0


def test_a_row_is_never_changed_after_it_is_built():
    row = compared()["amp-bf16"]
    with pytest.raises(dataclasses.FrozenInstanceError):
        row.speedup_vs_baseline = 1.0
