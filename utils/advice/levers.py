"""The levers --advise tries, one row each: the settings a lever switches on and off, why its trial
cannot run here, the settings its trial runs with, which way the advice takes it, and whether the
advice says when its compiling pays back. The preflight, the session and the trials' judge
(trials.py) ask this table and name no lever themselves; its order is the order the trials run in.
The settings a speed lever switches are those utils/config.py declares adviser=LEVER, and every one
of those belongs to a lever here. No torch at import: a reason imports what it checks."""
from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable, Dict, List, Mapping, Optional, Set, Tuple

from utils import config
from utils.errors import UserError, without_remedy

if TYPE_CHECKING:
    import torch

    from utils.config import DataSettings, Training
    from utils.settings import CommandLine

# A loader lever's value that its trial takes from this machine (every core this process may use),
# and that is on where it is more than the comparison's.
EVERY_CORE = "every core"


@dataclass(frozen=True)
class Here:
    """What a lever's trial would run on: the user's command (which way each lever is switched),
    what it trains, on what data, on which device."""
    training: Training
    data: DataSettings
    arguments: CommandLine
    device: torch.device


@dataclass(frozen=True)
class Lever:
    """One lever: every part is required, and checked where the row is written."""
    name: str  # as the advice names it, in sentences, advice.json and the phases
    on: Dict[str, Any]  # the settings that switch it on
    off: Dict[str, Any]  # and off; a loader lever's is the user's own setting ({})
    why_not: Callable[[Here], Optional[str]]  # why its trial cannot run here, or None
    loader: bool  # the input pipeline's: tried on streamed data alone, where the loader bounds the lead
    pays_back: bool  # its trial compiles: the advice says after how many steps compiling pays back

    def __post_init__(self) -> None:
        allowed = set(config.SETTINGS) - set(config.LEVER_KEYS) if self.loader else set(config.LEVER_KEYS)
        off = set() if self.loader else set(self.on)
        if not self.on or not set(self.on) <= allowed or set(self.off) != off or not callable(self.why_not):
            whose = "main.py settings that are no speed lever's, on alone (off is the user's own)" if self.loader \
                else "settings utils/config.py declares adviser=LEVER, switched off as well as on"
            raise TypeError(f"lever {self.name!r} switches {self.on} on and {self.off} off, why_not={self.why_not!r}: "
                            f"it switches {whose}, and says why it cannot be tried")

    @property
    def keys(self) -> Tuple[str, ...]:
        """The settings it switches."""
        return tuple(self.on)

    def is_on(self, settings: Mapping[str, Any], base: Optional[Mapping[str, Any]] = None) -> bool:
        """Whether `settings` (a command line's, or a results document's setup) have it on: a compile mode
        counts only where the model is compiled; more workers, against the comparison's `base`."""
        for key, value in self.on.items():
            if value == EVERY_CORE:
                if (settings.get(key) or 0) <= ((base or {}).get(key) or 0):
                    return False
            elif (key != "compile_mode" or settings.get("compile")) and settings.get(key) != value:
                return False
        return True

    def trial(self, arguments: CommandLine) -> Dict[str, Any]:
        """The settings its phase runs with: a speed lever the other way from the user's command,
        `arguments`; a loader lever on (it is not tried where it is on already)."""
        if self.loader:
            return {key: config.usable_cores() if value == EVERY_CORE else value for key, value in self.on.items()}
        return dict(self.off if self.is_on(arguments) else self.on)

    def tried_by(self, differing: Set[str], base: Mapping[str, Any], other: Mapping[str, Any]) -> bool:
        """Whether two setups that differ in the settings `differing` (alone) are this lever's trial."""
        if self.loader:
            return differing == set(self.on)
        return bool(differing) and differing <= set(self.on) and self.is_on(base) != self.is_on(other)

    def choice(self, kept: bool, harmful: bool, on: Mapping[str, Any], off: Mapping[str, Any]) -> Dict[str, Any]:
        """The settings the advice takes from its trial: its on side where it is kept, its off side
        where it is slower, none where it is not shown either way (`on`, `off`: the two setups, which
        a loader lever's value is read from)."""
        if not (kept or harmful):
            return {}
        if self.loader:
            return {key: (on if kept else off)[key] for key in self.on}
        return dict(self.on if kept else self.off)


def not_a_convnet(here: Here) -> Optional[str]:
    from models import families

    if families.family_of(here.training.model).recipe != "convnet":
        return "channels_last lays out convolutions' images, and this model is no convnet"
    return None


def no_fused_optimizer(here: Here) -> Optional[str]:
    from models import families
    from utils import compat
    from utils.training import step

    training = here.training
    kind = training.optimizer or families.recipe_of(training.model, training.model_factory is not None).optimizer
    if getattr(compat, step.FUSED_RELEASES[kind])() and step.fused_optimizer_works(here.device.type, kind):
        return None
    return f"this torch has no fused {kind} on {here.device.type}"


def no_compile(here: Here) -> Optional[str]:
    from utils import compat

    if not compat.has_compile():
        import torch

        return f"torch.compile needs torch 2.0, and this is {torch.__version__}"
    return "the command compiles already" if here.arguments["compile"] else None


def no_cuda_graphs(here: Here) -> Optional[str]:
    return "CUDA graphs need a GPU" if here.device.type != "cuda" else no_compile(here)


def workers_enough(here: Here) -> Optional[str]:
    cores = config.usable_cores()
    if here.arguments["workers"] < cores:
        return None
    return f"the loader has a worker for each of the {cores} cores this process may use already"


def no_gpu_decode(here: Here) -> Optional[str]:
    from utils.data import gpu_decode

    if here.data.decode == "gpu" or here.data.loader == "dali":
        return "the command decodes on the GPU already"
    try:
        gpu_decode.check_available(here.device)
    except UserError as refusal:
        return without_remedy(str(refusal))
    return None


# In the order they are tried (fused is main.py's default, so its trial times foreach).
LEVERS = (
    Lever("channels-last", {"channels_last": True}, {"channels_last": False}, not_a_convnet,
          loader=False, pays_back=False),
    Lever("fused optimizer", {"optimizer_impl": "fused"}, {"optimizer_impl": "foreach"}, no_fused_optimizer,
          loader=False, pays_back=False),
    Lever("compile", {"compile": True, "compile_mode": "default"}, {"compile": False, "compile_mode": "default"},
          no_compile, loader=False, pays_back=True),
    Lever("cuda graphs", {"compile": True, "compile_mode": "reduce-overhead"},
          {"compile": False, "compile_mode": "default"}, no_cuda_graphs, loader=False, pays_back=True),
    Lever("more workers", {"workers": EVERY_CORE}, {}, workers_enough, loader=True, pays_back=False),
    Lever("GPU decode", {"decode": "gpu"}, {}, no_gpu_decode, loader=True, pays_back=False),
)
BY_NAME = {lever.name: lever for lever in LEVERS}
LOADER = tuple(lever.name for lever in LEVERS if lever.loader)


def streamed(data: DataSettings) -> bool:
    """Whether the data streams from files through a loader of its own, which the loader levers
    may speed up (data held in memory has none)."""
    return data.data in config.STREAMED_DATA and data.loader not in ("device", "torchvision")


def trials(here: Here) -> Tuple[Tuple[Tuple[str, Dict[str, Any]], ...], Dict[str, str]]:
    """(the levers to try here, each with the settings its phase runs, in order; {lever: why not});
    the loader levers for streamed data alone, where the session tries them only once the comparison
    found the loader bounding the lead."""
    tried: List[Tuple[str, Dict[str, Any]]] = []
    why: Dict[str, str] = {}
    for lever in LEVERS:
        if lever.loader and not streamed(here.data):
            continue
        reason = lever.why_not(here)
        if reason is None:
            tried.append((lever.name, lever.trial(here.arguments)))
        else:
            why[lever.name] = reason
    return tuple(tried), why
