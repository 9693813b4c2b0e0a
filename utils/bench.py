"""What `python main.py` does once its arguments are parsed: check them, set up the device
and data, run the benchmark, report it and write the results."""
import math
import shlex
import signal
import sys
from dataclasses import dataclass
from typing import Optional

import torch

import models
from utils import checkpoint, cifar10, distributed, envinfo, flops, plot, precision, report
from utils.compare import compare_modes
from utils.errors import UserError
from utils.fileio import ensure_writable
from utils.loaders import batches_per_epoch, synthetic_images
from utils.preemption import StopRequest
from utils.train import Diverged, ModeRun

DEFAULT_STEPS = 200

SYNTHETIC_TRAIN_IMAGES = 50_000  # as many as CIFAR-10, so the data's memory footprint matches


@dataclass
class Data:
    """The images a run trains on, held on the training device."""
    name: str  # "cifar10" or "synthetic"
    train_images: torch.Tensor
    train_labels: torch.Tensor
    test_images: Optional[torch.Tensor]  # None for synthetic data: accuracy would mean nothing
    test_labels: Optional[torch.Tensor]
    info: dict


def warn(message):
    if distributed.detect().is_main:  # once per job, not once per rank
        print(f"main.py: warning: {message}", file=sys.stderr)


def check_arguments(args):
    if args.fp16 and args.bf16:
        raise UserError("--fp16 and --bf16 exclude each other; choose one autocast dtype.")
    if (args.compare or args.modes) and (args.fp16 or args.bf16 or args.tf32 or args.loss_scaling):
        raise UserError("--compare runs the modes listed in --modes; drop --fp16/--bf16/--tf32/-s and name "
                        "the modes instead, e.g. --modes fp32,amp-fp16,amp-bf16.")
    if args.steps and args.epochs:
        raise UserError("give either --steps/-n or --epochs, not both.")
    if args.nesterov and args.momentum == 0:
        raise UserError("--nesterov needs a non-zero --momentum.")
    if args.resume and not args.checkpoint:
        raise UserError("--resume needs --checkpoint PATH, the checkpoint to continue from.")
    if args.compile and args.warmup == 0:
        raise UserError("--compile needs --warmup 1 or more: the first step compiles, and it must stay out "
                        "of the step statistics.")
    if args.loss_scaling and args.bf16:
        warn("-s/--loss_scaling is ignored with --bf16: bfloat16 has FP32's exponent range, "
             "so gradients do not underflow and need no loss scaling.")
    elif args.loss_scaling and not args.fp16:
        warn("-s/--loss_scaling is ignored without --fp16: FP32 gradients need no loss scaling.")


def pick_device(use_gpu, cudnn_benchmark):
    if not use_gpu:
        return torch.device("cpu")
    if not torch.cuda.is_available():
        raise UserError("CUDA is not available: run without -p/--gpu to train on the CPU, or run on a "
                        "GPU node with a CUDA build of torch (in a container: singularity exec --nv).")
    torch.backends.cudnn.benchmark = cudnn_benchmark
    return torch.device("cuda")


def load_data(args, device):
    """CIFAR-10 or synthetic data, moved to the device once. --data auto takes CIFAR-10 when a
    usable copy is there (or may be downloaded), else synthetic data with a loud warning."""
    choice = args.data
    if choice == "auto":
        present = cifar10.is_present(args.data_dir)
        usable = present and (args.allow_unverified or not cifar10.mismatched_files(args.data_dir))
        if usable or (not present and args.download):
            choice = "cifar10"
        else:
            why = ("its files do not match the official md5 sums (pass --allow-unverified to use it)"
                   if present else "it was not found (pass --download, or set --data-dir / $CIFAR10_DIR)")
            warn(f"USING SYNTHETIC DATA: CIFAR-10 in {cifar10.batches_folder(args.data_dir)} is not usable: "
                 f"{why}. Step times are valid, loss and accuracy are meaningless.")
            choice = "synthetic"
    if choice == "synthetic":
        images, labels = synthetic_images(SYNTHETIC_TRAIN_IMAGES, device, args.seed)
        return Data("synthetic", images, labels, None, None,
                    {"name": "synthetic", "train_images": len(images), "test_images": 0})
    dataset = cifar10.load(args.data_dir, args.download, args.allow_unverified)
    if not dataset.verified:
        warn(f"using CIFAR-10 from {dataset.folder} although its md5 sums are not the official ones.")
    return Data("cifar10", dataset.train_images.to(device), dataset.train_labels.to(device),
                dataset.test_images.to(device), dataset.test_labels.to(device),
                {"name": "cifar10", "folder": dataset.folder, "verified": dataset.verified,
                 "train_images": len(dataset.train_images), "test_images": len(dataset.test_images)})


def resolve_steps(args, train_images, ranks=1):
    """Optimizer steps to run: --steps, or --epochs worth of global (micro-)batches."""
    if args.epochs:
        per_epoch = batches_per_epoch(args.loader, train_images, args.batch_size, ranks)
        args.steps = max(1, math.ceil(args.epochs * per_epoch / args.accum_steps))
    args.steps = args.steps or DEFAULT_STEPS
    if args.warmup >= args.steps:
        raise UserError(f"--warmup ({args.warmup}) must be smaller than the {args.steps} steps to run so that "
                        "some steps are timed; lower --warmup or raise --steps.")
    if args.warmup_lr_steps >= args.steps:
        raise UserError(f"--warmup-lr-steps ({args.warmup_lr_steps}) must be smaller than the {args.steps} "
                        "steps to run.")


def resume_line(args, stopped_by, completed_steps):
    where = f"interrupted by {stopped_by} after step {completed_steps} of {args.steps}"
    if not args.checkpoint:
        return f"main.py: {where}; no --checkpoint was given, so a rerun starts over."
    command = shlex.join(["python", "main.py"] + [a for a in sys.argv[1:] if a != "--resume"] + ["--resume"])
    return f"main.py: {where}; checkpoint saved to {args.checkpoint}; resume with: {command}"


def selected_modes(args):
    if args.modes:
        return precision.parse_modes(args.modes)
    if args.compare:
        return [precision.MODES[name] for name in precision.DEFAULT_COMPARE]
    return [precision.mode_from_flags(args.fp16, args.bf16, args.loss_scaling, args.tf32)]


def check_outputs(args):
    """Every output path is checked before training starts, not after an hour of it."""
    for path, flag in [(args.json, "--json"), (args.csv, "--csv"), (args.plot, "--plot"),
                       (args.checkpoint, "--checkpoint")]:
        if path:
            ensure_writable(path, flag)
    if args.csv:
        report.check_csv_header(args.csv)
    if args.plot:
        plot.check_available()


def run(args):
    if args.list_models:
        print("\n".join(models.model_names()))
        return 0
    check_arguments(args)
    device = pick_device(args.gpu, not args.no_cudnn_benchmark)
    world = distributed.detect()
    if world.distributed:
        device = distributed.init(world, args.gpu, args.dist_timeout)
    try:
        return benchmark(args, device, world)
    finally:
        distributed.shutdown(world)


def benchmark(args, device, world):
    modes = selected_modes(args)
    if args.checkpoint and (len(modes) > 1 or args.repeats > 1):
        raise UserError("--checkpoint works with one precision mode and no --repeats; run each mode as a job "
                        "of its own and merge the results with python -m utils.report.")
    for mode in modes:
        precision.check_supported(mode, device)
    check_outputs(args)
    if not args.epochs:  # --epochs needs the dataset's size first
        resolve_steps(args, None)
    saved = checkpoint.load(args.checkpoint, device) if args.resume else None
    with StopRequest() as stop:
        torch.manual_seed(args.seed)
        model = models.build_model(args.model, args.stem, args.dropout)
        data = load_data(args, device)
        if args.epochs:
            resolve_steps(args, len(data.train_images), world.size)
        resume_warning = None
        if saved is not None:
            resume_warning = checkpoint.check_compatible(saved, args, modes[0], args.checkpoint)
            if saved["step"] >= args.steps:
                raise UserError(f"{args.checkpoint} is at step {saved['step']}, which already reaches the "
                                f"{args.steps} steps asked for; raise --steps/--epochs to train further.")
            if resume_warning:
                warn(resume_warning)
        device_name = envinfo.device_name(device)
        flops_per_step = flops.training_flops_per_step(model, args.batch_size) * args.accum_steps * world.size

        runs, failure = [], None
        for repeat in range(args.repeats):
            for mode in modes if repeat % 2 == 0 else modes[::-1]:  # alternate the order to expose drift
                mode_run = ModeRun(model, mode, data, args, device, world)
                if saved is not None:
                    mode_run.resume(saved, resume_warning)
                try:
                    result = mode_run.run(stop)
                except Diverged as diverged:
                    result, failure = diverged.result, diverged
                except checkpoint.NonFiniteWeights:
                    print("main.py: error: the weights became inf/NaN, so no checkpoint was written (the previous "
                          "one is kept); rerun with -s, a lower --lr or --clip-grad.", file=sys.stderr)
                    return 1
                result["repeat"] = repeat
                if result["step_time_ms"] is not None:
                    result.update(flops.utilisation(flops_per_step, result["step_time_ms"]["median"],
                                                    device_name, mode, device.type == "cuda", world.size))
                runs.append(result)
                if failure or result["incomplete"]:
                    break
            if failure or runs[-1]["incomplete"]:
                break
    env = {**envinfo.collect(device, args), **distributed_env(world, args)}
    interrupted = runs[-1]["incomplete"] and not failure
    status = 1 if failure else 128 + (stop.signal_number or signal.SIGTERM) if interrupted else 0
    if not world.is_main:  # rank 0 alone prints and writes; every rank exits with the same status
        return status
    document = {"schema": report.SCHEMA, "env": env, "config": vars(args),
                "data": data.info, "incomplete": bool(failure) or interrupted,
                "runs": runs, "comparison": compare_modes(runs)}
    print(report.summary(document))
    write_outputs(args, document)
    if failure:
        print(f"main.py: error: training diverged: the loss became {failure.value} at step {failure.step} of "
              f"{args.steps} in mode {runs[-1]['mode']}, which has no loss scaler; rerun with -s/--loss_scaling "
              "(for --fp16), a lower --lr or --clip-grad, or skip such steps with --on-nan skip.", file=sys.stderr)
    elif interrupted:
        print(resume_line(args, runs[-1]["stopped_by"], runs[-1]["completed_steps"]), file=sys.stderr)
    return status


def distributed_env(world, args):
    names = distributed.hostnames(world)  # a collective: every rank takes part
    return {"world_size": world.size, "launcher": world.launcher,
            "backend": ("nccl" if args.gpu else "gloo") if world.distributed else None,
            "nodes": sorted(set(names)), "global_batch_size": args.batch_size * args.accum_steps * world.size}


def write_outputs(args, document):
    if args.json:
        report.write_json(args.json, document)
        print(f"results written to {args.json}")
    if args.csv and document["comparison"]:
        report.append_csv(args.csv, document)
        print(f"rows appended to {args.csv}")
    if args.plot and document["comparison"]:
        plot.draw(args.plot, document)
        print(f"plot written to {args.plot}")
