"""Every figure a sentence of the advice prints is in the evidence it cites: the numbers of a
claim's text, as printed, against its cited entries' values, intervals and counts (and the
numbers in their text), as those would print at the same precision, in the units a sentence uses (a share as
a percentage, seconds as minutes, milliseconds as seconds). "95% interval" names the level of
every interval, not a figure. No torch."""
from __future__ import annotations

import re
from typing import Any, Dict, Iterator, List

# A number as a sentence prints it: not part of a word or a name (fp32, resnet18, H100, 80GB,
# 16-bit), with its sign where one leads it; a speedup's "x" may follow it.
NUMBER = re.compile(r"(?<![\w.])[+-]?\d+(?:\.\d+)?(?![\d.]*(?:[A-Za-wyz_]|-[A-Za-z])|\.\d)")
LEVEL = "95% interval"
UNITS = (1.0, 100.0, 1 / 60, 1 / 1000)  # as it is, a share in %, seconds in minutes, milliseconds in seconds


def numbers_in(text: str) -> List[str]:
    """The numbers `text` prints, as printed ("2.03", "-0.50", "34")."""
    return [found.group() for found in NUMBER.finditer(text.replace(LEVEL, ""))]


def values_of(value: Any) -> Iterator[float]:
    """Every number an evidence value holds: itself, a list's items, the numbers of its text."""
    if isinstance(value, bool) or value is None:
        return
    if isinstance(value, (int, float)):
        yield float(value)
    elif isinstance(value, (list, tuple)):
        for item in value:
            yield from values_of(item)
    elif isinstance(value, str):
        yield from (float(number) for number in numbers_in(value))


def printed_as(number: str, value: float) -> bool:
    """Whether `value` prints as `number` at its precision, in one of UNITS."""
    decimals = len(number.split(".")[1]) if "." in number else 0
    target = float(number)
    return any(abs(round(value * unit, decimals) - target) < 10 ** -(decimals + 3) or
               f"{value * unit:.{decimals}f}" == f"{target:.{decimals}f}" for unit in UNITS)


def unsupported(advice: Dict[str, Any]) -> List[str]:
    """Each number of a claim that none of its cited entries holds, as "claims[N]: 1.23"."""
    entries = {entry["id"]: entry for entry in advice["evidence"]}
    found = []
    for index, claim in enumerate(advice["claims"]):
        cited = [value for ident in claim["evidence"] if ident in entries
                 for key in ("value", "interval", "n") for value in values_of(entries[ident][key])]
        found += [f"claims[{index}] prints {number}" for number in numbers_in(claim["text"])
                  if not any(printed_as(number.lstrip("+"), value) for value in cited)]
    return found
