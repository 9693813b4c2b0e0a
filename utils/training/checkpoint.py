"""Checkpoints that survive crashes: a trainer's whole state captured and restored, written
atomically, read with weights_only=True, and checked against the run before anything trains
from them."""
import collections
import os
from dataclasses import asdict

import torch

from utils import compat, safepickle
from utils.errors import UserError
from utils.fileio import atomic_write
from utils.training import precision
from utils.training.loop import Statistics

FORMAT = "ampbench.checkpoint/1"


class NonFiniteWeights(Exception):
    """The model holds inf or NaN: such a state is never written."""


def save(path, state, model):
    """Write `state` to `path` atomically: a crash or a full disk keeps the previous file."""
    if not all(torch.isfinite(p).all() for p in model.parameters()):
        raise NonFiniteWeights(path)
    atomic_write(path, lambda f: torch.save({"format": FORMAT, **state}, f))


def load(path, device):
    if not os.path.isfile(path):
        raise UserError(f"--resume: no checkpoint at {path}; run once with --checkpoint {path} first, "
                        "or drop --resume.")
    try:
        state = read(path, device)
    except Exception as error:  # whatever a truncated, foreign or crafted file makes the loader raise
        reason = str(error).splitlines()[0] if str(error) else type(error).__name__
        raise UserError(f"{path} is not a readable ampbench checkpoint ({reason[:200]}); "
                        "delete it or point --checkpoint elsewhere.") from None
    if not isinstance(state, dict) or state.get("format") != FORMAT:
        raise UserError(f"{path} is not an ampbench checkpoint; delete it or point --checkpoint elsewhere.")
    return state


def read(path, device):
    """torch.load that never runs code from the file: weights_only=True (torch 1.13), before it
    the same restriction through our own unpickler."""
    if compat.has_weights_only_load():
        return torch.load(path, map_location=device, weights_only=True)
    compat.degrade("checkpoint", "checkpoint read through ampbench's restricted unpickler (torch.load has "
                                 "no weights_only before torch 1.13)")
    return torch.load(path, map_location=device, pickle_module=safepickle.pickle_module(checkpoint_globals()))


def checkpoint_globals():
    """What a checkpoint's pickle may name: tensors, their storages and ordered dicts."""
    allowed = {("collections", "OrderedDict"): collections.OrderedDict,
               ("torch._utils", "_rebuild_tensor_v2"): torch._utils._rebuild_tensor_v2,
               ("torch._utils", "_rebuild_parameter"): torch._utils._rebuild_parameter}
    for name in dir(torch):
        if name.endswith("Storage") and isinstance(getattr(torch, name), type):
            allowed[("torch", name)] = getattr(torch, name)
    return allowed


def capture(trainer, config, step, stats, device):
    """Everything a later process needs to continue exactly: weights, optimizer, schedule,
    scaler, random-number and loader state, and the statistics so far."""
    return {
        "config": config.to_dict(), "mode": trainer.mode.name, "step": step,
        "model": trainer.model.state_dict(),
        "masters": [p.detach() for p in trainer.params] if trainer.mode.master_weights else None,
        "optimizer": trainer.optimizer.state_dict(), "scheduler": trainer.scheduler.state_dict(),
        "scaler": trainer.scaler.state_dict() if trainer.scaler.is_enabled() else None,
        "rng": {"torch": torch.get_rng_state(),
                "cuda": torch.cuda.get_rng_state_all() if device.type == "cuda" else None,
                "loader": trainer.loader.state_dict()},
        "stats": {**asdict(stats), "optimizer_steps": trainer.counter.count},
    }


def restore(trainer, state, device):
    """Load a checkpoint (checked by check_compatible) into `trainer`; returns (step to start
    from, the statistics to continue: those of the same mode, else none)."""
    same_mode = state["mode"] == trainer.mode.name
    trainer.model.load_state_dict(state["model"])
    if trainer.mode.master_weights:
        with torch.no_grad():
            for param, saved in zip(trainer.params, state["masters"]):
                param.copy_(saved)
    trainer.optimizer.load_state_dict(state["optimizer"])
    trainer.scheduler.load_state_dict(state["scheduler"])
    if state["scaler"] is not None and trainer.scaler.is_enabled() and same_mode:
        trainer.scaler.load_state_dict(state["scaler"])
    trainer.loader.load_state_dict(state["rng"]["loader"])  # first: its replay may draw from the global RNG
    torch.set_rng_state(state["rng"]["torch"].cpu())
    if device.type == "cuda" and state["rng"]["cuda"] is not None:
        torch.cuda.set_rng_state_all([s.cpu() for s in state["rng"]["cuda"]])
    trainer.counter.count = state["stats"]["optimizer_steps"]
    earlier = {key: value for key, value in state["stats"].items() if key != "optimizer_steps"}
    return state["step"], Statistics(**earlier) if same_mode else None


def check_compatible(state, config, mode, path):
    """Refuse a checkpoint of another model or batch; between FP32-weight modes allow it and
    say what happens to the loss scaler (as PyTorch's AMP notes do). Returns a warning or None."""
    saved = state["config"]
    for key in ("model", "stem", "batch_size", "accum_steps"):
        if saved[key] != getattr(config, key):
            raise UserError(f"{path} holds a run with --{key.replace('_', '-')} {saved[key]}, not "
                            f"{getattr(config, key)}; resume with the same settings or use another --checkpoint.")
    if state["mode"] == mode.name:
        return None
    saved_mode = precision.MODES.get(state["mode"])
    if saved_mode is None or not saved_mode.fp32_weights or not mode.fp32_weights:
        raise UserError(f"{path} was written in mode {state['mode']}, whose weights cannot continue in mode "
                        f"{mode.name}; resume in {state['mode']} or use another --checkpoint.")
    scaler_note = ("a fresh GradScaler starts" if mode.loss_scaling and state["scaler"] is None
                   else "its GradScaler state is ignored" if state["scaler"] is not None and not mode.loss_scaling
                   else "the scaler state carries over")
    return (f"{path} was written in mode {state['mode']}; continuing in {mode.name}: {scaler_note}, and the "
            "timing statistics restart for the new mode.")
