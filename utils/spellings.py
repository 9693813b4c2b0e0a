"""The spellings main.py keeps for old scripts and other tools' habits, and what each is now: one
table, EARLIER, whose flags main.py's parser takes as hidden flags (-h lists them apart) and
resolve() settles into the current settings after parsing, as timm's --amp settles --precision.
The checks and the results know only the current settings; the tutorial's classic call

    python main.py -n 200 -p --fp16 -s --model resnet50

runs as `-n 200 -p --modes amp-fp16 --model resnet50`. A renamed flag is its setting's flag under
its earlier name (`--warmup N` is `--timing-warmup N`; typed in both, it is refused), a default's
switch changes nothing, and the precision spellings, which name one mode together (--fp16 with -s
or without), are kept as typed and settled into --modes, so that one beside --modes or --compare
is refused however those were typed. What was typed is kept, so that every message names a flag
as the user typed it (RunConfig.flag). No torch, and nothing of the project's but its error type.
"""
from __future__ import annotations

import argparse
from dataclasses import dataclass
from typing import Any, List, Optional, Sequence, Tuple

from utils.errors import UserError


@dataclass(frozen=True)
class Earlier:
    """One earlier spelling: what it is now, and where it comes from (for -h and docs/flags.md)."""
    typed: str  # as typed, its value named: "--warmup N"
    current: str  # the current spelling, "" where the default does it
    origin: str


EARLIER = (
    Earlier("--fp16 -s", "--modes amp-fp16", "the ThetaGPU AMP tutorial's autocast float16 with loss scaling"),
    Earlier("--fp16", "--modes amp-fp16-noscale", "the tutorial's autocast float16, without loss scaling"),
    Earlier("--bf16", "--modes amp-bf16", "autocast bfloat16 (-s with it is ignored: bfloat16 needs no scaling)"),
    Earlier("--amp", "--modes amp-fp16", "timm's and NVIDIA's, float16 unless --amp-dtype says otherwise"),
    Earlier("--amp --amp-dtype bfloat16", "--modes amp-bf16", "timm's (--amp-dtype float16 is --amp)"),
    Earlier("--tf32", "--modes tf32", "FP32 with TF32 tensor cores"),
    Earlier("--loss_scaling", "-s", "the tutorial's long name of -s"),
    Earlier("--warmup N", "--timing-warmup N", "the timing warm-up's earlier name"),
    Earlier("--warmup-lr-steps N", "--lr-warmup-steps N", "the learning-rate warm-up's earlier name"),
    Earlier("--download", "", "fetching CIFAR-10 when no copy is there is the default"),
)
TITLE = "earlier spellings (kept for old scripts; each is read as the current one after it)"  # in -h
PRECISION = "--modes"  # where the precision spellings go
AMP_DTYPES = ("float16", "bfloat16")
NO_SPELLING = "fp32"  # the mode of a command line without a precision spelling (or with -s alone)


def flag_of(spelling: str) -> str:
    return spelling.split()[0]


# What EARLIER says, by the flag typed: the precision spellings' words (with --loss_scaling, -s
# by another name), what each set of them names, the flags renamed and the switches of a default.
PRECISION_WORDS = {word for row in EARLIER if row.current.startswith(PRECISION) for word in row.typed.split()
                   if word.startswith("-")}
ALIASES = {row.typed: row.current for row in EARLIER if row.current in PRECISION_WORDS}
PRECISION_WORDS |= set(ALIASES)
MODE_OF = {tuple(row.typed.split()): row.current.split()[1] for row in EARLIER if row.current.startswith(PRECISION)}
RENAMED = {flag_of(row.typed): flag_of(row.current) for row in EARLIER
           if row.current and flag_of(row.typed) not in PRECISION_WORDS}
DEFAULTS = {row.typed for row in EARLIER if not row.current}
CHOOSERS = tuple(dict.fromkeys(typed[0] for typed in MODE_OF))  # the spellings that choose a mode: --fp16 ...
SWITCHES = tuple(dict.fromkeys(word for row in EARLIER for word in row.typed.split()  # the precision words and
                               if word.startswith("-") and word not in RENAMED))  # the defaults' switches


# The namespace attribute where the earlier switches typed wait, in order, for resolve()
TYPED = "earlier_spellings"


class Typed(argparse.Action):
    """An earlier switch (--fp16, -s, --amp-dtype DTYPE, --download ...), kept as typed for resolve()."""

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace, values: Any,
                 option_string: Optional[str] = None) -> None:
        typed = f"{option_string} {values}" if isinstance(values, str) else str(option_string)
        setattr(namespace, TYPED, [*getattr(namespace, TYPED, []), typed])


def add_switches(parser: argparse.ArgumentParser) -> None:
    """Add the precision spellings and the switches of a default to `parser`, hidden: -h lists
    EARLIER in a group of its own. (A renamed flag is its setting's flag under another name.)"""
    for flag in SWITCHES:
        parser.add_argument(flag, action=Typed, dest=TYPED, default=argparse.SUPPRESS, help=argparse.SUPPRESS,
                            **({"choices": AMP_DTYPES} if flag == "--amp-dtype" else {"nargs": 0}))


def once(before: Optional[str], typed: str) -> None:
    """Refuse a setting typed as `typed` after `before`, where those are its two spellings."""
    for earlier, current in RENAMED.items():
        if {before, typed} == {earlier, current}:
            raise UserError(f"{earlier} and {current} are one setting ({earlier} is its earlier spelling), given "
                            f"twice; give it once, as {current}.")


def resolve(namespace: argparse.Namespace, argv: Sequence[str]) -> None:
    """Settle the parsed `namespace` of `argv` into current settings: the precision spellings'
    mode as --modes (refused beside --modes or --compare, which name the modes themselves), with
    the spelling typed in `namespace.spelled`, the warnings for an -s without effect in
    `namespace.warnings`, and `namespace.command`, `argv` in current spellings."""
    typed = [word for word in vars(namespace).pop(TYPED, []) if flag_of(word) in PRECISION_WORDS]
    end = list(argv).index("--") if "--" in argv else len(argv)
    if list(argv[:end]).count("-s") != typed.count("-s"):  # else the command in current spellings would keep it
        raise UserError("-s is read only on its own, not joined to other short flags (-ps); give it apart: -p -s.")
    namespace.warnings, mode = [], None
    if typed:
        spelled = " ".join(typed)
        mode, namespace.warnings = mode_of(typed)
        if namespace.modes is not None:
            raise UserError(f"{spelled} and --modes {namespace.modes} both name the precision mode ({spelled} is "
                            f"--modes {mode} in its earlier spelling); give the modes once, with --modes.")
        if namespace.compare:
            raise UserError(f"--compare runs the modes listed in --modes; drop {spelled} and name the modes "
                            "instead, e.g. --modes fp32,amp-fp16,amp-bf16.")
        namespace.modes = mode
        namespace.spelled = {**getattr(namespace, "spelled", {}), "modes": spelled}
    namespace.command = current(argv[:end], mode) + list(argv[end:])


def current(argv: Sequence[str], mode: Optional[str]) -> List[str]:
    """`argv`, which the parser read, in current spellings, as a command repeated to the user (a
    resume line) says it: renamed flags renamed (--warmup=5 too), switches of a default dropped,
    the precision spellings as --modes `mode` where the first of them stood."""
    words: List[str] = []
    at = None
    given = iter(argv)
    for word in given:
        flag, equals, value = word.partition("=") if word.startswith("--") else (word, "", "")
        if flag in RENAMED:
            words.append(RENAMED[flag] + equals + value)
        elif flag in PRECISION_WORDS:
            at = len(words) if at is None else at
            if flag == "--amp-dtype" and not equals:
                next(given, None)  # its value
        elif flag not in DEFAULTS:
            words.append(word)
    if mode is not None and at is not None:
        words[at:at] = [PRECISION, mode]
    return words


def mode_of(typed: Sequence[str]) -> Tuple[str, List[str]]:
    """The mode that the precision spellings `typed` name, as --modes names it now, and the warning
    for an -s that changes nothing; refuses spellings that name different modes."""
    words = [ALIASES.get(word, word) for word in typed]
    choosers = [word for word in dict.fromkeys(words) if word in ("--fp16", "--bf16", "--amp")]
    dtype = next((word for word in words if word.startswith("--amp-dtype")), None)
    tf32 = "--tf32" in words
    if len(choosers) > 1:
        raise UserError(f"{' and '.join(choosers)} each choose a precision mode; choose one, or compare modes with "
                        "--modes, e.g. --modes fp32,amp-fp16,amp-bf16.")
    if dtype is not None and choosers != ["--amp"]:
        raise UserError(f"--amp-dtype sets the dtype of --amp, which is not given; add --amp (--amp {dtype}) or "
                        "drop --amp-dtype.")
    if tf32 and choosers:
        raise UserError(f"--tf32 is the FP32 mode with TF32 tensor cores, and {choosers[0]} chooses an autocast "
                        "mode instead; drop one, or compare them with --modes tf32,amp-fp16,amp-bf16.")
    scaled = "-s" in words and choosers == ["--fp16"]
    named = [*choosers, *(["-s"] if scaled else []), *([dtype] if dtype == "--amp-dtype bfloat16" else []),
             *(["--tf32"] if tf32 else [])]
    mode = MODE_OF.get(tuple(" ".join(named).split()), NO_SPELLING)
    return mode, ([ignored_scaling(choosers, dtype)] if "-s" in words and not scaled else [])


def ignored_scaling(choosers: List[str], dtype: Optional[str]) -> str:
    """Why an -s typed beside `choosers` (and --amp's `dtype`) scales nothing more."""
    if choosers == ["--bf16"] or dtype == "--amp-dtype bfloat16":
        chosen = "--bf16" if choosers == ["--bf16"] else "--amp --amp-dtype bfloat16"
        return (f"-s/--loss_scaling is ignored with {chosen}: bfloat16 has FP32's exponent range, so gradients do "
                "not underflow and need no loss scaling.")
    if choosers == ["--amp"]:
        return "-s/--loss_scaling adds nothing to --amp, which scales float16's loss already."
    return "-s/--loss_scaling is ignored without --fp16: FP32 gradients need no loss scaling."
