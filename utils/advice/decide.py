"""The decider of --advise: from results documents to the advice, a plain function of what the
files hold (and of what the session knew beyond them: decision.Context), no torch, so that the
advice for any results file (results/ of every GPU) is given and tested without a GPU.

The documents are merged by setup and compared as utils.report does (merge.merge). The comparison
is the document of the most modes; another that differs from it in one lever alone (a row of
levers.py's table: channels_last, the optimizer's implementation, compile or its CUDA-graphs mode,
the loader's workers or GPU decoding) is that lever's trial (trials.py); one whose modes ran over
several seeds and were evaluated holds the accuracy verdicts.

Results that time one mode compare nothing and are refused. Timings that are unsteady (a mode's
speedup rests on repeats whose ratios spread over compare.SPREAD_WARNING_PCT, another process
competed for the cores, or a mode rests on runs cut short) give no advice yet, and say how to
measure again; so do leading modes without an interval between them (fewer than MIN_RUNS paired
repeats). Otherwise, of the modes
that may be advised (never one whose accuracy verdict "differs", one that did not learn or
diverged, emulated FP8, or float16 without loss scaling), the advice names the fastest when its
speedup over the runner-up has a 95% interval above 1; else the modes whose interval against the
fastest holds 1 tie, and the advice names the one that changes the numbers least (its rank). A
lever is kept only when its interval lies above 1. Speedups and intervals are the comparison's
own (compare.speedup), as utils.report prints them against that baseline.
"""
from __future__ import annotations

import math
from typing import Any, Dict, List, Optional, Tuple

from utils.advice import claims, commands
from utils.advice.decision import Context, Decision, holds_one, listing
from utils.advice.trials import batch_claim, lever_claims, untried
from utils.advice.why import loader_claim, why_claims
from utils.errors import UserError
from utils.modes import BASELINES, MODES
from utils.results.compare import SPREAD_WARNING_PCT, busy_host, unsteady_speedups
from utils.results.record import setup_of

__all__ = ["Context", "decide"]


def excluded(decision: Decision, mode: str) -> Optional[Tuple[str, str]]:
    """(why `mode` may not be advised, the id of its evidence), or None when it may be."""
    runs, row = decision.groups[mode], decision.rows[mode]
    never = MODES[mode].never_advised
    if never:
        return never, decision.field(f"{mode}'s median step", mode, "median_step_ms")
    emulated = next((index for index, run in enumerate(decision.document["runs"])
                     if run["mode"] == mode and (run.get("fp8") or {}).get("emulated")), None)
    if emulated is not None:
        return ("its FP8 was emulated in software, which is not FP8's speed",
                decision.run_field(f"{mode} emulated FP8", emulated, "fp8", "emulated"))
    if any(run["final_loss"] is not None and not math.isfinite(run["final_loss"]) for run in runs):
        return "its loss diverged", decision.field(f"{mode}'s final loss", mode, "final_loss")
    reference = decision.rows.get(BASELINES["reference"])
    if row.learned is False and reference is not None and reference.learned:  # not a run too short for anyone
        return "it did not learn, where fp32 did", decision.field(f"whether {mode} learned", mode, "learned")
    checked = decision.verdict(mode)
    if checked is not None and checked.accuracy_verdict == "differs":
        return (f"its accuracy differs from fp32's by {100 * checked.accuracy_mean_delta:+.2f} points over "
                f"{checked.seeds} seeds", claims.accuracy_evidence(decision, mode))
    return None


def choose(decision: Decision, eligible: List[str]) -> Dict[str, Any]:
    """The fastest of `eligible` when its interval over the runner-up lies above 1, else the
    safest of the modes that tie with it; "undecided" when there is no interval between the two."""
    ranked = sorted(eligible, key=lambda mode: decision.rows[mode].median_step_ms)
    fastest = ranked[0]
    if len(ranked) == 1:
        return {"mode": fastest, "decision": "only", "tied": [fastest], "runner_up": None}
    runner_up = ranked[1]
    interval = decision.row(fastest, runner_up).speedup_ci95
    if interval is None:
        return {"mode": fastest, "decision": "undecided", "tied": [fastest, runner_up], "runner_up": runner_up}
    if not holds_one(interval):
        return {"mode": fastest, "decision": "fastest", "tied": [fastest], "runner_up": runner_up}
    tied = [fastest] + [mode for mode in ranked[1:] if holds_one(decision.row(fastest, mode).speedup_ci95)]
    safest = min(tied, key=lambda mode: MODES[mode].rank)
    return {"mode": safest, "decision": "tie", "tied": tied, "runner_up": runner_up}


def unsteadiness(decision: Decision) -> List[Tuple[str, List[str]]]:
    """Why these timings cannot be ranked, each with its evidence: a mode whose speedup over the
    base rests on timings that spread over SPREAD_WARNING_PCT (compare.unsteady_speedups: its
    paired repeats' ratios, else its own runs or steps), one that rests on runs cut short, runs
    timed while another process competed for the cores; empty when they are steady."""
    reasons = []
    for mode, spread in unsteady_speedups(decision.rows, decision.views.base).items():
        rule = decision.rule("spread over which timings are unsteady, % of the median", "spread")
        ratios = decision.rows[mode].repeat_speedups or []
        if len(ratios) > 1:
            ident, _ = decision.per_repeat(mode, decision.views.base)
            spread_id = decision.ledger.add(f"how widely {mode}'s paired repeats' ratios spread, % of their median",
                                            spread, {"derived": "spread_pct", "of": [ident]}, kind="derived")
            reasons.append((f"{mode}'s speedup over {decision.views.base} spread {spread:.0f}% between its repeats "
                            f"({min(ratios):.2f}x to {max(ratios):.2f}x), over {SPREAD_WARNING_PCT:.0f}%",
                            [ident, spread_id, rule]))
        else:
            what = "runs" if decision.rows[mode].runs > 1 else "timed steps (p10 to p90)"
            reasons.append((f"{mode}'s {what} spread {spread:.0f}% of their median, over {SPREAD_WARNING_PCT:.0f}%",
                            [decision.field(f"{mode}'s spread, % of its median", mode, "spread_pct"), rule]))
    for mode, row in decision.rows.items():
        if row.cut_short:
            reasons.append((f"every run of {mode} was cut short by a stop signal",
                            [decision.field(f"whether {mode}'s figures rest on runs cut short", mode, "cut_short")]))
    for index, document in enumerate(decision.views()):
        busy = [number for number, run in enumerate(document["runs"]) if busy_host(run)]
        if busy:
            count = decision.ledger.add("runs timed while another process competed for the cores", len(busy),
                                        {"busy_runs": {key: value for key, value in decision.views.source(index).items()
                                                       if key != "field"}})
            first = decision.run_field("the first such run's warning", busy[0], "host", "warning", document=index)
            whose = "these" if index == decision.primary else "a trial's"
            reasons.append((f"another process competed for the cores while {len(busy)} of {whose} runs were timed",
                            [count, first]))
    return reasons


def settings_claim(decision: Decision, settings: Dict[str, Any]) -> None:
    """The speed levers the comparison ran with that no trial compared and that differ from
    main.py's defaults: an advised command from the results leaves them out, and says so."""
    left_out = untried(decision, settings)
    if left_out:
        ids = [decision.ledger.add(f"the comparison's {key}", value,
                                   decision.views.source(decision.primary, "config", key))
               for key, value in left_out.items()]
        decision.say(f"These runs used {listing(commands.flags_of(left_out))}, which they never compared with "
                     "the default: the command below leaves that to you (add it to train as they measured)", *ids)


def decide(documents: List[Dict[str, Any]], context: Context, margin_points: float) -> Dict[str, Any]:
    """The advice the results `documents` (as merge.load_result reads them) give: the mode (None
    while there is no advice yet), the levers kept, the sentences with their evidence, what was
    rejected and why, and why there is no advice (unsteady, undecided)."""
    decision = Decision(documents, context)
    if not decision.groups:
        raise UserError("these results' runs timed no step (each was stopped before its first timed step), so there "
                        "is no speed to compare; measure again with more steps, or a larger --budget.")
    if len(decision.groups) == 1:
        (mode,) = decision.groups
        on_gpu = not all(run["device"] == "cpu" for run in decision.document["runs"])
        raise UserError(f"these results time one mode, {mode}, so they compare nothing and no precision can be "
                        "advised from them; compare the modes first, "
                        f"{commands.shell_line(commands.compare_command(decision.document['config'], on_gpu))} "
                        "--json compared.json, then give --advise --from compared.json.")
    excluded_modes = {mode: found for mode in decision.groups for found in [excluded(decision, mode)] if found}
    eligible = [mode for mode in decision.groups if mode not in excluded_modes]
    if not eligible:
        raise UserError("no mode of these results may be advised (" +
                        "; ".join(f"{mode}: {why}" for mode, (why, _) in excluded_modes.items()) +
                        "); measure again, with the modes that were excluded fixed or left out.")
    choice = choose(decision, eligible)
    unsteady = unsteadiness(decision)
    advised = not unsteady and choice["decision"] != "undecided"
    mode = choice["mode"]
    if advised:
        claims.advice_claim(decision, choice)
    else:
        claims.no_advice_claim(decision, choice, unsteady)
    claims.tf32_claim(decision, mode)
    claims.memory_claim(decision, mode, choice["tied"])
    loader_claim(decision, mode)
    if advised:
        claims.rejected_claim(decision, choice, excluded_modes)
    settings = lever_claims(decision, mode)
    batch_claim(decision, mode)
    verdict = claims.accuracy_claim(decision, mode, margin_points) if advised else None
    why_claims(decision, mode, eligible, choice["tied"], advised and choice["decision"] == "tie")
    if advised and context.live is False:
        settings_claim(decision, settings)
    claims.traces_claim(decision, mode)
    claims.not_run_claim(decision)
    on_cpu = claims.device_claim(decision)
    recommendation = dict(choice, settings=settings, batch=decision.document["config"]["batch_size"])
    return {"recommendation": recommendation if advised else None, "lean": recommendation,
            "unsteady": [why for why, _ in unsteady], "accuracy_verdict": verdict, "on_cpu": on_cpu,
            "claims": decision.claims, "evidence": decision.ledger.entries, "rejected": decision.rejected,
            "setup": setup_of(decision.document), "config": decision.document["config"],
            "median_step_ms": {name: decision.rows[name].median_step_ms for name in decision.groups}}
