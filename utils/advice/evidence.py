"""The evidence an advice rests on: every figure a sentence cites, with an id (E1, E2, ...), its
kind (measured, predicted, not run, rule, derived), value, interval, count and the field it comes
from; and the way back from that field to the saved results, which advice.json's readers (and the
tests) take. A sentence prints no figure that its cited entries do not hold (figures.py).

A source is one of:
  {"file", "baseline", "document", "field"}  a field of the results file's documents as
      `python -m utils.report FILE --baseline BASELINE` compares them (merge.merge), the document's
      index in that merge, and the path of keys and indices inside it;
  {"ratio_of": [source, source]}  a figure that is one field over another (a lever's speedup:
      the comparison's median step over the lever run's);
  {"advice": path}  a field of advice.json itself: what the preflight predicted or the plan
      estimated, which no results file holds;
  {"rule": name}  a threshold the code decides by (RULES), which a sentence names beside a figure;
  {"busy_runs": {"file", "baseline", "document"}}  how many of a document's runs were timed while
      another process competed for the cores (compare.busy_host);
  {"derived": formula, "of": [ids]}  a figure computed from other entries by one of FORMULAS.
No torch.
"""
from __future__ import annotations

import dataclasses
import math
import os
from typing import Any, Callable, Dict, List, Optional, Sequence, Union

from utils.explain.diagnose import GPU_BOUND_SHARE
from utils.measure.feed import KEEPS_UP
from utils.results.compare import MIN_RUNS, SPREAD_WARNING_PCT, busy_host, ratios_spread_pct
from utils.results.merge import load_result, merge

KINDS = ("measured", "predicted", "not run", "rule", "derived")
Path = List[Union[str, int]]
# The thresholds a sentence names, by the name its evidence source gives; each is the code's own.
RULES = {
    "spread": SPREAD_WARNING_PCT,  # % of the median: runs or steps that spread wider are unsteady
    "min_runs": MIN_RUNS,  # runs (or paired repeats) a mode an interval over runs needs
    "busy": 90.0,  # % of a step the GPU runs kernels, under which the host side's levers are worth naming
    "host_bound": GPU_BOUND_SHARE,  # a step whose GPU runs kernels under this share of it is host-bound
    "keeps_up": KEEPS_UP,  # a loader delivering under this share of what the step alone takes bounds the run
    "no_change": 1.0,  # the speedup of no change: an interval that holds it shows neither faster nor slower
}


def payback_steps(compile_s: float, first_s: float, step_ms: float, speedup: float) -> Optional[int]:
    """After how many steps compiling pays for itself: the first compiled step's extra over the
    uncompiled first step, over the time each compiled step saves; None when it never does."""
    saved_s = step_ms / 1000 * (1 - 1 / speedup)
    return math.ceil(max(compile_s - first_s, 0.0) / saved_s) if saved_s > 0 else None


FORMULAS: Dict[str, Callable[..., Any]] = {"difference": lambda first, second: first - second,
                                           "payback_steps": payback_steps, "spread_pct": ratios_spread_pct}


class Ledger:
    """The evidence table as it is built: an entry per figure, its id in the order first cited;
    a figure cited again keeps its id."""

    def __init__(self) -> None:
        self.entries: List[Dict[str, Any]] = []

    def add(self, what: str, value: Any, source: Dict[str, Any], kind: str = "measured",
            interval: Optional[Sequence[float]] = None, n: Optional[int] = None,
            rests_on: Optional[str] = None) -> str:
        """The id of the entry for `what` (added if new): `value` from `source`."""
        for entry in self.entries:
            if entry["what"] == what and entry["source"] == source:
                return entry["id"]
        identifier = f"E{len(self.entries) + 1}"
        self.entries.append({"id": identifier, "kind": kind, "what": what, "value": value,
                             "interval": list(interval) if interval is not None else None, "n": n,
                             "rests_on": rests_on, "source": source})
        return identifier


def value_at(holder: Any, path: Path) -> Any:
    """The value at `path` inside dicts, lists and comparison rows (dataclasses); KeyError when a
    step of it is missing."""
    for key in path:
        if dataclasses.is_dataclass(holder) and isinstance(key, str):
            if not hasattr(holder, key):
                raise KeyError(key)
            holder = getattr(holder, key)
        elif isinstance(holder, dict) and isinstance(key, str) and key in holder:
            holder = holder[key]
        elif isinstance(holder, list) and isinstance(key, int) and -len(holder) <= key < len(holder):
            holder = holder[key]
        else:
            raise KeyError(key)
    return holder


Views = Callable[[str, str], List[Dict[str, Any]]]  # (results file, baseline) -> its documents so compared


def compared(documents: List[Dict[str, Any]], baseline: str) -> List[Dict[str, Any]]:
    """`documents` merged by setup and compared against `baseline`, as utils.report does; where
    no run is of that mode (fp32 never ran), against the baseline the files share."""
    ran = {run["mode"] for document in documents for run in document["runs"]}
    return merge(documents, baseline if baseline in ran else None)


def reader(folder: str) -> Views:
    """Views of the results files a source names, relative to `folder`, each read and merged once."""
    read: Dict[Any, List[Dict[str, Any]]] = {}

    def view(path: str, baseline: str) -> List[Dict[str, Any]]:
        if (path, baseline) not in read:
            documents = read.setdefault((path, None), load_result(os.path.join(folder, path)))
            read[(path, baseline)] = compared(documents, baseline)
        return read[(path, baseline)]

    return view


def resolved(source: Dict[str, Any], views: Views, advice: Dict[str, Any]) -> Any:
    """The value `source` names: a field of the results, one over another, advice.json's own, a
    rule's, a count of busy runs, or a formula of other entries."""
    if "ratio_of" in source:
        top, bottom = (resolved(part, views, advice) for part in source["ratio_of"])
        return top / bottom
    if "advice" in source:
        return value_at(advice, source["advice"])
    if "rule" in source:
        return RULES[source["rule"]]
    if "busy_runs" in source:
        where = source["busy_runs"]
        return sum(map(busy_host, views(where["file"], where["baseline"])[where["document"]]["runs"]))
    if "derived" in source:
        entries = {entry["id"]: entry for entry in advice["evidence"]}
        return FORMULAS[source["derived"]](*(resolved(entries[ident]["source"], views, advice)
                                             for ident in source["of"]))
    return value_at(views(source["file"], source["baseline"])[source["document"]], source["field"])


def same(found: Any, value: Any) -> bool:
    if isinstance(found, (int, float)) and isinstance(value, (int, float)) and not isinstance(found, bool):
        return math.isclose(found, value, rel_tol=1e-9, abs_tol=1e-12)
    return bool(found == value)


def unresolved(advice: Dict[str, Any], views: Views) -> List[str]:
    """The evidence entries of `advice` whose source names no field of the saved results (or of
    advice.json), or a field that holds another value, as sentences; empty when all resolve."""
    found = []
    for entry in advice["evidence"]:
        try:
            value = resolved(entry["source"], views, advice)
        except (KeyError, IndexError, TypeError, ZeroDivisionError, ValueError) as error:
            found.append(f"{entry['id']} ({entry['what']}): its source has no field {error}")
            continue
        if not same(value, entry["value"]):
            found.append(f"{entry['id']} ({entry['what']}) says {entry['value']!r}, its source holds {value!r}")
    return found
