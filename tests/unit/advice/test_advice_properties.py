"""The adviser on results as real sessions leave them, drawn by Hypothesis from the committed
GPU results files: per-run step-time noise (small and large), two or three repeats, busy-host
warnings on some runs, runs cut short, --explain profiles whose findings the real diagnose rules
make, accuracy checks whose seeds hold, differ or leave it open, a compiled trial, a larger batch,
streamed data, runs on the CPU. For every draw: --advise refuses with one UserError, or writes
advice that passes every rule of document.check and whose evidence resolves; a mode advised as
"fastest" has an interval over its runner-up clear of 1; timings that spread over the warning
threshold, a busy host, or a mode resting on runs cut short give no advice; no sentence holds a
control character or a line break. No torch, no GPU; a fixed set of 60 draws (derandomized: the same
in every run), more where $AMPBENCH_ADVICE_EXAMPLES says."""
import copy
import os
import statistics
from types import SimpleNamespace

from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st
from test_decide import COMPARED, accuracy_check_of, advice_of, compiled_twin, larger_batch, streamed

from conftest import third_repeat
from utils.advice import document
from utils.advice.decision import Context, Decision, holds_one
from utils.advice.evidence import unresolved
from utils.advice.figures import unsupported
from utils.errors import UserError
from utils.explain.categories import NAMES as CATEGORIES
from utils.explain.diagnose import diagnose_run
from utils.modes import BASELINES
from utils.results.compare import SPREAD_WARNING_PCT, busy_host, cut_short
from utils.results.merge import load_result, merge

LOADED = {path: load_result(str(path)) for path in COMPARED}
BUSY = ("the host was busy: load average 3.9 on 2 cores while this process used 0.6 of them (another process "
        "competes for the cores); its step times are slower than a quiet machine's, rerun alone")
# Layers whose widths tensor cores cannot use, as a model names them: a user's module may name
# its children with any text but a dot, line breaks and escape sequences included.
LAYERS = [[], ["conv1"], ["fc", "conv1", "layer1.0.conv2", "layer2.0.conv1", "layer3.0.conv1"],
          ["blocks.0\nhead", "stem\x1b[31m\tconv"]]
# CPUs as /proc/cpuinfo's "model name" (or platform.machine()) names them.
CPUS = ["Intel(R) Xeon(R) CPU @ 2.20GHz", "AMD EPYC 7B13 64-Core Processor", "Intel(R) Xeon(R) Platinum 8480+",
        "Intel(R) Core(TM) i7-10700 CPU @ 2.90GHz", "aarch64", "13th Gen Intel(R) Core(TM) i9-13900K"]
SMALL, LARGE = st.floats(0.97, 1.03), st.floats(0.6, 1.6)


def scaled(run, factor):
    run["step_times_ms"] = [ms * factor for ms in run["step_times_ms"]]
    run["step_time_ms"] = {key: value * factor for key, value in run["step_time_ms"].items()}


def profile_of(draw, run):
    """A --explain profile of `run` with drawn shares, and the findings diagnose_run gives of it."""
    weights = {name: draw(st.floats(0.0, 1.0)) for name in CATEGORIES}
    total_ms = run["step_time_ms"]["median"]
    whole = sum(weights.values()) or 1.0
    categories = {name: {"ms": total_ms * weight / whole, "share": weight / whole} for name, weight in weights.items()}
    profile = SimpleNamespace(total_ms=total_ms, categories=categories, host_ms={"data": categories["data"]["ms"]},
                              idle_ms=total_ms * draw(st.floats(0.0, 0.6)), host_syncs_per_step=0, host_syncs=[],
                              comm_exposed_ms=None, wall_ms=None,
                              unaligned_layers=draw(st.sampled_from(LAYERS)))
    facts = SimpleNamespace(mode=run["mode"], device=run["device"], loader=run.get("loader") or "device",
                            channels_last=bool(run.get("channels_last")), world_size=run.get("world_size") or 1,
                            grad_comm=None, bucket_mb=None, optimizer_impl=run.get("optimizer_impl"),
                            effective_batch_size=run.get("effective_batch_size") or 1, feed=run.get("feed"))
    findings = diagnose_run(facts, profile, workers=draw(st.integers(0, 8)), cpu_count=draw(st.integers(1, 16)))
    return {"categories": categories, "steps": 3, "diagnosis": findings}


class Session:
    """The documents drawn, shown as the steps that made them (a failing draw's report stays short)."""

    def __init__(self, path, documents, steps):
        self.path, self.documents, self.steps = path, documents, steps

    def __repr__(self):
        return f"Session({self.path.name!r}: {'; '.join(self.steps)})"


def agreeing_repeats(draw, documents, steps):
    if draw(st.booleans()):  # most committed comparisons are unsteady: repeats that agree reach the advice
        for found in documents:
            first = {run["mode"]: run for run in found["runs"] if run.get("repeat") == 0}
            for run in found["runs"]:
                if run.get("repeat") and run["mode"] in first and first[run["mode"]]["step_time_ms"]:
                    run["step_times_ms"] = list(first[run["mode"]]["step_times_ms"])
                    run["step_time_ms"] = dict(first[run["mode"]]["step_time_ms"])
        steps.append("repeats agree")
    return documents


def third(draw, documents, steps):
    if draw(st.booleans()):
        factor = draw(st.one_of(SMALL, LARGE))
        documents = third_repeat(documents, factor)
        steps.append(f"third repeat x{factor:.3f}")
    return documents


def tie(draw, documents, steps):
    """Two modes about as fast, whose interval may hold 1."""
    if draw(st.booleans()):
        modes = list(dict.fromkeys(run["mode"] for run in documents[0]["runs"]))
        leader, follower = draw(st.permutations(modes))[:2]
        lead = {run.get("repeat"): run for run in documents[0]["runs"] if run["mode"] == leader}
        for run in documents[0]["runs"]:
            if run["mode"] == follower and run.get("repeat") in lead and lead[run.get("repeat")]["step_time_ms"]:
                run["step_times_ms"] = list(lead[run.get("repeat")]["step_times_ms"])
                run["step_time_ms"] = dict(lead[run.get("repeat")]["step_time_ms"])
        steps.append(f"{follower} as fast as {leader}")
    return documents


def noisy(draw, documents, steps):
    noise = st.one_of(SMALL, LARGE) if draw(st.integers(0, 3)) == 0 else SMALL
    runs = documents[0]["runs"]
    factors = [draw(noise) for run in runs]
    for run, factor in zip(runs, factors):
        if run["step_time_ms"] is not None:
            scaled(run, factor)
    steps.append("noise " + ",".join(f"{factor:.3f}" for factor in factors))
    return documents


def streamed_data(draw, documents, steps):
    if draw(st.integers(0, 3)) == 0:
        workers, rate, speedup = draw(st.integers(1, 8)), draw(st.floats(50.0, 1e5)), draw(st.floats(0.8, 1.5))
        documents = streamed(documents, workers, rate, speedup)
        bound = draw(st.sampled_from(["input", "step"]))
        for run in documents[0]["runs"]:
            run["feed"]["bound"] = bound
        steps.append(f"streamed({workers}, {rate:.1f}, {speedup:.3f}) {bound}-bound")
    return documents


def on_a_cpu(draw, documents, steps):
    if draw(st.integers(0, 3)) == 0:
        name = draw(st.sampled_from(CPUS))
        for found in documents:
            found["env"] = dict(found["env"], device=name, device_type="cpu")
            for run in found["runs"]:
                run["device"] = "cpu"
        steps.append(f"on the cpu {name!r}")
    return documents


def busy(draw, documents, steps):
    runs = documents[0]["runs"]
    if draw(st.integers(0, 3)) == 0:
        marked = draw(st.lists(st.integers(0, len(runs) - 1), min_size=1, max_size=3, unique=True))
        for index in marked:
            runs[index]["host"] = dict(runs[index].get("host") or {}, warning=BUSY)
        steps.append(f"busy host in runs {marked}")
    return documents


def profiled(draw, documents, steps):
    runs = documents[0]["runs"]
    if draw(st.booleans()):
        for run in runs:
            if run["step_time_ms"] is not None:
                run["profile"] = profile_of(draw, run)
        steps.append("profiled: " + "; ".join(f"{run['mode']}: {found['rule']}" for run in runs
                                                for found in (run.get("profile") or {}).get("diagnosis", [])))
    return documents


def accuracy_checked(draw, documents, steps):
    runs = documents[0]["runs"]
    modes = [mode for mode in dict.fromkeys(run["mode"] for run in runs) if mode != BASELINES["reference"]]
    if draw(st.booleans()) and any(run["mode"] == BASELINES["reference"] for run in runs):
        checked = [BASELINES["reference"]] + draw(st.lists(st.sampled_from(modes), min_size=1, max_size=2,
                                                           unique=True))
        deltas = {mode: draw(st.sampled_from([0.0, 0.05, -3.0])) for mode in checked[1:]}
        documents = accuracy_check_of(documents, checked, deltas)
        spread = draw(st.sampled_from([0.0, 0.4, 3.0]))
        for run in documents[-1]["runs"]:
            if run["mode"] != BASELINES["reference"]:
                run["test_accuracy"] += [0.0, spread, -spread][run["seed"]] / 100
        steps.append(f"accuracy check {deltas}, seeds +-{spread}")
    return documents


def compiled(draw, documents, steps):
    if draw(st.integers(0, 3)) == 0:
        speedup, compile_s = draw(st.floats(0.7, 1.6)), draw(st.floats(0.5, 120.0))
        documents = compiled_twin(documents, speedup, compile_s)
        scatter = [draw(st.one_of(SMALL, LARGE)) for run in documents[-1]["runs"]]
        for run, factor in zip(documents[-1]["runs"], scatter):
            scaled(run, factor)
        steps.append(f"compiled twin {speedup:.3f}x, {compile_s:.1f} s, its runs x" +
                     ",".join(f"{factor:.3f}" for factor in scatter))
    return documents


def larger(draw, documents, steps):
    if draw(st.integers(0, 3)) == 0 and any(run["mode"] == "amp-bf16" and run.get("peak_memory_bytes")
                                            for run in documents[0]["runs"]):
        step_factor, memory_factor = draw(st.floats(1.2, 2.5)), draw(st.floats(1.1, 2.0))
        documents = larger_batch(documents, 2, step_factor, memory_factor)
        steps.append(f"larger batch x2: steps x{step_factor:.3f}, memory x{memory_factor:.3f}")
    return documents


def cut(draw, documents, steps):
    runs = documents[0]["runs"]
    if draw(st.integers(0, 3)) == 0:
        index = draw(st.integers(0, len(runs) - 1))
        run = runs[index]
        if run["step_times_ms"]:
            kept = draw(st.integers(0, len(run["step_times_ms"])))
            timed = run["step_times_ms"][:kept]
            run.update(stopped_by="SIGTERM", completed_steps=run["warmup"] + kept, timed_steps=kept,
                       incomplete=True, step_times_ms=timed,
                       step_time_ms=dict(run["step_time_ms"], median=statistics.median(timed)) if timed else None)
            documents[0]["incomplete"] = True
            steps.append(f"run {index} cut short after {kept} steps")
    return documents


# What a session on a noisy machine may leave, in the order drawn: each takes (draw, documents,
# the steps so far) and returns the documents, with its step said where it drew one
SHAPES = [agreeing_repeats, third, tie, noisy, streamed_data, on_a_cpu, busy, profiled, accuracy_checked, compiled,
          larger, cut]


@st.composite
def sessions(draw):
    """A Session: the results a session on a noisy machine would leave."""
    path = draw(st.sampled_from(COMPARED))
    documents, steps = copy.deepcopy(LOADED[path]), []
    for shape in SHAPES:
        documents = shape(draw, documents, steps)
    return Session(path, documents, steps)


def primary_spreads(documents):
    """{mode: how widely its paired repeats' speedups over the base spread, %} of the comparison
    (the document of the most modes), from its whole runs, as docs/advice.md states the rule."""
    decision = Decision(documents, Context("results.json"))
    base = decision.views.base
    by_mode = {}
    for run in decision.document["runs"]:
        if run["step_time_ms"] is not None and not cut_short(run):
            by_mode.setdefault(run["mode"], {}).setdefault((run.get("seed", 0), run["repeat"]), []).append(
                run["step_time_ms"]["median"])
    spreads = {}
    for mode, repeats in by_mode.items():
        if mode == base:
            continue
        ratios = [base_ms / ms for key, times in repeats.items() if key in by_mode.get(base, {})
                  for base_ms, ms in zip(by_mode[base][key], times)]
        if len(ratios) > 1:
            spreads[mode] = 100 * (max(ratios) - min(ratios)) / statistics.median(ratios)
    return spreads


def control_characters(text):
    return [char for char in text if ord(char) < 32 or 127 <= ord(char) < 160 or char in "\u2028\u2029"]


@settings(max_examples=int(os.environ.get("AMPBENCH_ADVICE_EXAMPLES", 60)), derandomize=True, deadline=None,
          database=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(sessions())
def test_noisy_results_give_advice_that_checks_or_a_refusal(drawn):
    path, documents = drawn.path, drawn.documents
    try:
        advice = advice_of(path, copy.deepcopy(documents))
    except UserError as refused:
        event("refused")
        assert "\n" not in str(refused)
        return
    event(advice["status"])
    found = unsupported(advice)
    assert found == [], [advice["claims"][int(where.split("[")[1].split("]")[0])]["text"] for where in found]
    document.check(advice)
    assert unresolved(advice, lambda file, baseline: merge(copy.deepcopy(documents), baseline)) == []
    for text in [claim["text"] for claim in advice["claims"]] + advice["unsteady"] + \
            [entry["why"] for entry in advice["rejected"]]:
        assert control_characters(text) == [], text
    recommendation = advice["recommendation"]
    if recommendation is not None and recommendation["decision"] == "fastest":
        decision = Decision(copy.deepcopy(documents), Context("results.json"))
        interval = decision.row(recommendation["mode"], recommendation["runner_up"]).speedup_ci95
        assert not holds_one(interval), (recommendation["mode"], recommendation["runner_up"], interval)
    spreads = {mode: spread for mode, spread in primary_spreads(documents).items() if spread > SPREAD_WARNING_PCT}
    busy = any(busy_host(run) for found in documents for run in found["runs"])
    timed = {}
    for run in Decision(copy.deepcopy(documents), Context("results.json")).document["runs"]:
        if run["step_time_ms"] is not None:
            timed.setdefault(run["mode"], []).append(cut_short(run))
    stopped = [mode for mode, cut in timed.items() if all(cut)]
    if spreads or busy or stopped:
        assert recommendation is None and advice["status"] == "unsteady", (spreads, busy, stopped, advice["status"])
    if recommendation is None:
        assert advice["status"] in document.NO_ADVICE
