"""The levers' table: a row is refused where it is written unless it has every part, and switches
only the settings utils/config.py declares a lever's; each lever is tried the other way from the
user's command, told apart by what its trial's results differ in, and taken the way its trial
says; and every lever the adviser names is a row of it. No torch."""
import json
import re

import pytest

from conftest import ROOT
from utils import config
from utils.advice import plan
from utils.advice.levers import BY_NAME, EVERY_CORE, LEVERS, LOADER, Lever, no_compile
from utils.advice.trials import lever_of
from utils.measure import feed


def test_a_row_without_every_part_is_refused_where_it_is_written():
    with pytest.raises(TypeError):  # no word on whether it is a loader's, or compiles
        Lever("faster", {"channels_last": True}, {"channels_last": False}, no_compile)  # type: ignore[call-arg]
    with pytest.raises(TypeError, match="'faster' switches .* off"):  # on, but never off
        Lever("faster", {"channels_last": True}, {}, no_compile, loader=False, pays_back=False)
    with pytest.raises(TypeError, match="adviser=LEVER"):  # a setting config.py does not declare a lever's
        Lever("faster", {"batch_size": 512}, {"batch_size": 64}, no_compile, loader=False, pays_back=False)
    with pytest.raises(TypeError, match="no speed lever's, on alone"):
        Lever("faster", {"channels_last": True}, {}, no_compile, loader=True, pays_back=False)
    with pytest.raises(TypeError, match="why it cannot be tried"):
        Lever("faster", {"workers": EVERY_CORE}, {}, "never", loader=True, pays_back=False)  # type: ignore[arg-type]


def test_every_setting_config_declares_a_levers_is_switched_by_a_row():
    speed = [lever for lever in LEVERS if not lever.loader]
    assert {key for lever in speed for key in lever.keys} == set(config.LEVER_KEYS)
    assert len(BY_NAME) == len(LEVERS) and LOADER == ("more workers", "GPU decode")
    assert [lever.name for lever in LEVERS if lever.pays_back] == ["compile", "cuda graphs"]


def test_a_lever_is_tried_the_other_way_from_the_users_command():
    assert BY_NAME["fused optimizer"].trial(config.command_line()) == {"optimizer_impl": "foreach"}  # fused by default
    assert BY_NAME["channels-last"].trial(config.command_line()) == {"channels_last": True}
    assert BY_NAME["channels-last"].trial(config.command_line(channels_last=True)) == {"channels_last": False}
    assert BY_NAME["cuda graphs"].trial(config.command_line())["compile_mode"] == "reduce-overhead"
    assert BY_NAME["more workers"].trial(config.command_line(workers=0)) == {"workers": config.usable_cores()}
    assert BY_NAME["compile"].is_on({"compile": True, "compile_mode": "default"})
    assert not BY_NAME["cuda graphs"].is_on({"compile": False, "compile_mode": "reduce-overhead"})
    assert BY_NAME["more workers"].is_on({"workers": 8}, {"workers": 2})
    assert not BY_NAME["more workers"].is_on({"workers": 2}, {"workers": 8})


@pytest.mark.parametrize("lever", [lever.name for lever in LEVERS])
def test_a_trial_that_differs_in_one_lever_alone_is_that_levers_and_taken_the_way_it_says(lever):
    row, user = BY_NAME[lever], config.command_line(workers=0, decode="cpu")
    base = {"model": "resnet18", **{key: user[key] for key in row.keys}}
    trial = {**base, **row.trial(user)}
    assert lever_of(base, trial) == lever == lever_of(trial, base)
    assert lever_of(base, {**base, "model": "resnet50"}) is None
    assert row.choice(False, False, trial, base) == {}
    if row.loader:  # the value is the trial's own (every core here), or the comparison's where it is slower
        assert row.choice(True, False, trial, base) == row.trial(user)
        assert row.choice(False, True, trial, base) == {key: base[key] for key in row.keys}
    else:
        assert row.choice(True, False, trial, base) == row.on and row.choice(False, True, trial, base) == row.off


def test_every_lever_the_adviser_names_is_a_row_of_the_table():
    advice = json.loads((ROOT / "docs" / "samples" / "advice" / "advice.json").read_text())
    others = {"compare", "accuracy", plan.LARGER_BATCH, *plan.REMEASURES}
    named = {*advice["preflight"]["levers"], *advice["preflight"]["no_levers"],
             *(phase["name"] for phase in advice["plan"] if phase["name"] not in others)}
    (said,) = [claim["text"] for claim in advice["claims"] if claim["text"].startswith("Speed levers on ")]
    named |= set(re.findall(r"(?:^|; )([^:;]+?) [0-9.]+x \(", said.split(": ", 1)[1]))
    named |= {found.group(1) for entry in advice["evidence"]
              for found in [re.search(r"speedup with (.+) on$", entry["what"])] if found}
    assert named and named <= set(BY_NAME)
    # the loader's levers a results file names where the input bounds a run are the ones the adviser times
    found = feed.levers(workers=0, cores=8, decode="cpu", device_type="cuda", data="imagefolder", resized=None,
                        resize_side=256)
    assert set(LOADER) <= {lever["lever"] for lever in found}
