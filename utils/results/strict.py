"""Strict JSON for result files: no NaN or Infinity, which jq, JavaScript and most databases
refuse. A non-finite number is written as null, and beside its key a key `<key>_nonfinite`
says what it was: {"": "nan"} for the value itself, {"12": "inf"} for item 12 of its list.
utils.report reads such files back with the numbers restored."""
from __future__ import annotations

import json
import math
from typing import Any, Dict

SUFFIX = "_nonfinite"


def nonfinite(value: Any) -> bool:
    return isinstance(value, float) and not math.isfinite(value)


def finite_copy(value: Any) -> Any:
    """`value` (dicts, lists, numbers, strings) with every non-finite float null and marked."""
    if isinstance(value, dict):
        copy: Dict[str, Any] = {}
        for key, item in value.items():
            if nonfinite(item):
                copy[key], copy[key + SUFFIX] = None, {"": repr(item)}
            elif isinstance(item, list) and any(nonfinite(element) for element in item):
                copy[key] = [None if nonfinite(element) else finite_copy(element) for element in item]
                copy[key + SUFFIX] = {str(index): repr(element) for index, element in enumerate(item)
                                      if nonfinite(element)}
            else:
                copy[key] = finite_copy(item)
        return copy
    if isinstance(value, list):
        return [finite_copy(item) for item in value]
    return value


WORDS = ("nan", "inf", "-inf")


class Conflict(ValueError):
    """A mark that cannot be read back: beside a number, or not one of WORDS."""


def restored(value: Any, where: str = "") -> Any:
    """The inverse of finite_copy: the marked nulls become their numbers again. A mark beside a
    number (which is the value?) or of another word raises Conflict naming the field."""
    if isinstance(value, list):
        return [restored(item, f"{where}[{index}]") for index, item in enumerate(value)]
    if not isinstance(value, dict):
        return value

    def inside(key: str) -> str:
        return f"{where}.{key}" if where else key

    copy = {key: restored(item, inside(key)) for key, item in value.items() if not key.endswith(SUFFIX)}
    for key, marks in value.items():
        base = key[:-len(SUFFIX)]
        if not key.endswith(SUFFIX) or base not in copy:
            continue
        if not isinstance(marks, dict):
            raise Conflict(f"{inside(key)} is {json.dumps(marks)[:40]}, not an object")
        for index, word in marks.items():
            if word not in WORDS:
                raise Conflict(f'{inside(key)} is {json.dumps(word)[:40]}, not "nan", "inf" or "-inf"')
            field = inside(base) + (f"[{index}]" if index else "")
            if index == "" and copy[base] is None:
                copy[base] = float(word)
            elif isinstance(copy[base], list) and index.isdigit() and int(index) < len(copy[base]):
                if copy[base][int(index)] is not None:
                    raise Conflict(f"{field} holds a number and a {key} mark")
                copy[base][int(index)] = float(word)
            elif index == "":
                raise Conflict(f"{field} holds a number and a {key} mark")
    return copy
