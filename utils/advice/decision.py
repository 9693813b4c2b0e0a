"""The advice as it is decided: the results merged and compared against each baseline a sentence
needs (Views, as `python -m utils.report FILE --baseline B` compares them), the evidence ledger and
the sentences so far (Decision), and what the session knew beyond the results (Context). No torch.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Dict, List, NamedTuple, Optional, Sequence, Tuple

from utils.advice.evidence import RULES, Ledger, compared, value_at
from utils.modes import BASELINES
from utils.results.compare import group_by_mode

Group = List[Dict[str, Any]]


class Cited(NamedTuple):
    """A figure as a sentence cites it: its evidence ids, value, interval and the words that say
    what the interval is (or why there is none)."""
    ids: List[str]
    value: float
    interval: Optional[List[float]]
    words: str


@dataclass
class Context:
    """What the session knew beyond the results: the results file the evidence cites, the modes
    not timed and why, the preflight's FP8 predictions and the phases not run (both in
    advice.json, where the evidence finds them), the accuracy check's plan, and whether the
    results come from a live session (which ran every phase it could) or were given to --from."""
    results: str  # the results file as the evidence cites it (relative to advice.json)
    not_timed: Dict[str, str] = field(default_factory=dict)
    predictions: Dict[str, Dict[str, Any]] = field(default_factory=dict)  # fp8 mode: fp8_predict's figures
    not_run: Dict[str, Dict[str, Any]] = field(default_factory=dict)  # phase: {"why", "estimate_s"}
    accuracy_check: Optional[Dict[str, Any]] = None  # {"seeds", "estimate_s", "lines"}
    live: bool = False
    cut_short: Dict[str, str] = field(default_factory=dict)  # phase: what stopped it before its last step
    traces: Dict[str, str] = field(default_factory=dict)  # mode: its profiler trace, relative to advice.json


class Views:
    """The documents merged and compared against each baseline asked for, once each: what
    `python -m utils.report FILE --baseline B` prints, and what each evidence source names."""

    def __init__(self, documents: List[Dict[str, Any]], results: str) -> None:
        self.documents, self.results = documents, results
        self.merged: Dict[str, List[Dict[str, Any]]] = {}
        self.ran = {run["mode"] for document in documents for run in document["runs"]}
        self.base = BASELINES["default"] if BASELINES["default"] in self.ran else documents[0]["config"]["baseline"]

    def __call__(self, baseline: Optional[str] = None) -> List[Dict[str, Any]]:
        baseline = baseline or self.base
        if baseline not in self.merged:
            self.merged[baseline] = compared(self.documents, baseline)
        return self.merged[baseline]

    def source(self, index: int, *path: Any, baseline: Optional[str] = None) -> Dict[str, Any]:
        return {"file": self.results, "baseline": baseline or self.base, "document": index, "field": list(path)}


def holds_one(interval: Optional[Sequence[float]]) -> bool:
    return interval is None or interval[0] <= RULES["no_change"] <= interval[1]


def span(interval: Optional[Sequence[float]]) -> str:
    return f"{interval[0]:.2f}-{interval[1]:.2f}" if interval else "no interval"


def listing(names: Sequence[str]) -> str:
    """"a", "a and b", "a, b and c"."""
    return " and ".join([", ".join(names[:-1]), names[-1]] if len(names) > 1 else list(names))


def is_accuracy_document(document: Dict[str, Any]) -> bool:
    """Its modes ran over several seeds and were evaluated: it answers whether accuracy holds."""
    return any(row.accuracy_verdict is not None and row.seeds > 1 for row in document["comparison"].values())


def primary_index(documents: List[Dict[str, Any]]) -> int:
    """The comparison: the document of the most modes, a speed comparison before an accuracy
    check, then the most runs."""
    def rank(index: int) -> Tuple[int, bool, int]:
        document = documents[index]
        return len(group_by_mode(document["runs"])), not is_accuracy_document(document), len(document["runs"])

    return max(range(len(documents)), key=rank)


def accuracy_index(documents: List[Dict[str, Any]]) -> Optional[int]:
    """The document whose accuracy verdicts rest on the most seeds, or None."""
    checks = [index for index, document in enumerate(documents) if is_accuracy_document(document)]
    return max(checks, key=lambda index: max(row.seeds for row in documents[index]["comparison"].values()),
               default=None)


class Decision:
    """One advice as it is decided: the views, the evidence ledger, the sentences."""

    def __init__(self, documents: List[Dict[str, Any]], context: Context) -> None:
        self.views, self.context, self.ledger = Views(documents, context.results), context, Ledger()
        merged = self.views()
        self.primary = primary_index(merged)
        self.accuracy = accuracy_index(merged)
        self.document = merged[self.primary]
        self.groups = group_by_mode(self.document["runs"])
        self.rows = self.document["comparison"]
        self.claims: List[Dict[str, Any]] = []
        self.rejected: List[Dict[str, Any]] = []

    def say(self, text: str, *ids: str) -> None:
        self.claims.append({"text": text, "evidence": list(dict.fromkeys(ids))})

    def field(self, what: str, mode: str, *path: Any, baseline: Optional[str] = None,
              interval: Optional[Sequence[float]] = None, rests_on: Optional[str] = None,
              n: Optional[int] = None) -> str:
        """The id of the comparison's figure at `path` in `mode`'s row (against `baseline`), which
        rests on `n` samples (the mode's runs unless told)."""
        view = self.views(baseline)[self.primary]
        return self.ledger.add(what, value_at(view["comparison"][mode], list(path)),
                               self.views.source(self.primary, "comparison", mode, *path, baseline=baseline),
                               interval=interval, n=len(self.groups[mode]) if n is None else n, rests_on=rests_on)

    def run_field(self, what: str, index: int, *path: Any, document: Optional[int] = None) -> str:
        """The id of the figure at `path` in run `index` of a document (the comparison's unless told)."""
        document = self.primary if document is None else document
        return self.ledger.add(what, value_at(self.views()[document]["runs"][index], list(path)),
                               self.views.source(document, "runs", index, *path))

    def rule(self, what: str, name: str) -> str:
        """The id of a threshold the code decides by (evidence.RULES), which a sentence names."""
        from utils.advice.evidence import RULES

        return self.ledger.add(what, RULES[name], {"rule": name}, kind="rule")

    def no_change(self) -> str:
        """The id of the 1 a sentence says an interval holds (or lies clear of)."""
        return self.rule("the speedup of no change, which an interval that holds it shows neither faster nor slower",
                         "no_change")

    def row(self, mode: str, baseline: str) -> Any:
        """`mode`'s comparison row against `baseline` (a ComparisonRow)."""
        return self.views(baseline)[self.primary]["comparison"][mode]

    def speedup(self, mode: str, baseline: str) -> Cited:
        """`mode`'s speedup over `baseline`, cited: with its interval, or, without one, each paired
        repeat's ratio where those are what it rests on."""
        row = self.row(mode, baseline)
        pairs = len(row.repeat_speedups or [])  # what a paired speedup rests on, else the runs
        ids = [self.field(f"{mode}'s speedup over {baseline}", mode, "speedup_vs_baseline", baseline=baseline,
                          interval=row.speedup_ci95, rests_on=row.speedup_interval, n=pairs or None)]
        if row.speedup_ci95 is not None:
            words = f"95% interval {span(row.speedup_ci95)}"
        elif row.repeat_speedups and len(row.repeat_speedups) > 1:
            ident, ratios = self.per_repeat(mode, baseline)
            ids.append(ident)
            words = "no interval; each paired repeat " + ", ".join(f"{ratio:.2f}x" for ratio in ratios)
        else:
            words = "no interval"
        return Cited(ids, row.speedup_vs_baseline, row.speedup_ci95, words)

    def per_repeat(self, mode: str, baseline: str) -> Tuple[str, List[float]]:
        """(evidence id, ratios) of `mode`'s speedup over `baseline` in each paired repeat."""
        ratios = self.row(mode, baseline).repeat_speedups or []
        return self.field(f"{mode}'s speedup over {baseline}, each paired repeat", mode, "repeat_speedups",
                          baseline=baseline, n=len(ratios)), ratios

    def verdict(self, mode: str) -> Optional[Any]:
        if self.accuracy is None or mode not in self.views(BASELINES["default"])[self.accuracy]["comparison"]:
            return None
        return self.views(BASELINES["default"])[self.accuracy]["comparison"][mode]
