"""The suite's steps, each described once in STEPS: its name, its section, its commands (a main.py
run or a study's as a typed value, main_run.MainRun or study_run.StudyRun, its command line
rendered from it), its known time with --quick, and by its place there the order in which a
budget spends on it. Every list of steps (the priority order, a section's steps, the --quick
times, README's coverage) is derived from STEPS; a step's time estimate is read from its
commands (estimate.py), so nothing here repeats what a command says."""
from __future__ import annotations

import dataclasses
import itertools
import os
import re
import string
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Dict, List, Optional, Protocol, Sequence, Set, Tuple, Union

from benchmarks import fp8_sweep
from benchmarks.suite.device import DataFacts, data_facts
from benchmarks.suite.main_run import PYTHON, ROOT, MainRun, main_run
from benchmarks.suite.study_run import StudyRun, study_run
from utils import modes, spellings
from utils.config import default_data_dir, flag_words
from utils.measure.estimate import Run

# The modes each section times, as the mode rows say (utils/modes.py's Mode.timed_in)
MODES = modes.timed_in(modes.COMPARISONS)
TRANSFORMER_MODES = modes.timed_in(modes.TRANSFORMERS)
HEADLINE_MODES = modes.timed_in(modes.HEADLINE)  # README's table for the convnets, and resnet50 at 224
HEADLINE_FP8_MODES = modes.timed_in(modes.FP8_ROW)  # and its FP8 row, its baseline first
RECIPES: List[Tuple[str, Dict[str, Any]]] = [
    ("eager", {}), ("compile", {"compile": True}), ("cudagraphs", {"compile": True, "compile_mode": "reduce-overhead"})]
RESUME_PROCESSES = ("resume-full-a", "resume-full-b", "resume-stopped", "resume-resumed")
ADVISE_MINUTES = 6  # the advise step's --budget: its comparison, a lever or two and what the accuracy check needs
ADVICE_DIR = "advise"  # where in a run's folder the advise step writes its advice.json and report.txt


class Plan:
    """Step counts and sizes: the GPU plan took 6.6 minutes on an H100 (measured there:
    a resnet50 FP32 step at batch 256 takes 90 ms, the five modes 240 ms together, and each
    process spends 15-20 s starting); --quick shrinks everything for a CPU."""

    def __init__(self, quick: bool) -> None:
        self.quick = quick
        self.on_gpu: Dict[str, Any] = {} if quick else {"gpu": True}  # main.py's setting
        self.slow_fp16: Dict[str, Any] = {"allow_slow_fp16": True} if quick else {}  # float16 on a CPU only if asked
        self.classic_steps = 3 if quick else 200
        self.batch = 16 if quick else 256
        self.steps = 4 if quick else 50
        self.warmup = 1 if quick else 10
        self.repeats = 2  # the full comparisons: 3 took a cold H100 past 9 minutes
        # README's rows: 3 repeats give each ratio a 95% interval (--quick: the plumbing, 2 are enough)
        self.headline_repeats = 2 if quick else 3
        # the steps and mode_steps of each headline step a GPU pass times for the energy window (window_runs):
        # each mode's timed steps last it (estimate.window_steps sets them before the planning); else `steps`
        self.window_settings: Dict[str, Dict[str, Any]] = {}
        self.stem_name = "imagenet" if quick else "cifar"  # 32x32 at full resolution is slow on a CPU
        self.stem: Dict[str, Any] = {"stem": self.stem_name} if quick else {}
        self.models = ["resnet18"] if quick else ["resnet50", "resnet18"]
        self.resume_steps = 6 if quick else 40
        self.resume_every = 2 if quick else 10
        self.amp = {"modes": "amp-bf16" if quick else "amp-fp16"}  # a CPU has no fast float16
        self.explain_steps = 1 if quick else 5  # float16 steps take seconds on a CPU
        self.vit = "vit_t4" if quick else "vit_s4"
        self.vit_batch = 4 if quick else self.batch
        self.vit_steps = 3 if quick else self.steps
        self.vit_repeats = 1 if quick else self.repeats
        self.vit_headline_repeats = self.vit_repeats if quick else self.headline_repeats  # README's FP8 row
        # the FP8 sweep: fp8_sweep.py's widths (384 to 4096), batch and steps; --quick: two tiny widths, emulated
        self.sweep_widths = [64, 128] if quick else fp8_sweep.WIDTHS
        self.sweep_batch = 2 if quick else fp8_sweep.BATCH
        self.sweep_steps, self.sweep_warmup = (2, 1) if quick else (fp8_sweep.STEPS, fp8_sweep.WARMUP)
        # torchvision's own models at their native 224x224 (vit_b_16, resnet50); --quick: the least a CPU does
        self.vit_b_batch, self.vit_b_steps = (1, 2) if quick else (self.batch, self.steps)
        self.native_size = 64 if quick else 224  # resnet50 at 224 takes seconds a step on a CPU
        self.native_batch = 4 if quick else self.batch


class Program(Protocol):
    """What a command runs: a main.py run (MainRun) or a study's (StudyRun), each a typed value
    whose command line is rendered from it."""

    def argv(self) -> Tuple[str, ...]: ...

    def moved(self, old: Path, new: Path) -> Program: ...


@dataclass(frozen=True)
class Command:
    """One process of a step, its `program`; `name` names its log (NAME.log) and its record in
    suite.json."""
    name: str
    program: Program
    timeout: int = 300

    @property
    def run(self) -> Optional[MainRun]:
        """The main.py run this command makes; None for a study's."""
        return self.program if isinstance(self.program, MainRun) else None

    @property
    def study(self) -> Optional[StudyRun]:
        """The study this command runs; None for main.py's run."""
        return self.program if isinstance(self.program, StudyRun) else None

    @property
    def argv(self) -> Tuple[str, ...]:
        return self.program.argv()

    def moved(self, old: Path, new: Path) -> Command:
        """The command writing into `new` instead of `old`."""
        return dataclasses.replace(self, program=self.program.moved(old, new))


@dataclass(frozen=True)
class Step:
    """One step of a pass, planned from its description (STEPS): its commands, run in order. The
    resume check's four processes, which share a checkpoint folder that lives only while they
    run, are one step whose `execute` runs them (ledger.run_resume). `quick_s`: its known time
    with --quick (Described.quick_s)."""
    name: str
    section: str
    commands: Tuple[Command, ...]
    execute: Optional[str] = None  # the name of a special runner in ledger.py; None: each command in turn
    quick_s: Optional[int] = None

    @property
    def processes(self) -> Tuple[str, ...]:
        return tuple(command.name for command in self.commands)

    def moved(self, old: Path, new: Path) -> Step:
        """The step with its commands writing into `new` instead of `old`."""
        return dataclasses.replace(self, commands=tuple(command.moved(old, new) for command in self.commands))


Planned = Union[Tuple[Command, ...], str]  # a step's commands, or the sentence that says why it is skipped


@dataclass(frozen=True)
class Described:
    """One step of the suite, described once: its name, its section, its commands and, by its
    place in STEPS, its priority. In `name`, {model} stands for each of the plan's models and
    {layout} for each layout (AXES); `commands(planner, name, **those values)` types the step's
    commands, or says why it is skipped. `quick_s`: its seconds with --quick on a 2-core machine
    like CI's, one torch thread per process as the tests run them, with other jobs sharing it
    (load 3 to 4): the times measured there, a quarter added; None for a step --quick skips."""
    name: str
    section: str
    commands: Callable[..., Planned]
    quick_s: Optional[int]
    execute: Optional[str] = None

    def instances(self, plan: Plan) -> List[Tuple[str, Dict[str, str]]]:
        """(name, the values of its placeholders) of each step this description makes in `plan`."""
        fields = [field for _, field, _, _ in string.Formatter().parse(self.name) if field]
        combinations = itertools.product(*(AXES[field](plan) for field in fields))
        return [(self.name.format(**values), values) for values in (dict(zip(fields, chosen))
                                                                      for chosen in combinations)]


AXES: Dict[str, Callable[[Plan], Sequence[str]]] = {"model": lambda plan: plan.models,
                                                    "layout": lambda plan: ("-cl", "")}


def one(name: str, program: Program, timeout: int = 300) -> Tuple[Command, ...]:
    """The commands of a step that is one process."""
    return (Command(name, program, timeout),)


def available_flags() -> Set[str]:
    from main import build_parser

    return set(re.findall(r"--[a-z][a-z0-9-]*", build_parser().format_help()))


class Planner:
    """What one suite command plans: the steps each section adds, in priority order, and the
    records of the steps it skips, with the reason (suite.json keeps both)."""

    def __init__(self, out: Path, data_dir: Optional[str], plan: Plan, mode_names: Sequence[str], flags: Set[str],
                 transformer_modes: Sequence[str] = (), say: Callable[[str], None] = print,
                 data: Optional[DataFacts] = None) -> None:
        self.out, self.plan, self.say = out, plan, say
        self.known_data = data  # what the runs train on, where the caller knows it: else asked once, when needed
        self.data_settings: Dict[str, Any] = {"data_dir": data_dir, "allow_unverified": True} if data_dir else {}
        # where the runs look for CIFAR-10: the suite's --data-dir, else main.py's default (they start in ROOT)
        self.data_dir, self.unverified = data_dir or os.path.join(ROOT, default_data_dir()), bool(data_dir)
        self.modes, self.flags = list(mode_names), flags  # the modes this device runs; main.py's flags
        self.transformer_modes = list(transformer_modes)  # the transformers section's, that this device runs
        self.records: List[Dict[str, Any]] = []  # this command's step records: skipped here, run by the ledger
        self.planned: List[Step] = []
        self.section = "modes"  # the section whose steps are planned now

    def plan_section(self, section: str) -> None:
        """Plan `section`'s steps, in priority order: each described step's commands, or its skip."""
        self.section = section
        check = SECTIONS[section]
        if check is not None and not check(self):
            return
        for described in STEPS:
            if described.section != section:
                continue
            for name, values in described.instances(self.plan):
                planned = described.commands(self, name, **values)
                if isinstance(planned, str):
                    self.skip(name, planned)
                else:
                    self.planned.append(Step(name, section, planned, described.execute, described.quick_s))

    def skip(self, name: str, reason: str) -> None:
        reason = reason.replace(str(ROOT) + os.sep, "")  # as the commands are recorded: no machine's path
        self.records.append({"name": name, "section": self.section, "skipped": reason})
        self.say(f"{name}: skipped ({reason})")

    @property
    def data_flags(self) -> List[str]:
        """The data's flags that every main.py command types (suite.json records them)."""
        return [word for key, value in self.data_settings.items() for word in flag_words(key, value)]

    @property
    def data(self) -> DataFacts:
        """data_facts' answer, asked once, by the first step that needs CIFAR-10 or evaluates."""
        if self.known_data is None:
            self.known_data = data_facts(self.data_dir, self.unverified)
        return self.known_data

    @property
    def without_cifar10(self) -> Optional[str]:
        return self.data.without_cifar10

    def without_test_images(self) -> Optional[str]:
        """Why a step that measures test accuracy is skipped where the runs get synthetic data."""
        if self.without_cifar10:
            return ("it measures test accuracy, and the runs get synthetic data, which has no test images: "
                    + self.without_cifar10)
        return None


def headline_convnet(suite: Planner, name: str, model: str) -> Planned:
    """README's headline: resnet50 and resnet18 with channels_last in fp32, tf32, amp-fp16 and
    amp-bf16 (3 repeats, alternating, for an interval on each ratio; on a GPU each mode's timed
    steps last the energy window, for J/image and enough busy-share samples). --quick runs
    resnet18 at tiny sizes."""
    plan = suite.plan
    return one(name, main_run(**plan.on_gpu, **plan.slow_fp16, model=model, **plan.stem, batch_size=plan.batch,
                              **plan.window_settings.get(name, {"steps": plan.steps}), warmup=plan.warmup,
                              modes=",".join(headline_convnet_modes(suite)), repeats=plan.headline_repeats,
                              channels_last=True, **suite.data_settings, no_progress=True, no_eval=True,
                              json=suite.out / f"{name}.json", plot=suite.out / f"{name}.png"))


def headline_vit(suite: Planner, name: str) -> Planned:
    """README's FP8 row: vit_s4 in amp-bf16, fp8 and fp8-rowwise eager (on a GPU 3 repeats, each
    mode timed for the energy window as the convnets are; --quick: vit_t4, FP8 emulated)."""
    plan = suite.plan
    if not {"--fp8-emulate", "--modes"} <= suite.flags:
        return "this version of main.py has no fp8 modes"
    fp8 = headline_vit_modes(suite)
    emulate = {"fp8_emulate": True} if plan.quick else {}
    baseline = {"baseline": "amp-bf16"} if "amp-bf16" in fp8 and "--baseline" in suite.flags else {}
    return one(name, main_run(**plan.on_gpu, model=plan.vit, batch_size=plan.vit_batch,
                              **plan.window_settings.get(name, {"steps": plan.vit_steps}), warmup=plan.warmup,
                              modes=",".join(fp8), **emulate, **baseline, repeats=plan.vit_headline_repeats,
                              **suite.data_settings, no_progress=True, no_eval=True, json=suite.out / f"{name}.json"))


def headline_vit_modes(suite: Planner) -> List[str]:
    """The modes of the headline's FP8 row that this device runs."""
    return [mode for mode in HEADLINE_FP8_MODES if mode in suite.transformer_modes]


def window_runs(suite: Planner) -> Dict[str, List[Run]]:
    """The headline steps a GPU pass times for the energy window, each with one run of every mode
    it times, as its command runs it: the convnets with channels_last, and the FP8 row; none with
    --quick, whose tiny steps are the plumbing's."""
    plan = suite.plan
    if plan.quick:
        return {}
    found = {f"headline-{model}": [Run(model, "cifar", mode, plan.batch, plan.steps, channels_last=True)
                                   for mode in headline_convnet_modes(suite)] for model in plan.models}
    found["headline-vit"] = [Run(plan.vit, "cifar", mode, plan.vit_batch, plan.vit_steps)
                             for mode in headline_vit_modes(suite)]
    return {name: runs for name, runs in found.items() if runs}


def overhead(suite: Planner, name: str) -> Planned:
    """README's overhead ratio: ampbench's loop against a bare AMP-recipe loop."""
    plan = suite.plan
    model, mode, batch, steps, rounds = (("resnet18", "fp32", 8, 2, 3) if plan.quick else
                                         ("resnet50", "amp-fp16", plan.batch, 20, 7))
    return one(name, study_run("overhead.py", **plan.on_gpu, modes=[mode], model=model, batch_size=batch,
                               timed_steps=steps, rounds=rounds))


def headline_convnet_modes(suite: Planner) -> List[str]:
    """The modes of the headline's convnets that this device runs."""
    return [mode for mode in HEADLINE_MODES if mode in suite.modes]


def classic(suite: Planner, name: str, spelled: Optional[Dict[str, str]] = None) -> Planned:
    """The tutorial's commands as typed (resnet50 on the GPU; `spelled`: the precision's spelling,
    --fp16 -s, where it names one)."""
    plan, spelled = suite.plan, spelled or {}
    precision = {"modes": spellings.MODE_OF[tuple(spelled["modes"].split())]} if "modes" in spelled else {}
    return one(name, main_run({"model": "--model", **spelled}, steps=plan.classic_steps, **plan.on_gpu, **precision,
                              model="resnet50", **quick_size(plan), **suite.data_settings, no_progress=True,
                              json=suite.out / f"{name}.json"))


def classic_cpu(suite: Planner, name: str) -> Planned:
    plan = suite.plan
    return one(name, main_run({"model": "--model"}, steps=3 if plan.quick else 20, model="resnet18",
                              **quick_size(plan), **suite.data_settings, no_progress=True,
                              json=suite.out / f"{name}.json"))


def quick_size(plan: Plan) -> Dict[str, Any]:
    """The classic commands' sizes with --quick: a batch and stem a CPU runs in seconds."""
    return {"batch_size": 16, "stem": "imagenet", "warmup": 1, **plan.slow_fp16} if plan.quick else {}


def comparison(suite: Planner, name: str, model: str, layout: str) -> Planned:
    """Every mode of `model` in one layout, with --explain and --numerics (and, once, --max-batch)."""
    plan, flags = suite.plan, suite.flags
    extra: Dict[str, Any] = {key: True for key in ("explain", "numerics") if f"--{key}" in flags}
    if "explain" in extra:
        extra["explain_steps"] = plan.explain_steps
    # --quick: the plumbing in two modes, without the test set (convergence checks accuracy); a CPU
    # takes seconds a step in float16, and evaluates in seconds per mode and repeat
    modes = "fp32,amp-bf16" if plan.quick else ",".join(suite.modes)
    if plan.quick:
        extra["no_eval"] = True
    # the largest batch per mode: once, for the first model's plain layout, on a GPU
    largest = not plan.quick and "--max-batch" in flags and model == plan.models[0] and not layout
    return one(name, main_run(**plan.on_gpu, **plan.slow_fp16, model=model, **plan.stem, batch_size=plan.batch,
                              steps=plan.steps, warmup=plan.warmup, modes=modes, repeats=plan.repeats,
                              **({"channels_last": True} if layout else {}), **extra,
                              **({"max_batch": True} if largest else {}), **suite.data_settings, no_progress=True,
                              json=suite.out / f"{name}.json", plot=suite.out / f"{name}.png",
                              csv=suite.out / "all.csv"),
               timeout=900 if largest else 420)


def comparisons_run(suite: Planner) -> bool:
    """The comparisons run; each of their flags this main.py lacks is recorded as skipped."""
    for flag, what in (("--explain", "the per-category step-time breakdown"),
                       ("--numerics", "the gradient census"), ("--max-batch", "the largest batch per mode")):
        if flag not in suite.flags:
            suite.skip(flag, f"{what}: this version of main.py has no {flag}")
    return True


def recipe(suite: Planner, name: str) -> Planned:
    """The fastest honest recipe per mode: eager, torch.compile and compile with CUDA graphs
    (RECIPES, by the name's end), all with channels_last and the fused optimizer, every mode in
    one process per recipe."""
    plan, settings = suite.plan, dict(RECIPES)[name[len("recipe-"):]]
    return one(name, main_run(gpu=True, model="resnet18", batch_size=plan.batch, steps=plan.steps, warmup=plan.warmup,
                              channels_last=True, modes=",".join(suite.modes), **settings, **suite.data_settings,
                              no_progress=True, no_eval=True, json=suite.out / f"{name}.json"),
               timeout=540)


def recipes_run(suite: Planner) -> bool:
    if suite.plan.quick:
        suite.skip("recipes", "torch.compile takes minutes on a 2-core CPU; the GPU suite runs it")
    return not suite.plan.quick


def loaders(suite: Planner, name: str) -> Planned:
    plan = suite.plan
    if suite.without_cifar10:
        return f"benchmarks/loader.py times CIFAR-10's images: {suite.without_cifar10}"
    return one(name, study_run("loader.py", **plan.on_gpu, batch_size=plan.batch, batches=3 if plan.quick else 20,
                               data_dir=suite.data_dir))


def convergence(suite: Planner, name: str) -> Planned:
    """Does accuracy hold? resnet18 with channels_last in every mode, 3 seeds paired across
    modes, evaluated every epoch to a plateau of the data, with a target accuracy: the verdicts
    and the time to target (about 4 minutes on an H100, by the step times measured there)."""
    plan = suite.plan
    why = suite.without_test_images()
    if why:
        return why
    # --quick: a few steps evaluated every one to three (the subset's epoch is 340 batches of 16)
    size: Dict[str, Any]
    if plan.quick:
        size = {"stem": "imagenet", "batch_size": 16, "steps": 8, "warmup": 1, "eval_every": 0.001,
                "target_accuracy": 0.05, "modes": "fp32,amp-bf16", "seeds": 2}
    else:
        size = {"batch_size": plan.batch, "epochs": 15, "warmup": plan.warmup, "eval_every": 1,
                "target_accuracy": 0.5, "modes": ",".join(suite.modes), "seeds": 3, "channels_last": True}
    return one(name, main_run(**plan.on_gpu, **plan.slow_fp16, model="resnet18", **size, **suite.data_settings,
                              no_progress=True, json=suite.out / f"{name}.json", plot=suite.out / f"{name}.png"),
               timeout=540)


def one_process_run(suite: Planner) -> Dict[str, Any]:
    """The run that plain-1 and torchrun-1 make alike: one process, and one rank under torchrun."""
    plan = suite.plan
    return {**plan.on_gpu, **plan.slow_fp16, "model": "resnet18", **plan.stem, "batch_size": plan.batch,
            "steps": plan.steps, "warmup": plan.warmup, **plan.amp, **suite.data_settings, "no_progress": True,
            "no_eval": True}


def plain(suite: Planner, name: str) -> Planned:
    return one(name, main_run(**one_process_run(suite), json=suite.out / f"{name}.json"))


def torchrun(suite: Planner, name: str) -> Planned:
    launcher = (PYTHON, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node=1")
    run = main_run(**one_process_run(suite), json=suite.out / f"{name}.json")
    return one(name, dataclasses.replace(run, launcher=launcher))


def resume_folder() -> Path:
    """Where the resume check's checkpoints live while it runs: they are large, never in the results."""
    return Path(tempfile.gettempdir()) / f"ampbench-resume-{os.getpid()}"


def resume(suite: Planner, name: str) -> Planned:
    """Checkpoint, SIGTERM and resume against an uninterrupted run, and an uninterrupted run
    against itself: the second pair is the noise floor of this device's arithmetic. The stopped
    run gets SIGTERM once its first checkpoint exists (ledger.run_resume), then resumes."""
    plan, work = suite.plan, resume_folder()
    common = {**one_process_run(suite), "steps": plan.resume_steps}
    stopped = main_run(**common, checkpoint=work / "stopped.pt", checkpoint_every=plan.resume_every,
                       json=suite.out / f"{name}.json")
    runs = [main_run(**common, checkpoint=work / "full-a.pt"), main_run(**common, checkpoint=work / "full-b.pt"),
            stopped, stopped.with_settings(resume=True)]
    return tuple(Command(process, run) for process, run in zip(RESUME_PROCESSES, runs))


def transformers_run(suite: Planner) -> bool:
    """Does FP8 pay on a transformer? vit_s4 at batch 256 in every mode of TRANSFORMER_MODES,
    eager (2 repeats, --explain) and compiled, then 5 epochs of the subset evaluated after each;
    fp8_sweep.py's blocks by width, and vit_b_16 at 224. An estimate, not a measurement: a vit_s4
    step is 2.2 TFLOP at batch 256 (8.5 GFLOP an image), so the six modes' steps take about 0.15 s
    together on an H100 (fp32 about 80 ms at 40% of its peak, the others 10 to 20 ms); the eager
    run's 110 steps per mode are then about 1 minute with starting and profiling, the compiled
    run's 60 about 5 minutes, almost all compiling (about 45 s per mode), and the 5 epochs (21
    steps each) about 1.5 minutes with their evaluations: some 7.5 minutes in all."""
    if not {"--fp8-emulate", "--modes"} <= suite.flags:
        suite.skip("transformers", "this version of main.py has no fp8 modes")
        return False
    return True


def transformer_run(suite: Planner) -> Dict[str, Any]:
    """What the vit_s4 steps share: every transformer mode this device runs (--quick leaves out
    float16, which takes seconds a step on a CPU without fast float16 arithmetic, and emulates FP8)."""
    plan = suite.plan
    fp8 = plan.quick and any(modes.MODES[mode].float8 for mode in suite.transformer_modes)
    names = [mode for mode in suite.transformer_modes if not (plan.quick and mode == "amp-fp16")]
    return {**plan.on_gpu, **plan.slow_fp16, "model": plan.vit, "batch_size": plan.vit_batch, "modes": ",".join(names),
            **({"fp8_emulate": True} if fp8 else {}), **suite.data_settings, "no_progress": True}


def transformers_eager(suite: Planner, name: str) -> Planned:
    plan = suite.plan
    return one(name, main_run(**transformer_run(suite), steps=plan.vit_steps, warmup=plan.warmup,
                              repeats=plan.vit_repeats, **explained(suite), no_eval=True,
                              json=suite.out / f"{name}.json"), timeout=540)


def explained(suite: Planner) -> Dict[str, Any]:
    """--explain for a few steps, where this main.py has it."""
    return {"explain": True, "explain_steps": suite.plan.explain_steps} if "--explain" in suite.flags else {}


def transformers_compile(suite: Planner, name: str) -> Planned:
    plan = suite.plan
    if plan.quick:
        return "torch.compile takes minutes on a 2-core CPU; the GPU suite runs it"
    return one(name, main_run(**transformer_run(suite), steps=plan.steps, warmup=plan.warmup, compile=True,
                              no_eval=True, json=suite.out / f"{name}.json"), timeout=540)


def transformers_accuracy(suite: Planner, name: str) -> Planned:
    plan = suite.plan
    if plan.quick:
        return "epochs of a ViT take hours on a 2-core CPU; the GPU suite runs them"
    why = suite.without_test_images()
    if why:
        return why
    return one(name, main_run(**transformer_run(suite), epochs=5, warmup=plan.warmup, eval_every=1,
                              json=suite.out / f"{name}.json"), timeout=540)


def fp8_missing(suite: Planner) -> Optional[str]:
    """Why the FP8 sweep and vit_b_16 are skipped on a device that cannot run both fp8 recipes
    beside amp-bf16 (the skipped mode's reason says why: torchao missing, no FP8 tensor cores)."""
    missing = [mode for mode in HEADLINE_FP8_MODES if mode not in suite.transformer_modes]
    if missing:
        return (f"it compares fp8 and fp8-rowwise with amp-bf16, and this device cannot run {', '.join(missing)} "
                f"(see `mode {missing[0]}`)")
    return None


def transformers_sweep(suite: Planner, name: str) -> Planned:
    """Where FP8 starts to pay: fp8_sweep.py's ViT blocks from width 384 to 4096, measured beside
    the roofline's prediction. --quick: two tiny widths, FP8 emulated."""
    plan = suite.plan
    why = fp8_missing(suite)
    if why:
        return why
    device = {"fp8_emulate": True} if plan.quick else plan.on_gpu
    return one(name, study_run("fp8_sweep.py", **device, widths=plan.sweep_widths, batch_size=plan.sweep_batch,
                               timed_steps=plan.sweep_steps, warmup=plan.sweep_warmup,
                               json=suite.out / f"{name}.json"), timeout=540)


def transformers_vit_b_16(suite: Planner, name: str) -> Planned:
    """torchvision's vit_b_16 at its native 224x224 in amp-bf16 and both fp8 recipes (eager).
    --quick: batch 1, FP8 emulated."""
    plan = suite.plan
    why = fp8_missing(suite)
    if why:
        return why
    if "--image-size" not in suite.flags:
        return "vit_b_16 needs 224x224 images: this version of main.py has no --image-size"
    return one(name, main_run(**plan.on_gpu, model="vit_b_16", image_size=224, batch_size=plan.vit_b_batch,
                              steps=plan.vit_b_steps, warmup=plan.warmup, modes=",".join(HEADLINE_FP8_MODES),
                              **({"fp8_emulate": True} if plan.quick else {}), baseline="amp-bf16",
                              **suite.data_settings, no_progress=True, no_eval=True, json=suite.out / f"{name}.json"),
               timeout=540)


def native(suite: Planner, name: str, data: str) -> Planned:
    """resnet50 at its native 224x224 with channels_last in fp32, tf32, amp-fp16 and amp-bf16
    against tf32 (3 repeats), on synthetic images or on CIFAR-10 upsampled on the device, beside
    NVIDIA's published figures where this GPU is one they measured (published.py). The synthetic
    step runs --explain, so its page says where each mode's step goes (why amp-bf16 trails
    amp-fp16 there, say). --quick: 64x64, batch 4, without tf32 (a GPU's) and float16 (seconds a
    step on a CPU)."""
    plan = suite.plan
    if data == "cifar10" and suite.without_cifar10:
        return (f"it trains on CIFAR-10 upsampled to {plan.native_size}x{plan.native_size}, and the runs get "
                f"synthetic data: {suite.without_cifar10}")
    names = [mode for mode in HEADLINE_MODES if mode in suite.modes and not (plan.quick and mode == "amp-fp16")]
    baseline = {"baseline": "tf32"} if "tf32" in names else {}
    source = {"data": "synthetic"} if data == "synthetic" else {"data": "cifar10", **suite.data_settings}
    return one(name, main_run(**plan.on_gpu, **plan.slow_fp16, model="resnet50", stem="imagenet",
                              image_size=plan.native_size, batch_size=plan.native_batch, steps=plan.steps,
                              warmup=plan.warmup, modes=",".join(names), **baseline, repeats=plan.headline_repeats,
                              channels_last=True, **(explained(suite) if data == "synthetic" else {}), **source,
                              no_progress=True, no_eval=True, json=suite.out / f"{name}.json"), timeout=540)


def advise(suite: Planner, name: str) -> Planned:
    """Which precision resnet50 at its native 224x224 should train with on this GPU, as a user
    asks it: main.py --advise within ADVISE_MINUTES, its advice.json, report and runs in ADVICE_DIR
    (README's table across devices reads them). --quick skips it: its phases take minutes of a CPU."""
    plan = suite.plan
    if plan.quick:
        return "the adviser's phases take many minutes of a 2-core CPU; the GPU suite runs it"
    if "--advise" not in suite.flags:
        return "this version of main.py has no --advise"
    return one(name, main_run(gpu=True, advise=True, model="resnet50", image_size=224, batch_size=plan.native_batch,
                              budget=ADVISE_MINUTES, **suite.data_settings, no_progress=True,
                              advice_dir=suite.out / ADVICE_DIR), timeout=ADVISE_MINUTES * 60 + 120)


def native_run(suite: Planner) -> bool:
    if "--image-size" not in suite.flags:
        suite.skip("native", "this version of main.py has no --image-size")
        return False
    return True


# The sections, in the order a pass plans them (`--only` names them), each with what it checks
# before its steps: False where the whole section is skipped (it records why).
SECTIONS: Dict[str, Optional[Callable[[Planner], bool]]] = {
    "headline": None, "classics": None, "comparisons": comparisons_run, "recipes": recipes_run, "convergence": None,
    "scripts": None, "torchrun": None, "resume": None, "transformers": transformers_run, "native": native_run,
    "advise": None}

# Every step of the suite, most wanted first: README's headline (its table, the FP8 row, the
# overhead ratio); resnet50 at its native size on synthetic images (the size people train), and
# which precision it should train with there (the adviser's answer, README's advice table); the
# recipes that lift a host-bound row (torch.compile and CUDA graphs, beside eager); the compiled
# transformers; vit_b_16 at 224; whether accuracy holds; then resnet50 on upsampled CIFAR-10, the
# FP8 width sweep, the transformers' eager speeds, the full comparisons (every mode, --explain,
# --numerics, --max-batch), the evaluated transformers, and the checks of the plumbing: the
# loaders, the classic commands, torchrun, and the resume check.
STEPS: Tuple[Described, ...] = (
    Described("headline-{model}", "headline", headline_convnet, quick_s=60),
    Described("headline-vit", "headline", headline_vit, quick_s=10),
    Described("overhead", "headline", overhead, quick_s=15),
    Described("native-synthetic", "native", lambda suite, name: native(suite, name, "synthetic"), quick_s=30),
    Described("advise", "advise", advise, quick_s=None),
    Described("recipe-compile", "recipes", recipe, quick_s=None),
    Described("recipe-cudagraphs", "recipes", recipe, quick_s=None),
    Described("recipe-eager", "recipes", recipe, quick_s=None),
    Described("transformers-compile", "transformers", transformers_compile, quick_s=None),
    Described("transformers-vit_b_16", "transformers", transformers_vit_b_16, quick_s=85),
    Described("convergence", "convergence", convergence, quick_s=70),
    Described("native-cifar10", "native", lambda suite, name: native(suite, name, "cifar10"), quick_s=30),
    Described("transformers-sweep", "transformers", transformers_sweep, quick_s=40),
    Described("transformers-eager", "transformers", transformers_eager, quick_s=20),
    Described("{model}{layout}", "comparisons", comparison, quick_s=170),
    Described("transformers-accuracy", "transformers", transformers_accuracy, quick_s=None),
    Described("loaders", "scripts", loaders, quick_s=10),
    Described("classic-fp16", "classics", lambda suite, name: classic(suite, name, {"modes": "--fp16 -s"}), quick_s=95),
    Described("classic-fp32", "classics", classic, quick_s=20),
    Described("classic-cpu", "classics", classic_cpu, quick_s=10),
    Described("plain-1", "torchrun", plain, quick_s=10),
    Described("torchrun-1", "torchrun", torchrun, quick_s=15),
    Described("resume", "resume", resume, quick_s=40, execute="resume"),
)


def priority(plan: Plan) -> List[str]:
    """Every step's name in `plan`, most wanted first: STEPS' order."""
    return [name for described in STEPS for name, _ in described.instances(plan)]


def planned_steps(planner: Planner, sections: Sequence[str]) -> List[Step]:
    """The steps `sections` plan, in priority order."""
    for name in sections:
        planner.plan_section(name)
    order = priority(planner.plan)
    return sorted(planner.planned, key=lambda step: order.index(step.name))
