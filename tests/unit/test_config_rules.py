"""The rules between flags are typed, keyword-only functions of the settled sections they read
(utils/config.py), so the type checker sees every setting a rule names; what the command line
set is kept as `given`, away from the defaults, for the rules that ask whether a flag was typed."""
from __future__ import annotations

import inspect
import typing

import pytest

from utils import config
from utils.errors import UserError
from utils.settings import Section

RULES = [function for name, function in vars(config).items()
         if name.startswith("check_") and inspect.isfunction(function) and function.__module__ == config.__name__]


def test_there_are_rules_to_check() -> None:
    assert len(RULES) >= 12


@pytest.mark.parametrize("rule", RULES, ids=lambda rule: rule.__name__)
def test_each_rule_takes_its_sections_by_keyword_typed(rule) -> None:
    hints = typing.get_type_hints(rule)
    for name, parameter in inspect.signature(rule).parameters.items():
        assert parameter.kind is inspect.Parameter.KEYWORD_ONLY, f"{rule.__name__}({name}) is not keyword-only"
        kind = hints[name]
        assert (inspect.isclass(kind) and issubclass(kind, Section)) or kind in (bool, typing.Dict[str, typing.Any],
                                                                                 typing.Dict[str, str]), \
            f"{rule.__name__}({name}: {kind}) is neither a section nor what the command line gave"


def test_given_holds_what_the_command_line_set_away_from_its_defaults() -> None:
    built = config.RunConfig.build(model="resnet18", batch_size=128, repeats=1)
    assert built.given == {"model": "resnet18"}
    assert built.command_line == {**config.defaults(), "model": "resnet18"}


def test_a_flag_typed_at_its_default_is_not_given_and_a_value_of_another_type_is() -> None:
    config.RunConfig.build(model_factory="tests.cli.user_models:TinyNet", model=config.DEFAULT_MODEL)
    with pytest.raises(UserError, match="-m/--model resnet18 names a torchvision one"):
        config.RunConfig.build(model_factory="tests.cli.user_models:TinyNet", model="resnet18")
    with pytest.raises(UserError, match="--repeats must be a positive integer"):
        config.RunConfig.build(repeats=True)


def test_a_rule_reads_the_settled_value_where_the_run_decides_the_default() -> None:
    """The stem the image size implies is no --stem, and --steps beside --epochs is refused
    although the steps settle to none."""
    config.RunConfig.build(model="vit_s4", image_size=64)
    with pytest.raises(UserError, match="--stem cifar changes the first conv"):
        config.RunConfig.build(model="vit_s4", stem="cifar", image_size=224)
    with pytest.raises(UserError, match="either --steps/-n or --epochs"):
        config.RunConfig.build(steps=10, epochs=1.0)
