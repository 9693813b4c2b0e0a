"""Checkpoints that survive crashes: a trainer's whole state captured and restored, written
atomically, read with weights_only=True, and checked against the run before anything trains
from them."""
from __future__ import annotations

import collections
import io
import os
import re
import zipfile
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any, Callable, Dict, List, Optional, Tuple, Union

import torch

from utils import compat, modes, safepickle
from utils.config import RESUME_KEYS
from utils.errors import UserError, WriteFailed
from utils.fileio import atomic_write
from utils.training import checkpoint_format
from utils.training.loop import Statistics, nonfinite_policy, skipped_steps
from utils.training.step import start_momentum

if TYPE_CHECKING:
    from torch import nn

    from utils.data.dataset import Data
    from utils.launch import World
    from utils.modes import Mode
    from utils.safepickle import Allowed
    from utils.training.trainer import Trainer

FORMAT = "ampbench.checkpoint/1"


class NonFiniteWeights(Exception):
    """The model holds inf or NaN: such a state is never written."""


def save(path: str, state: Dict[str, Any], model: nn.Module) -> None:
    """Write `state` to `path` atomically: a crash or a full disk keeps the previous file."""
    if not all(torch.isfinite(p).all() for p in model.parameters()):
        raise NonFiniteWeights(path)
    archive = io.BytesIO()  # torch.save reports a full disk as a RuntimeError; f.write as the OSError it is
    torch.save({"format": FORMAT, **state}, archive)
    atomic_write(path, lambda f: f.write(archive.getbuffer()))


@dataclass(frozen=True)
class Resumed:
    """The checkpoint a run continues: the path it was read from, and what load() read there."""
    path: str
    state: Dict[str, Any]


def load(path: str, device: torch.device) -> Dict[str, Any]:
    """The checkpoint at `path` in this release's form (checkpoint_format.upgrade), refused with a
    sentence unless its archive is intact, it runs no code and every entry has the type and form
    that capture() writes."""
    if not os.path.isfile(path):
        raise UserError(f"--resume: no checkpoint at {path}; run once with --checkpoint {path} first, "
                        "or drop --resume.")
    check_integrity(path)
    try:
        state = read(path, device)
    except Exception as error:  # whatever a truncated, foreign or crafted file makes the loader raise
        raise UserError(f"{path} is not a readable ampbench checkpoint ({load_failure(error)}); "
                        "delete it or point --checkpoint elsewhere.") from None
    if not isinstance(state, dict) or state.get("format") != FORMAT:
        raise UserError(f"{path} is not an ampbench checkpoint; delete it or point --checkpoint elsewhere.")
    problem = checkpoint_format.entries_problem(state)
    if problem is None:
        state = checkpoint_format.upgrade(state)
        problem = checkpoint_format.schema_problem(state)
    if problem:
        raise UserError(f"{path} is not a complete ampbench checkpoint: {problem}; delete it or point "
                        "--checkpoint elsewhere.")
    return state


def check_integrity(path: str) -> None:
    """torch.save writes a zip archive with a CRC-32 per record, and torch.load never checks
    them: flipped bytes inside a tensor would load silently. zipfile's testzip checks them all."""
    try:
        with zipfile.ZipFile(path) as archive:
            damaged = archive.testzip()
    except Exception as error:  # a truncated or foreign file: zipfile raises several types
        raise UserError(f"{path} is not a readable ampbench checkpoint (not a complete zip archive: "
                        f"{load_failure(error)}); delete it or point --checkpoint elsewhere.") from None
    if damaged is not None:
        raise UserError(f"{path} is corrupted: its record {damaged} fails its CRC-32 check (a disk or copy "
                        "error); delete it or point --checkpoint elsewhere.")


def load_failure(error: Exception) -> str:
    """Why a load failed, in a few words: the forbidden name for a crafted pickle (never torch's
    hint to retry with weights_only=False, which would run it), else the first line."""
    text = str(error)
    forbidden = re.search(r"GLOBAL ([\w.]+)", text) or re.search(r"refusing to load '([\w.]+)'", text)
    if forbidden:
        return f"it names {forbidden.group(1)}, which a checkpoint never holds"
    lines = [line for line in text.splitlines() if line.strip() and "weights_only" not in line]
    return lines[0][:200] if lines else f"{type(error).__name__}, the file ends early or is not a torch file"


def read(path: str, device: torch.device) -> object:
    """torch.load that never runs code from the file: weights_only=True (torch 1.13), before it
    the same restriction through our own unpickler."""
    if compat.has_weights_only_load():
        return torch.load(path, map_location=device, weights_only=True)
    compat.degrade("checkpoint", "checkpoint read through ampbench's restricted unpickler (torch.load has "
                                 "no weights_only before torch 1.13)")
    return torch.load(path, map_location=device, pickle_module=safepickle.pickle_module(checkpoint_globals()))


def checkpoint_globals() -> Allowed:
    """What a checkpoint's pickle may name: tensors, their storages and ordered dicts."""
    allowed: Allowed = {("collections", "OrderedDict"): collections.OrderedDict,
               ("torch._utils", "_rebuild_tensor_v2"): torch._utils._rebuild_tensor_v2,
               ("torch._utils", "_rebuild_parameter"): torch._utils._rebuild_parameter}
    for name in dir(torch):
        if name.endswith("Storage") and isinstance(getattr(torch, name), type):
            allowed[("torch", name)] = getattr(torch, name)
    return allowed


def resume_setup(data: Data, world: World) -> Dict[str, Union[int, str]]:
    """What a resume must find again besides the config: the ranks and the data."""
    return {"world_size": world.size, "data": data.identity, "train_images": data.train_count}


class Saver:
    """Writes one run's checkpoints to `path` (rank 0 alone: every rank holds the same weights).
    A save that fails (a full disk, weights gone inf/NaN) is reported once and training goes
    on, since an hour of training is worth more than its checkpoint: `holds` is the step the
    file holds for this run, `failures` says in one sentence what could not be saved."""
    holds: Optional[int]
    failed: int
    last_error: Optional[str]

    def __init__(self, path: str, trainer: Trainer, record: Dict[str, Any], setup: Dict[str, Union[int, str]],
                 device: torch.device, is_main: bool, warn: Callable[[str], None]):
        """`record` is the run's settings as its results file records them (RunConfig.record)."""
        self.path, self.trainer, self.record, self.setup, self.device = path, trainer, record, setup, device
        self.is_main, self.warn = is_main, warn
        self.holds, self.failed, self.last_error = None, 0, None

    def __call__(self, step: int, stats: Statistics) -> None:
        if not self.is_main:
            return
        try:
            save(self.path, capture(self.trainer, self.record, step, stats, self.device, self.setup),
                 self.trainer.model)
            self.holds = step
        except NonFiniteWeights:
            self.fail(step, f"the weights became inf/NaN by step {step}, so {self.path} was not written (rerun with "
                            "-s, a lower --lr or --clip-grad).")
        except WriteFailed as error:
            self.fail(step, str(error))

    def fail(self, step: int, reason: str) -> None:
        if not self.failed:
            self.warn(f"{reason} Training goes on; the results are still written.")
        self.failed += 1
        self.last_error = reason

    @property
    def failures(self) -> List[str]:
        if not self.failed:
            return []
        assert self.last_error is not None  # fail() sets it with each failure
        kept = f"holds step {self.holds}" if self.holds is not None else "holds no step of this run"
        return [f"{self.failed} of this run's checkpoint saves failed (the last: {self.last_error.rstrip('.')}); "
                f"{self.path} {kept}."]


def capture(trainer: Trainer, record: Dict[str, Any], step: int, stats: Statistics, device: torch.device,
            setup: Dict[str, Union[int, str]]) -> Dict[str, Any]:
    """Everything a later process needs to continue exactly: the run's settings (`record`),
    weights, optimizer, schedule, scaler, random-number and loader state, and the statistics so
    far; `setup` is resume_setup()."""
    skipped = skipped_steps(trainer, nonfinite_policy(trainer.mode, record["on_nan"]), stats)
    return {
        "config": record, "setup": setup, "mode": trainer.mode.name, "step": step,
        "model": trainer.model.state_dict(),
        "masters": [p.detach() for p in trainer.params] if trainer.mode.master_weights else None,
        "optimizer": trainer.optimizer.state_dict(), "scheduler": trainer.scheduler.state_dict(),
        "scaler": trainer.scaler.state_dict() if trainer.scaler.is_enabled() else None,
        "rng": {"torch": torch.get_rng_state(),
                "cuda": torch.cuda.get_rng_state_all() if device.type == "cuda" else None,
                "loader": trainer.loader.state_dict()},
        "stats": {**asdict(stats), "optimizer_steps": step - skipped},
    }


def restore(trainer: Trainer, state: Dict[str, Any], device: torch.device,
            path: str) -> Tuple[int, Optional[Statistics]]:
    """Load a checkpoint (checked by load() and check_compatible) into `trainer`; returns
    (step to start from, the statistics to continue: those of the same mode, else none). A state
    of the right form that still does not fit this model or loader is refused with a sentence."""
    try:
        return restore_state(trainer, state, device)
    except (KeyError, TypeError, ValueError, RuntimeError, IndexError, AttributeError) as error:
        reason = (str(error).strip().splitlines() or [type(error).__name__])[0][:200]
        raise UserError(f"{path} does not fit this run: {reason}; resume with the "
                        "settings that wrote it, or use another --checkpoint.") from None


def restore_state(trainer: Trainer, state: Dict[str, Any], device: torch.device) -> Tuple[int, Optional[Statistics]]:
    same_mode = state["mode"] == trainer.mode.name
    problem = checkpoint_format.trainer_state_problem(trainer, state, same_mode)
    if problem:
        raise ValueError(problem)
    trainer.model.load_state_dict(state["model"])
    if trainer.mode.master_weights:
        with torch.no_grad():
            for param, saved in zip(trainer.params, state["masters"]):
                param.copy_(saved)
    trainer.optimizer.load_state_dict(state["optimizer"])
    start_momentum(trainer.optimizer)
    trainer.scheduler.load_state_dict(state["scheduler"])
    if state["scaler"] is not None and trainer.scaler.is_enabled() and same_mode:
        trainer.scaler.load_state_dict(state["scaler"])
    trainer.loader.load_state_dict(state["rng"]["loader"])  # first: its replay may draw from the global RNG
    torch.set_rng_state(state["rng"]["torch"].cpu())
    if device.type == "cuda" and state["rng"]["cuda"] is not None:
        torch.cuda.set_rng_state_all([s.cpu() for s in state["rng"]["cuda"]])
    earlier = {key: value for key, value in state["stats"].items() if key != "optimizer_steps"}
    return state["step"], Statistics(**earlier) if same_mode else None


def check_compatible(state: Dict[str, Any], record: Dict[str, Any], mode: Mode, path: str,
                     setup: Dict[str, Union[int, str]],
                     flag: Optional[Callable[[str, str], str]] = None) -> Optional[str]:
    """Refuse a checkpoint of another model, batch, optimizer setting, rank count or data set
    (`record`: this run's settings as RunConfig.record gives them, the checkpoint's `config`
    holds its run's; `setup`: this run's resume_setup(); `flag`: RunConfig.flag, which names a
    setting's flag as the user typed it); between FP32-weight modes allow it and say what happens
    to the loss scaler (as PyTorch's AMP notes do). Returns a warning or None."""
    named = flag or (lambda setting, name: name)
    saved = state["config"]
    # a setting an earlier release's checkpoint did not record is not checked; the settings come
    # first, as they say why the data differs (synthetic data's count follows --image-size), and
    # a model's factory before its name (which is the factory's MODULE:FUNCTION)
    factory_first = ("model_factory",) if "model_factory" in saved else ()
    reasons = checkpoint_format.REFUSED_CHANGES
    for key in dict.fromkeys(factory_first + RESUME_KEYS + tuple(key for key in reasons if key in saved)):
        if saved[key] != record[key]:
            why = f" ({reasons[key]})" if key in reasons else ""
            raise UserError(f"{path} holds a run with {named(key, '--' + key.replace('_', '-'))} "
                            f"{setting_in_words(saved[key])}, not {setting_in_words(record[key])}{why}; resume with "
                            "the same settings or use another --checkpoint.")
    check_setup(state, path, setup)
    steps = record["steps"]
    if saved.get("warmup_lr_steps") not in (None, record["warmup_lr_steps"]) and saved["steps"] == steps:
        raise UserError(f"{path} holds a run with {named('warmup_lr_steps', '--lr-warmup-steps')} "
                        f"{saved['warmup_lr_steps']}, not {record['warmup_lr_steps']}; resume with the same settings "
                        "or use another --checkpoint.")
    if record["lr_schedule"] == "onecycle" and saved["steps"] != steps:
        raise UserError(f"{path} holds a one-cycle schedule over {saved['steps']} steps, which cannot stretch to "
                        f"{steps}; resume with {named('steps', '--steps')} {saved['steps']} or use another "
                        "--checkpoint.")
    stretched = None
    if record["lr_schedule"] == "cosine" and saved["steps"] != steps:
        stretched = (f"{path} holds a cosine schedule over {saved['steps']} steps; it now decays over {steps}, "
                     "so the learning rate from here differs from that of one uninterrupted run.")
    if state["mode"] == mode.name:
        return stretched
    return " ".join(filter(None, [stretched, mode_change_note(state, mode, path)]))


def setting_in_words(value: Union[bool, float, str, None]) -> Union[float, str]:
    """A setting as a refusal names it: on/off for a switch, "unset" for None."""
    return ("on" if value else "off") if isinstance(value, bool) else "unset" if value is None else value


def lacks_final_evaluation(state: Dict[str, Any], mode: Mode) -> bool:
    """Whether the checkpoint's run, in `mode` (the mode this run trains), has no accuracy at its
    last step (a signal cut its final evaluation short)."""
    points = state["stats"]["accuracy_curve"]
    return state["mode"] == mode.name and not (points and points[-1]["step"] == state["step"])


def check_setup(state: Dict[str, Any], path: str, setup: Dict[str, Union[int, str]]) -> None:
    """Refuse a checkpoint of another number of ranks or another data set: its schedule and
    data order belong to them."""
    saved = state["setup"]
    if saved is None:
        return  # an earlier release's checkpoint: its ranks and data were not recorded (upgrade)
    if saved["world_size"] != setup["world_size"]:
        raise UserError(f"{path} was written by a job of {saved['world_size']} rank(s), and this one has "
                        f"{setup['world_size']}: the global batch and the lr would change; resume with the "
                        f"launcher and rank count that wrote it, or use another --checkpoint.")
    if (saved["data"], saved["train_images"]) != (setup["data"], setup["train_images"]):
        raise UserError(f"{path} was trained on {saved['data']} ({saved['train_images']} training images), and "
                        f"this run loaded {setup['data']} ({setup['train_images']}); resume with the same data "
                        "(--data, --data-dir) or use another --checkpoint.")


def mode_change_note(state: Dict[str, Any], mode: Mode, path: str) -> str:
    """Refuse a checkpoint whose weights cannot continue in `mode`; else say what carries over."""
    saved_mode = modes.MODES.get(state["mode"])
    if saved_mode is None or not saved_mode.fp32_weights or not mode.fp32_weights:
        raise UserError(f"{path} was written in mode {state['mode']}, whose weights cannot continue in mode "
                        f"{mode.name}; resume in {state['mode']} or use another --checkpoint.")
    scaler_note = ("a fresh GradScaler starts" if mode.loss_scaling and state["scaler"] is None
                   else "its GradScaler state is ignored" if state["scaler"] is not None and not mode.loss_scaling
                   else "the scaler state carries over")
    return (f"{path} was written in mode {state['mode']}; continuing in {mode.name}: {scaler_note}, and the timing "
            "statistics restart for the new mode.")
