"""The precision modes by name: what each asks of autocast, GradScaler and TF32.

A table without torch, so that RunConfig checks --modes and the precision flags before the
slow imports (a mistyped mode is refused in a second); utils/training/precision.py turns a
mode into autocast, a scaler and TF32 switches.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Dict, List, Optional, Sequence, Tuple

from utils.errors import UserError

if TYPE_CHECKING:
    import torch


@dataclass(frozen=True)
class Spelling:
    """How a precision mode is switched on in the frameworks people train with (Lightning's Trainer,
    Hugging Face's TrainingArguments, timm's train.py, plain PyTorch: utils/advice/frameworks.py
    writes the lines); None where a framework has no setting of its own."""
    lightning: Optional[str]  # Trainer(precision=...)
    # torch.set_float32_matmul_precision(...) ("highest" keeps FP32 matmuls, "high" allows TF32) and
    # torch.backends.cudnn.allow_tf32, which decide FP32's arithmetic; None where autocast decides it
    matmul_precision: Optional[str]
    cudnn_tf32: Optional[bool]
    transformers: Optional[Dict[str, Any]]  # TrainingArguments(...)
    timm: Optional[Tuple[str, ...]]  # train.py's flags
    autocast: Optional[str]  # torch.autocast's dtype
    scaler: bool  # torch.amp.GradScaler
    float8: Optional[str] = None  # torchao's Float8LinearConfig.from_recipe_name(...)
    notes: Dict[str, str] = field(default_factory=dict)  # framework: what else it needs, said once


@dataclass(frozen=True)
class Mode:
    """A precision mode: what it asks of autocast, GradScaler and TF32, and what the adviser, the
    comparisons and the GPU suite know of it (`rank`, `weighed`, `never_advised`, `at_speed_on`,
    `timed_in`), and how other frameworks spell it (`spelling`)."""
    name: str
    autocast: Optional[str]  # torch dtype name for autocast ("float16", "bfloat16"); None: autocast off
    loss_scaling: bool  # dynamic loss scaling with torch.amp.GradScaler
    tf32: bool  # TF32 allowed for FP32 matmuls and convolutions
    description: str
    colour: str  # the mode's colour in every plot
    rank: int  # how much it changes the numbers, least first: an adviser's tie goes to the lowest
    at_speed_on: Tuple[str, ...]  # the devices ("cuda", "cpu") whose arithmetic runs it at speed
    timed_in: Tuple[str, ...]  # the GPU suite's sections that time it (SUITE_SECTIONS)
    weighed: bool = True  # whether --advise times it where it runs at speed
    never_advised: Optional[str] = None  # why --advise never advises it, whatever its speed
    master_weights: bool = False  # FP16 model, FP32 master weights, static loss scale
    float8: Optional[str] = None  # torchao's float8 training recipe for the Linear layers ("tensorwise", "rowwise")
    # how the frameworks people train with switch it on (utils/advice/frameworks.py); a mode the adviser weighs has one
    spelling: Optional[Spelling] = None

    @property
    def compute_dtype(self) -> str:
        """What its matmuls and convolutions compute in: "float32", "tf32", "float16", "bfloat16" or
        "float8" (the converted Linear layers; the rest of an fp8 mode computes in its autocast dtype)."""
        if self.float8:
            return "float8"
        if self.master_weights:
            return "float16"
        return self.autocast or ("tf32" if self.tf32 else "float32")

    @property
    def low_precision_dtype(self) -> Optional[str]:
        """"float16" or "bfloat16" for a mode that computes in one, else None; an fp8 mode's
        activations and unconverted layers are in its autocast dtype."""
        if self.float8:
            return self.autocast
        return self.compute_dtype if self.compute_dtype in ("float16", "bfloat16") else None

    @property
    def autocast_dtype(self) -> Optional[torch.dtype]:
        """The torch dtype autocast casts to, or None."""
        if self.autocast is None:
            return None
        import torch  # only once training needs it: this table is read before torch is imported

        return getattr(torch, self.autocast)

    @property
    def fp32_weights(self) -> bool:
        """The model's own weights are FP32, so checkpoints of such modes can continue each other."""
        return not self.master_weights

    @property
    def scaled(self) -> bool:
        """A loss scaler watches for inf/NaN gradients and skips those steps by itself."""
        return self.loss_scaling or self.master_weights


STRICT = "timm's train.py turns TF32 on for matmuls on CUDA: set torch.backends.cuda.matmul.allow_tf32 and " \
         "torch.backends.cudnn.allow_tf32 to False in it"
NO_FP8 = "no setting of its own: convert the model's Linear layers with torchao as in the PyTorch line"
FP8_BY_TORCHAO = dict.fromkeys(("lightning", "transformers", "timm"), NO_FP8)
GPU, EVERYWHERE = ("cuda",), ("cuda", "cpu")
# The GPU suite's sections that time a mode (Mode.timed_in, read by benchmarks/suite/plan.py), each
# in the rows' order.
HEADLINE = "headline"  # README's convnet rows, and resnet50 at 224 (strict FP32, and NVIDIA's TF32 and AMP)
FP8_ROW = "fp8 row"  # README's FP8 row: FP8 against its fair baseline, the same autocast without it
COMPARISONS = "comparisons"  # the convnets' full comparisons (the fp8 modes refuse convnets' few Linear FLOPs)
TRANSFORMERS = "transformers"  # vit_s4 in every mode that trains it
SUITE_SECTIONS = (HEADLINE, FP8_ROW, COMPARISONS, TRANSFORMERS)
EVERY_SECTION_BUT_FP8 = (HEADLINE, COMPARISONS, TRANSFORMERS)
MODES = {
    "fp32": Mode("fp32", None, False, False, "FP32, TF32 off", "#595959", 0, EVERYWHERE, EVERY_SECTION_BUT_FP8,
                 spelling=Spelling("32-true", "highest", False, {"tf32": False}, (), None, False,
                                   notes={"timm": STRICT})),
    "tf32": Mode("tf32", None, False, True, "FP32 with TF32 tensor cores for matmul and conv", "#8c564b", 1, GPU,
                 EVERY_SECTION_BUT_FP8, spelling=Spelling("32-true", "high", True, {"tf32": True}, (), None, False)),
    "amp-fp16": Mode("amp-fp16", "float16", True, False, "autocast float16 + GradScaler", "#1f77b4", 3, GPU,
                     EVERY_SECTION_BUT_FP8,
                     spelling=Spelling("16-mixed", None, None, {"fp16": True}, ("--amp", "--amp-dtype", "float16"),
                                       "float16", True)),
    # the didactic one: its underflow is --numerics' subject, not a speed the suite times
    "amp-fp16-noscale": Mode("amp-fp16-noscale", "float16", False, False,
                             "autocast float16 without loss scaling (small gradients may underflow)", "#17becf", 7,
                             GPU, (), weighed=False,
                             never_advised="float16 without loss scaling: small gradients underflow to zero"),
    "amp-bf16": Mode("amp-bf16", "bfloat16", False, False, "autocast bfloat16", "#2ca02c", 2, EVERYWHERE,
                     SUITE_SECTIONS,
                     spelling=Spelling("bf16-mixed", None, None, {"bf16": True}, ("--amp", "--amp-dtype", "bfloat16"),
                                       "bfloat16", False)),
    "fp16-master": Mode("fp16-master", None, False, False,
                        "FP16 model (BatchNorm FP32), FP32 master weights, static loss scale", "#ff7f0e", 4, GPU,
                        (COMPARISONS,), weighed=False, master_weights=True),
    "fp8": Mode("fp8", "bfloat16", False, False,
                "autocast bfloat16 + torchao float8 Linear layers, tensorwise dynamic scaling", "#7b4173", 5, GPU,
                (FP8_ROW, TRANSFORMERS), float8="tensorwise",
                spelling=Spelling(None, None, None, None, None, "bfloat16", False, "tensorwise", FP8_BY_TORCHAO)),
    "fp8-rowwise": Mode("fp8-rowwise", "bfloat16", False, False,
                        "autocast bfloat16 + torchao float8 Linear layers, rowwise dynamic scaling", "#e377c2", 6, GPU,
                        (FP8_ROW, TRANSFORMERS), float8="rowwise",
                        spelling=Spelling(None, None, None, None, None, "bfloat16", False, "rowwise", FP8_BY_TORCHAO)),
}

# The mode the others are read against, by role, and why it is that mode.
BASELINES = {
    "reference": "fp32",  # --explain's rules and --numerics' ratios read this mode's figures, whatever --baseline
    "default": "fp32",  # --baseline's default, and what files of earlier releases compared against
    "fp8": "amp-bf16",  # an fp8 mode's fair comparison: the same autocast without the float8 layers
}
# Below this share of a step's matmul FLOPs in FP8, the rest of the step decides an fp8 mode's speed:
# its run says so loudly, and --explain names it when FP8 is slower than bf16.
LOW_FP8_SHARE = 0.5
# What an fp8 mode needs on the CPU: a flags rule (utils/config.py, so that --check-flags refuses it)
# and the device check's answer (utils/training/float8.py) say it alike.
FP8_NEEDS_A_GPU = ("needs a GPU with FP8 tensor cores (-p); on the CPU add --fp8-emulate, which checks that fp8 "
                   "trains but does not measure FP8 speed.")
DEFAULT_COMPARE = ("fp32", "amp-fp16")  # on a GPU
# On a CPU: most have no fast float16 arithmetic (fallback kernels, many times slower than fp32),
# while bfloat16 autocast runs at FP32's speed or better where the CPU has bfloat16 instructions
DEFAULT_COMPARE_CPU = ("fp32", "amp-bf16")

INITIAL_LOSS_SCALE = 2.0 ** 16  # where GradScaler's dynamic scale starts (its default, named here)


def timed_in(section: str) -> List[str]:
    """The modes the GPU suite's `section` (SUITE_SECTIONS) times, by their rows, in the rows' order."""
    return [name for name, mode in MODES.items() if section in mode.timed_in]


def fp32_modes() -> Tuple[str, ...]:
    """The modes that compute in FP32 (strict, or with TF32): what speedups are read against."""
    return tuple(name for name, mode in MODES.items() if mode.compute_dtype in ("float32", "tf32"))


def weighed_on(device: str) -> Tuple[str, ...]:
    """The modes --advise times on `device` ("cuda", "cpu"), by their rows; the fp8 modes only
    where FP8 tensor cores are (the preflight asks the device)."""
    return tuple(name for name, mode in MODES.items() if mode.weighed and device in mode.at_speed_on)


def listed(names: Sequence[str]) -> str:
    """"a", "a or b", "a, b or c": modes named in a sentence, as the rows give them."""
    return " or ".join([", ".join(names[:-1]), names[-1]] if len(names) > 1 else list(names))


def scale_drop_steps(curve: Sequence[float], dynamic: bool) -> List[int]:
    """The steps (from 1) at which a loss-scale curve (the scale after each step) fell: a
    dynamic GradScaler halves its scale at each step it skips, from INITIAL_LOSS_SCALE on; a
    static scale never falls."""
    if not curve:
        return []
    previous = INITIAL_LOSS_SCALE if dynamic else curve[0]
    steps = []
    for step, scale in enumerate(curve, 1):
        if scale < previous:
            steps.append(step)
        previous = scale
    return steps


def parse_modes(text: str) -> List[Mode]:
    """A comma list of mode names, e.g. "fp32,amp-bf16"."""
    names = [name.strip() for name in text.split(",")]
    if not all(names):
        raise UserError(f"--modes '{text}' has an empty item; list mode names separated by commas, e.g. "
                        "fp32,amp-bf16.")
    unknown = [name for name in names if name not in MODES]
    if unknown or not names:
        raise UserError(f"unknown precision mode '{unknown[0] if unknown else text}' in --modes; "
                        f"choose from {', '.join(MODES)}.")
    if len(set(names)) != len(names):
        raise UserError(f"--modes lists a mode twice ({text}); use --repeats to run modes again.")
    return [MODES[name] for name in names]

