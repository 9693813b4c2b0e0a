"""The decider of --advise: from results documents to the advice, a plain function of what the
files hold (and of what the session knew beyond them: Context), no torch, so that the advice for
any results file (results/ of every GPU) is given and tested without a GPU.

The documents are merged by setup and compared against fp32 as utils.report does (merge.merge).
The comparison is the document of the most modes; another that differs from it in one speed
lever alone (channels_last, the optimizer's implementation, compile or its CUDA-graphs mode) is
that lever's trial; one whose modes ran over several seeds and were evaluated holds the accuracy
verdicts. Of the modes that may be advised (never one whose accuracy verdict "differs", one that
did not learn or diverged, emulated FP8, or float16 without loss scaling), the advice names the
fastest when its speedup over the runner-up has a 95% interval above 1; otherwise the modes whose
interval against the fastest holds 1 tie, and the advice names the one that changes the numbers
least (SAFETY). A lever is kept only when its interval lies above 1.

An interval is compare.speedup_interval's: over the runs' medians with MIN_RUNS runs a mode, over
the timed steps of one run each; with two runs each, the hull of each repeat's interval (each
repeat ran both modes back to back), which says so.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional, Sequence, Tuple

from utils.advice import commands
from utils.advice.evidence import Ledger, compared, value_at
from utils.advice.plan import SEEDS
from utils.errors import UserError
from utils.explain.diagnose import GPU_BOUND_SHARE, speedup_text
from utils.modes import BASELINES
from utils.results.compare import MIN_RUNS, group_by_mode, speedup_interval
from utils.results.record import setup_of

# The modes by how much they change the numbers, least first: a tie goes to the earliest.
SAFETY = ("fp32", "tf32", "amp-bf16", "amp-fp16", "fp16-master", "fp8", "fp8-rowwise")
NEVER = {"amp-fp16-noscale": "float16 without loss scaling: small gradients underflow to zero"}
LEVER_KEYS = ("channels_last", "optimizer_impl", "compile", "compile_mode")
Group = List[Dict[str, Any]]


@dataclass
class Context:
    """What the session knew beyond the results: the results file the evidence cites, the modes
    not timed and why, the preflight's FP8 predictions and the phases not run (both in
    advice.json, where the evidence finds them), and the accuracy check's plan."""
    results: str  # the results file as the evidence cites it (relative to advice.json)
    not_timed: Dict[str, str] = field(default_factory=dict)
    predictions: Dict[str, Dict[str, Any]] = field(default_factory=dict)  # fp8 mode: fp8_predict's figures
    not_run: Dict[str, Dict[str, Any]] = field(default_factory=dict)  # phase: {"why", "estimate_s"}
    accuracy_check: Optional[Dict[str, Any]] = None  # {"seeds", "estimate_s", "lines"}


class Views:
    """The documents merged and compared against each baseline asked for, once each: what
    `python -m utils.report FILE --baseline B` prints, and what each evidence source names."""

    def __init__(self, documents: List[Dict[str, Any]], results: str) -> None:
        self.documents, self.results = documents, results
        self.merged: Dict[str, List[Dict[str, Any]]] = {}
        ran = {run["mode"] for document in documents for run in document["runs"]}
        self.base = BASELINES["default"] if BASELINES["default"] in ran else documents[0]["config"]["baseline"]
        self.ran = ran

    def __call__(self, baseline: Optional[str] = None) -> List[Dict[str, Any]]:
        baseline = baseline or self.base
        if baseline not in self.merged:
            self.merged[baseline] = compared(self.documents, baseline)
        return self.merged[baseline]

    def source(self, index: int, *path: Any, baseline: Optional[str] = None) -> Dict[str, Any]:
        return {"file": self.results, "baseline": baseline or self.base, "document": index, "field": list(path)}


def interval_between(base: Group, group: Group) -> Tuple[Optional[List[float]], str]:
    """The 95% interval of `group`'s speedup over `base` and what it rests on (module docstring)."""
    interval, rests_on = speedup_interval(base, group)
    if interval is not None or not 1 < len(base) == len(group) < MIN_RUNS:
        return interval, rests_on
    pairs = [speedup_interval([one], [other])[0] for one, other in zip(by_repeat(base), by_repeat(group))]
    hull = [min(pair[0] for pair in pairs if pair), max(pair[1] for pair in pairs if pair)]
    return hull, (f"the hull of the {len(pairs)} repeats' intervals, each a block bootstrap over one run's timed "
                  f"steps (an interval over runs needs {MIN_RUNS} runs a mode)")


def by_repeat(group: Group) -> Group:
    return sorted(group, key=lambda run: (run.get("seed") or 0, run.get("repeat") or 0))


def holds_one(interval: Optional[Sequence[float]]) -> bool:
    return interval is None or interval[0] <= 1.0 <= interval[1]


def span(interval: Optional[Sequence[float]]) -> str:
    return f"{interval[0]:.2f}-{interval[1]:.2f}" if interval else "no interval"


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


def lever_of(base: Dict[str, Any], other: Dict[str, Any]) -> Optional[str]:
    """The speed lever that two setups (record.setup_of) differ in, alone, or None."""
    differing = {key for key in set(base) | set(other) if base.get(key) != other.get(key)}
    if not differing or not differing <= set(LEVER_KEYS):
        return None
    for lever in commands.LEVERS:
        keys = {"compile", "compile_mode"} if "compile" in commands.LEVERS[lever][0] else \
            set(commands.LEVERS[lever][0])
        if differing <= keys and commands.is_on(lever, base) != commands.is_on(lever, other):
            return lever
    return None


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
              interval: Optional[Sequence[float]] = None, rests_on: Optional[str] = None) -> str:
        """The id of the comparison's figure at `path` in `mode`'s row (against `baseline`)."""
        view = self.views(baseline)[self.primary]
        return self.ledger.add(what, value_at(view["comparison"][mode], list(path)),
                               self.views.source(self.primary, "comparison", mode, *path, baseline=baseline),
                               interval=interval, n=len(self.groups[mode]), rests_on=rests_on)

    def speedup(self, mode: str, baseline: str) -> Tuple[str, float, Optional[List[float]]]:
        """(evidence id, value, interval) of `mode`'s speedup over `baseline`."""
        interval, rests_on = interval_between(self.groups[baseline], self.groups[mode])
        value = self.views(baseline)[self.primary]["comparison"][mode].speedup_vs_baseline
        return (self.field(f"{mode}'s speedup over {baseline}", mode, "speedup_vs_baseline", baseline=baseline,
                           interval=interval, rests_on=rests_on), value, interval)

    def verdict(self, mode: str) -> Optional[Any]:
        if self.accuracy is None or mode not in self.views(BASELINES["default"])[self.accuracy]["comparison"]:
            return None
        return self.views(BASELINES["default"])[self.accuracy]["comparison"][mode]


def excluded(decision: Decision, mode: str) -> Optional[Tuple[str, str]]:
    """(why `mode` may not be advised, the id of its evidence), or None when it may be."""
    runs, row = decision.groups[mode], decision.rows[mode]
    if mode in NEVER:
        return NEVER[mode], decision.field(f"{mode}'s median step", mode, "median_step_ms")
    emulated = next((index for index, run in enumerate(decision.document["runs"])
                     if run["mode"] == mode and (run.get("fp8") or {}).get("emulated")), None)
    if emulated is not None:
        return "its FP8 was emulated in software, which is not FP8's speed", decision.ledger.add(
            f"{mode} emulated FP8", True, decision.views.source(decision.primary, "runs", emulated, "fp8", "emulated"))
    if any(run["final_loss"] is not None and not math.isfinite(run["final_loss"]) for run in runs):
        return "its loss diverged", decision.field(f"{mode}'s final loss", mode, "final_loss")
    reference = decision.rows.get(BASELINES["reference"])
    if row.learned is False and reference is not None and reference.learned:  # not a run too short for anyone
        return "it did not learn, where fp32 did", decision.field(f"whether {mode} learned", mode, "learned")
    checked = decision.verdict(mode)
    if checked is not None and checked.accuracy_verdict == "differs":
        return (f"its accuracy differs from fp32's by {100 * checked.accuracy_mean_delta:+.2f} points over "
                f"{checked.seeds} seeds", accuracy_evidence(decision, mode))
    return None


def accuracy_evidence(decision: Decision, mode: str) -> str:
    checked = decision.verdict(mode)
    assert checked is not None and decision.accuracy is not None  # asked only where a verdict exists
    return decision.ledger.add(
        f"{mode}'s accuracy difference from fp32 (verdict {checked.accuracy_verdict})", checked.accuracy_mean_delta,
        decision.views.source(decision.accuracy, "comparison", mode, "accuracy_mean_delta",
                              baseline=BASELINES["default"]),
        interval=checked.accuracy_delta_ci95, n=checked.seeds, rests_on="paired seeds, Student's t")


def choose(decision: Decision, eligible: List[str]) -> Dict[str, Any]:
    """The fastest of `eligible` when its interval over the runner-up lies above 1, else the
    safest of the modes that tie with it."""
    ranked = sorted(eligible, key=lambda mode: decision.rows[mode].median_step_ms)
    fastest = ranked[0]
    if len(ranked) == 1:
        return {"mode": fastest, "decision": "only", "tied": [fastest], "runner_up": None}
    runner_up = ranked[1]
    interval, _ = interval_between(decision.groups[runner_up], decision.groups[fastest])
    if not holds_one(interval):
        return {"mode": fastest, "decision": "fastest", "tied": [fastest], "runner_up": runner_up}
    tied = [fastest] + [mode for mode in ranked[1:]
                        if holds_one(interval_between(decision.groups[mode], decision.groups[fastest])[0])]
    safest = min(tied, key=lambda mode: SAFETY.index(mode) if mode in SAFETY else len(SAFETY))
    return {"mode": safest, "decision": "tie", "tied": tied, "runner_up": runner_up}


def advice_claim(decision: Decision, choice: Dict[str, Any]) -> None:
    mode, fastest, runner_up = choice["mode"], choice["tied"][0], choice["runner_up"]
    base = decision.views.base
    against = []
    if mode != base and base in decision.groups:
        ident, value, interval = decision.speedup(mode, base)
        against = [ident]
        versus_base = f"{value:.2f}x {base}'s speed (95% interval {span(interval)})"
    if choice["decision"] == "only":
        decision.say(f"Train with {mode}: it is the only mode these results time that may be advised",
                     decision.field(f"{mode}'s median step", mode, "median_step_ms"))
        return
    ident, value, interval = decision.speedup(fastest, runner_up)
    rests_on = decision.ledger.entries[int(ident[1:]) - 1]["rests_on"]
    if choice["decision"] == "fastest":
        text = (f"Train with {mode}: it is the fastest here, {value:.2f}x the speed of the next fastest, {runner_up} "
                f"(95% interval {span(interval)})")
        if against and runner_up != base:
            text += f", and {versus_base}"
        decision.say(text, ident, *(against if runner_up != base else []))
        return
    shown = f"a 95% interval ({span(interval)}) that holds 1" if interval else f"no 95% interval ({rests_on})"
    text = (f"Train with {mode}: {fastest} is fastest, but its speedup over {runner_up}, {value:.2f}x, has {shown}, "
            f"so {listing(choice['tied'])} tie (none is shown slower than {fastest}), and {mode} changes the numbers "
            "least of them")
    decision.say(text + (f"; it runs at {versus_base}" if against else ""), ident, *against)


def listing(names: Sequence[str]) -> str:
    """"a", "a and b", "a, b and c"."""
    return " and ".join([", ".join(names[:-1]), names[-1]] if len(names) > 1 else list(names))


def tf32_claim(decision: Decision, mode: str) -> None:
    """Against tf32, the FP32 most GPU code runs by default (where it ran)."""
    if "tf32" not in decision.groups or mode in ("tf32", BASELINES["default"]):
        return
    ident, value, interval = decision.speedup(mode, "tf32")
    decision.say(f"Against tf32, the FP32 that most code on Ampere and newer GPUs runs by default, {mode} is "
                 f"{value:.2f}x as fast (95% interval {span(interval)})", ident)


def memory_claim(decision: Decision, mode: str) -> None:
    base = decision.views.base
    row = decision.rows[mode]
    if mode == base or row.memory_ratio_vs_baseline is None:
        return
    ids = [decision.field(f"{mode}'s peak memory over {base}'s", mode, "memory_ratio_vs_baseline",
                          interval=row.memory_ratio_ci95)]
    text = f"Its steady-state peak memory is {row.memory_ratio_vs_baseline:.2f}x {base}'s" + (
        f" (95% interval {span(row.memory_ratio_ci95)})" if row.memory_ratio_ci95 else "")
    if row.energy_ratio_vs_baseline is not None:
        ids.append(decision.field(f"{mode}'s energy per image over {base}'s", mode, "energy_ratio_vs_baseline",
                                  interval=row.energy_ratio_ci95))
        text += f", and its energy per image {row.energy_ratio_vs_baseline:.2f}x" + (
            f" ({span(row.energy_ratio_ci95)})" if row.energy_ratio_ci95 else "")
    decision.say(text, *ids)


def rejected_claim(decision: Decision, choice: Dict[str, Any], excluded_modes: Dict[str, Tuple[str, str]]) -> None:
    """One sentence on every mode not advised: slower (its speed against the base), excluded (why),
    or not timed (why, a prediction cited where there is one)."""
    parts, ids = [], []
    base = decision.views.base
    for mode in sorted(decision.groups, key=lambda name: decision.rows[name].median_step_ms):
        if mode == choice["mode"] or mode == base:
            continue
        if mode in excluded_modes:
            why, ident = excluded_modes[mode]
        elif base in decision.groups:
            ident, value, interval = decision.speedup(mode, base)
            why = f"{value:.2f}x {base}'s speed ({span(interval)})" + (", tied" if mode in choice["tied"] else "")
        else:
            why, ident = "slower", decision.field(f"{mode}'s median step", mode, "median_step_ms")
        parts.append(f"{mode}, {why}")
        ids.append(ident)
        decision.rejected.append({"mode": mode, "why": why, "evidence": [ident]})
    for mode, why in decision.context.not_timed.items():
        ident = not_timed_evidence(decision, mode, why)
        parts.append(f"{mode}, not timed: {why}")
        ids.append(ident)
        decision.rejected.append({"mode": mode, "why": f"not timed: {why}", "evidence": [ident]})
    if parts:
        decision.say("Not advised: " + "; ".join(parts), *ids)


def not_timed_evidence(decision: Decision, mode: str, why: str) -> str:
    prediction = decision.context.predictions.get(mode)
    if prediction is not None:
        return decision.ledger.add(f"{mode}'s predicted speedup over {BASELINES['fp8']} ({prediction['for']})",
                                   prediction["speedup"], {"advice": ["preflight", "fp8", mode, "speedup"]},
                                   kind="predicted", rests_on="utils/explain/fp8_predict.py's roofline")
    return decision.ledger.add(f"why {mode} was not timed", why, {"advice": ["preflight", "not_timed", mode]},
                               kind="not run")


def lever_claims(decision: Decision, mode: str) -> Dict[str, Any]:
    """A sentence on every lever tried on `mode` (one at a time, each against the comparison's
    runs of the same mode); returns the settings of Arguments the advice changes."""
    settings: Dict[str, Any] = {}
    parts, ids = [], []
    base_setup = setup_of(decision.document)
    for index, document in enumerate(decision.views()):
        lever = lever_of(base_setup, setup_of(document)) if index != decision.primary else None
        runs = group_by_mode(document["runs"]).get(mode)
        if lever is None or not runs:
            continue
        part, found, flip = lever_result(decision, lever, index, runs)
        parts.append(part)
        ids += found
        settings.update(flip)
    if parts:
        decision.say(f"Speed levers on {mode}, one at a time against its runs above: " + "; ".join(parts), *ids)
    return settings


def lever_result(decision: Decision, lever: str, index: int, runs: Group) -> Tuple[str, List[str], Dict[str, Any]]:
    """(the words, the evidence ids, the settings the advice takes) of one lever's trial."""
    mode = runs[0]["mode"]
    tried_on = commands.is_on(lever, setup_of(decision.views()[index]))
    on, off = (runs, decision.groups[mode]) if tried_on else (decision.groups[mode], runs)
    interval, rests_on = interval_between(off, on)
    on_index, off_index = (index, decision.primary) if tried_on else (decision.primary, index)
    median = ["comparison", mode, "median_step_ms"]
    source = {"ratio_of": [decision.views.source(off_index, *median), decision.views.source(on_index, *median)]}
    value = decision.views()[off_index]["comparison"][mode].median_step_ms / \
        decision.views()[on_index]["comparison"][mode].median_step_ms
    ids = [decision.ledger.add(f"{mode}'s speedup with {lever} on", value, source, interval=interval,
                               n=min(len(on), len(off)), rests_on=rests_on + "; the runs of two processes")]
    kept = not holds_one(interval) and interval is not None and interval[0] > 1
    harmful = not holds_one(interval) and not kept
    words = f"{lever} {value:.2f}x ({span(interval)}), " + ("kept" if kept else "left off: slower" if harmful
                                                           else "not kept: its interval holds 1")
    if lever in ("compile", "cuda graphs"):
        payback, found = payback_steps(decision, on_index, off_index, mode, value)
        ids += found
        words += payback
    choice = commands.LEVERS[lever][0 if kept else 1] if kept or harmful else {}
    return words, ids, choice


def payback_steps(decision: Decision, on_index: int, off_index: int, mode: str,
                  speedup: float) -> Tuple[str, List[str]]:
    """After how many steps compiling pays for itself: its longest first step's extra over the
    uncompiled run's shortest first step, over the time each compiled step saves."""
    views = decision.views()
    compiled = [(index, run) for index, run in enumerate(views[on_index]["runs"])
                if run["mode"] == mode and run.get("compile_time_s") is not None]
    plain = [(index, run) for index, run in enumerate(views[off_index]["runs"])
             if run["mode"] == mode and run.get("first_step_s") is not None]
    if not compiled or not plain:
        return "", []
    slowest, quickest = max(compiled, key=lambda item: item[1]["compile_time_s"]), \
        min(plain, key=lambda item: item[1]["first_step_s"])
    ids = [decision.ledger.add(f"{mode}'s compile time (its first compiled step)", slowest[1]["compile_time_s"],
                               decision.views.source(on_index, "runs", slowest[0], "compile_time_s")),
           decision.ledger.add(f"{mode}'s first step uncompiled", quickest[1]["first_step_s"],
                               decision.views.source(off_index, "runs", quickest[0], "first_step_s"))]
    extra = slowest[1]["compile_time_s"] - quickest[1]["first_step_s"]
    saved_s = views[off_index]["comparison"][mode].median_step_ms / 1000 * (1 - 1 / speedup)
    if saved_s <= 0:
        return f"; its {extra:.0f} s of compiling would never pay back", ids
    steps = math.ceil(max(extra, 0.0) / saved_s)
    return f"; its {extra:.0f} s of compiling pay back after {steps} steps at that speedup", ids


def accuracy_claim(decision: Decision, mode: str, margin_points: float) -> Optional[str]:
    """The accuracy sentence for `mode` against fp32; returns its verdict."""
    if mode == BASELINES["default"]:
        return None
    checked = decision.verdict(mode)
    if checked is not None and checked.accuracy_verdict in ("holds", "inconclusive"):
        ident = accuracy_evidence(decision, mode)
        difference = (f"{100 * checked.accuracy_mean_delta:+.2f} points from fp32's over {checked.seeds} paired seeds"
                      + (f" (95% interval {100 * checked.accuracy_delta_ci95[0]:+.2f} to "
                         f"{100 * checked.accuracy_delta_ci95[1]:+.2f})" if checked.accuracy_delta_ci95 else ""))
        if checked.accuracy_verdict == "holds":
            decision.say(f"Accuracy holds: {mode} is {difference}, within the +-{margin_points:g} margin", ident)
            return "holds"
        decision.say(f"Accuracy is inconclusive: {mode} is {difference}; {checked.accuracy_verdict_why}", ident)
        return "inconclusive"
    check = decision.context.accuracy_check or {"seeds": SEEDS, "estimate_s": None}
    ids = [decision.ledger.add("seeds a conclusive accuracy check needs at least", check["seeds"],
                               {"advice": ["accuracy_check", "seeds"]}, kind="not run")]
    needs = ""
    if check.get("estimate_s"):
        ids.append(decision.ledger.add(f"the accuracy check of {mode} against fp32, estimated seconds",
                                       check["estimate_s"], {"advice": ["accuracy_check", "estimate_s"]},
                                       kind="not run"))
        needs = f", about {minutes_text(check['estimate_s'])} here"
    why = decision.context.not_run.get("accuracy", {}).get("why", "these results hold no such check")
    if why.startswith("needs about"):  # the budget's: say what the check needs once
        why = why.split(", and ", 1)[-1]
    decision.say(f"Accuracy is inconclusive: {mode} was not checked against fp32 over paired seeds ({why}); a "
                 f"conclusive check needs at least {check['seeds']} seeds{needs}, and the lines below run it", *ids)
    return "inconclusive"


def minutes_text(seconds: float) -> str:
    return f"{seconds:.0f} s" if seconds < 120 else f"{seconds / 60:.0f} minutes"


def why_claims(decision: Decision, mode: str, eligible: Sequence[str]) -> None:
    """Why the advised mode is as fast as it is, or, where fp32 is advised, why the fastest other
    mode is no faster: --explain's categories against fp32 (Amdahl's line) and its largest
    finding; then whether the GPU or the host sets the pace."""
    base = BASELINES["reference"]
    others = sorted((other for other in eligible if other != base), key=lambda name: decision.rows[name].median_step_ms)
    explained = others[0] if mode == base and others else mode
    row = decision.rows[explained]
    if row.amdahl is not None:
        amdahl = row.amdahl
        ids = [decision.field("conv and matmul's share of fp32's profiled step", explained, "amdahl", "share",
                              rests_on="--explain's profiles"),
               decision.field(f"conv and matmul's speedup in {explained}", explained, "amdahl", "speedup",
                              rests_on="--explain's profiles")]
        lead = "Why" if explained == mode else f"Why {explained} is no faster"
        decision.say(f"{lead}: convolutions and matmuls are {100 * amdahl['share']:.0f}% of fp32's profiled step and "
                     f"ran {speedup_text(amdahl['speedup'])} as fast in {explained}; with the rest unchanged that "
                     f"predicts {speedup_text(amdahl['predicted'])}, and it measured "
                     f"{speedup_text(amdahl['measured'])}", *ids)
    findings = sorted(row.diagnosis or [], key=lambda found: -found["at_stake_ms"])
    if findings:
        found = findings[0]
        assert row.diagnosis is not None  # findings come from it
        ident = decision.ledger.add(f"{explained}'s largest --explain finding, ms at stake", found["at_stake_ms"],
                                    decision.views.source(decision.primary, "comparison", explained, "diagnosis",
                                                          row.diagnosis.index(found), "at_stake_ms"))
        decision.say(f"{explained}, {found['rule']}: {found['evidence']}; {found['remedy']} would change it", ident)
    busy_claim(decision, mode)


SHARE_SOURCES = {"gpu_busy_share": "NVML", "profiled_gpu_busy_share": "profiler"}  # the comparison's two


def busy_share(decision: Decision, mode: str) -> Optional[Tuple[str, float]]:
    """(the comparison's field, value) of `mode`'s GPU busy share: NVML's, else the profiler's."""
    row = decision.rows[mode]
    for name in SHARE_SOURCES:
        if getattr(row, name) is not None:
            return name, getattr(row, name)
    return None


def busy_claim(decision: Decision, mode: str) -> None:
    shares = {other: busy_share(decision, other) for other in decision.groups}
    measured = {other: found for other, found in shares.items() if found is not None}
    if mode not in measured:
        return
    ids = [decision.field(f"{other}'s GPU busy share ({SHARE_SOURCES[name]})", other, name)
           for other, (name, _) in measured.items()]
    listed = ", ".join(f"{other} {share:.0%}" for other, (_, share) in measured.items())
    if all(share < GPU_BOUND_SHARE for _, share in measured.values()):
        decision.say(f"Every mode is host-bound: the GPU ran kernels under {GPU_BOUND_SHARE:.0%} of each step "
                     f"({listed}), so precision is not what limits this step; CUDA graphs (--compile --compile-mode "
                     "reduce-overhead), --compile or a larger -b would", *ids)
    elif measured[mode][1] < GPU_BOUND_SHARE:
        decision.say(f"{mode}'s step is host-bound (GPU busy {listed}): it waits for the host's launches, which CUDA "
                     "graphs, --compile or a larger -b would lift", *ids)
    else:
        decision.say(f"The GPU ran kernels {measured[mode][1]:.0%} of {mode}'s step ({listed}): the step is "
                     "GPU-bound, so the number format sets its pace", *ids)


def not_run_claim(decision: Decision) -> None:
    skipped = {phase: entry for phase, entry in decision.context.not_run.items() if phase != "accuracy"}
    if not skipped:
        return
    ids = [decision.ledger.add(f"the {phase} phase, not run", entry.get("estimate_s"),
                               {"advice": ["not_run", phase, "estimate_s"]}, kind="not run")
           for phase, entry in skipped.items()]
    decision.say("Not run: " + "; ".join(f"{phase} ({entry['why']})" for phase, entry in skipped.items()), *ids)


def device_claim(decision: Decision) -> bool:
    """On a CPU, a sentence saying so; returns whether the results are a CPU's."""
    env = decision.document["env"]
    on_cpu = all(run["device"] == "cpu" for run in decision.document["runs"])
    if on_cpu:
        ident = decision.ledger.add("the device the runs trained on", decision.document["runs"][0]["device"],
                                    decision.views.source(decision.primary, "runs", 0, "device"))
        decision.say(f"These are this CPU's figures ({env['device']}): a GPU's differ, so run the same command with "
                     "-p on a GPU node before training there", ident)
    return on_cpu


def decide(documents: List[Dict[str, Any]], context: Context, margin_points: float) -> Dict[str, Any]:
    """The advice the results `documents` (as merge.load_result reads them) give: the mode, the
    levers kept, the sentences with their evidence, what was rejected and why."""
    decision = Decision(documents, context)
    if not decision.groups:
        raise UserError("these results' runs timed no step (each was stopped before its first timed step), so there "
                        "is no speed to compare; measure again with more steps, or a larger --budget.")
    excluded_modes = {mode: found for mode in decision.groups for found in [excluded(decision, mode)] if found}
    eligible = [mode for mode in decision.groups if mode not in excluded_modes]
    if not eligible:
        raise UserError("no mode of these results may be advised (" +
                        "; ".join(f"{mode}: {why}" for mode, (why, _) in excluded_modes.items()) +
                        "); measure again, with the modes that were excluded fixed or left out.")
    choice = choose(decision, eligible)
    mode = choice["mode"]
    advice_claim(decision, choice)
    tf32_claim(decision, mode)
    memory_claim(decision, mode)
    rejected_claim(decision, choice, excluded_modes)
    settings = lever_claims(decision, mode)
    verdict = accuracy_claim(decision, mode, margin_points)
    why_claims(decision, mode, eligible)
    not_run_claim(decision)
    on_cpu = device_claim(decision)
    return {"recommendation": dict(choice, settings=settings, batch=decision.document["config"]["batch_size"]),
            "accuracy_verdict": verdict, "on_cpu": on_cpu, "claims": decision.claims,
            "evidence": decision.ledger.entries, "rejected": decision.rejected,
            "setup": setup_of(decision.document), "config": decision.document["config"],
            "median_step_ms": {name: decision.rows[name].median_step_ms for name in decision.groups}}
