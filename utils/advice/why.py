"""The sentences of the advice about why: whether the input pipeline keeps up with the advised
mode (streamed data), --explain's categories against fp32 (the Amdahl line, and what it means when
the step sped up beyond it), the largest finding with time at stake, and whether the GPU or the
host sets the pace of every mode that could be trained instead. No torch."""
from __future__ import annotations

from typing import Any, Dict, List, Optional, Sequence, Tuple

from utils.advice.decision import Decision, listing
from utils.advice.evidence import RULES
from utils.explain.categories import MEMORY_BOUND, TENSOR_CORE_WORK
from utils.explain.diagnose import GPU_BOUND_SHARE, speedup_text
from utils.modes import BASELINES, MODES

SHARE_SOURCES = {"gpu_busy_share": "NVML", "profiled_gpu_busy_share": "profiler"}  # the comparison's two
BEYOND = 1.05  # a step measured this much faster than the Amdahl line predicts sped up outside conv and matmul


def why_claims(decision: Decision, mode: str, eligible: Sequence[str], tied: Sequence[str], tie: bool) -> None:
    """Why the advised mode is as fast as it is, or, where fp32 is advised, why the fastest other
    mode is no faster; then whether the GPU or the host sets the pace of the advised mode and of
    the modes tied with it or faster."""
    base = BASELINES["reference"]
    others = sorted((other for other in eligible if other != base), key=lambda name: decision.rows[name].median_step_ms)
    explained = others[0] if mode == base and others else mode
    amdahl_claim(decision, mode, explained)
    finding_claim(decision, explained)
    busy_claim(decision, mode, [other for other in eligible if other in tied or
                                decision.rows[other].median_step_ms < decision.rows[mode].median_step_ms], tie)


def loader_claim(decision: Decision, mode: str) -> None:
    """Whether the input pipeline keeps up with `mode`, from its runs' feed (streamed data only):
    where the loader alone delivers under KEEPS_UP of what the step alone takes, it bounds the run
    and no number format can speed it up, so the sentence says so and names the loader's levers."""
    fed = decision.rows[mode].feed
    if not fed:
        return
    runs = fed["runs"]

    def cite(key: str, what: str) -> str:
        return decision.field(what, mode, "feed", key, n=runs, rests_on="the median over its runs")

    ids = [cite("step_images_per_sec", f"{mode}'s step alone, images a second"),
           cite("loader_images_per_sec", f"{mode}'s loader alone, images a second"),
           cite("train_images_per_sec", f"{mode}'s training, images a second"),
           cite("workers", "the loader's worker processes")]
    rates = (f"its step alone could take {rate(fed['step_images_per_sec'])} images a second, the loader alone "
             f"delivers {rate(fed['loader_images_per_sec'])} with {fed['workers']} workers, and training ran at "
             f"{rate(fed['train_images_per_sec'])}")
    if fed["bound"] != "input":
        decision.say(f"The input pipeline keeps up with {mode}: {rates}", *ids)
        return
    ids.append(decision.rule("the share of the step's rate under which the loader bounds the run", "keeps_up"))
    levers = fed.get("levers") or []
    ids += [cite_lever(decision, mode, index) for index in range(len(levers))]
    said = "; the loader's levers: " + ", ".join(f"{lever['lever']} ({lever['flags']})" for lever in levers) \
        if levers else ""
    decision.say(f"The input pipeline bounds {mode}: {rates}, under {RULES['keeps_up']:.0%} of the step's, so no "
                 f"number format can speed this run up until the loader keeps up{said}", *ids)


def cite_lever(decision: Decision, mode: str, index: int) -> str:
    return decision.field(f"the loader's lever {index + 1}, its flags", mode, "feed", "levers", index, "flags")


def rate(images_per_sec: float) -> str:
    """Images a second as a sentence prints them: whole above 100 (no thousands separator, which
    would read as two figures), three digits below."""
    return f"{images_per_sec:.0f}" if images_per_sec >= 100 else f"{images_per_sec:.3g}"


def amdahl_claim(decision: Decision, mode: str, explained: str) -> None:
    amdahl = decision.rows[explained].amdahl
    if amdahl is None:
        return
    def cite(key: str, what: str) -> str:
        return decision.field(what, explained, "amdahl", key, rests_on="--explain's profiles")

    ids = [cite("share", "conv and matmul's share of fp32's profiled step"),
           cite("speedup", f"conv and matmul's speedup in {explained}"),
           cite("predicted", f"{explained}'s speedup were the rest of the step unchanged"),
           cite("measured", f"{explained}'s measured speedup over fp32")]
    lead = "Why" if explained == mode else f"Why {explained} is no faster"
    text = (f"{lead}: convolutions and matmuls are {100 * amdahl['share']:.0f}% of fp32's profiled step and ran "
            f"{speedup_text(amdahl['speedup'])} as fast in {explained}; with the rest unchanged that predicts "
            f"{speedup_text(amdahl['predicted'])}, and it measured {speedup_text(amdahl['measured'])}")
    if amdahl["measured"] > BEYOND * amdahl["predicted"]:
        text += beyond(decision, explained, amdahl, ids)
    decision.say(text, *ids)


def beyond(decision: Decision, mode: str, amdahl: Dict[str, Any], ids: List[str]) -> str:
    """What a measured speedup beyond the Amdahl line means: the rest of the step sped up too,
    in the categories outside conv and matmul that ran faster (--explain's, against fp32), or, where
    none did, between the profiled and the timed steps; beyond its limit (conv and matmul free), more so."""
    words = ""
    if amdahl.get("limit") and amdahl["measured"] > amdahl["limit"]:
        ids.append(decision.field(f"{mode}'s speedup limit were conv and matmul free", mode, "amdahl", "limit",
                                  rests_on="--explain's profiles"))
        words = f", beyond even the {speedup_text(amdahl['limit'])} that free convolutions and matmuls would give"
    found = decision.rows[mode].profile_speedup or {}
    faster = sorted((name for name in found if name not in (*TENSOR_CORE_WORK, "total") and found[name] >= BEYOND),
                    key=lambda name: -found[name])[:2]
    if not faster:
        return (f"{words}: no other category of its profile ran faster, so the difference lies between its profiled "
                "steps and its timed ones")
    for name in faster:
        ids.append(decision.field(f"{name}'s speedup in {mode}", mode, "profile_speedup", name,
                                  rests_on="--explain's profiles"))
    moving = [name for name in faster if name in MEMORY_BOUND]
    why = f"; in half precision {listing(moving)} {'moves' if len(moving) == 1 else 'move'} half the bytes" if \
        MODES[mode].low_precision_dtype and moving else ""
    return (f"{words}: the rest of the step sped up too ("
            + ", ".join(f"{name} {speedup_text(found[name])}" for name in faster) + f" as fast{why})")


def finding_claim(decision: Decision, mode: str) -> None:
    """--explain's finding with the most time at stake (none with none at stake), as it is written."""
    row = decision.rows[mode]
    findings = [found for found in row.diagnosis or [] if found["at_stake_ms"] > 0]
    if not findings:
        return
    found = max(findings, key=lambda item: item["at_stake_ms"])
    assert row.diagnosis is not None  # findings come from it
    index = row.diagnosis.index(found)
    source = decision.views.source(decision.primary, "comparison", mode, "diagnosis", index)
    ids = [decision.ledger.add(f"{mode}'s largest --explain finding, ms at stake", found["at_stake_ms"],
                               dict(source, field=source["field"] + ["at_stake_ms"])),
           decision.ledger.add(f"{mode}'s largest --explain finding, its evidence", found["evidence"],
                               dict(source, field=source["field"] + ["evidence"])),
           decision.ledger.add(f"{mode}'s largest --explain finding, what to try", found["remedy"],
                               dict(source, field=source["field"] + ["remedy"]))]
    decision.say(f"{mode}, {found['rule']}, {found['at_stake_ms']:.1f} ms a step at stake: {found['evidence']}; try "
                 f"{found['remedy']}", *ids)


def busy_share(decision: Decision, mode: str) -> Optional[Tuple[str, float]]:
    """(the comparison's field, value) of `mode`'s GPU busy share: NVML's, else the profiler's."""
    row = decision.rows[mode]
    for name in SHARE_SOURCES:
        if getattr(row, name) is not None:
            return name, getattr(row, name)
    return None


def busy_claim(decision: Decision, mode: str, rivals: Sequence[str], tie: bool) -> None:
    """Whether the GPU or the host sets the pace of `mode` and of its `rivals` (the modes tied
    with it or faster): the host-side levers are named for each that leaves the GPU waiting, and
    where `mode` won a `tie` that such a lever could break, so."""
    shares = {other: busy_share(decision, other) for other in dict.fromkeys([mode, *rivals])}
    measured = {other: found for other, found in shares.items() if found is not None}
    if mode not in measured:
        return
    ids = [decision.field(f"{other}'s GPU busy share ({SHARE_SOURCES[name]})", other, name)
           for other, (name, _) in measured.items()]
    listed = ", ".join(f"{other} {share:.0%}" for other, (_, share) in measured.items())
    levers = "CUDA graphs (--compile --compile-mode reduce-overhead), --compile or a larger -b"
    if all(share < GPU_BOUND_SHARE for _, share in measured.values()):
        ids.append(decision.rule("the busy share under which a step is host-bound", "host_bound"))
        decision.say(f"Every mode is host-bound: the GPU ran kernels under {GPU_BOUND_SHARE:.0%} of each step "
                     f"({listed}), so precision is not what limits this step; {levers} would", *ids)
        return
    waiting = [other for other, (_, share) in measured.items() if 100 * share < RULES["busy"]]
    if not waiting:
        decision.say(f"The GPU ran kernels most of each step ({listed}): these steps are GPU-bound, so the number "
                     "format sets their pace", *ids)
        return
    ids.append(decision.rule("the busy share under which a step waits for the host enough to name its levers",
                             "busy"))
    bound = [other for other in measured if other not in waiting]
    one = len(waiting) == 1
    text = (f"GPU busy: {listed}; {listing(waiting)} {'keeps' if one else 'keep'} the GPU busy under "
            f"{RULES['busy']:.0f}% of {'its' if one else 'their'} step, waiting for the host the rest, so {levers} "
            f"would shorten {'it' if one else 'them'}" +
            (", which could break the tie" if tie and mode not in waiting else ""))
    if bound:
        text += f"; {listing(bound)} {'is' if len(bound) == 1 else 'are'} GPU-bound"
    decision.say(text, *ids)
