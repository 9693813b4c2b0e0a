"""What `python main.py` runs once its arguments are a RunConfig: set up the device and the
data, run every mode (x repeats), assemble the results document, print and write it, and
choose the exit status. This is the one place that reads RunConfig whole: it hands each stage
(the trainer, the loop, the evaluation, the outputs, the adviser ...) the sections it reads."""
from __future__ import annotations

import contextlib
import dataclasses
import os
import shlex
import signal
import sys
from typing import TYPE_CHECKING, Any, Callable, Dict, List, Optional, Tuple, Union

import torch

from models import factory, families, raised, user
from utils import compat, console, fileio, launch
from utils.advice import session
from utils.config import SETUP_KEYS, no_test_images
from utils.data import dataset
from utils.errors import UserError
from utils.explain import fp8_predict, profiler
from utils.measure import envinfo, flops, memory
from utils.measure.progress import Reporter
from utils.numerics.census import Census
from utils.results import live, record, run_outputs
from utils.results.compare import compare_modes
from utils.results.summary import summary
from utils.training import checkpoint, distributed, float8, loop, max_batch, precision
from utils.training import feed as training_feed
from utils.training.context import RunContext
from utils.training.curve import AccuracyCurve
from utils.training.evaluation import evaluate
from utils.training.start import pick_device, seeded_model
from utils.training.trainer import build_trainer

if TYPE_CHECKING:
    from torch import nn

    from utils.config import RunConfig, TrainingPlan
    from utils.data.dataset import Data
    from utils.explain.profiler import Profile
    from utils.launch import World
    from utils.modes import Mode
    from utils.stop import StopRequest
    from utils.training.trainer import Trainer


def warn(message: str, kind: str = "warning") -> None:
    if launch.detect().is_main:  # once per job, not once per rank
        print(f"main.py: {kind}: {message}", file=sys.stderr)


def resume_line(config: RunConfig, last: record.RunRecord, checkpoint_holds: Optional[int], saves_failed: bool,
                world: World) -> str:
    """What the user can do after a signal cut the run `last` short; `checkpoint_holds` is the
    step that --checkpoint holds for it, or None when nothing was written (and none resumed).
    The command repeats the launcher that started the job, so every rank resumes."""
    evaluating = last.completed_steps == last.steps
    if evaluating and checkpoint_holds != last.steps:
        return (f"main.py: interrupted by {last.stopped_by} during the test-set evaluation, after all "
                f"{last.steps} steps: the timings are complete, the accuracy was not measured.")
    where = f"interrupted by {last.stopped_by} " + (
        f"during the test-set evaluation, after all {last.steps} steps" if evaluating
        else f"after step {last.completed_steps} of {last.steps}")
    if not config.checkpoints.checkpoint:
        return f"main.py: {where}; no --checkpoint was given, so a rerun starts over."
    if checkpoint_holds is None and saves_failed:
        return f"main.py: {where}; the checkpoint could not be written (above), so a rerun starts over."
    if checkpoint_holds is None:
        return f"main.py: {where}; no step was trained, so no checkpoint was written: rerun the same command."
    command = shlex.join(distributed.launch_prefix(world) + ["main.py"]
                         + [a for a in config.command if a != "--resume"] + ["--resume"])
    return f"main.py: {where}; {config.checkpoints.checkpoint} holds step {checkpoint_holds}; resume with: {command}"


def run(config: RunConfig, stop: StopRequest) -> int:
    """`stop` is main.py's utils.stop.StopRequest, installed before torch was imported."""
    if config.list_models:
        return list_models(config.data.image_size)
    device = pick_device(config.precision.gpu, config.speed.cudnn_benchmark)
    world = launch.detect()
    if world.distributed:
        device = distributed.init(world, config.precision.gpu, config.distributed, config.record())
    stream = live.LiveLog.of(config.measurement, config.training, warn) if world.is_main else None
    context = RunContext(device, world, stop, Reporter(not config.measurement.no_progress and world.is_main,
                                                       config.measurement.log_every, stream))
    try:
        with distributed.session(world):
            return benchmark(config, context)
    except Exception as error:
        if isinstance(error, (RuntimeError, MemoryError)) and memory.is_out_of_memory(error):  # the batch to lower
            raise UserError(memory.out_of_memory_advice(device, config.training.batch_size)) from None
        if config.training.model_factory is not None and raised.raised_by_its_code(error):  # the user's model's bug
            raise UserError(user.raised_while_running(config.training.model_factory, error)) from None
        raise
    finally:
        if stream is not None:
            stream.close_writer()  # a refusal or a traceback: the streams end where the run did


def advise(config: RunConfig, stop: StopRequest) -> int:
    """--advise (utils/advice/session.py), handed the sections it reads and the command line it
    passes on to every run it starts; with --check-flags, its checks up to the plan alone."""
    return session.advise(config.training, config.data, config.accuracy, config.precision, config.speed,
                          config.advice, config.command_line, stop, check_only=config.check_flags)


def list_models(image_size: int) -> int:
    """The models that take images of `image_size` (stdout), and those that do not, with why (stderr)."""
    names = factory.model_names()
    print("\n".join(name for name in names if families.size_refusal(name, image_size) is None))
    left_out = [refusal for refusal in (families.size_refusal(name, image_size) for name in names) if refusal]
    print(f"{len(names) - len(left_out)} models; {len(left_out)} more cannot take {image_size}x{image_size} images "
          f"(--image-size):\n" + "\n".join(left_out), file=sys.stderr)
    return 0


def benchmark(config: RunConfig, context: RunContext) -> int:
    """Prepare once, run every (repeat, mode), then print, write and choose the exit status."""
    plan, model, data, resumed = prepare(config, context)
    return finish(config, plan, context, data, run_all(config, plan, context, model, data, resumed), resumed)


def check_flags(config: RunConfig) -> int:
    """main.py --check-flags: the checks a run makes before its first step, by the run's own
    code, but for those that read its data or a checkpoint: the device and the modes on it, the
    outputs (check_setup), an image folder's tree (listed, not read: a class folder without an
    image is refused as the run refuses it), the model built
    (a torchvision one weightless where this torch can: models/factory.py; a --model-factory
    one whole, as its check may need to run it) and the layers fp8 converts in it. Writes
    nothing, says no warning (the run says them); 0 when the run would start."""
    device = pick_device(config.precision.gpu, config.speed.cudnn_benchmark)
    check_setup(config, device, lambda *said: None)
    classes = dataset.class_count(config.data)
    dataset.check_listing(config.data)
    weightless = compat.runs_on_meta() and config.training.model_factory is None
    with factory.weightless() if weightless else contextlib.nullcontext():
        model = seeded_model(config.training, config.data, classes, device)
    if any(mode.float8 for mode in config.modes):  # refuses a model with nothing to convert
        float8.accounting(model, config.training.batch_size, config.training.model, config.data.input_shape)
    return 0


def check_setup(config: RunConfig, device: torch.device, warn: Callable[..., None]) -> None:
    """A run's checks before it builds its model: the modes on `device`, --compile on this
    torch and every output (run_outputs.check); the flags' and the modes' warnings to `warn`."""
    for message in config.warnings:
        warn(message)
    for mode in config.modes:
        slow = precision.check_supported(mode, device, config.precision.fp8_emulate, config.precision.allow_slow_fp16)
        if slow:
            warn(f"{slow}.")
    if config.precision.fp8_emulate:
        warn("--fp8-emulate: the fp8 modes compute FP8 in software, much slower than FP8 tensor cores and "
             "slower than bfloat16: their times are NOT FP8 speed; use them to check that fp8 trains, never to "
             "benchmark it.", "WARNING")
    if config.speed.compile and not compat.has_compile():
        raise UserError(f"--compile needs torch 2.0 or newer, and this is torch {torch.__version__}: drop --compile.")
    run_outputs.check(config.measurement, config.checkpoints, config.data)


def prepare(config: RunConfig, context: RunContext) -> Tuple[TrainingPlan, nn.Module, Data,
                                                             Optional[checkpoint.Resumed]]:
    """Everything checked before the first step: check_setup's, a killed save's leftovers
    removed, the checkpoint to resume; then the model, the data and the TrainingPlan they
    settle (the steps of --epochs, the family's recipe)."""
    check_setup(config, context.device, warn)
    if config.checkpoints.checkpoint and context.world.is_main:
        removed = fileio.remove_leftovers(config.checkpoints.checkpoint)
        if removed:
            warn(f"removed {removed / 2 ** 20:.1f} MiB of temporary files that a killed save of "
                 f"{config.checkpoints.checkpoint} left beside it.")
    path = config.checkpoints.resume_from
    resumed = checkpoint.Resumed(path, checkpoint.load(path, context.device)) if path is not None else None
    classes = dataset.class_count(config.data)  # an image folder's, listed before the model is built
    smaller = "a smaller model for --model-factory" if config.training.model_factory else "a smaller --model"
    if config.data.num_classes:  # the head grows with them: 2**31 classes take terabytes
        smaller += f", or fewer --num-classes than {config.data.num_classes}"
    with memory.out_of_memory_in(context.device, f"building the model {config.training.model}", f"use {smaller}."):
        model = seeded_model(config.training, config.data, classes, context.device, warn)
    built = f" ({factory.class_name(model)})" if config.training.model_factory else ""
    context.reporter.phase(f"model {config.training.model}{built} built: "
                           f"{sum(p.numel() for p in model.parameters()) / 1e6:.1f} M parameters")
    with memory.out_of_memory_in(context.device, f"loading the training data (--data {config.data.data}), before "
                                 "the first step", "too little memory was free for the data alone: free some "
                                 "(another process may hold it)."):
        data, data_warnings = dataset.load(config.data, context.device, config.training.seed, context.reporter.phase)
    for message in data_warnings:
        warn(message)
    for message in data.notes:
        warn(message, "note")
    if not data.has_test_set and config.accuracy_flags:  # --data auto fell back to synthetic images
        raise UserError(no_test_images(config.accuracy_flags[0], data.name))
    held = f"streamed from disk by {console.plural(config.data.workers, 'worker')}" if data.stream is not None \
        else f"on {context.device}"
    context.reporter.phase(f"data loaded: {data.name}, {data.train_count} training images"
                           + (f", {data.test_count} test images" if data.has_test_set else "") + f", {held}")
    hook = user.logits_hook(model)
    plan = config.plan(factory.has_batch_norm(model), context.world.size, data.train_count, classes,
                       factory.class_name(model), hook.taken if hook else None, data.loader)
    note = config.short_run_note(plan)
    if note:
        warn(note, "note")
    if resumed is not None:
        check_resume(resumed, config, plan, checkpoint.resume_setup(data, context.world),
                     not config.training.no_eval and data.has_test_set)
    return plan, model, data, resumed


def check_resume(resumed: checkpoint.Resumed, config: RunConfig, plan: TrainingPlan,
                 setup: Dict[str, Union[int, str]], evaluates: bool) -> None:
    """Refuse a checkpoint this run cannot continue; `evaluates`: whether the run measures test
    accuracy, so that a checkpoint at the last step whose final evaluation was cut short resumes
    that evaluation alone."""
    path, state, mode = resumed.path, resumed.state, config.modes[0]
    resume_warning = checkpoint.check_compatible(state, config.record(plan), mode, path, setup, config.flag)
    # the steps are all trained and the final evaluation was cut: the run evaluates, and trains nothing more
    evaluates_only = state["step"] == plan.steps and evaluates and checkpoint.lacks_final_evaluation(state, mode)
    if state["step"] >= plan.steps and not evaluates_only:
        raise UserError(f"{path} is at step {state['step']}, which already reaches the "
                        f"{plan.steps} steps asked for; raise --steps/--epochs to train further.")
    if resume_warning:
        warn(resume_warning)


def run_all(config: RunConfig, plan: TrainingPlan, context: RunContext, model: nn.Module, data: Data,
            resumed: Optional[checkpoint.Resumed]) -> List[ModeRun]:
    """For each seed (its own weights and data order), every mode, `--repeats` times in
    alternating order (to expose drift); stops at the first run that diverged or was
    interrupted. Returns the ModeRuns in the order they ran."""
    per_step = config.training.accum_steps * context.world.size
    counted, why = flops.training_flops_or_why(model, config.training.batch_size, config.data.input_shape)
    flops_note = f"FLOPs not counted: {why}" if why else None
    if why:
        warn(f"the FLOPs of a step could not be counted ({why}), so no TFLOP/s or MFU is reported.")
    flops_per_step = counted * per_step if counted is not None else None
    device = context.device
    fp8, low_share = fp8_predict.fp8_blocks(config.precision, config.training, config.data, config.speed, model,
                                            per_step, envinfo.device_name(device) if device.type == "cuda" else None)
    if low_share:
        warn(low_share, "NOTE")
    runs = []
    for seed in range(config.training.seed, config.training.seed + config.accuracy.seeds):
        seeded = dataclasses.replace(config, training=dataclasses.replace(config.training, seed=seed))
        initial = model if seed == config.training.seed else \
            seeded_model(seeded.training, seeded.data, plan.num_classes, context.device)
        state = random_state(context.device)  # every mode of this seed starts from it (dropout draws)
        for repeat in range(config.precision.repeats):
            modes = config.modes
            for mode in modes if repeat % 2 == 0 else modes[::-1]:
                restore_random_state(state, context.device)
                runs.append(run_mode(initial, mode, data, seeded, config.plan_of(plan, mode.name), context,
                                     resumed, repeat, flops_per_step, fp8.get(mode.name), flops_note))
                if runs[-1].outcome.diverged_at is not None or runs[-1].record.incomplete:
                    return runs
    return runs


def random_state(device: torch.device) -> Tuple[torch.Tensor, Optional[torch.Tensor]]:
    return torch.get_rng_state(), torch.cuda.get_rng_state(device) if device.type == "cuda" else None


def restore_random_state(state: Tuple[torch.Tensor, Optional[torch.Tensor]], device: torch.device) -> None:
    torch.set_rng_state(state[0])
    if state[1] is not None:
        torch.cuda.set_rng_state(state[1], device)


@dataclasses.dataclass
class ModeRun:
    """One run as finish() needs it: its record, its loop's outcome, and what became of the
    writes made on the way (returned here, never left on the context)."""
    record: record.RunRecord
    outcome: loop.LoopOutcome
    checkpoint_step: Optional[int]  # the step --checkpoint holds for this run (None: none written by it)
    failures: List[str]  # writes that failed on the way (checkpoint saves, a trace), in words


def run_mode(initial_model: nn.Module, mode: Mode, data: Data, config: RunConfig, plan: TrainingPlan,
             context: RunContext, resumed: Optional[checkpoint.Resumed] = None, repeat: int = 0,
             flops_per_step: Optional[int] = None, fp8: Optional[Dict[str, Any]] = None,
             flops_note: Optional[str] = None) -> ModeRun:
    """Train a copy of `initial_model` for the plan's steps in `mode` (continuing the checkpoint
    `resumed`, if given), then measure what the flags ask beside the loop; returns its ModeRun.

    Each call starts from the same weights and the same data order (the loader is seeded with
    config.training.seed), and run_all gives every mode of a seed the same global random state
    (dropout), so runs of different modes of one seed differ by precision alone. With --compile, the
    first step (always a warm-up step) compiles; its wall time is reported as compile time. A stop
    signal during the evaluation leaves the accuracy unmeasured and the run incomplete."""
    trainer = build_trainer(initial_model, mode, data, plan, config.training, config.precision, config.data,
                            config.speed, config.distributed, context.device, context.world)
    steps, settings = plan.steps, config.record(plan)
    stream = context.reporter.live
    if stream is not None:
        stream.begin_run(run_label(config, mode, repeat))
    start_step, resumed_stats = 0, None
    if resumed is not None:
        start_step, resumed_stats = checkpoint.restore(trainer, resumed.state, context.device, resumed.path)
    curve = accuracy_curve(trainer, config, context, data, resumed_stats)
    if start_step and curve is not None and curve.wants(start_step, steps):
        # the earlier process evaluated its last step after writing the checkpoint: again here
        curve.take(start_step, resumed_stats.train_time_s if resumed_stats else 0.0)
    saver = checkpoint.Saver(config.checkpoints.checkpoint, trainer, settings,
                             checkpoint.resume_setup(data, context.world), context.device, context.world.is_main,
                             warn) if config.checkpoints.checkpoint else None
    census = Census(mode, context.device, steps, config.measurement.numerics_every) if config.measurement.numerics \
        else None
    context.reporter.phase(f"{mode.name}: training steps {start_step + 1} to {steps}")
    outcome = loop.train(trainer, config.training, config.accuracy, config.checkpoints, context, start_step,
                         resumed_stats, saver, census, curve)
    evaluation = final_evaluation(config, context, data, outcome, curve, census)
    if saver is not None and outcome.diverged_at is None and (outcome.completed_steps > start_step
                                                              or evaluation.test_accuracy is not None):
        # after the final evaluation, so that the checkpoint holds it: one cut short is resumed alone
        saver(outcome.completed_steps,
              dataclasses.replace(outcome.stats, accuracy_curve=list(curve.points), eval_time_s=curve.eval_time_s)
              if curve else outcome.stats)
    measured = measure_beside_the_loop(initial_model, trainer, config, context, data, outcome, repeat, evaluation)
    result = record.build(config.training, config.data, config.speed, config.distributed, trainer, outcome, data,
                          context, measured, repeat, flops_per_step, dict(fp8, recipe=mode.float8) if fp8 else None,
                          flops_note)
    if stream is not None:
        stream.end_run(result.to_dict(), {key: settings[key] for key in SETUP_KEYS})
    return ModeRun(result, outcome, saver.holds if saver else None,
                   (saver.failures if saver else []) + measured.failures)


def run_label(config: RunConfig, mode: Mode, repeat: int) -> str:
    """The run's name in live logs and trace folders: the mode, then its seed and repeat where a
    job has several."""
    return mode.name + (f"-seed{config.training.seed}" if config.accuracy.seeds > 1 else "") + \
        (f"-repeat{repeat}" if config.precision.repeats > 1 else "")


def accuracy_curve(trainer: Trainer, config: RunConfig, context: RunContext, data: Data,
                   resumed_stats: Optional[loop.Statistics]) -> Optional[AccuracyCurve]:
    """The run's AccuracyCurve (None without test images or with --no-eval), continuing the
    points of a resumed checkpoint (`resumed_stats`, its Statistics of this mode, or None)."""
    if config.training.no_eval or not data.has_test_set:
        return None
    mode, images, ranks = trainer.mode, data.train_count, context.world.size

    def evaluate_at(step: int) -> Optional[float]:
        context.reporter.phase(f"{mode.name}: evaluating on {data.test_count} test images")
        accuracy = evaluate(trainer.model, mode, data, config.training, config.speed, config.data, context)
        if accuracy is not None:
            context.reporter.phase(f"{mode.name}: test accuracy {100 * accuracy:.2f}%")
            if context.reporter.live is not None:
                context.reporter.live.evaluation(step, accuracy)
        return accuracy

    return AccuracyCurve(evaluate_at, config.eval_every_steps(images, ranks), config.steps_per_epoch(images, ranks),
                         config.accuracy.target_accuracy, resumed_stats.accuracy_curve if resumed_stats else None,
                         resumed_stats.eval_time_s if resumed_stats else 0.0)


def final_evaluation(config: RunConfig, context: RunContext, data: Data, outcome: loop.LoopOutcome,
                     curve: Optional[AccuracyCurve], census: Optional[Census]) -> record.SideMeasurements:
    """The run's SideMeasurements with --numerics' census (taken in the loop) and the final
    test accuracy, measured after the timed loop; a signal, or a file that is no whole image, that
    cuts the evaluation short is their stopped_by."""
    measured = record.SideMeasurements(curve=curve)
    if census is not None:
        measured.numerics, measured.memory = census.result(), census.footprint
    if curve is not None and record.should_evaluate(config.training, data, outcome):
        measured.test_accuracy = curve.take(outcome.completed_steps, outcome.stats.train_time_s)
        if measured.test_accuracy is None:
            measured.stopped_by = context.stop.signal_name or \
                (loop.STOPPED_BY_BAD_DATA if data.failure else loop.STOPPED_BY_ANOTHER_RANK)
    return measured


def measure_beside_the_loop(initial_model: nn.Module, trainer: Trainer, config: RunConfig, context: RunContext,
                            data: Data, outcome: loop.LoopOutcome, repeat: int,
                            evaluation: record.SideMeasurements) -> record.SideMeasurements:
    """The run's SideMeasurements: `evaluation` (the final evaluation's) with --explain's profile
    (and a trace that could not be written among the failures), whether streamed data's loader
    keeps up with the step (training/feed.py) and --max-batch, each measured after the timed loop
    and the final evaluation (neither changes their figures); none after a cut evaluation."""
    mode = trainer.mode
    finished = outcome.ran_all_steps(trainer.plan.steps) and outcome.diverged_at is None and \
        evaluation.stopped_by is None
    profile, failed = explain(trainer, config, context, repeat) if config.measurement.explain and finished \
        else (None, None)
    fed = training_feed.measure(trainer, config.training, config.data, data, context, outcome.stats.step_ms) \
        if finished else None
    largest = None
    if config.measurement.max_batch and repeat == 0 and finished:
        context.reporter.phase(f"{mode.name}: finding the largest batch that fits (--max-batch)")
        largest = max_batch.largest_batch_of(initial_model, mode, config.training, config.precision, config.data,
                                             trainer.plan, context.device)
        context.reporter.phase(f"{mode.name}: the largest batch that fits is {largest}")
    return dataclasses.replace(evaluation, profile=profile, max_batch=largest, feed=fed,
                               failures=evaluation.failures + ([failed] if failed else []))


def explain(trainer: Trainer, config: RunConfig, context: RunContext,
            repeat: int) -> Tuple[Optional[Profile], Optional[str]]:
    """--explain: profile a few steps after the timed ones and the evaluation (so neither
    changes), writing the trace with --trace-dir. Returns (the profile, or None when a signal
    cut the profiling short; the sentence saying the trace could not be written, or None); with
    several ranks every rank takes all the steps, as DDP's all-reduce needs."""
    world, mode = context.world, trainer.mode
    context.reporter.phase(f"{mode.name}: profiling {config.measurement.explain_steps} more steps (--explain)")
    trace = None
    if config.measurement.trace_dir:
        # torch.profiler.tensorboard_trace_handler's layout, which TensorBoard's profiler plugin and
        # Holistic Trace Analysis read: a folder per run, a <worker>.pt.trace.json per rank in it
        run = f"{config.training.model}-{run_label(config, mode, repeat)}"
        trace = os.path.join(config.measurement.trace_dir, run, f"rank{world.rank}.pt.trace.json")
    profile, failed = profiler.profile_steps(trainer, config.training, context.device, config.measurement.explain_steps,
                                             None if world.distributed else context.stop, trace)
    if profile is None:
        return None, None
    if profile.gpu_kernels_missing:
        warn(f"{mode.name}: torch.profiler recorded no GPU kernel (CUPTI unusable here, e.g. another "
             "profiler holds it), so --explain shows the host's time per op, not the GPU's.")
    if trace and not failed:
        context.reporter.phase(f"{mode.name}: trace written to {trace}")
    return profile, failed


def finish(config: RunConfig, plan: TrainingPlan, context: RunContext, data: Data, runs: List[ModeRun],
           resumed: Optional[checkpoint.Resumed]) -> int:
    """Print and write the results (rank 0 alone), say what the user can do after a
    divergence, a signal or a file that is no whole image, and return the exit status every rank
    shares (but a rank that met such a file, which exits 2 as a refusal does, saying why)."""
    stop, world, last = context.stop, context.world, runs[-1]
    diverged = last.outcome.diverged_at
    interrupted = last.record.incomplete and not diverged
    failures = [failure for run in runs for failure in run.failures]  # then the outputs' below
    bad_data = data.failure  # the sentence naming it, where this rank met one

    def status() -> int:  # read when returning: a signal may still arrive while the results are written
        if bad_data and not stop.requested:
            return 2
        if interrupted or stop.requested:
            return 128 + (stop.signal_number or signal.SIGTERM)
        return 1 if diverged or failures else 0

    job = distributed_env(world, config)  # a collective: before rank 0 goes on alone
    if not world.is_main:
        if bad_data:
            print(f"main.py: error: {bad_data}", file=sys.stderr)
        return status()
    document = results_document(config, plan, context, data, job, [run.record for run in runs],
                                bool(diverged) or interrupted)
    # before printing: a closed stdout costs none
    written, failed = run_outputs.write(config.measurement, context.reporter.live, document)
    failures += failed
    print(summary(document, config.measurement.wide))
    for line in written:
        print(line)
    for failure in failures:
        print(f"main.py: error: {failure}", file=sys.stderr)
    if diverged:
        print(f"main.py: error: training diverged: the loss became {last.record.loss_curve[diverged - 1]} at step "
              f"{diverged} of {last.record.steps} in mode {last.record.mode}, which has no loss scaler; rerun with "
              "one (--modes amp-fp16 for float16), a lower --lr or --clip-grad, or skip such steps with --on-nan "
              "skip.",
              file=sys.stderr)
    elif interrupted:
        if bad_data:
            print(f"main.py: error: {bad_data}", file=sys.stderr)
        holds = last.checkpoint_step if last.checkpoint_step is not None else \
            resumed.state["step"] if resumed is not None else None
        print(resume_line(config, last.record, holds, bool(last.failures), context.world), file=sys.stderr)
    elif stop.requested:
        print(f"main.py: {stop.signal_name} arrived after the last step and evaluation; the results above are "
              "complete.", file=sys.stderr)
    return status()


def results_document(config: RunConfig, plan: TrainingPlan, context: RunContext, data: Data, job: Dict[str, Any],
                     records: List[record.RunRecord], incomplete: bool) -> Dict[str, Any]:
    """The results file's document: the environment (the machine and the job's ranks), the
    config, the data, every run and their comparison (computed from the runs as written, as
    utils.report computes it from files)."""
    env = {**envinfo.collect(context.device), **job}
    run_dicts = [run.to_dict() for run in records]
    return record.make_document(env, config.record(plan), data.info, incomplete, run_dicts,
                                compare_modes(run_dicts, config.accuracy.margin_points, config.precision.baseline))


def distributed_env(world: World, config: RunConfig) -> Dict[str, Any]:
    """The job's shape; gathering the hostnames is a collective, so every rank calls this."""
    names = distributed.hostnames(world)
    return {"world_size": world.size, "launcher": world.launcher,
            "backend": ("nccl" if config.precision.gpu else "gloo") if world.distributed else None,
            "nodes": sorted(set(names)), "global_batch_size": config.training.global_batch_size(world.size)}
