"""A lent GPU, made up for the CPU: the H200 under a made-up NVML, main.py's runs made up at the
H200's measured step times, and the suite's clocks spending each step's made-up seconds. A test
installs it in its own process (with pytest's monkeypatch), or in a suite it starts as a child
process, through a sitecustomize hook (`hook`), so that a lease script can run end to end."""
import copy
import functools
import json
import os
import sys
import time
from pathlib import Path

from conftest import ROOT, FakeGpu, fake_nvml

H200 = ROOT / "results" / "NVIDIA-H200" / "2026-11-26"
HEADLINE = H200 / "headline-resnet18.json"  # 2 repeats of fp32, tf32, amp-fp16, amp-bf16, before the busy share
BUS = "00000000:3B:00.0"
SOFTWARE = {"torch": "2.11.0+cu130", "cuda": "13.0", "driver": "580.159.04"}  # the H200 folder's passes'


def flag_value(words, flag):
    return words[words.index(flag) + 1] if flag in words[:-1] else None


class Patch:
    """monkeypatch's setattr and setitem, for a process without pytest: nothing is undone."""

    @staticmethod
    def setattr(target, name, value):
        setattr(target, name, value)

    @staticmethod
    def setitem(mapping, key, value):
        mapping[key] = value


class MadeUpLease:
    """A GPU under a made-up NVML (an energy counter drawing each mode's watts, a utilization
    sample every 0.5 s) and main.py's runs made up at the H200's measured step times: each run's
    energy and busy share are what nvml_meter reads of it, over its timed steps. The clocks the
    suite spends its budget by move by each step's made-up seconds (a process's start, 15 s, and
    its runs' steps) and by nothing else, so that a pass spends as on the GPU, however busy the
    CPU that plans it. An advise step's advice is the adviser's, decided (--advise --from) from
    made-up runs of its model and size."""
    WATTS = {"fp32": 600.0, "tf32": 650.0, "amp-fp16": 500.0, "amp-bf16": 520.0}
    START_S = 15.0

    def __init__(self, patch):
        self.now, self.millijoules, self.watts, self.since, self.samples = 1_000.0, 0, 0.0, 1_000.0, []
        self.spent = 0.0  # the made-up seconds the steps took
        for name in ("perf_counter", "monotonic"):
            patch.setattr(time, name, functools.partial(lambda start: start + self.spent, getattr(time, name)()))
        patch.setitem(sys.modules, "pynvml", fake_nvml(FakeGpu(0, BUS, energy=self.energy,
                                                               utilization=lambda: self.samples)))
        self.medians = {(model, run["mode"]): run["step_time_ms"]["median"]
                        for model, step in (("resnet50", "headline-resnet50"), ("resnet18", "headline-resnet18"),
                                            ("vit_s4", "transformers-eager"))  # the H200's only fp8 runs
                        for run in json.loads((H200 / f"{step}.json").read_text())["runs"]}

    def energy(self):
        return int(self.millijoules + 1000 * self.watts * (self.now - self.since))

    def measured(self, mode, ms, steps, images):
        """One run's timed steps: its energy and busy share, as the meter reads them."""
        from utils.measure import nvml_meter

        meter = nvml_meter.open_meter(0, BUS, clock=lambda: self.now, interval_s=3600.0, wall=lambda: self.now)
        self.millijoules, self.watts, self.since = self.energy(), self.WATTS.get(mode, 500.0), self.now
        meter.start()
        seconds = steps * ms / 1000
        self.samples += [(int((self.now + 0.5 * (i + 1)) * 1e6), 95 if mode == "fp32" else 70)
                         for i in range(int(seconds / 0.5))]
        self.now += seconds
        found = meter.finish(images)
        self.now += 2.0
        return found

    def document(self, words):
        """The results main.py would write for its command `words`, from these made-up runs."""
        from utils.config import mode_steps_of

        template = json.loads(HEADLINE.read_text())
        steps, warmup = int(flag_value(words, "-n")), int(flag_value(words, "--timing-warmup"))
        modes, model = flag_value(words, "--modes").split(","), flag_value(words, "-m")
        repeats, runs = int(flag_value(words, "--repeats") or 1), []
        own = mode_steps_of(flag_value(words, "--mode-steps"))
        for repeat in range(repeats):
            for mode in modes if repeat % 2 == 0 else modes[::-1]:
                n = own.get(mode, steps)
                run = copy.deepcopy(next((run for run in template["runs"] if run["mode"] == mode),
                                         template["runs"][-1]))
                ms = self.medians.get((model, mode), 35.0)
                run.update(mode=mode, repeat=repeat, steps=n, warmup=warmup, timed_steps=n - warmup, completed_steps=n,
                           step_times_ms=[ms * (1 + 0.002 * (i % 5)) for i in range(n - warmup)],
                           step_time_ms=dict(run["step_time_ms"], median=ms, p10=ms, p90=ms * 1.008, min=ms,
                                             max=ms * 1.008, mean=ms * 1.004),
                           images_per_sec=256 * 1000 / ms, **self.measured(mode, ms, n - warmup, 256 * (n - warmup)))
                runs.append(run)
        template.update(schema="ampbench.result/5", runs=runs)
        template["config"].update(steps=steps, warmup=warmup, repeats=repeats, modes=",".join(modes), model=model,
                                  mode_steps=flag_value(words, "--mode-steps"),
                                  image_size=int(flag_value(words, "--image-size") or 32))
        template["env"].update(git_commit="c" * 40, source_sha256="d" * 64, git_commit_source="AMPBENCH_COMMIT")
        return template

    def advise(self, words):
        """What the advise step leaves in its --advice-dir: the adviser's advice, decided from
        made-up runs of its model and image size (3 repeats of the four modes)."""
        import main

        folder = Path(flag_value(words, "--advice-dir"))
        folder.mkdir(parents=True, exist_ok=True)
        runs = ["-m", flag_value(words, "-m"), "--image-size", flag_value(words, "--image-size"), "-n", "60",
                "--timing-warmup", "10", "--modes", "fp32,tf32,amp-fp16,amp-bf16", "--repeats", "3"]
        (folder / "results.json").write_text(json.dumps(self.document(runs)))
        main.main(["--advise", "--from", str(folder / "results.json"), "--advice-dir", str(folder)])

    def run(self, runner, section, command, stop_when=None):
        """ledger.Runner.run for a made-up GPU: main.py's results, and for any program a log."""
        started, before = time.perf_counter(), self.now
        words = list(command.argv)
        (runner.out / f"{command.name}.log").write_text("throughput ratio ampbench/bare: 0.990\n")
        if words[1].endswith("main.py") and "--advise" in words:
            self.advise(words)
        elif "--json" in words and words[1].endswith("main.py"):
            with open(flag_value(words, "--json"), "w") as file:
                json.dump(self.document(words), file)
        self.spent += self.START_S + (self.now - before)
        runner.record(section, command, 0, started)
        return 0


def install(patch):
    """The made-up H200 in the suite's place of the machine: its device, its software, its runs."""
    from benchmarks.suite import device, history, ledger

    lease = MadeUpLease(patch)
    patch.setattr(ledger.Runner, "run", lambda runner, *words, **kwargs: lease.run(runner, *words, **kwargs))
    patch.setattr(device, "device_facts", lambda quick, modes: ("NVIDIA H200", {}))
    patch.setattr(device, "software", lambda: dict(SOFTWARE))
    patch.setattr(history, "WARNED", set())
    return lease


# A sitecustomize for the processes a test starts: in gpu_suite.py's, the made-up H200 stands in
# for the machine before the suite imports what it patches; any other process is left alone.
HOOK = """
if any(part.endswith(b"gpu_suite.py") for part in open("/proc/self/cmdline", "rb").read().split(b"\\0")):
    import made_up_lease
    made_up_lease.install(made_up_lease.Patch())
"""


def hook(folder):
    """A child's PYTHONPATH with HOOK as its sitecustomize.py first, and last the folders that hold
    this module and the conftest it imports."""
    os.makedirs(folder, exist_ok=True)
    Path(folder, "sitecustomize.py").write_text(HOOK)
    return os.pathsep.join([str(folder), os.environ.get("PYTHONPATH", str(ROOT)), str(ROOT / "tests"),
                            str(ROOT / "tests" / "benchmarks")])
