"""advice.json: the advice as a versioned document, checked like a results file before anyone
reads it (utils/results/validate.py's specs), and its status, each with its own exit status.

{"schema", "status", "exit_code", "recommendation" {mode, decision, tied, runner_up, settings,
batch, command, environment, frameworks, nsys} or null (no advice yet), "lean" (the mode the
figures lead with), "unsteady" [why the timings cannot be ranked], "measure_again" {where: line}
or null, "claims" [{text, evidence}],
"cut_short" {phase: what stopped it before its last step}, "traces" {mode: the comparison's
profiler trace, relative to advice.json}, "evidence" [{id, kind, what, value, interval, n,
rests_on, source}], "rejected" [{mode, why, evidence}], "not_run" {phase: {why, estimate_s}},
"accuracy_check" {seeds, estimate_s, lines} or null, "results" (the results file the evidence
cites, relative to advice.json), "budget" {minutes, spent_s} or null (--from spends none),
"preflight" (what the device runs, the model's size, the FP8 predictions) or null, "plan" [the
phases as planned before the first ran]}. docs/advice.md describes every field.
"""
from __future__ import annotations

import os
from typing import Any, Callable, Dict, List, Optional, Sequence

from utils.advice.evidence import KINDS
from utils.advice.figures import unsupported
from utils.errors import UserError
from utils.fileio import atomic_write_all
from utils.modes import MODES
from utils.results import files, validate
from utils.results.merge import parsed
from utils.results.validate import ANY, FLAG, TEXT, Fields, Kind, ListOf, MapOf, Nullable, Number, OneOf

SCHEMA = "ampbench.advice/2"
EARLIER = "ampbench.advice/1"  # /2 without lean, unsteady and measure_again: every /1 advice advised
# A status says what the advice rests on, and is the exit status of --advise (0: complete).
STATUSES = {
    "complete": 0,  # every phase ran: the comparison, the levers that apply, the accuracy check
    "partial-budget": 3,  # a phase did not fit the budget, or the deadline cut it short
    "cpu-only": 4,  # measured on a CPU: the advice is this CPU's, and a GPU's would differ
    "unsteady": 5,  # no advice yet: the timings spread too widely, or another process competed for the cores
    "too-few-runs": 6,  # no advice yet: the leading modes have too few paired repeats for an interval
    "partial-results": 7,  # --from: the results given hold no accuracy check that settles the advised mode
}
DECISIONS = ("fastest", "tie", "only")
VERDICTS = ("holds", "differs", "inconclusive")
MODE = OneOf(MODES, "a precision mode")
SECONDS = Number(low=0)
INTERVAL = Nullable(ListOf(Number()))
EVIDENCE = Fields({"id": TEXT, "kind": OneOf(KINDS, "a kind of evidence"), "what": TEXT, "value": ANY,
                   "interval": INTERVAL, "n": Nullable(Number(whole=True, low=0)), "rests_on": Nullable(TEXT),
                   "source": Kind(dict, "an object")})
DOCUMENT = Fields({
    "schema": OneOf([SCHEMA], "ampbench's advice schema"), "status": OneOf(STATUSES, "a status"),
    "exit_code": Number(whole=True, low=0),
    "recommendation": Nullable(Fields({
        "mode": MODE, "decision": OneOf(DECISIONS, "a decision"), "tied": ListOf(MODE), "runner_up": Nullable(MODE),
        "settings": MapOf(ANY), "batch": Number(whole=True, low=1), "command": ListOf(TEXT, nonempty=True)},
        {"frameworks": MapOf(TEXT), "nsys": Nullable(TEXT), "environment": MapOf(TEXT)})),  # an /1 advice lacks them
    "lean": MODE, "unsteady": ListOf(TEXT), "measure_again": Nullable(MapOf(TEXT)),
    "claims": ListOf(Fields({"text": TEXT, "evidence": ListOf(TEXT, nonempty=True)}), nonempty=True),
    "evidence": ListOf(EVIDENCE, nonempty=True),
    "rejected": ListOf(Fields({"mode": TEXT, "why": TEXT, "evidence": ListOf(TEXT)})),
    "not_run": MapOf(Fields({"why": TEXT}, {"estimate_s": Nullable(SECONDS)})), "cut_short": MapOf(TEXT),
    "traces": MapOf(TEXT),
    "accuracy_check": Nullable(Fields({"seeds": Number(whole=True, low=1), "estimate_s": Nullable(SECONDS),
                                       "lines": MapOf(TEXT)})),
    "results": TEXT,
    "budget": Nullable(Fields({"minutes": Number(above=0), "spent_s": SECONDS})),
    "preflight": Nullable(Fields({}, {"not_timed": MapOf(TEXT), "fp8": MapOf(Fields(
        {}, {"speedup": Nullable(Number(above=0)), "for": TEXT}))})),  # what --from reads of it
    "plan": ListOf(Fields({"name": TEXT, "modes": ListOf(MODE), "estimate_s": SECONDS, "runs": FLAG})),
    "accuracy_verdict": Nullable(OneOf(VERDICTS, "an accuracy verdict")), "setup": Kind(dict, "an object"),
    "arguments": Nullable(Kind(dict, "an object")), "written_utc": TEXT,
})


def cited_but_missing(advice: Dict[str, Any]) -> Optional[str]:
    """Every id a claim or a rejected mode cites is an evidence entry's, and no two entries share one."""
    ids = [entry["id"] for entry in advice["evidence"]]
    if len(set(ids)) != len(ids):
        return f"evidence lists {next(ident for ident in ids if ids.count(ident) > 1)} twice"
    for where in ("claims", "rejected"):
        for index, item in enumerate(advice[where]):
            missing = [ident for ident in item["evidence"] if ident not in ids]
            if missing:
                return f"{where}[{index}] cites {missing[0]}, which the evidence lacks"
    return None


def status_and_code(advice: Dict[str, Any]) -> Optional[str]:
    if advice["exit_code"] != STATUSES[advice["status"]]:
        return f"exit_code is {advice['exit_code']}, not status {advice['status']}'s {STATUSES[advice['status']]}"
    if (advice["recommendation"] is None) != (advice["status"] in NO_ADVICE):
        return f"status {advice['status']} " + ("advises nothing" if advice["recommendation"] is None else
                                                "gives no advice, yet a recommendation is there")
    if (advice["measure_again"] is None) != (advice["recommendation"] is not None):
        return "measure_again is there only where there is no advice yet"
    return None


def figures_in_evidence(advice: Dict[str, Any]) -> Optional[str]:
    """Every figure a sentence prints is in the evidence it cites (figures.py)."""
    found = unsupported(advice)
    return f"{found[0]}, which none of the evidence it cites holds" if found else None


def prediction_for_a_gpu(advice: Dict[str, Any]) -> Optional[str]:
    """An FP8 prediction names the GPU it is for, which the advice's sentence cites."""
    for mode, found in ((advice["preflight"] or {}).get("fp8") or {}).items():
        if found.get("speedup") is not None and "for" not in found:
            return f"preflight.fp8.{mode} predicts a speedup without saying for which GPU (its for is missing)"
    return None


RULES: List[Callable[[Dict[str, Any]], Optional[str]]] = [cited_but_missing, status_and_code, prediction_for_a_gpu,
                                                          figures_in_evidence]
NO_ADVICE = ("unsteady", "too-few-runs")


def check(advice: Dict[str, Any], rules: Sequence[Callable[[Dict[str, Any]], Optional[str]]] = ()) -> None:
    """Raise validate.Invalid naming the first field of `advice` that a reader cannot use, or the
    first of its `rules` (all of RULES unless told) it breaks."""
    DOCUMENT.check(advice, "")
    for rule in rules or RULES:
        contradiction = rule(advice)
        if contradiction:
            raise validate.Invalid(contradiction)


def status_of(advised: bool, unsteady: bool, on_cpu: bool, complete: bool, live: bool) -> str:
    """What the advice rests on, the first that holds: no advice (unsteady timings, too few runs),
    a CPU's figures, less than every phase (a live session's budget, or the results --from read)."""
    if unsteady:
        return "unsteady"
    if not advised:
        return "too-few-runs"
    if on_cpu:
        return "cpu-only"
    if complete:
        return "complete"
    return "partial-budget" if live else "partial-results"


def is_advice(content: Any) -> bool:
    return isinstance(content, dict) and str(content.get("schema", "")).startswith("ampbench.advice/")


def load(path: str) -> Dict[str, Any]:
    """An advice.json, checked (one of /1 read as /2: it advised, so it leans its advice's way);
    a user error naming the field that is wrong."""
    content = parsed(path)
    if not is_advice(content) or content.get("schema") not in (EARLIER, SCHEMA):
        raise UserError(f"{path} is not an advice file of schema {SCHEMA}; give an advice.json --advise wrote.")
    rules = RULES
    if content["schema"] == EARLIER and isinstance(content.get("recommendation"), dict):
        content = dict(content, schema=SCHEMA, lean=content["recommendation"].get("mode"), unsteady=[],
                       measure_again=None, cut_short={}, traces={})
        rules = [rule for rule in RULES if rule is not figures_in_evidence]  # /1's sentences predate the rule
    try:
        check(content, rules)
    except validate.Invalid as error:
        raise UserError(f"{path}: {error}; is it an advice.json --advise wrote?") from None
    return content


def write(path: str, advice: Dict[str, Any], report: str) -> None:
    """advice.json, checked first, and beside it report.txt (`report`, its printed report): both
    written, or neither."""
    check(advice)
    atomic_write_all([(path, lambda f: f.write(files.json_text(advice))),
                      (os.path.join(os.path.dirname(path), "report.txt"), lambda f: f.write(report.encode() + b"\n"))])
