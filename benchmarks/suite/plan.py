"""The suite's steps: each section's commands, typed as a user would type them, and the order in
which a budget spends on them. A step is described once, by its commands; its time estimate is
read from them (estimate.py), so nothing here repeats what a command says."""
from __future__ import annotations

import dataclasses
import os
import re
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Dict, List, Optional, Sequence, Set, Tuple

from benchmarks import fp8_sweep
from benchmarks.suite.device import DataFacts, data_facts
from utils import modes
from utils.config import default_data_dir

ROOT = Path(__file__).resolve().parents[2]
PYTHON = sys.executable
# Every mode but the didactic amp-fp16-noscale (its underflow is --numerics' subject, not a speed) and
# the fp8 modes, which refuse convnets (they have almost no Linear FLOPs): the transformers section's
MODES = [name for name in modes.MODES if name != "amp-fp16-noscale" and not modes.MODES[name].float8]
TRANSFORMER_MODES = ["fp32", "tf32", "amp-fp16", "amp-bf16", "fp8", "fp8-rowwise"]
HEADLINE_MODES = ["fp32", "tf32", "amp-fp16", "amp-bf16"]  # README's table, for the convnets
HEADLINE_FP8_MODES = ["amp-bf16", "fp8", "fp8-rowwise"]  # and its FP8 row: FP8 against its fair baseline
# resnet50 at 224: strict FP32, and NVIDIA's published ResNet-50 figures' TF32 and AMP
NATIVE_MODES = ["fp32", "tf32", "amp-fp16", "amp-bf16"]
RECIPES = [("eager", []), ("compile", ["--compile"]),
           ("cudagraphs", ["--compile", "--compile-mode", "reduce-overhead"])]
RESUME_PROCESSES = ("resume-full-a", "resume-full-b", "resume-stopped", "resume-resumed")


class Plan:
    """Step counts and sizes: the GPU plan took 6.6 minutes on an H100 (measured there:
    a resnet50 FP32 step at batch 256 takes 90 ms, the five modes 240 ms together, and each
    process spends 15-20 s starting); --quick shrinks everything for a CPU."""

    def __init__(self, quick: bool) -> None:
        self.quick = quick
        self.gpu = [] if quick else ["-p"]
        self.slow_fp16 = [] if self.gpu else ["--allow-slow-fp16"]  # main.py runs float16 on a CPU only if asked
        self.classic_steps = 3 if quick else 200
        self.batch = 16 if quick else 256
        self.steps = 4 if quick else 50
        self.warmup = 1 if quick else 10
        self.repeats = 2  # the full comparisons: 3 took a cold H100 past 9 minutes
        # README's rows: 3 repeats give each ratio a 95% interval (--quick: the plumbing, 2 are enough)
        self.headline_repeats = 2 if quick else 3
        # the headline's steps per model where they are more than `steps`: on a GPU, enough that each mode's timed
        # steps last the window an energy figure needs (estimate.window_steps sets them before the planning)
        self.headline_steps: Dict[str, int] = {}
        self.stem_name = "imagenet" if quick else "cifar"  # 32x32 at full resolution is slow on a CPU
        self.stem = ["--stem", self.stem_name] if quick else []
        self.models = ["resnet18"] if quick else ["resnet50", "resnet18"]
        self.resume_steps = 6 if quick else 40
        self.resume_every = 2 if quick else 10
        self.amp = ["--modes", "amp-bf16" if quick else "amp-fp16"]  # a CPU has no fast float16
        self.explain_steps = 1 if quick else 5  # float16 steps take seconds on a CPU
        self.vit = "vit_t4" if quick else "vit_s4"
        self.vit_batch = 4 if quick else self.batch
        self.vit_steps = 3 if quick else self.steps
        self.vit_repeats = 1 if quick else self.repeats
        # the FP8 sweep: fp8_sweep.py's widths (384 to 4096), batch and steps; --quick: two tiny widths, emulated
        self.sweep_widths = [64, 128] if quick else fp8_sweep.WIDTHS
        self.sweep_batch = 2 if quick else fp8_sweep.BATCH
        self.sweep_steps, self.sweep_warmup = (2, 1) if quick else (fp8_sweep.STEPS, fp8_sweep.WARMUP)
        # torchvision's own models at their native 224x224 (vit_b_16, resnet50); --quick: the least a CPU does
        self.vit_b_batch, self.vit_b_steps = (1, 2) if quick else (self.batch, self.steps)
        self.native_size = 64 if quick else 224  # resnet50 at 224 takes seconds a step on a CPU
        self.native_batch = 4 if quick else self.batch


@dataclass(frozen=True)
class Command:
    """One process of a step, as a user would type it; `name` names its log (NAME.log) and its
    record in suite.json."""
    name: str
    argv: Tuple[str, ...]
    timeout: int = 300


@dataclass(frozen=True)
class Step:
    """One step of the suite: its commands, run in order. The resume check's four processes,
    which share a checkpoint folder that lives only while they run, are one step whose
    `execute` runs them (ledger.run_resume)."""
    name: str
    section: str
    commands: Tuple[Command, ...]
    execute: Optional[str] = None  # the name of a special runner in ledger.py; None: each command in turn

    @property
    def processes(self) -> Tuple[str, ...]:
        return tuple(command.name for command in self.commands)

    def moved(self, old: Path, new: Path) -> Step:
        """The step with its commands writing into `new` instead of `old`."""
        commands = tuple(dataclasses.replace(command, argv=tuple(arg.replace(str(old), str(new))
                                                                 for arg in command.argv))
                         for command in self.commands)
        return dataclasses.replace(self, commands=commands)


def main_py(*argv: object) -> List[str]:
    return [PYTHON, str(ROOT / "main.py"), *map(str, argv)]


def script(name: str, *argv: object) -> List[str]:
    """A benchmark script of benchmarks/ as a user would run it."""
    return [PYTHON, str(ROOT / "benchmarks" / name), *map(str, argv)]


def available_flags() -> Set[str]:
    from main import build_parser

    return set(re.findall(r"--[a-z][a-z0-9-]*", build_parser().format_help()))


class Planner:
    """What one suite command plans: the steps each section adds, in the order added, and the
    records of the steps it skips, with the reason (suite.json keeps both)."""

    def __init__(self, out: Path, data_dir: Optional[str], plan: Plan, mode_names: Sequence[str], flags: Set[str],
                 transformer_modes: Sequence[str] = (), say: Callable[[str], None] = print,
                 data: Optional[DataFacts] = None) -> None:
        self.out, self.plan, self.say = out, plan, say
        self.known_data = data  # what the runs train on, where the caller knows it: else asked once, when needed
        self.data_flags = ["--data-dir", data_dir, "--allow-unverified"] if data_dir else []
        # where the runs look for CIFAR-10: the suite's --data-dir, else main.py's default (they start in ROOT)
        self.data_dir, self.unverified = data_dir or os.path.join(ROOT, default_data_dir()), bool(data_dir)
        self.modes, self.flags = list(mode_names), flags  # the modes this device runs; main.py's flags
        self.transformer_modes = list(transformer_modes)  # the transformers section's, that this device runs
        self.records: List[Dict[str, object]] = []  # this command's step records: skipped here, run by the ledger
        self.planned: List[Step] = []
        self.section = "modes"  # the section whose steps are planned now

    def add(self, name: str, argv: Sequence[object], timeout: int = 300) -> None:
        self.planned.append(Step(name, self.section, (Command(name, tuple(map(str, argv)), timeout),)))

    def skip(self, name: str, reason: str) -> None:
        reason = reason.replace(str(ROOT) + os.sep, "")  # as the commands are recorded: no machine's path
        self.records.append({"name": name, "section": self.section, "skipped": reason})
        self.say(f"{name}: skipped ({reason})")

    @property
    def data(self) -> DataFacts:
        """data_facts' answer, asked once, by the first step that needs CIFAR-10 or evaluates."""
        if self.known_data is None:
            self.known_data = data_facts(self.data_dir, self.unverified)
        return self.known_data

    @property
    def without_cifar10(self) -> Optional[str]:
        return self.data.without_cifar10

    def skip_without_test_images(self, name: str) -> bool:
        """Skip `name`, which measures test accuracy, where the runs get synthetic data: True if so."""
        if self.without_cifar10:
            self.skip(name, "it measures test accuracy, and the runs get synthetic data, which has no test images: "
                      + self.without_cifar10)
        return bool(self.without_cifar10)


def plan_headline(suite: Planner) -> None:
    """README's headline: resnet50 and resnet18 with channels_last in fp32, tf32, amp-fp16 and
    amp-bf16 (3 repeats, alternating, for an interval on each ratio; on a GPU each mode's timed
    steps last the energy window, for J/image and enough busy-share samples), vit_s4 in amp-bf16,
    fp8 and fp8-rowwise eager, and the overhead benchmark's ratio. --quick runs resnet18 and
    vit_t4 at tiny sizes, FP8 emulated."""
    plan = suite.plan
    convnet = headline_convnet_modes(suite)
    for model in plan.models:
        name = f"headline-{model}"
        steps = plan.headline_steps.get(model, plan.steps)
        suite.add(name, main_py(*plan.gpu, *plan.slow_fp16, "-m", model, *plan.stem, "-b", plan.batch, "-n",
                                steps, "--timing-warmup", plan.warmup, "--modes", ",".join(convnet), "--repeats",
                                plan.headline_repeats, "--channels-last", *suite.data_flags, "--no-progress",
                                "--no-eval", "--json", suite.out / f"{name}.json", "--plot", suite.out / f"{name}.png"))
    fp8 = [mode for mode in HEADLINE_FP8_MODES if mode in suite.transformer_modes]
    if not {"--fp8-emulate", "--modes"} <= suite.flags:
        suite.skip("headline-vit", "this version of main.py has no fp8 modes")
    else:
        emulate = ["--fp8-emulate"] if plan.quick else []
        baseline = ["--baseline", "amp-bf16"] if "amp-bf16" in fp8 and "--baseline" in suite.flags else []
        suite.add("headline-vit", main_py(*plan.gpu, "-m", plan.vit, "-b", plan.vit_batch, "-n", plan.vit_steps,
                                          "--timing-warmup", plan.warmup, "--modes", ",".join(fp8), *emulate, *baseline,
                                          "--repeats", plan.vit_repeats, *suite.data_flags, "--no-progress",
                                          "--no-eval", "--json", suite.out / "headline-vit.json"))
    model, mode, batch, steps, rounds = (("resnet18", "fp32", 8, 2, 3) if plan.quick else
                                         ("resnet50", "amp-fp16", plan.batch, 20, 7))
    suite.add("overhead", script("overhead.py", *plan.gpu, "--mode", mode, "--model", model, "-b", batch, "--steps",
                                 steps, "--rounds", rounds))


def headline_convnet_modes(suite: Planner) -> List[str]:
    """The modes of the headline's convnets that this device runs."""
    return [mode for mode in HEADLINE_MODES if mode in suite.modes]


def plan_classics(suite: Planner) -> None:
    plan, data = suite.plan, suite.data_flags
    n = plan.classic_steps
    quick_size = ["-b", "16", "--stem", "imagenet", "--timing-warmup", "1", *plan.slow_fp16] if plan.quick else []
    for name, flags in (("classic-fp16", ["--fp16", "-s"]), ("classic-fp32", [])):
        suite.add(name, main_py("-n", n, *plan.gpu, *flags, "--model", "resnet50", *quick_size, *data,
                                "--no-progress", "--json", suite.out / f"{name}.json"))
    cpu_steps = 3 if plan.quick else 20
    suite.add("classic-cpu", main_py("-n", cpu_steps, "--model", "resnet18", *quick_size, *data,
                                     "--no-progress", "--json", suite.out / "classic-cpu.json"))


def plan_comparisons(suite: Planner) -> None:
    plan, data, flags = suite.plan, suite.data_flags, suite.flags
    extra: List[object] = [flag for flag in ("--explain", "--numerics") if flag in flags]
    if "--explain" in extra:
        extra += ["--explain-steps", plan.explain_steps]
    # --quick: the plumbing in two modes, without the test set (convergence checks accuracy); a CPU
    # takes seconds a step in float16, and evaluates in seconds per mode and repeat
    modes = "fp32,amp-bf16" if plan.quick else ",".join(suite.modes)
    if plan.quick:
        extra.append("--no-eval")
    for model in plan.models:
        for layout in ("", "-cl"):
            name = f"{model}{layout}"
            # the largest batch per mode: once, for the first model's plain layout, on a GPU
            largest = not plan.quick and "--max-batch" in flags and model == plan.models[0] and not layout
            suite.add(name, main_py(*plan.gpu, *plan.slow_fp16, "-m", model, *plan.stem, "-b", plan.batch,
                                    "-n", plan.steps,
                                    "--timing-warmup", plan.warmup, "--modes", modes, "--repeats", plan.repeats,
                                    *(["--channels-last"] if layout else []), *extra,
                                    *(["--max-batch"] if largest else []), *data, "--no-progress",
                                    "--json", suite.out / f"{name}.json", "--plot", suite.out / f"{name}.png",
                                    "--csv", suite.out / "all.csv"),
                      timeout=900 if largest else 420)
    for flag, what in (("--explain", "the per-category step-time breakdown"),
                       ("--numerics", "the gradient census"), ("--max-batch", "the largest batch per mode")):
        if flag not in flags:
            suite.skip(flag, f"{what}: this version of main.py has no {flag}")


def plan_recipes(suite: Planner) -> None:
    """The fastest honest recipe per mode: eager, torch.compile and compile with CUDA graphs,
    all with channels_last and the fused optimizer, every mode in one process per recipe."""
    plan = suite.plan
    if plan.quick:
        suite.skip("recipes", "torch.compile takes minutes on a 2-core CPU; the GPU suite runs it")
        return
    for recipe, flags in RECIPES:
        suite.add(f"recipe-{recipe}", main_py("-p", "-m", "resnet18", "-b", plan.batch, "-n", plan.steps,
                                              "--timing-warmup", plan.warmup, "--channels-last", "--modes",
                                              ",".join(suite.modes), *flags,
                                              *suite.data_flags, "--no-progress", "--no-eval", "--json",
                                              suite.out / f"recipe-{recipe}.json"), timeout=540)


def plan_scripts(suite: Planner) -> None:
    plan = suite.plan
    if suite.without_cifar10:
        suite.skip("loaders", f"benchmarks/loader.py times CIFAR-10's images: {suite.without_cifar10}")
        return
    suite.add("loaders", script("loader.py", *plan.gpu, "-b", plan.batch, "--batches", 3 if plan.quick else 20,
                                "--data-dir", suite.data_dir))


def plan_convergence(suite: Planner) -> None:
    """Does accuracy hold? resnet18 with channels_last in every mode, 3 seeds paired across
    modes, evaluated every epoch to a plateau of the data, with a target accuracy: the verdicts
    and the time to target (about 4 minutes on an H100, by the step times measured there)."""
    plan = suite.plan
    if suite.skip_without_test_images("convergence"):
        return
    # --quick: a few steps evaluated every one to three (the subset's epoch is 340 batches of 16)
    size: List[object]
    if plan.quick:
        size = ["--stem", "imagenet", "-b", 16, "-n", 8, "--timing-warmup", 1, "--eval-every", 0.001,
                "--target-accuracy", 0.05, "--modes", "fp32,amp-bf16", "--seeds", 2]
    else:
        size = ["-b", plan.batch, "--epochs", 15, "--timing-warmup", plan.warmup, "--eval-every", 1,
                "--target-accuracy", 0.5, "--modes", ",".join(suite.modes), "--seeds", 3, "--channels-last"]
    suite.add("convergence", main_py(*plan.gpu, *plan.slow_fp16, "-m", "resnet18", *size, *suite.data_flags,
                                     "--no-progress", "--json", suite.out / "convergence.json", "--plot",
                                     suite.out / "convergence.png"), timeout=540)


def plan_torchrun(suite: Planner) -> None:
    plan = suite.plan
    common = [*plan.gpu, *plan.slow_fp16, "-m", "resnet18", *plan.stem, "-b", plan.batch, "-n", plan.steps,
              "--timing-warmup", plan.warmup, *plan.amp, *suite.data_flags, "--no-progress", "--no-eval"]
    suite.add("plain-1", main_py(*common, "--json", suite.out / "plain-1.json"))
    torchrun = [PYTHON, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node=1", str(ROOT / "main.py")]
    suite.add("torchrun-1", torchrun + [str(a) for a in common] + ["--json", str(suite.out / "torchrun-1.json")])


def resume_folder() -> Path:
    """Where the resume check's checkpoints live while it runs: they are large, never in the results."""
    return Path(tempfile.gettempdir()) / f"ampbench-resume-{os.getpid()}"


def plan_resume(suite: Planner) -> None:
    """Checkpoint, SIGTERM and resume against an uninterrupted run, and an uninterrupted run
    against itself: the second pair is the noise floor of this device's arithmetic. The stopped
    run gets SIGTERM once its first checkpoint exists (ledger.run_resume), then resumes."""
    plan, work = suite.plan, resume_folder()
    common = [*plan.gpu, *plan.slow_fp16, "-m", "resnet18", *plan.stem, "-b", plan.batch, "-n", plan.resume_steps,
              "--timing-warmup", plan.warmup, *plan.amp, *suite.data_flags, "--no-progress", "--no-eval"]
    stopped = main_py(*common, "--checkpoint", work / "stopped.pt", "--checkpoint-every", plan.resume_every,
                      "--json", suite.out / "resume.json")
    commands = [Command(f"resume-{name}", tuple(main_py(*common, "--checkpoint", work / f"{name}.pt")))
                for name in ("full-a", "full-b")]
    commands += [Command("resume-stopped", tuple(stopped)), Command("resume-resumed", tuple(stopped + ["--resume"]))]
    suite.planned.append(Step("resume", suite.section, tuple(commands), execute="resume"))


def plan_transformers(suite: Planner) -> None:
    """Does FP8 pay on a transformer? vit_s4 at batch 256 in every mode of TRANSFORMER_MODES,
    eager (2 repeats, --explain) and compiled, then 5 epochs of the subset evaluated after each.
    An estimate, not a measurement: a vit_s4 step is 2.2 TFLOP at batch 256 (8.5 GFLOP an
    image), so the six modes' steps take about 0.15 s together on an H100 (fp32 about 80 ms at
    40% of its peak, the others 10 to 20 ms); the eager run's 110 steps per mode are then about
    1 minute with starting and profiling, the compiled run's 60 about 5 minutes, almost all
    compiling (about 45 s per mode), and the 5 epochs (21 steps each) about 1.5 minutes with
    their evaluations: some 7.5 minutes in all."""
    plan = suite.plan
    if not {"--fp8-emulate", "--modes"} <= suite.flags:
        suite.skip("transformers", "this version of main.py has no fp8 modes")
        return
    plan_fp8_at_size(suite)
    fp8 = ["--fp8-emulate"] if plan.quick and any(modes.MODES[mode].float8 for mode in suite.transformer_modes) else []
    # --quick leaves out float16, which takes seconds a step on a CPU without fast float16 arithmetic
    names = [mode for mode in suite.transformer_modes if not (plan.quick and mode == "amp-fp16")]
    common = [*plan.gpu, *plan.slow_fp16, "-m", plan.vit, "-b", plan.vit_batch, "--modes", ",".join(names), *fp8,
              *suite.data_flags, "--no-progress"]
    explain = ["--explain", "--explain-steps", plan.explain_steps] if "--explain" in suite.flags else []
    suite.add("transformers-eager", main_py(*common, "-n", plan.vit_steps, "--timing-warmup", plan.warmup,
                                            "--repeats", plan.vit_repeats, *explain, "--no-eval",
                                            "--json", suite.out / "transformers-eager.json"), timeout=540)
    if plan.quick:
        suite.skip("transformers-compile", "torch.compile takes minutes on a 2-core CPU; the GPU suite runs it")
        suite.skip("transformers-accuracy", "epochs of a ViT take hours on a 2-core CPU; the GPU suite runs them")
        return
    suite.add("transformers-compile", main_py(*common, "-n", plan.steps, "--timing-warmup", plan.warmup, "--compile",
                                              "--no-eval", "--json", suite.out / "transformers-compile.json"),
              timeout=540)
    if suite.skip_without_test_images("transformers-accuracy"):
        return
    suite.add("transformers-accuracy", main_py(*common, "--epochs", 5, "--timing-warmup", plan.warmup,
                                               "--eval-every", 1, "--json", suite.out / "transformers-accuracy.json"),
              timeout=540)


def plan_fp8_at_size(suite: Planner) -> None:
    """Where FP8 starts to pay: fp8_sweep.py's ViT blocks from width 384 to 4096, measured beside
    the roofline's prediction, and torchvision's vit_b_16 at its native 224x224 in amp-bf16 and
    both fp8 recipes (eager). --quick: two tiny widths and vit_b_16 at batch 1, FP8 emulated."""
    plan = suite.plan
    fp8 = [mode for mode in HEADLINE_FP8_MODES if mode in suite.transformer_modes]
    missing = [mode for mode in HEADLINE_FP8_MODES if mode not in fp8]
    if missing:  # the reason is the skipped mode's (torchao missing, no FP8 tensor cores)
        for name in ("transformers-sweep", "transformers-vit_b_16"):
            suite.skip(name, f"it compares fp8 and fp8-rowwise with amp-bf16, and this device cannot run "
                       f"{', '.join(missing)} (see `mode {missing[0]}`)")
        return
    emulate = ["--fp8-emulate"] if plan.quick else []
    suite.add("transformers-sweep", script(
        "fp8_sweep.py", *(emulate or ["-p"]), "--widths", ",".join(map(str, plan.sweep_widths)), "-b",
        plan.sweep_batch, "--steps", plan.sweep_steps, "--warmup", plan.sweep_warmup, "--json",
        suite.out / "transformers-sweep.json"), timeout=540)
    if "--image-size" not in suite.flags:
        suite.skip("transformers-vit_b_16", "vit_b_16 needs 224x224 images: this version of main.py has no "
                   "--image-size")
        return
    suite.add("transformers-vit_b_16", main_py(
        *plan.gpu, "-m", "vit_b_16", "--image-size", 224, "-b", plan.vit_b_batch, "-n", plan.vit_b_steps,
        "--timing-warmup", plan.warmup, "--modes", ",".join(fp8), *emulate, "--baseline", "amp-bf16", *suite.data_flags,
        "--no-progress", "--no-eval", "--json", suite.out / "transformers-vit_b_16.json"), timeout=540)


def plan_native(suite: Planner) -> None:
    """resnet50 at its native 224x224 with channels_last in fp32, tf32, amp-fp16 and amp-bf16
    against tf32 (3 repeats), on synthetic images and on CIFAR-10 upsampled on the device, beside
    NVIDIA's published figures where this GPU is one they measured (published.py). The synthetic
    step runs --explain, so its page says where each mode's step goes (why amp-bf16 trails
    amp-fp16 there, say). --quick: 64x64, batch 4, without tf32 (a GPU's) and float16 (seconds a
    step on a CPU)."""
    plan = suite.plan
    if "--image-size" not in suite.flags:
        suite.skip("native", "this version of main.py has no --image-size")
        return
    names = [mode for mode in NATIVE_MODES if mode in suite.modes and not (plan.quick and mode == "amp-fp16")]
    baseline = ["--baseline", "tf32"] if "tf32" in names else []
    explain = ["--explain", "--explain-steps", plan.explain_steps] if "--explain" in suite.flags else []
    for data in ("synthetic", "cifar10"):
        name = f"native-{data}"
        if data == "cifar10" and suite.without_cifar10:
            suite.skip(name, f"it trains on CIFAR-10 upsampled to {plan.native_size}x{plan.native_size}, and the runs "
                       f"get synthetic data: {suite.without_cifar10}")
            continue
        source = ["--data", "synthetic"] if data == "synthetic" else ["--data", "cifar10", *suite.data_flags]
        suite.add(name, main_py(*plan.gpu, *plan.slow_fp16, "-m", "resnet50", "--stem", "imagenet", "--image-size",
                                plan.native_size, "-b", plan.native_batch, "-n", plan.steps, "--timing-warmup",
                                plan.warmup, "--modes", ",".join(names), *baseline, "--repeats", plan.headline_repeats,
                                "--channels-last", *(explain if data == "synthetic" else []), *source,
                                "--no-progress", "--no-eval", "--json", suite.out / f"{name}.json"),
                  timeout=540)


SECTIONS: Dict[str, Callable[[Planner], None]] = {
    "headline": plan_headline, "classics": plan_classics, "comparisons": plan_comparisons, "recipes": plan_recipes,
    "convergence": plan_convergence, "scripts": plan_scripts, "torchrun": plan_torchrun, "resume": plan_resume,
    "transformers": plan_transformers, "native": plan_native}


def priority(plan: Plan) -> List[str]:
    """Every step's name, most wanted first: README's headline (its table, the FP8 row, the
    overhead ratio); resnet50 at its native size on synthetic images (the size people train); the
    recipes that lift a host-bound row (torch.compile and CUDA graphs, beside eager); the compiled
    transformers; vit_b_16 at 224; whether accuracy holds; then resnet50 on upsampled CIFAR-10,
    the FP8 width sweep, the transformers' eager speeds, the full comparisons (every mode,
    --explain, --numerics, --max-batch), the evaluated transformers, and the checks of the
    plumbing: the loaders, the classic commands, torchrun, and the resume check."""
    return ([f"headline-{model}" for model in plan.models] + ["headline-vit", "overhead", "native-synthetic"]
            + [f"recipe-{recipe}" for recipe in ("compile", "cudagraphs", "eager")]
            + ["transformers-compile", "transformers-vit_b_16", "convergence", "native-cifar10", "transformers-sweep",
               "transformers-eager"]
            + [f"{model}{layout}" for model in plan.models for layout in ("-cl", "")]
            + ["transformers-accuracy", "loaders", "classic-fp16", "classic-fp32", "classic-cpu", "plain-1",
               "torchrun-1", "resume"])


def planned_steps(planner: Planner, sections: Sequence[str]) -> List[Step]:
    """The steps `sections` plan, in priority order."""
    for name in sections:
        planner.section = name
        SECTIONS[name](planner)
    order = priority(planner.plan)
    return sorted(planner.planned, key=lambda step: order.index(step.name))
