"""--advise's session under a fake clock: with a fake preflight and a runner that takes its
phases' time off the clock (and, like a main.py stopped by SIGTERM at the deadline, ends one
step after it), the command ends within the budget plus one step's time, starts no phase whose
estimate does not fit what is left, and lists each such phase as not run with why. No training."""
import copy
import json
import os
import signal
import time

import pytest

from conftest import ROOT
from utils.advice import document, plan, session
from utils.advice.evidence import reader, unresolved
from utils.advice.levers import LEVERS
from utils.advice.preflight import Preflight
from utils.config import RunConfig, default_workers
from utils.errors import UserError
from utils.stop import StopRequest

TEMPLATE = json.loads((ROOT / "docs" / "samples" / "reading-the-numbers.json").read_text())  # fp32, amp-bf16 x 3
STEP_S = 2.0  # every step of the fake runs, in the fake clock's seconds
PREFLIGHT_S = 5.0


class FakeClock:
    def __init__(self):
        self.now = 1000.0

    def __call__(self):
        return self.now


def fake_preflight(clock, modes=("fp32", "amp-bf16"), memory_bytes=None):
    def preflight(config):
        clock.now += PREFLIGHT_S
        levers = tuple((lever.name, lever.trial(config.command_line)) for lever in LEVERS
                       if lever.name != "cuda graphs" and not lever.loader)
        capabilities = plan.Capabilities("cpu", "a CPU", tuple(modes), {"tf32": "mode tf32 only applies to CUDA"},
                                         levers, {"cuda graphs": "CUDA graphs need a GPU"}, None, memory_bytes)
        estimates = plan.Estimates("resnet18", "cifar", 64, 32, True, 8.0, dict.fromkeys(modes, STEP_S), 90.0, 5.0)
        facts = {"device": "cpu", "device_name": "a CPU", "threads": 2, "cores": 2, "parameters": 11_000_000,
                 "train_flops_per_step": 2e11, "timed": list(modes), "not_timed": dict(capabilities.not_timed),
                 "fp8": {}, "levers": [lever for lever, _ in levers], "no_levers": dict(capabilities.no_levers)}
        return Preflight(capabilities, estimates, facts, {})

    return preflight


def phase_document(phase, cut):
    """What main.py would have written for `phase`: the template's runs in its modes and setting,
    the accuracy check's over seeds and evaluated; `cut`: stopped at the deadline."""
    found = copy.deepcopy(TEMPLATE)
    found["config"].update(phase.settings, steps=phase.steps if phase.kind == "accuracy" else 40)
    runs = []
    for repeat in range(phase.repeats):
        for mode in phase.modes:
            run = copy.deepcopy(next(run for run in TEMPLATE["runs"] if run["mode"] == mode))
            run.update(repeat=0 if phase.kind == "accuracy" else repeat, seed=repeat if phase.kind == "accuracy" else 0,
                       channels_last=bool(phase.settings.get("channels_last")),
                       compiled=bool(phase.settings.get("compile")),
                       optimizer_impl=phase.settings.get("optimizer_impl", run["optimizer_impl"]),
                       finished_utc=f"{phase.name}-{repeat}-{mode}")
            if phase.settings.get("compile"):
                run.update(compile_time_s=90.0, compile_mode=phase.settings["compile_mode"])
            if phase.kind == "accuracy":
                run["test_accuracy"] += 0.001 * repeat
            runs.append(run)
    found["runs"] = runs[:max(1, len(runs) - 1)] if cut else runs
    found["incomplete"] = cut
    return found


class FakeRunner:
    """Takes `factor` times each phase's estimate off the clock; a phase still running at the
    deadline ends one step later, its results cut short, as main.py does on SIGTERM."""

    def __init__(self, clock, factor):
        self.clock, self.factor, self.ran, self.deadlines = clock, factor, [], []

    def __call__(self, phase, argv, deadline):
        started = self.clock.now
        self.ran.append(phase)
        self.deadlines.append(deadline)
        ends = started + self.factor * phase.estimate_s
        cut = ends > deadline
        self.clock.now = deadline + STEP_S if cut else ends
        path = argv[argv.index("--json") + 1]
        with open(path, "w") as output:
            json.dump(phase_document(phase, cut), output)
        return session.Outcome(path, 143 if cut else 0, "", self.clock.now - started)


def advise(config, stop, clock, runner, flight):
    """session.advise with the sections utils/app.py hands it, and the fake preflight `flight`."""
    return session.advise(config.training, config.data, config.accuracy, config.precision, config.speed,
                          config.advice, config.command_line, stop, clock, runner, lambda: flight(config))


def config_of(tmp_path, budget, *extra):
    return RunConfig.build(advise=True, budget=budget, model="resnet18", batch_size=64,
                           advice_dir=str(tmp_path / "advice"), **dict(extra))


@pytest.mark.parametrize("budget", [2.0, 3.0, 5.0, 10.0, 60.0])
@pytest.mark.parametrize("factor", [0.5, 1.0, 1.5, 3.0])
def test_the_command_ends_within_its_budget_and_one_step_and_says_what_did_not_fit(tmp_path, budget, factor, capsys):
    clock = FakeClock()
    runner = FakeRunner(clock, factor)
    started = clock.now
    config = config_of(tmp_path, budget)
    with StopRequest() as stop:
        code = advise(config, stop, clock, runner, fake_preflight(clock))
    assert clock.now - started <= budget * 60 + STEP_S
    assert all(deadline == started + budget * 60 for deadline in runner.deadlines)
    advice = json.loads((tmp_path / "advice" / "advice.json").read_text())
    document.check(advice)
    # a comparison the deadline cut short before its third repeat leaves too few for an interval
    expected = "cpu-only" if advice["recommendation"] is not None else "too-few-runs"
    assert code == advice["exit_code"] == document.STATUSES[expected]
    assert expected == "cpu-only" or "compare" in advice["cut_short"]
    assert runner.ran[0].name == "compare"
    # the fake's levers; its memory: unknown
    wanted = {"compare", *[lever.name for lever in LEVERS if lever.name != "cuda graphs" and not lever.loader]}
    ran = [phase.name for phase in runner.ran]
    listed = set(advice["not_run"])
    assert set(ran) | listed - {"accuracy", *plan.REMEASURES} == wanted | ({"accuracy"} & set(ran))
    if (set(ran) | listed) & set(plan.REMEASURES):  # only where the comparison's two leading modes tied
        assert advice["recommendation"] is None or advice["recommendation"]["decision"] == "tie"
    leading = runner.ran[1].modes[0] if len(runner.ran) > 1 else advice["lean"]
    assert "accuracy" in set(ran) | listed or leading == "fp32"  # nothing to check fp32 against
    for name, why in advice["cut_short"].items():  # started within the budget, stopped at its deadline
        assert name in ran and name not in advice["not_run"] and why == "the deadline stopped it before its last step"
    for name, entry in advice["not_run"].items():
        assert name not in ran and entry["why"].startswith("needs about ")
        assert "of the budget was left" in entry["why"]
    assert unresolved(advice, reader(str(tmp_path / "advice"))) == []
    printed = capsys.readouterr().out
    assert printed.index("plan for") < printed.index("compare: fp32, amp-bf16, about")  # the plan comes first


def test_a_phase_is_started_only_when_its_estimate_fits_what_is_left(tmp_path):
    clock = FakeClock()
    runner = FakeRunner(clock, 1.0)
    started = clock.now
    with StopRequest() as stop:
        advise(config_of(tmp_path, 3.0), stop, clock, runner, fake_preflight(clock))
    elapsed = PREFLIGHT_S
    for phase in runner.ran:
        assert phase.estimate_s <= 3.0 * 60 - elapsed
        elapsed += phase.estimate_s
    assert clock.now - started == pytest.approx(elapsed)


def test_a_budget_below_one_comparison_is_refused_with_what_it_needs(tmp_path):
    clock = FakeClock()
    with StopRequest() as stop, pytest.raises(UserError, match=r"--budget 0.5 is less than one comparison needs "
                                                               r"here: fp32, amp-bf16, 3 repeats of 5 steps.*give "
                                                               r"--budget [0-9.]+ or more"):
        advise(config_of(tmp_path, 0.5), stop, clock, FakeRunner(clock, 1.0), fake_preflight(clock))
    assert not (tmp_path / "advice").exists()


def test_the_user_flags_reach_every_phase_and_the_advised_command(tmp_path):
    clock = FakeClock()
    argvs = []
    runner = FakeRunner(clock, 0.5)

    def recording(phase, argv, deadline):
        argvs.append((phase, argv))
        return runner(phase, argv, deadline)

    config = config_of(tmp_path, 60.0, ("image_size", 64), ("lr", 0.05), ("data", "cifar10"), ("steps", 300))
    with StopRequest() as stop:
        advise(config, stop, clock, recording, fake_preflight(clock))
    for phase, argv in argvs:
        pairs = list(zip(argv, argv[1:]))
        for flag, value in (("--lr", "0.05"), ("--batch-size", "64"), ("--model", "resnet18"), ("--data", "cifar10"),
                            ("--image-size", "64")):
            assert (flag, value) in pairs, (phase.name, argv)
        assert (("--steps", "300") in pairs) == (phase.kind == "accuracy")  # the speed phases choose their length
        assert all(flag not in argv for flag in ("--advise", "--budget", "--advice-dir"))
    advice = json.loads((tmp_path / "advice" / "advice.json").read_text())
    command = advice["recommendation"]["command"]
    assert command[:2] == ["python", "main.py"] and "--steps" in command and "--image-size" in command


@pytest.mark.parametrize("stopped_in", ["compare", "channels-last"])
def test_a_stop_signal_that_ends_a_phase_before_it_wrote_a_result_is_said_as_the_stop(tmp_path, stopped_in):
    """A stop signal can end a phase's main.py before its first step, so that it writes no
    results: that phase was stopped, not failed, and --advise still ends with 128 + the signal."""
    clock = FakeClock()
    runner = FakeRunner(clock, 0.5)

    def stopping(phase, argv, deadline):
        if phase.name != stopped_in:
            return runner(phase, argv, deadline)
        stop.handler(signal.SIGINT, None)  # arrives as the phase's process builds its model
        return session.Outcome(None, 2, "main.py: SIGTERM received before building the model: stopping now", 1.0)

    with StopRequest() as stop:
        code = advise(config_of(tmp_path, 10.0), stop, clock, stopping, fake_preflight(clock))
    assert code == 128 + signal.SIGINT
    if stopped_in == "compare":  # nothing measured, so nothing advised
        assert not (tmp_path / "advice" / "advice.json").exists()
        return
    advice = json.loads((tmp_path / "advice" / "advice.json").read_text())
    assert advice["not_run"][stopped_in]["why"] == "stopped by SIGINT before it wrote a result"
    assert all(entry["why"].startswith("stopped by SIGINT") for entry in advice["not_run"].values())


STAND_IN = """import json, signal, sys, time
path = sys.argv[sys.argv.index("--json") + 1]
def stop(number, frame):
    with open(path, "w") as out:
        json.dump({"stopped": True}, out)
    sys.exit(128 + number)
signal.signal(signal.SIGTERM, stop if "--obey" in sys.argv else signal.SIG_IGN)
print("main.py: error: a stand-in that never ends by itself.", flush=True)
while True:
    time.sleep(0.05)
"""


@pytest.mark.parametrize("obeys", [True, False])
def test_a_phase_still_running_at_the_deadline_gets_sigterm_and_sigkill_if_it_ignores_it(tmp_path, monkeypatch,
                                                                                           obeys):
    stand_in = tmp_path / "main.py"
    stand_in.write_text(STAND_IN)
    monkeypatch.setattr(session, "MAIN", str(stand_in))
    monkeypatch.setattr(session, "GRACE_S", 1.0)
    for sub in ("logs", "phases"):
        (tmp_path / sub).mkdir()
    phase = plan.Phase("compare", ("fp32",), 5, 2, 3, estimate_s=0.1)
    results = str(tmp_path / "phases" / "compare.json")
    with StopRequest() as stop:
        runner = session.process_runner(str(tmp_path), stop)
        started = time.monotonic()
        outcome = runner(phase, [*(["--obey"] if obeys else []), "--json", results], started + 1.0)
    took = time.monotonic() - started
    if obeys:  # ended as main.py does on SIGTERM: its results written, 128 + 15
        assert outcome.returncode == 143 and outcome.results == results and 1.0 <= took < 2.5
    else:  # killed once its grace ran out
        assert outcome.returncode == -9 and outcome.results is None and 2.0 <= took < 3.5
    assert outcome.said == "a stand-in that never ends by itself."


def settled_by(ratios):
    """A FakeRunner whose comparison and re-measures time amp-bf16 at fp32's 40 ms over each
    phase's `ratios` (one a repeat), every step alike, and whose accuracy check finds the two
    modes' accuracies the same."""
    clock = FakeClock()
    runner = FakeRunner(clock, 0.5)

    def timed(phase, argv, deadline):
        outcome = runner(phase, argv, deadline)
        found = json.loads(open(outcome.results).read())
        for run in found["runs"]:
            if phase.kind == "accuracy":
                run["test_accuracy"] = 0.8 + 0.001 * run["seed"]
            elif phase.kind in ("compare", "re-measure"):
                ms = 40.0 / (ratios[phase.name][run["repeat"]] if run["mode"] == "amp-bf16" else 1.0)
                run.update(step_times_ms=[ms] * len(run["step_times_ms"]),
                           step_time_ms=dict.fromkeys(run["step_time_ms"], ms))
        with open(outcome.results, "w") as output:
            json.dump(found, output)
        return outcome

    return clock, runner, timed


def test_a_tie_is_re_measured_two_repeats_at_a_time_until_its_interval_excludes_one(tmp_path):
    clock, runner, timed = settled_by({"compare": [1.10, 0.95, 1.08], "re-measure": [1.08, 1.08],
                                       "re-measure again": [1.08, 1.08]})
    with StopRequest() as stop:
        advise(config_of(tmp_path, 60.0), stop, clock, timed, fake_preflight(clock))
    names = [phase.name for phase in runner.ran]
    assert names[:3] == ["compare", "re-measure", "re-measure again"]
    assert all(phase.modes == ("amp-bf16", "fp32") and phase.repeats == 2 for phase in runner.ran[1:3])
    advice = json.loads((tmp_path / "advice" / "advice.json").read_text())
    assert advice["recommendation"]["decision"] == "fastest" and advice["recommendation"]["mode"] == "amp-bf16"
    speedup = next(entry for entry in advice["evidence"] if entry["what"] == "amp-bf16's speedup over fp32")
    assert speedup["n"] == 7 and speedup["interval"][0] > 1 and "7 paired repeats" in speedup["rests_on"]
    assert unresolved(advice, reader(str(tmp_path / "advice"))) == []


def test_a_tie_that_more_repeats_do_not_settle_stays_a_tie_at_seven_pairs(tmp_path):
    clock, runner, timed = settled_by({"compare": [1.05, 0.95, 1.05], "re-measure": [0.95, 1.05],
                                       "re-measure again": [0.95, 1.05]})
    with StopRequest() as stop:
        advise(config_of(tmp_path, 60.0), stop, clock, timed, fake_preflight(clock))
    assert [phase.name for phase in runner.ran].count("re-measure again") == 1
    advice = json.loads((tmp_path / "advice" / "advice.json").read_text())
    assert advice["recommendation"]["decision"] == "tie" and advice["recommendation"]["mode"] == "fp32"
    assert "0.95x" not in advice["claims"][0]["text"] and "holds 1" in advice["claims"][0]["text"]


@pytest.mark.parametrize("memory_gib", [None, 1, 64])
def test_a_larger_batch_is_timed_where_the_leading_modes_memory_leaves_room(tmp_path, memory_gib):
    clock = FakeClock()
    argvs = []
    runner = FakeRunner(clock, 0.5)

    def recording(phase, argv, deadline):
        argvs.append((phase, argv))
        return runner(phase, argv, deadline)

    memory = memory_gib and memory_gib << 30
    with StopRequest() as stop:
        advise(config_of(tmp_path, 60.0), stop, clock, recording, fake_preflight(clock, memory_bytes=memory))
    advice = json.loads((tmp_path / "advice" / "advice.json").read_text())
    batch = [argv for phase, argv in argvs if phase.name == plan.LARGER_BATCH]
    if memory_gib == 64:  # the template's peak, 1 GiB or so, twice over, fits
        (argv,) = batch
        assert ("--batch-size", "128") in list(zip(argv, argv[1:])) and "--repeats" in argv
        assert plan.LARGER_BATCH not in advice["not_run"]
    elif memory_gib is None:  # not planned where the device's memory is unknown
        assert batch == [] and plan.LARGER_BATCH not in advice["not_run"]
        assert plan.LARGER_BATCH not in [phase["name"] for phase in advice["plan"]]
    else:
        assert batch == [] and "more than 90% of the 1.0 GiB here" in advice["not_run"][plan.LARGER_BATCH]["why"]


def test_the_comparisons_profiler_traces_are_kept_and_cited(tmp_path):
    clock = FakeClock()
    runner = FakeRunner(clock, 0.5)
    traced = []

    def tracing(phase, argv, deadline):
        if phase.kind == "compare":  # what main.py --trace-dir writes: a folder a run
            folder = argv[argv.index("--trace-dir") + 1]
            for mode in phase.modes:
                for repeat in range(phase.repeats):
                    path = os.path.join(folder, f"resnet18-{mode}-repeat{repeat}", "rank0.pt.trace.json")
                    os.makedirs(os.path.dirname(path))
                    with open(path, "w") as trace:
                        trace.write("{}")
                    traced.append(path)
        else:
            assert "--trace-dir" not in argv
        return runner(phase, argv, deadline)

    with StopRequest() as stop:
        advise(config_of(tmp_path, 60.0), stop, clock, tracing, fake_preflight(clock))
    advice = json.loads((tmp_path / "advice" / "advice.json").read_text())
    assert advice["traces"] == {mode: os.path.join("traces", f"resnet18-{mode}-repeat0", "rank0.pt.trace.json")
                                for mode in ("fp32", "amp-bf16")}
    (said,) = [claim["text"] for claim in advice["claims"] if "ui.perfetto.dev" in claim["text"]]
    assert "amp-bf16's traces/resnet18-amp-bf16-repeat0/rank0.pt.trace.json" in said
    assert unresolved(advice, reader(str(tmp_path / "advice"))) == []
    assert advice["recommendation"]["nsys"] is None  # a CPU's advice: no Nsight Systems line


@pytest.mark.parametrize("bound", ["input", "step"])
def test_the_loaders_levers_are_tried_only_where_the_comparison_found_the_loader_bounding_the_lead(tmp_path, bound):
    clock = FakeClock()
    runner = FakeRunner(clock, 0.5)
    argvs = []
    more = default_workers() + 3  # not this machine's default, which a command leaves out

    def streamed(phase, argv, deadline):
        """The fake run on streamed data: each run's feed says `bound`."""
        argvs.append((phase, argv))
        outcome = runner(phase, argv, deadline)
        found = json.loads(open(outcome.results).read())
        found["config"].update(loader="stream", workers=phase.settings.get("workers", 1))
        for run in found["runs"]:
            run["feed"] = {"loader": "stream", "workers": found["config"]["workers"], "decode": "cpu", "cores": 2,
                           "loader_images_per_sec": 10.0 if bound == "input" else 1000.0, "loader_batches": 8,
                           "step_images_per_sec": 100.0, "step_steps": 4, "train_images_per_sec": 9.0,
                           "bound": bound, "contended": False, "levers": []}
        with open(outcome.results, "w") as output:
            json.dump(found, output)
        return outcome

    def preflight(config):
        found = fake_preflight(clock)(config)
        capabilities = found.capabilities
        levers = capabilities.levers + (("more workers", {"workers": more}),)
        return Preflight(plan.Capabilities(capabilities.device, capabilities.device_name, capabilities.modes,
                                           capabilities.not_timed, levers, capabilities.no_levers),
                         found.estimates, found.facts, {})

    with StopRequest() as stop:
        advise(config_of(tmp_path, 60.0, ("workers", 1)), stop, clock, streamed, preflight)
    advice = json.loads((tmp_path / "advice" / "advice.json").read_text())
    tried = [argv for phase, argv in argvs if phase.name == "more workers"]
    if bound == "input":
        (argv,) = tried
        assert ("--workers", str(more)) in list(zip(argv, argv[1:]))
    else:
        assert tried == [] and "more workers" not in advice["not_run"]
