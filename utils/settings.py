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


# What a run's record does with a setting (Flag.record): runs are pooled into one comparison, and a
# checkpoint resumed, only where the settings that change their numbers match.
STEP_TIMES = "step times"  # changes the step times: a merge pools only runs that match in it; a CSV column
VERDICT = "verdict"  # changes the accuracy question, not the step times: a merge pools by it too; a CSV column
POOLED = "pooled"  # runs that differ in it are pooled (the seed, an output, the display)
RECORDS = (STEP_TIMES, VERDICT, POOLED)
# What --advise does with a setting (Flag.adviser) of the command it is given.
OWNED = "owned"  # the adviser decides it for each phase: refused beside --advise
ADVICE = "advice"  # one of the adviser's own flags: refused without --advise, passed to no run
KEPT = "kept"  # an action or the display: passed to no run
PASSED = "passed"  # passed on to every run, where not at its default
LENGTH = "length"  # the run's length: passed on where a run keeps the user's (the accuracy check), chosen by the others
NAMED = "named"  # passed on to every run, at its default too, so that a command says what it trains
LEVER = "lever"  # passed on, and switched the other way in a speed trial of its own (advice/levers.py LEVERS)
ADVISER_ROLES = (OWNED, ADVICE, KEPT, PASSED, LENGTH, NAMED, LEVER)


@dataclass(frozen=True)
class Resume:
    """What a resume does when the setting differs from its checkpoint's: `refused` or not; `why`,
    said in the refusal; `always`: every release's checkpoint holds it, so its config is checked for it."""
    refused: bool
    why: Optional[str] = None
    always: bool = False


CHECKED = Resume(True, always=True)  # refused, in every checkpoint (the model, the batch, the data's shape)
FREE = Resume(False)  # a resume may change it: the outputs, the display, the steps (which may grow), the warm-up


def refused(why: str) -> Resume:
    """A resume refuses a change of the setting, for checkpoints that hold it, saying `why`."""
    return Resume(True, why)


@dataclass(frozen=True)
class Flag:
    """How a setting is typed. `names` as -h shows them, the first the one messages use; `help`
    for -h and `doc` for docs/flags.md where the page says more, both written as argparse help
    is (%(default)s, %%), `{help}` standing for `help` in `doc`; the value when not given
    (`default`, or `default_factory`'s); argparse's `action`, `choices` and `metavar`; the
    `range` of a number; the -h `group`, where not its section's; and `key`, the setting's name
    as argparse's dest, RunConfig.build's keyword and the results record's key, where the field
    is named otherwise. Its roles: what the `record` does with it (RECORDS), what a `resume` does
    when it changes, what the `adviser` does with it (ADVISER_ROLES), whether it names a file or
    folder the run `writes`, whether every release's results files hold it (`recorded_always`: a
    file without it is refused), and whether the batch-job scripts (cluster/stages.sh) type it
    themselves (`job`: --advise's job lines leave it out of EXTRA_ARGS); the lists of settings by
    role are read from them (config.py)."""
    names: Tuple[str, ...]
    help: str
    record: str
    resume: Resume
    adviser: str
    default: Any = None
    default_factory: Optional[Callable[[], Any]] = None
    doc: Optional[str] = None
    action: Optional[str] = None  # store_true, store_false
    choices: Optional[Tuple[str, ...]] = None
    metavar: Optional[str] = None
    range: Optional[Range] = None
    group: Optional[str] = None
    key: Optional[str] = None
    writes: bool = False
    recorded_always: bool = False
    job: bool = False

    def __post_init__(self) -> None:
        if self.record not in RECORDS or self.adviser not in ADVISER_ROLES or not isinstance(self.resume, Resume):
            raise TypeError(f"{self.names[0]} declares its roles as record={self.record!r}, resume={self.resume!r}, "
                            f"adviser={self.adviser!r}: record is one of {RECORDS}, resume a Resume and adviser one "
                            f"of {ADVISER_ROLES}")


def setting(*names: str, help: str, record: str, resume: Resume, adviser: str, **details: Any) -> Any:
    """A section's field that is a setting, typed as `names`, with its roles (Flag says the rest).
    A switch is off unless said otherwise. The field itself has no default: RunConfig.build fills it."""
    if details.get("action") == "store_true":
        details.setdefault("default", False)
    return field(metadata={FLAG: Flag(names, help, record, resume, adviser, **details)})


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


def keys_with(settings: Dict[str, Setting], role: Callable[[Flag], bool]) -> Tuple[str, ...]:
    """The keys of the `settings` whose flag has the `role`, in -h's order."""
    return tuple(key for key, each in settings.items() if role(each.flag))


# A main.py command line as its settings: every one by key, as given or at its default. --advise
# passes it on to the runs it starts, and rebuilds their flags from it.
CommandLine = Dict[str, Any]
