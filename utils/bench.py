"""What `python main.py` does once its arguments are parsed: check them, set up the device
and data, run the benchmark, report it and write the results."""
import sys
from dataclasses import dataclass
from typing import Optional

import torch

import models
from utils import cifar10, envinfo, flops, plot, precision, report
from utils.compare import compare_modes
from utils.errors import UserError
from utils.fileio import ensure_writable
from utils.loaders import synthetic_images
from utils.train import run_mode

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
    print(f"main.py: warning: {message}", file=sys.stderr)


def check_arguments(args):
    if args.fp16 and args.bf16:
        raise UserError("--fp16 and --bf16 exclude each other; choose one autocast dtype.")
    if (args.compare or args.modes) and (args.fp16 or args.bf16 or args.tf32 or args.loss_scaling):
        raise UserError("--compare runs the modes listed in --modes; drop --fp16/--bf16/--tf32/-s and name "
                        "the modes instead, e.g. --modes fp32,amp-fp16,amp-bf16.")
    if args.warmup >= args.steps:
        raise UserError(f"--warmup ({args.warmup}) must be smaller than --steps ({args.steps}) so that some "
                        "steps are timed; lower --warmup or raise --steps.")
    if args.loss_scaling and args.bf16:
        warn("-s/--loss_scaling is ignored with --bf16: bfloat16 has FP32's exponent range, "
             "so gradients do not underflow and need no loss scaling.")
    elif args.loss_scaling and not args.fp16:
        warn("-s/--loss_scaling is ignored without --fp16: FP32 gradients need no loss scaling.")


def pick_device(use_gpu):
    if not use_gpu:
        return torch.device("cpu")
    if not torch.cuda.is_available():
        raise UserError("CUDA is not available: run without -p/--gpu to train on the CPU, or run on a "
                        "GPU node with a CUDA build of torch (in a container: singularity exec --nv).")
    torch.backends.cudnn.benchmark = True
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


def selected_modes(args):
    if args.modes:
        return precision.parse_modes(args.modes)
    if args.compare:
        return [precision.MODES[name] for name in precision.DEFAULT_COMPARE]
    return [precision.mode_from_flags(args.fp16, args.bf16, args.loss_scaling, args.tf32)]


def check_outputs(args):
    """Every output path is checked before training starts, not after an hour of it."""
    for path, flag in [(args.json, "--json"), (args.csv, "--csv"), (args.plot, "--plot")]:
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
    device = pick_device(args.gpu)
    modes = selected_modes(args)
    for mode in modes:
        precision.check_supported(mode, device)
    check_outputs(args)
    torch.manual_seed(args.seed)
    model = models.build_model(args.model, args.stem)
    data = load_data(args, device)
    device_name = envinfo.device_name(device)
    flops_per_step = flops.training_flops_per_step(model, args.batch_size)

    runs = []
    for repeat in range(args.repeats):
        for mode in modes if repeat % 2 == 0 else modes[::-1]:  # alternate the order to expose drift
            result = run_mode(model, mode, data, args, device)
            result["repeat"] = repeat
            result.update(flops.utilisation(flops_per_step, result["step_time_ms"]["median"], device_name, mode,
                                            device.type == "cuda"))
            runs.append(result)
    document = {"schema": report.SCHEMA, "env": envinfo.collect(device), "config": vars(args),
                "data": data.info, "runs": runs, "comparison": compare_modes(runs)}
    print(report.summary(document))
    if args.json:
        report.write_json(args.json, document)
        print(f"results written to {args.json}")
    if args.csv:
        report.append_csv(args.csv, document)
        print(f"rows appended to {args.csv}")
    if args.plot:
        plot.draw(args.plot, document)
        print(f"plot written to {args.plot}")
    return 0
