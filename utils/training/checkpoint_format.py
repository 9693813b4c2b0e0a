"""The form of a checkpoint, apart from saving and restoring it (checkpoint.py): the entries
capture() writes with their types and ranges, checked before anything trains from a file; the
rules that read checkpoints of earlier releases as this release's (upgrade); and the form of the
optimizer, schedule and scaler state against the trainer they are restored into."""
from __future__ import annotations

import math
import numbers
from dataclasses import asdict, fields
from typing import TYPE_CHECKING, Any, Dict, List, Mapping, Optional, Tuple, Union

import torch

from models.families import DEFAULT_IMAGE_SIZE
from utils.config import RESUME_KEYS, RESUME_SETTINGS, record_kind
from utils.measure import host_load
from utils.training.loop import Statistics

if TYPE_CHECKING:
    from utils.training.trainer import Trainer

    Kinds = Mapping[str, Union[type, Tuple[type, ...]]]  # {entry: its type, or the types it may have}

ENTRIES: Kinds = {"config": dict, "mode": str, "step": int, "model": dict, "masters": (list, type(None)),
           "optimizer": dict, "scheduler": dict, "scaler": (dict, type(None)), "rng": dict, "stats": dict}
CONFIG_ENTRIES = {key: record_kind(key) for key in RESUME_KEYS + ("steps",)}
# What a resume refuses to change where the checkpoint holds it, with why: the class of the model a
# factory built (the record holds it too), then the settings that say so (config.RESUME_SETTINGS),
# the optimizer first, as the defaults of the rest (the learning rate, the momentum) follow its recipe.
REFUSED_CHANGES = {"model_class": "the weights are those of a model of that class",
                   **{key: RESUME_SETTINGS[key] for key in sorted(RESUME_SETTINGS, key=lambda key: key != "optimizer")}}
SETUP_ENTRIES = {"world_size": int, "data": str, "train_images": int}  # where the run happened, beside its config
CURVES = ("step_ms", "data_ms", "losses", "lrs", "loss_scales")
POINT_KEYS = ("step", "epoch", "train_s", "accuracy")  # of each accuracy_curve entry
STATS_ENTRIES = {**{f.name: (list if f.name in CURVES + ("accuracy_curve", "host_readings") else numbers.Real)
                    for f in fields(Statistics)},
                 "optimizer_steps": int}
# The statistics that checkpoints of earlier releases lack, each starting from its Statistics default:
STATS_ADDED = ("warmup_peak_memory_bytes", "peak_reserved_bytes",  # before the steady-state peak memory
               "train_time_s", "accuracy_curve", "eval_time_s",  # before accuracy curves (--eval-every)
               "host_readings")  # before runs[].host covered every segment: the earlier ones go unread


def upgrade(state: Dict[str, Any]) -> Dict[str, Any]:
    """A copy of `state` (whose entries have their types: entries_problem) with what a
    checkpoint of an earlier release lacks filled in, as this release reads it. Two more rules
    fill nothing in: the settings an earlier checkpoint did not record are not checked against
    this run's (check_compatible), and its schedule may be at the optimizer's own step count
    (trainer_state_problem). A ViT saved with nn.MultiheadAttention's weight names needs no rule
    here: models/attention.py's SelfAttention loads them."""
    config = dict(state["config"])
    config.setdefault("optimizer", "sgd")  # before --optimizer (AdamW beside SGD): SGD
    config.setdefault("image_size", DEFAULT_IMAGE_SIZE)  # before --image-size: CIFAR-10's 32x32
    stats, start = dict(state["stats"]), asdict(Statistics())
    for key in STATS_ADDED:
        stats.setdefault(key, start[key])
    # before resumes refused another rank count or data set, the checkpoint did not record them:
    # None, nothing to check them against (check_setup)
    return dict(state, config=config, stats=stats, setup=state.get("setup"))


def entries_problem(state: Dict[str, Any]) -> Optional[str]:
    """The first entry of the checkpoint that is missing or not of the type capture() writes, in
    words; None when all have their types."""
    return table_problem(state, ENTRIES, "")


def table_problem(table: Dict[str, Any], entries: Kinds, where: str) -> Optional[str]:
    """The first of `entries` ({key: type}) that `table` lacks or holds of another type, in words."""
    for key, kind in entries.items():
        if key not in table:
            return f"it has no {where}entry {key!r}"
        if not isinstance(table[key], kind) or isinstance(table[key], bool):
            return f"its {where}entry {key!r} is a {type(table[key]).__name__}"
    return None


def schema_problem(state: Dict[str, Any]) -> Optional[str]:
    """The first entry of an upgraded `state` that capture() would not have written (missing, of
    another type, out of range), in words; None when the checkpoint has the exact form, before it
    reaches a trainer."""
    problem = table_problem(state["config"], CONFIG_ENTRIES, "config ") or \
        table_problem(state["stats"], STATS_ENTRIES, "stats ")
    if problem:
        return problem
    setup = state["setup"]
    if setup is not None and not (isinstance(setup, dict) and all(
            isinstance(setup.get(key), kind) and not isinstance(setup.get(key), bool)
            for key, kind in SETUP_ENTRIES.items())):
        return "its setup entry is not the one a run saves"
    settings = [state["config"][key] for key in REFUSED_CHANGES if key in state["config"]]
    if not all(value is None or isinstance(value, (bool, numbers.Real, str)) for value in settings):
        return "its optimizer settings are not plain values"
    if state["step"] < 0 or state["stats"]["optimizer_steps"] < 0:
        return "its step counts are negative"
    stats = state["stats"]
    if not all(isinstance(value, numbers.Real) for key in CURVES for value in stats[key]):
        return "its statistics hold values that are not numbers"
    if not all(isinstance(point, dict) and set(point) == set(POINT_KEYS) and all(
            isinstance(point[key], numbers.Real) and math.isfinite(point[key]) for key in POINT_KEYS)
            for point in stats["accuracy_curve"]):
        return "its accuracy curve holds entries that are not points of one"
    if any(host_load.malformed(reading) for reading in stats["host_readings"]):
        return "its host readings are not the ones a run saves"
    times = stats["step_ms"] + stats["data_ms"] + [stats[key] for key in (
        "wall_time_s", "peak_memory_bytes", "warmup_peak_memory_bytes", "peak_reserved_bytes", "train_time_s",
        "eval_time_s")]
    if not all(math.isfinite(value) and value >= 0 for value in times):  # losses may be inf: skipped steps
        return "its timing statistics hold negative or non-finite values"
    return tensors_problem(state)


def tensors_problem(state: Dict[str, Any]) -> Optional[str]:
    """Where the weights or the random-number state are not what a run saves."""
    tensors = list(state["model"].items()) + [(f"master {i}", t) for i, t in enumerate(state["masters"] or [])]
    for name, tensor in tensors:
        if not isinstance(tensor, torch.Tensor):
            return f"its weight {name} is a {type(tensor).__name__}, not a tensor"
        if tensor.is_floating_point() and not torch.isfinite(tensor).all():
            return f"its weight {name} holds inf or NaN, which a checkpoint is never written with"
    rng = state["rng"]
    if not (isinstance(rng.get("torch"), torch.Tensor) and rng["torch"].dtype == torch.uint8
            and isinstance(rng.get("loader"), dict) and isinstance(rng.get("cuda"), (list, type(None)))):
        return "its random-number state is not the one a run saves"
    return None


def trainer_state_problem(trainer: Trainer, state: Dict[str, Any], same_mode: bool) -> Optional[str]:
    """Where the saved optimizer, schedule, scaler and FP32 master weights differ in form from
    `trainer`'s own (torch would load them and fail, or train wrongly, at the next step)."""
    params = [p for group in trainer.optimizer.param_groups for p in group["params"]]
    own = trainer.optimizer.state_dict()
    saved = state["optimizer"]
    if [group.get("params") for group in saved.get("param_groups", [])] != [g["params"] for g in own["param_groups"]]:
        return "its optimizer holds other parameters than this model's"
    missing = {key for key in ("lr", "initial_lr", "momentum", "dampening", "weight_decay")  # no default in SGD
               for group, own_group in zip(saved["param_groups"], own["param_groups"])
               if key in own_group and not (isinstance(group, dict) and key in group)}
    if missing:
        return f"its optimizer settings lack {', '.join(sorted(missing))}"
    problem = form_problem(saved["param_groups"], own["param_groups"], "its optimizer settings")
    if problem or not isinstance(saved.get("state"), dict):
        return problem or "its optimizer has no per-parameter state"
    for index, entry in saved["state"].items():
        if not (isinstance(index, int) and 0 <= index < len(params) and isinstance(entry, dict)):
            return f"its optimizer state names parameter {index!r:.20}, which this model does not have"
        problem = entry_problem(entry, index, params[index])
        if problem:
            return problem
    # The schedule counts every step; checkpoints from before it did (no host sync in the step)
    # counted the optimizer's own, and their schedule continues from there
    if state["scheduler"].get("last_epoch") not in (state["step"], state["stats"]["optimizer_steps"]):
        return "its learning-rate schedule is not at the step its optimizer reached"
    checks: List[Tuple[object, object, str]] = [  # form_problem()'s saved state, this run's own, and what it is
        (state["scheduler"], trainer.scheduler.state_dict(), "its learning-rate schedule")]
    if trainer.mode.master_weights:
        checks.append((state["masters"], [p.detach() for p in trainer.params], "its FP32 master weights"))
    if state["scaler"] is not None and trainer.scaler.is_enabled() and same_mode:
        checks.append((state["scaler"], trainer.scaler.state_dict(), "its loss scaler"))
    return next((p for p in (form_problem(*check) for check in checks) if p), None)


def entry_problem(entry: Dict[str, Any], index: int, param: torch.Tensor) -> Optional[str]:
    """Where a parameter's saved optimizer state does not fit `param`: SGD keeps a momentum
    buffer of its shape, AdamW two moments of its shape and a step count (one number)."""
    for key, value in entry.items():
        if value is None:
            continue
        if key == "step" and isinstance(value, numbers.Real) and not isinstance(value, bool):
            value = torch.tensor(float(value))
        fits = isinstance(value, torch.Tensor) and (value.numel() == 1 if key == "step" else value.shape == param.shape)
        if not fits:
            return (f"its optimizer {key} of parameter {index} is not "
                    + ("one number" if key == "step" else "a tensor of the parameter's shape"))
        if value.is_floating_point() and not torch.isfinite(value).all():
            return f"its optimizer {key} of parameter {index} holds inf or NaN"
    return None


def form_problem(saved: object, reference: object, where: str) -> Optional[str]:
    """Where `saved` differs in form from `reference` (a state of the same kind that this run
    built): types, list lengths, tensor shapes, finite numbers. Keys `reference` has and `saved`
    lacks are allowed (another torch release), and None in `reference` accepts a plain value."""
    if isinstance(reference, dict):
        if not isinstance(saved, dict):
            return f"{where} is a {type(saved).__name__}"
        return next((p for p in (form_problem(saved[key], value, f"{where} {key}")
                                 for key, value in reference.items() if key in saved) if p), None)
    if isinstance(reference, (list, tuple)):
        if not isinstance(saved, (list, tuple)) or len(saved) != len(reference):
            return f"{where} is not a list of {len(reference)}"
        return next((p for p in (form_problem(s, r, where) for s, r in zip(saved, reference)) if p), None)
    if isinstance(reference, torch.Tensor):
        fits = isinstance(saved, torch.Tensor) and saved.shape == reference.shape
    elif isinstance(reference, bool):
        fits = isinstance(saved, bool)
    elif isinstance(reference, numbers.Real):
        fits = isinstance(saved, numbers.Real) and not isinstance(saved, bool) and math.isfinite(saved)
    elif isinstance(reference, str):
        fits = isinstance(saved, str)
    else:  # None: an unset option, which a plain value may set
        fits = saved is None or isinstance(saved, (bool, str)) or (
            isinstance(saved, numbers.Real) and math.isfinite(saved))
    return None if fits else f"{where} is {saved!r:.40}, where this run has a {type(reference).__name__}"


