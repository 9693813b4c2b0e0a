"""A setting's roles sit on its field (utils/settings.py's Flag): what the record, a resume and
--advise do with it. The lists of settings by role are read from the fields (utils/config.py), so
a field that forgets its roles, or names one that is not, is refused where it is written."""
from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Optional

import pytest

from utils import config
from utils.results import validate
from utils.settings import FREE, PASSED, POOLED, STEP_TIMES, Section, keys_with, refused, setting, settings_of


def test_a_field_without_its_roles_is_refused_where_it_is_written() -> None:
    with pytest.raises(TypeError, match="record.*resume.*adviser"):
        setting("--knob", help="a knob")  # type: ignore[call-arg]


def test_a_role_that_is_none_of_the_declared_ones_is_refused_naming_the_flag() -> None:
    with pytest.raises(TypeError, match="--knob declares its roles as record='steps'"):
        setting("--knob", help="a knob", record="steps", resume=FREE, adviser=PASSED)
    with pytest.raises(TypeError, match="--knob declares its roles"):
        setting("--knob", help="a knob", record=POOLED, resume="refused", adviser=PASSED)


def test_a_new_setting_joins_the_lists_of_its_roles_with_its_field_alone() -> None:
    @dataclass(frozen=True)
    class Toy(Section):
        GROUP = "toy"
        knob: Optional[float] = setting("--knob", help="a knob that changes the step times", record=STEP_TIMES,
                                        resume=refused("the step times would mix two knobs"), adviser=PASSED)
        shown: bool = setting("--shown", action="store_true", help="display only", record=POOLED, resume=FREE,
                              adviser=PASSED)

    toy = settings_of((("toy", Toy),))
    assert keys_with(toy, lambda flag: flag.record == STEP_TIMES) == ("knob",)
    assert [key for key in toy if toy[key].flag.resume.refused] == ["knob"]
    assert toy["knob"].flag.resume.why == "the step times would mix two knobs"


@pytest.mark.parametrize("key", [key for key in (*config.SETUP_KEYS, *config.ACCURACY_KEYS)
                                 if config.SETTINGS[key].flag.range is not None])
def test_a_results_file_holds_each_setting_in_the_range_its_flag_takes(key: str) -> None:
    """The validator's check of a recorded setting is its flag's: the same range, said in the same words."""
    flag = config.SETTINGS[key].flag
    assert flag.range is not None
    spec = validate.setting(key)
    spec.check(flag.range.low if not flag.range.low_open else flag.range.high, "config." + key)
    outside = flag.range.low if flag.range.low_open else flag.range.low - 1
    with pytest.raises(validate.Invalid, match=re.escape(flag.range.wording)):
        spec.check(outside, "config." + key)


def test_a_results_file_missing_a_setting_every_release_recorded_is_refused_and_one_missing_another_is_not() -> None:
    """Which settings every release's files hold is said on their fields (recorded_always)."""
    assert set(config.RECORDED_ALWAYS) == {"model", "stem", "batch_size", "steps", "warmup", "lr"}
    document = {key: config.SETTINGS[key].default() for key in config.RECORDED_ALWAYS}
    document.update(model="resnet18", stem="cifar", steps=20, warmup=2, lr=0.1)
    validate.CONFIG.check(document, "config")
    for key in config.RECORDED_ALWAYS:
        with pytest.raises(validate.Invalid, match=key):
            validate.CONFIG.check({name: value for name, value in document.items() if name != key}, "config")
