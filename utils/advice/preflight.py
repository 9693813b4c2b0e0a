"""The preflight of --advise, before any timed step: which modes (utils/training/precision.py's
check_supported, the one answer a run gives too) and levers (levers.py's table) this device,
install and data run, the
model's size and FLOPs, FP8's predicted speed per converted Linear layer (fp8_predict's roofline:
an fp8 mode predicted under FP8_WORTH of amp-bf16's speed is not timed), and from them the
planner's Capabilities and Estimates."""
from __future__ import annotations

import contextlib
import os
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Dict, List, Optional, Tuple

import torch

from models import factory
from utils import compat
from utils.advice.levers import Here, trials
from utils.advice.plan import Capabilities, Estimates
from utils.data import cifar10
from utils.errors import UserError, without_remedy
from utils.explain import fp8_predict
from utils.measure import envinfo, estimate, flops
from utils.modes import BASELINES, MODES
from utils.training import float8
from utils.training.precision import check_supported
from utils.training.start import pick_device, seeded_model

if TYPE_CHECKING:
    from torch import nn

    from utils.config import DataSettings, InputShape, Precision, Speed, Training
    from utils.settings import CommandLine

FP8_WORTH = 0.95  # of amp-bf16's speed: an fp8 mode predicted slower is not timed
FP16_TENSOR_CORES = (7, 0)  # compute capability from which float16 runs on tensor cores (Volta)
COMPILE_CPU_S = 90.0  # torch.compile of resnet18's training step on a 2-core CPU took 79 s
CIFAR_TEST_IMAGES = 10000  # what a pass over the test set counts before the data is read


@dataclass(frozen=True)
class Preflight:
    capabilities: Capabilities
    estimates: Estimates
    facts: Dict[str, Any]  # advice.json's "preflight": the device, the model, the modes, the predictions
    predictions: Dict[str, Dict[str, Any]]  # fp8 mode: its predicted speedup over amp-bf16 (fp8_predict)


def device_of(precision: Precision, speed: Speed) -> Tuple[torch.device, str]:
    device = pick_device(precision.gpu, speed.cudnn_benchmark)
    return device, envinfo.device_name(device)


def timed_modes(precision: Precision, device: torch.device) -> Tuple[List[str], Dict[str, str]]:
    """(the modes to time here, {mode: why not}) by check_supported, and float16 on a GPU only
    where it has tensor cores."""
    timed, not_timed = [], {}
    for name in [name for name, mode in MODES.items() if mode.weighed]:  # each checked here, or said why not
        try:
            check_supported(MODES[name], device, False, precision.allow_slow_fp16)
        except UserError as refusal:
            not_timed[name] = without_remedy(str(refusal))
            continue
        if name == "amp-fp16" and device.type == "cuda" and \
                torch.cuda.get_device_capability(device) < FP16_TENSOR_CORES:
            not_timed[name] = "this GPU has no float16 tensor cores (compute capability 7.0), so float16 is slow here"
            continue
        timed.append(name)
    return timed, not_timed


def fp8_layers(model: nn.Module, gpu: str, recipe: str, compiled: bool, batch: int,
               input_shape: InputShape) -> List[Dict[str, Any]]:
    """Each Linear layer fp8 converts, with its forward's shape and its roofline prediction."""
    count = flops.count_step(model, batch, input_shape)
    return [{"layer": name, "shape": list(count.linears[name][1]),
             "speedup": fp8_predict.predict_linear(gpu, recipe, compiled, *count.linears[name][1]).speedup}
            for name in float8.converted_layers(model, count.linears)]


def fp8_predictions(training: Training, data: DataSettings, speed: Speed, model: nn.Module, device_name: str,
                    timed: List[str], not_timed: Dict[str, str]) -> Tuple[Dict[str, Dict[str, Any]], Dict[str, Any]]:
    """({fp8 mode: its step's prediction}, the facts per layer) for the fp8 modes this device runs;
    a mode predicted under FP8_WORTH of amp-bf16's speed moves from `timed` to `not_timed`."""
    predictions: Dict[str, Dict[str, Any]] = {}
    facts: Dict[str, Any] = {}
    for name in [mode for mode in timed if MODES[mode].float8]:
        recipe = MODES[name].float8
        assert recipe is not None  # the fp8 modes have a recipe
        try:
            float8.accounting(model, training.batch_size, training.model, data.input_shape)
            prediction, why = fp8_predict.run_prediction(device_name, False, recipe, speed.compile, model,
                                                         training.batch_size, data.input_shape)
        except UserError as refusal:  # nothing it could convert, or no FLOP counter on this torch
            timed.remove(name)
            not_timed[name] = without_remedy(str(refusal))
            continue
        if prediction is None:
            facts[name] = {"prediction": None, "why": why}
            continue
        predictions[name] = prediction
        facts[name] = dict(prediction, layers=fp8_layers(model, prediction["gpu"], recipe, speed.compile,
                                                          training.batch_size, data.input_shape))
        if prediction["speedup"] < FP8_WORTH:
            timed.remove(name)
            not_timed[name] = (f"predicted {prediction['speedup']:.2f}x {BASELINES['fp8']}'s speed on "
                               f"{prediction['for'].split(': ', 1)[-1]}, under {FP8_WORTH:g}x")
    return predictions, facts


def levers(training: Training, data: DataSettings, arguments: CommandLine,
           device: torch.device) -> Tuple[Tuple[Tuple[str, Dict[str, Any]], ...], Dict[str, str]]:
    """(the levers to try here, each with the settings its phase runs, in order, switched the
    other way from the user's command, `arguments`; {lever: why not}): levers.py's table says."""
    return trials(Here(training, data, arguments, device))


def no_test_images(data: DataSettings) -> Optional[str]:
    """Why the runs may have no test images to check accuracy on, as far as the preflight can
    tell without reading the data: synthetic images, or no CIFAR-10 in --data-dir yet (the
    comparison downloads it where it can, or trains on synthetic images; the session plans the
    accuracy check again once it knows)."""
    if data.data == "synthetic":
        return "synthetic data has no test images"
    if data.data in ("auto", "cifar10") and not cifar10.is_present(data.data_dir):
        return f"there is no CIFAR-10 in {data.data_dir} yet, so the runs may train on synthetic images"
    return None


def memory_bytes(device: torch.device) -> Optional[int]:
    """What a larger batch may fill: the GPU's memory, or the host's memory available now (None
    where the platform does not say)."""
    if device.type == "cuda":
        return int(torch.cuda.get_device_properties(device).total_memory)
    try:
        return os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (AttributeError, ValueError, OSError):
        return None


def counted_flops(training: Training, data: DataSettings, model: nn.Module) -> Tuple[int, int]:
    """(a step's FLOPs, one image's), which every phase's estimate rests on; a model the meta
    device cannot run (a --model-factory one) is refused, as no phase can be planned without them."""
    step, why = flops.training_flops_or_why(model, training.batch_size, data.input_shape)
    if step is None:
        raise UserError(f"--advise plans each phase from the model's FLOPs, and they cannot be counted ({why}); "
                        "compare the modes yourself with main.py --modes fp32,amp-bf16, which trains without them.")
    return step, flops.training_flops_per_step(model, 1, data.input_shape)


def preflight(training: Training, data: DataSettings, precision: Precision, speed: Speed,
              arguments: CommandLine) -> Preflight:
    """What the device runs, what the model is, and the estimates the planner needs: no timed
    step; `arguments`, the user's command, says which way each lever is tried."""
    device, device_name = device_of(precision, speed)
    # a --model-factory model whole, as its check may need to run it (models/user.py)
    with factory.weightless() if compat.runs_on_meta() and training.model_factory is None \
            else contextlib.nullcontext():
        model = seeded_model(training, data, device=device)
    timed, not_timed = timed_modes(precision, device)
    predictions, fp8_facts = fp8_predictions(training, data, speed, model, device_name, timed, not_timed)
    tried, why_not = levers(training, data, arguments, device)
    batch = training.batch_size
    step_flops, image_flops = counted_flops(training, data, model)
    on_cpu, threads = device.type == "cpu", torch.get_num_threads()
    gpu = device_name if not on_cpu else None

    def step_s(mode: str) -> float:
        return step_flops / estimate.rate(mode, gpu, on_cpu, threads)

    capabilities = Capabilities(device.type, device_name, tuple(timed), not_timed, tried, why_not,
                                no_test_images(data), memory_bytes(device))
    estimates = Estimates(training.model, training.stem, batch, data.image_size, on_cpu,
                          estimate.START_S, {mode: step_s(mode) for mode in timed},
                          COMPILE_CPU_S if on_cpu else estimate.COMPILE_S,
                          CIFAR_TEST_IMAGES * image_flops / 3 / estimate.rate("fp32", gpu, on_cpu, threads))
    facts = {"device": device.type, "device_name": device_name, "threads": threads if on_cpu else None,
             "cores": os.cpu_count(), "parameters": sum(parameter.numel() for parameter in model.parameters()),
             "train_flops_per_step": step_flops, "timed": timed, "not_timed": not_timed, "fp8": fp8_facts,
             "levers": [lever for lever, _ in tried], "no_levers": why_not, "torch": torch.__version__}
    return Preflight(capabilities, estimates, facts, predictions)
