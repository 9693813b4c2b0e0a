"""Checkpoints that survive crashes: written atomically, read with weights_only=True, and
checked against the run before anything trains from them."""
import os

import torch

from utils.errors import UserError
from utils.fileio import atomic_write

FORMAT = "ampbench.checkpoint/1"
# Modes whose model weights are FP32 and can continue each other (fp16-master keeps an FP16 model).
FP32_WEIGHT_MODES = {"fp32", "tf32", "amp-fp16", "amp-fp16-noscale", "amp-bf16"}


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
        state = torch.load(path, map_location=device, weights_only=True)
    except Exception as error:  # whatever a truncated, foreign or crafted file makes the loader raise
        reason = str(error).splitlines()[0] if str(error) else type(error).__name__
        raise UserError(f"{path} is not a readable ampbench checkpoint ({reason[:200]}); "
                        "delete it or point --checkpoint elsewhere.") from None
    if not isinstance(state, dict) or state.get("format") != FORMAT:
        raise UserError(f"{path} is not an ampbench checkpoint; delete it or point --checkpoint elsewhere.")
    return state


def check_compatible(state, args, mode, path):
    """Refuse a checkpoint of another model or batch; between FP32-weight modes allow it and
    say what happens to the loss scaler (as PyTorch's AMP notes do). Returns a warning or None."""
    config = state["config"]
    for key in ("model", "stem", "batch_size", "accum_steps"):
        if config[key] != getattr(args, key):
            raise UserError(f"{path} holds a run with --{key.replace('_', '-')} {config[key]}, not "
                            f"{getattr(args, key)}; resume with the same settings or use another --checkpoint.")
    if state["mode"] == mode.name:
        return None
    if state["mode"] not in FP32_WEIGHT_MODES or mode.name not in FP32_WEIGHT_MODES:
        raise UserError(f"{path} was written in mode {state['mode']}, whose weights cannot continue in mode "
                        f"{mode.name}; resume in {state['mode']} or use another --checkpoint.")
    scaler_note = ("a fresh GradScaler starts" if mode.loss_scaling and state["scaler"] is None
                   else "its GradScaler state is ignored" if state["scaler"] is not None and not mode.loss_scaling
                   else "the scaler state carries over")
    return (f"{path} was written in mode {state['mode']}; continuing in {mode.name}: {scaler_note}, and the "
            "timing statistics restart for the new mode.")
