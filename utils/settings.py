"""A setting of main.py is a field of one of RunConfig's sections (utils/config.py) that carries its
flag: the names it is typed under, its -h help and docs/flags.md's text, its argparse settings,
its default and the range of a number. The parser (main.py), docs/flags.md
(docs/generate_flags.py), the defaults, the range checks, --check-flags and the results record
are all read from the fields, so that a setting is written once (as torchtitan's config fields
are their flags). No torch, and nothing of the project's: the sections are made of it.
"""
from __future__ import annotations

from dataclasses import dataclass, field, fields
from typing import Any, Callable, ClassVar, Dict, Optional, Sequence, Tuple, Type

LARGEST_COUNT = 2 ** 31 - 1  # the most steps, images or seconds a flag may ask for
LARGEST_FLOAT = 3.4028234663852886e38  # float32's largest finite value: torch holds no larger rate or scale


@dataclass(frozen=True)
class Range:
    """The values a numeric flag takes: a `kind` (int or float) from `low` to `high`, either end
    left open where said. Numbers beyond what torch's int64 counters and float32 tensors hold
    are refused with the limit, instead of failing deep inside torch."""
    kind: type
    low: float
    high: float
    wording: str
    low_open: bool = False
    high_open: bool = False

    def accepts(self, value: object) -> bool:
        """`value` set in code: a number of this kind (an int will do for a float) in the range."""
        numeric = (int,) if self.kind is int else (int, float)
        return isinstance(value, numeric) and not isinstance(value, bool) and self.holds(value)

    def holds(self, value: float) -> bool:
        above = value > self.low if self.low_open else value >= self.low
        below = value < self.high if self.high_open else value <= self.high
        return above and below  # False for NaN


COUNT = Range(int, 1, LARGEST_COUNT, f"a positive integer up to {LARGEST_COUNT}")
COUNT_OR_ZERO = Range(int, 0, LARGEST_COUNT, f"zero or a positive integer up to {LARGEST_COUNT}")
POSITIVE = Range(float, 0, LARGEST_FLOAT, f"a positive number up to {LARGEST_FLOAT:.4g}", low_open=True)
POSITIVE_OR_ZERO = Range(float, 0, LARGEST_FLOAT, f"zero or a positive number up to {LARGEST_FLOAT:.4g}")
FRACTION = Range(float, 0, 1, "at least 0 and below 1", high_open=True)


@dataclass(frozen=True)
class Flag:
    """How a setting is typed. `names` as -h shows them, the first the one messages use; `help`
    for -h and `doc` for docs/flags.md where the page says more, both written as argparse help
    is (%(default)s, %%), `{help}` standing for `help` in `doc`; the value when not given
    (`default`, or `default_factory`'s); argparse's `action`, `choices` and `metavar`; the
    `range` of a number; the -h `group`, where not its section's; and `key`, the setting's name
    as argparse's dest, RunConfig.build's keyword and the results record's key, where the field
    is named otherwise."""
    names: Tuple[str, ...]
    help: str
    default: Any = None
    default_factory: Optional[Callable[[], Any]] = None
    doc: Optional[str] = None
    action: Optional[str] = None  # store_true, store_false
    choices: Optional[Tuple[str, ...]] = None
    metavar: Optional[str] = None
    range: Optional[Range] = None
    group: Optional[str] = None
    key: Optional[str] = None


def setting(*names: str, help: str, **details: Any) -> Any:
    """A section's field that is a setting, typed as `names` (Flag says the rest). A switch
    is off unless said otherwise. The field itself has no default: RunConfig.build fills it."""
    if details.get("action") == "store_true":
        details.setdefault("default", False)
    return field(metadata={FLAG: Flag(names, help, **details)})


FLAG = "flag"  # where a field's metadata holds its Flag


@dataclass(frozen=True)
class Section:
    """What a section of RunConfig declares beside its fields: its -h group."""
    GROUP: ClassVar[str]


@dataclass(frozen=True)
class Setting:
    """A setting as the parser and the record see it: its `key`, the section (RunConfig's
    attribute) and field that hold it, its flag and its -h group."""
    key: str
    section: str
    field: str
    flag: Flag
    group: str

    @property
    def name(self) -> str:
        """The flag's name in messages: its first."""
        return self.flag.names[0]

    def default(self) -> Any:
        factory = self.flag.default_factory
        return factory() if factory is not None else self.flag.default


def settings_of(sections: Sequence[Tuple[str, Type[Section]]]) -> Dict[str, Setting]:
    """Every setting of `sections` ((RunConfig's attribute, its section class), in -h's order),
    by key, in -h's order."""
    found = {}
    for attribute, section in sections:
        for each in fields(section):
            flag = each.metadata[FLAG]
            key = flag.key or each.name
            found[key] = Setting(key, attribute, each.name, flag, flag.group or section.GROUP)
    return found


class Arguments(Dict[str, Any]):
    """A command line as parsed: every setting by its key, at its value or its default. The
    rules between flags read it (as attributes), and --advise passes it on to the runs it starts."""

    def __getattr__(self, key: str) -> Any:
        try:
            return self[key]
        except KeyError:
            raise AttributeError(key) from None
