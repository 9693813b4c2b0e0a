"""Strict JSON for result files: no NaN or Infinity, which jq, JavaScript and most databases
refuse. A non-finite number is written as null, and beside its key a key `<key>_nonfinite`
says what it was: {"": "nan"} for the value itself, {"12": "inf"} for item 12 of its list.
utils.report reads such files back with the numbers restored."""
import math

SUFFIX = "_nonfinite"


def nonfinite(value):
    return isinstance(value, float) and not math.isfinite(value)


def finite_copy(value):
    """`value` (dicts, lists, numbers, strings) with every non-finite float null and marked."""
    if isinstance(value, dict):
        copy = {}
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


def restored(value):
    """The inverse of finite_copy: the marked nulls become their numbers again."""
    if isinstance(value, list):
        return [restored(item) for item in value]
    if not isinstance(value, dict):
        return value
    copy = {key: restored(item) for key, item in value.items() if not key.endswith(SUFFIX)}
    for key, marks in value.items():
        base = key[:-len(SUFFIX)]
        if not key.endswith(SUFFIX) or base not in copy or not isinstance(marks, dict):
            continue
        for where, word in marks.items():
            number = float(word) if word in ("nan", "inf", "-inf") else None
            if where == "" and copy[base] is None:
                copy[base] = number
            elif isinstance(copy[base], list) and where.isdigit() and int(where) < len(copy[base]):
                copy[base][int(where)] = number
    return copy
