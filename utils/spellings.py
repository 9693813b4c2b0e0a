"""The spellings main.py keeps for old scripts and other tools' habits, and what each is now: one
table, EARLIER, that rewrites a command line before it is parsed. The parser, -h's groups, the
checks and the results know only the current flags; the tutorial's classic call

    python main.py -n 200 -p --fp16 -s --model resnet50

runs as `-n 200 -p --modes amp-fp16 --model resnet50`. A renamed flag is renamed (`--warmup N` is
`--timing-warmup N`) and a default's switch dropped before parsing; the precision spellings, which
name one mode together (--fp16 with -s or without), are taken out then and settled into --modes
once the rest is parsed, so that one beside --modes or --compare is refused however those were
typed. What was typed is kept, so that every message names a flag as the user typed it
(RunConfig.flag). No torch, and nothing of the project's but its error type.
"""
from __future__ import annotations

import argparse
from dataclasses import dataclass, field
from typing import Dict, List, Optional, Sequence, Tuple

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
KNOWN = tuple(dict.fromkeys(flag_of(row.typed) for row in EARLIER))  # for the parser's "did you mean"


class Malformed(Exception):
    """An earlier spelling typed in a form the parser would refuse, worded as argparse words it."""


@dataclass
class Rewritten:
    """A command line in current spellings: `argv` for the parser; `typed`, the spelling each
    renamed flag was typed in, by its current name; and the precision spellings typed, in order,
    which settle() turns into --modes once the parser has read the rest."""
    argv: List[str]
    typed: Dict[str, str] = field(default_factory=dict)
    precision: List[str] = field(default_factory=list)
    at: int = 0  # where in `argv` the first precision spelling stood
    mode: Optional[str] = None

    def settle(self, namespace: argparse.Namespace) -> None:
        """Put the precision spellings' mode into the parsed `namespace` as --modes (refused beside
        --modes or --compare, which name the modes themselves), with the spelling typed in
        `namespace.spelled` and the warnings for an -s without effect in `namespace.warnings`."""
        namespace.warnings = []
        if not self.precision:
            return
        typed = " ".join(self.precision)
        self.mode, namespace.warnings = mode_of(self.precision)
        if namespace.modes is not None:
            raise UserError(f"{typed} and --modes {namespace.modes} both name the precision mode ({typed} is "
                            f"--modes {self.mode} in its earlier spelling); give the modes once, with --modes.")
        if namespace.compare:
            raise UserError(f"--compare runs the modes listed in --modes; drop {typed} and name the modes "
                            "instead, e.g. --modes fp32,amp-fp16,amp-bf16.")
        namespace.modes = self.mode
        namespace.spelled = {**getattr(namespace, "spelled", {}), "modes": typed}

    def current(self) -> List[str]:
        """The command line in current spellings, the precision ones as --modes where the first of
        them stood: what a command repeated for the user (a resume line) says."""
        if self.mode is None:
            return list(self.argv)
        return self.argv[:self.at] + [PRECISION, self.mode] + self.argv[self.at:]


def rewrite(argv: Sequence[str]) -> Rewritten:
    """`argv` in current spellings: renamed flags renamed (--warmup=5 too), switches of a default
    dropped, the precision spellings taken out for settle(); the words after `--` left alone.
    Raises Malformed where argparse would refuse the form an earlier spelling was typed in, and
    UserError where a setting is given in both its spellings."""
    command, words, index = Rewritten([]), list(argv), 0
    while index < len(words):
        word = words[index]
        index += 1
        flag, equals, value = word.partition("=") if word.startswith("--") else (word, "", "")
        if word == "--":
            command.argv += words[index - 1:]
            break
        if flag in RENAMED:
            if given(RENAMED[flag], words[:index - 1]) or given(RENAMED[flag], words[index:]):
                raise UserError(f"{flag} and {RENAMED[flag]} are one setting ({flag} is its earlier spelling), given "
                                f"twice; give it once, as {RENAMED[flag]}.")
            command.typed[RENAMED[flag]] = flag
            command.argv.append(RENAMED[flag] + equals + value)
            continue
        if flag not in PRECISION_WORDS and flag not in DEFAULTS:
            command.argv.append(word)
            continue
        if flag == "--amp-dtype":
            flag, index = amp_dtype(value if equals else None, words, index)
        elif equals:
            raise Malformed(f"argument {flag}: ignored explicit argument '{value}'")
        if flag not in DEFAULTS:
            command.at = command.at if command.precision else len(command.argv)
            command.precision.append(flag)
    return command


def given(flag: str, words: Sequence[str]) -> bool:
    """Whether `flag` is among `words` (as itself or --flag=value) before any `--`."""
    before = list(words)[:list(words).index("--")] if "--" in words else words
    return any(word == flag or word.startswith(flag + "=") for word in before)


def amp_dtype(given: Optional[str], words: List[str], index: int) -> Tuple[str, int]:
    """"--amp-dtype DTYPE" as typed (`given` after its `=`, else the word at `index`), read as
    argparse reads a choice; and the index of the word after it."""
    if given is None:
        if index >= len(words) or words[index].startswith("-"):
            raise Malformed("argument --amp-dtype: expected one argument")
        given, index = words[index], index + 1
    if given not in AMP_DTYPES:
        raise Malformed(f"argument --amp-dtype: invalid choice: '{given}' (choose from "
                        f"{', '.join(repr(dtype) for dtype in AMP_DTYPES)})")
    return f"--amp-dtype {given}", index


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
