"""The sentences of the advice about its answer: which mode, or why there is no advice yet; its
speed against tf32, its memory and that of the modes tied with it; the modes not advised; the
accuracy; the phases not run; the device. Each sentence prints only figures its cited evidence
holds (figures.py). No torch."""
from __future__ import annotations

from typing import Any, Dict, List, Optional, Tuple

from utils.advice.decision import Decision, listing, span
from utils.advice.plan import SEEDS
from utils.modes import BASELINES
from utils.results.compare import MIN_RUNS
from utils.results.record import WARMUP_IN_PEAK, written_schema


def advice_claim(decision: Decision, choice: Dict[str, Any]) -> None:
    """Sentence 1 where there is advice: the mode, and why it is the one."""
    mode, fastest, runner_up = choice["mode"], choice["tied"][0], choice["runner_up"]
    base = decision.views.base
    against: List[str] = []
    versus_base = ""
    if mode != base and base in decision.groups:
        cited = decision.speedup(mode, base)
        against = cited.ids
        versus_base = f"{cited.value:.2f}x {base}'s speed ({cited.words})"
    if choice["decision"] == "only":
        decision.say(f"Train with {mode}: it is the only mode these results time that may be advised",
                     decision.field(f"{mode}'s median step", mode, "median_step_ms"))
        return
    lead = decision.speedup(fastest, runner_up)
    if choice["decision"] == "fastest":
        text = (f"Train with {mode}: it is the fastest here, {lead.value:.2f}x the speed of the next fastest, "
                f"{runner_up} ({lead.words})")
        if against and runner_up != base:
            text += f", and {versus_base}"
        decision.say(text, *lead.ids, *(against if runner_up != base else []))
        return
    text = (f"Train with {mode}: {fastest} is fastest, but its speedup over {runner_up}, {lead.value:.2f}x, has a "
            f"95% interval ({span(lead.interval)}) that holds 1, so {listing(choice['tied'])} tie (none is shown "
            f"slower than {fastest}), and {mode} changes the numbers least of them")
    decision.say(text + (f"; it runs at {versus_base}" if against else ""), *lead.ids, decision.no_change(), *against)


def no_advice_claim(decision: Decision, choice: Dict[str, Any], unsteady: List[Tuple[str, List[str]]]) -> None:
    """Sentence 1 where there is no advice yet: the timings are unsteady (`unsteady`: each reason
    with its evidence), or the leading modes have too few paired repeats for an interval."""
    if unsteady:
        decision.say("No advice yet: these timings are unsteady (" + "; ".join(why for why, _ in unsteady) +
                     "), so no ranking of them can be trusted; measure again alone, on a quiet node or as a batch "
                     "job, with the lines below", *[ident for _, ids in unsteady for ident in ids])
        return
    fastest, runner_up = choice["tied"][0], choice["runner_up"]
    ident, ratios = decision.per_repeat(fastest, runner_up)
    each = " and ".join(f"{ratio:.2f}x" for ratio in ratios)
    decision.say(f"No advice yet: {fastest} is fastest, but over {runner_up} it rests on {len(ratios)} paired "
                 f"repeat{'s' if len(ratios) != 1 else ''} ({each}), and an interval needs "
                 f"{MIN_RUNS} or more; measure again with the lines below", ident, decision.rule(
                     "paired repeats an interval over repeats needs at least", "min_runs"))


def tf32_claim(decision: Decision, mode: str) -> None:
    """Against tf32, the FP32 most GPU code runs by default (where it ran)."""
    if "tf32" not in decision.groups or mode in ("tf32", BASELINES["default"]):
        return
    cited = decision.speedup(mode, "tf32")
    decision.say(f"Against tf32, the FP32 that most code on Ampere and newer GPUs runs by default, {mode} is "
                 f"{cited.value:.2f}x as fast ({cited.words})", *cited.ids)


def memory_claim(decision: Decision, mode: str, tied: List[str]) -> None:
    """The advised mode's steady-state peak memory against the base, with the modes tied with it
    (memory is what often decides between modes of one speed), and its energy; for runs whose
    peaks include the warm-up (WARMUP_IN_PEAK), that no steady memory can be compared."""
    base = decision.views.base
    if written_schema(decision.document) == WARMUP_IN_PEAK:
        decision.say("Memory is not compared: these runs' peaks include the warm-up, where cuDNN's autotuning can "
                     "take more than the training steps do (a file of an older ampbench)",
                     decision.ledger.add("the schema the runs were written in", WARMUP_IN_PEAK,
                                         decision.views.source(decision.primary, "upgraded_from")))
        return
    shown = [other for other in [mode, *tied] if other != base and
             decision.rows[other].memory_ratio_vs_baseline is not None]
    shown = list(dict.fromkeys(shown))
    if not shown:
        return
    parts, ids = [], []
    for other in shown:
        row = decision.rows[other]
        ids.append(decision.field(f"{other}'s peak memory over {base}'s", other, "memory_ratio_vs_baseline",
                                  interval=row.memory_ratio_ci95))
        parts.append(f"{other}'s {row.memory_ratio_vs_baseline:.2f}x" +
                     (f" (95% interval {span(row.memory_ratio_ci95)})" if row.memory_ratio_ci95 else ""))
    lead = f"Steady-state peak memory against {base}'s: " if mode in shown else \
        f"Steady-state peak memory of the modes tied with {mode}, against {base}'s: "
    text = lead + listing(parts)
    row = decision.rows[mode]
    if mode in shown and row.energy_ratio_vs_baseline is not None:
        ids.append(decision.field(f"{mode}'s energy per image over {base}'s", mode, "energy_ratio_vs_baseline",
                                  interval=row.energy_ratio_ci95))
        text += f"; {mode}'s energy per image {row.energy_ratio_vs_baseline:.2f}x" + (
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
            cited_ids = [ident]
        elif base in decision.groups:
            cited = decision.speedup(mode, base)
            why = f"{cited.value:.2f}x {base}'s speed ({cited.words})" + (", tied" if mode in choice["tied"] else "")
            cited_ids = cited.ids
        else:
            why, cited_ids = "slower", [decision.field(f"{mode}'s median step", mode, "median_step_ms")]
        parts.append(f"{mode}, {why}")
        ids += cited_ids
        decision.rejected.append({"mode": mode, "why": why, "evidence": cited_ids})
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


def accuracy_evidence(decision: Decision, mode: str) -> str:
    checked = decision.verdict(mode)
    assert checked is not None and decision.accuracy is not None  # asked only where a verdict exists
    return decision.ledger.add(
        f"{mode}'s accuracy difference from fp32 (verdict {checked.accuracy_verdict})", checked.accuracy_mean_delta,
        decision.views.source(decision.accuracy, "comparison", mode, "accuracy_mean_delta",
                              baseline=BASELINES["default"]),
        interval=checked.accuracy_delta_ci95, n=checked.seeds, rests_on="paired seeds, Student's t")


def accuracy_claim(decision: Decision, mode: str, margin_points: float) -> Optional[str]:
    """The accuracy sentence for `mode` against fp32; returns its verdict."""
    if mode == BASELINES["default"]:
        return None
    checked = decision.verdict(mode)
    if checked is not None and checked.accuracy_verdict in ("holds", "inconclusive"):
        ident = accuracy_evidence(decision, mode)
        assert decision.accuracy is not None  # a verdict comes from the accuracy check's document
        difference = (f"{100 * checked.accuracy_mean_delta:+.2f} points from fp32's over {checked.seeds} paired seeds"
                      + (f" (95% interval {100 * checked.accuracy_delta_ci95[0]:+.2f} to "
                         f"{100 * checked.accuracy_delta_ci95[1]:+.2f})" if checked.accuracy_delta_ci95 else ""))
        if checked.accuracy_verdict == "holds":
            margin = decision.views()[decision.accuracy]["config"]["accuracy_margin"]  # the verdict's own
            cited = decision.ledger.add("the accuracy verdict's margin, points", margin,
                                        decision.views.source(decision.accuracy, "config", "accuracy_margin"),
                                        kind="rule")
            decision.say(f"Accuracy holds: {mode} is {difference}, within the margin of {margin:g} points either side",
                         ident, cited)
            return "holds"
        why = decision.ledger.add(f"why {mode}'s accuracy verdict is inconclusive", checked.accuracy_verdict_why,
                                  decision.views.source(decision.accuracy, "comparison", mode, "accuracy_verdict_why",
                                                        baseline=BASELINES["default"]))
        decision.say(f"Accuracy is inconclusive: {mode} is {difference}; {checked.accuracy_verdict_why}", ident, why)
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
    not_run = decision.context.not_run.get("accuracy")
    why = (not_run or {}).get("why", "these results hold no such check")
    if why.startswith("needs about"):  # the budget's: say what the check needs once
        why = why.split(", and ", 1)[-1]
    if not_run:
        ids.append(decision.ledger.add("why the accuracy check did not run", not_run["why"],
                                       {"advice": ["not_run", "accuracy", "why"]}, kind="not run"))
    decision.say(f"Accuracy is inconclusive: {mode} was not checked against fp32 over paired seeds ({why}); a "
                 f"conclusive check needs at least {check['seeds']} seeds{needs}, and the lines below run it", *ids)
    return "inconclusive"


def minutes_text(seconds: float) -> str:
    return f"{seconds:.0f} s" if seconds < 120 else f"{seconds / 60:.0f} minutes"


def not_run_claim(decision: Decision) -> None:
    """The phases that were cut short (they ran, and their runs a stop cut short are left out of
    the figures) and those that did not run, each with why."""
    cut = decision.context.cut_short
    if cut:
        ids = [decision.ledger.add(f"what stopped the {phase} phase", why, {"advice": ["cut_short", phase]},
                                   kind="not run") for phase, why in cut.items()]
        decision.say("Cut short: " + "; ".join(f"{phase} ({why})" for phase, why in cut.items()) +
                     "; runs stopped before their last step are left out of the figures", *ids)
    skipped = {phase: entry for phase, entry in decision.context.not_run.items() if phase != "accuracy"}
    if not skipped:
        return
    ids = [decision.ledger.add(f"why the {phase} phase did not run", entry["why"],
                               {"advice": ["not_run", phase, "why"]}, kind="not run")
           for phase, entry in skipped.items()]
    decision.say("Not run: " + "; ".join(f"{phase} ({entry['why']})" for phase, entry in skipped.items()), *ids)


def device_claim(decision: Decision) -> bool:
    """On a CPU, a sentence saying so; returns whether the results are a CPU's."""
    env = decision.document["env"]
    on_cpu = all(run["device"] == "cpu" for run in decision.document["runs"])
    if on_cpu:
        ident = decision.run_field("the device the runs trained on", 0, "device")
        name = decision.ledger.add("the CPU's name", env["device"], decision.views.source(decision.primary, "env",
                                                                                           "device"))
        decision.say(f"These are this CPU's figures ({env['device']}): a GPU's differ, so run the same command with "
                     "-p on a GPU node before training there", ident, name)
    return on_cpu


def traces_claim(decision: Decision, mode: str) -> None:
    """Where the comparison's profiles of `mode` and of fp32 lie (of every mode where fp32 is
    advised: the others are why it is), to open where the time goes."""
    kept = {other: path for other, path in decision.context.traces.items()
            if mode == BASELINES["reference"] or other in (mode, BASELINES["reference"])}
    if not kept:
        return
    ids = [decision.ledger.add(f"{other}'s profiler trace (Chrome/Kineto JSON)", path, {"advice": ["traces", other]})
           for other, path in kept.items()]
    decision.say("To see where each step's time goes, open the comparison's profiles in ui.perfetto.dev or "
                 "TensorBoard: " + listing([f"{other}'s {path}" for other, path in kept.items()]), *ids)
