"""The levers' trials in the advice (levers.py's table says what each switches): which results
document tried which lever (it differs from the comparison in that lever alone), how each
compares with the comparison's runs of the same mode, whether it is kept, and after how many
steps compiling pays back; and the larger
batch's trial (it differs in the batch alone), in images a second. A trial ran in a process of
its own, so its runs and the comparison's are compared as independent samples. No torch."""
from __future__ import annotations

from typing import Any, Dict, List, Optional, Tuple

from utils import config
from utils.advice.decision import Decision, Group, holds_one, span
from utils.advice.evidence import payback_steps
from utils.advice.levers import BY_NAME, LEVERS
from utils.results.compare import SPREAD_WARNING_PCT, group_by_mode, speedup
from utils.results.record import setup_of


def lever_of(base: Dict[str, Any], other: Dict[str, Any]) -> Optional[str]:
    """The lever (levers.py) that two setups (record.setup_of) differ in, alone, or None."""
    differing = {key for key in set(base) | set(other) if base.get(key) != other.get(key)}
    return next((lever.name for lever in LEVERS if lever.tried_by(differing, base, other)), None)


def tried(decision: Decision) -> List[Tuple[str, int]]:
    """(lever, the index of the document that tried it) for each lever trial in the results."""
    base_setup = setup_of(decision.document)
    found = []
    for index, document in enumerate(decision.views()):
        lever = lever_of(base_setup, setup_of(document)) if index != decision.primary else None
        if lever is not None:
            found.append((lever, index))
    return found


def untried(decision: Decision, settings: Dict[str, Any]) -> Dict[str, Any]:
    """The comparison's lever settings that differ from main.py's defaults and that no trial
    compared (`settings`: those the trials decided): a command built from the results leaves them
    at their defaults, as nothing measured says they are better."""
    defaults, record = config.defaults(), decision.document["config"]
    compared = {key for lever, _ in tried(decision) for key in BY_NAME[lever].keys}
    return {key: record[key] for key in config.LEVER_KEYS
            if record.get(key) is not None and record[key] != defaults[key] and key not in compared | set(settings)
            and (key != "compile_mode" or record.get("compile"))}


def lever_claims(decision: Decision, mode: str) -> Dict[str, Any]:
    """A sentence on every lever tried on `mode` (one at a time, each against the comparison's
    runs of the same mode); returns the settings the advice changes."""
    settings: Dict[str, Any] = {}
    parts, ids = [], []
    for lever, index in tried(decision):
        runs = group_by_mode(decision.views()[index]["runs"]).get(mode)
        if not runs:
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
    trial, base = setup_of(decision.views()[index]), setup_of(decision.document)
    row = BY_NAME[lever]
    tried_on = row.is_on(trial, base)
    on, off = (runs, decision.groups[mode]) if tried_on else (decision.groups[mode], runs)
    found = speedup(off, on, pair=False)
    on_index, off_index = (index, decision.primary) if tried_on else (decision.primary, index)
    median = ["comparison", mode, "median_step_ms"]
    source = {"ratio_of": [decision.views.source(off_index, *median), decision.views.source(on_index, *median)]}
    ids = [decision.ledger.add(f"{mode}'s speedup with {lever} on", found.value, source, interval=found.interval,
                               n=min(len(on), len(off)), rests_on=found.rests_on + "; the runs of two processes")]
    unsteady = unsteady_side(decision, lever, mode, {"on": on_index, "off": off_index})
    ids += unsteady[1] if unsteady else []
    kept = not unsteady and not holds_one(found.interval) and found.interval is not None and found.interval[0] > 1
    harmful = not unsteady and not holds_one(found.interval) and not kept
    # A trial of too few runs has no interval: saying it holds 1 would claim one it lacks.
    words = f"{lever} {found.value:.2f}x ({span(found.interval)}), " + (
        unsteady[0] if unsteady else "kept" if kept else "left off: slower" if harmful else
        "not kept: without an interval nothing shows it faster" if found.interval is None else
        "not kept: its interval holds 1")
    if not unsteady and found.interval is not None and not kept and not harmful:
        ids.append(decision.no_change())
    if row.pays_back:
        payback, more = payback_words(decision, on_index, off_index, mode, (ids[0], found.value))
        ids += more
        words += payback
    return words, ids, row.choice(kept, harmful, trial if tried_on else base, base if tried_on else trial)


def unsteady_side(decision: Decision, lever: str, mode: str,
                  sides: Dict[str, int]) -> Optional[Tuple[str, List[str]]]:
    """(the words, the evidence ids) where the runs of `mode` on either side of a lever's trial
    (`sides`: on and off, each a document's index) spread over SPREAD_WARNING_PCT of their median:
    its two processes' runs are compared as independent samples, so an interval between runs that
    moved that much would judge the host, not the lever. None where both are steady."""
    for side, index in sides.items():
        spread = decision.views()[index]["comparison"][mode].spread_pct
        if spread is not None and spread > SPREAD_WARNING_PCT:
            ids = [decision.ledger.add(f"how widely {mode}'s runs with {lever} {side} spread, % of their median",
                                       spread, decision.views.source(index, "comparison", mode, "spread_pct")),
                   decision.rule("spread over which timings are unsteady, % of the median", "spread")]
            return (f"not judged: with it {side}, {mode}'s runs spread {spread:.0f}% of their median, over "
                    f"{SPREAD_WARNING_PCT:.0f}%"), ids
    return None


def payback_words(decision: Decision, on_index: int, off_index: int, mode: str,
                  speedup_found: Tuple[str, float]) -> Tuple[str, List[str]]:
    """After how many steps compiling pays for itself (evidence.payback_steps) at the trial's
    speedup (its evidence id and value), from its longest first compiled step and the
    uncompiled runs' shortest first step."""
    views = decision.views()
    compiled = [(index, run) for index, run in enumerate(views[on_index]["runs"])
                if run["mode"] == mode and run.get("compile_time_s") is not None]
    plain = [(index, run) for index, run in enumerate(views[off_index]["runs"])
             if run["mode"] == mode and run.get("first_step_s") is not None]
    if not compiled or not plain:
        return "", []
    slowest = max(compiled, key=lambda item: item[1]["compile_time_s"])
    quickest = min(plain, key=lambda item: item[1]["first_step_s"])
    first = decision.run_field(f"{mode}'s compile time (its first compiled step)", slowest[0], "compile_time_s",
                               document=on_index)
    plain_first = decision.run_field(f"{mode}'s first step uncompiled", quickest[0], "first_step_s",
                                     document=off_index)
    step = decision.ledger.add(f"{mode}'s median step uncompiled", views[off_index]["comparison"][mode].median_step_ms,
                               decision.views.source(off_index, "comparison", mode, "median_step_ms"))
    extra = slowest[1]["compile_time_s"] - quickest[1]["first_step_s"]
    extra_id = decision.ledger.add(f"{mode}'s seconds of compiling beyond an uncompiled first step", extra,
                                   {"derived": "difference", "of": [first, plain_first]}, kind="derived")
    speedup_id, speedup_value = speedup_found
    steps = payback_steps(slowest[1]["compile_time_s"], quickest[1]["first_step_s"],
                          views[off_index]["comparison"][mode].median_step_ms, speedup_value)
    if steps is None:
        return f"; its {extra:.0f} s of compiling would never pay back", [extra_id]
    steps_id = decision.ledger.add(f"steps after which {mode}'s compiling pays back", steps,
                                   {"derived": "payback_steps", "of": [first, plain_first, step, speedup_id]},
                                   kind="derived")
    return f"; its {extra:.0f} s of compiling pay back after {steps} steps at that speedup", [extra_id, steps_id]


def batch_claim(decision: Decision, mode: str) -> None:
    """Whether a larger batch trains more images a second than the user's, in `mode`: its trial
    (a document that differs from the comparison in a larger batch alone) against the comparison's
    runs, with the peak memory it took."""
    base_setup = setup_of(decision.document)
    trials = [index for index, document in enumerate(decision.views()) if index != decision.primary and
              {key for key in set(base_setup) | set(setup_of(document))
               if base_setup.get(key) != setup_of(document).get(key)} == {"batch_size"} and
              document["config"]["batch_size"] > decision.document["config"]["batch_size"]]
    runs = group_by_mode(decision.views()[trials[0]]["runs"]).get(mode) if trials else None
    if not runs:
        return
    index, views = trials[0], decision.views()
    batch, base_batch = views[index]["config"]["batch_size"], decision.document["config"]["batch_size"]
    found = speedup(decision.groups[mode], runs, pair=False)  # step times: the user's batch's over the larger's
    factor = batch / base_batch
    interval = [factor * bound for bound in found.interval] if found.interval else None

    def ratio_of(key: str) -> Dict[str, Any]:
        return {"ratio_of": [decision.views.source(index, "comparison", mode, key),
                             decision.views.source(decision.primary, "comparison", mode, key)]}

    rate = views[index]["comparison"][mode].images_per_sec / decision.rows[mode].images_per_sec
    memory = views[index]["comparison"][mode].peak_memory_bytes / decision.rows[mode].peak_memory_bytes
    ids = [decision.ledger.add(f"{mode}'s images a second at the larger batch over the user's", rate,
                               ratio_of("images_per_sec"), interval=interval,
                               n=min(len(runs), len(decision.groups[mode])),
                               rests_on=found.rests_on + ", times the batches' ratio; the runs of two processes"),
           decision.ledger.add(f"{mode}'s peak memory at the larger batch over the user's", memory,
                               ratio_of("peak_memory_bytes")),
           decision.ledger.add("the larger batch", batch, decision.views.source(index, "config", "batch_size")),
           decision.ledger.add("the user's batch", base_batch,
                               decision.views.source(decision.primary, "config", "batch_size"))]
    verdict = ("a larger batch trains faster here (scale the learning rate with it)" if interval and interval[0] > 1
               else "a larger batch trains slower here" if interval and interval[1] < 1
               else "a larger batch is not shown to train faster here")
    decision.say(f"At -b {batch}, {mode} trained {rate:.2f}x the images a second of -b {base_batch} "
                 f"({'95% interval ' + span(interval) if interval else 'no interval'}) with {memory:.2f}x the peak "
                 f"memory: {verdict}", *ids)
