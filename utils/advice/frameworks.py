"""The advised setting in the frameworks people train with: Lightning's Trainer, Hugging Face's
TrainingArguments, timm's train.py and plain PyTorch, each in that library's own documented
spelling, a mode's on its row (utils/modes.py's Mode.spelling), a lever's here
(tests/unit/advice/test_frameworks.py holds every spelling against the library itself,
and runs the PyTorch lines). TF32 is spelled out in each: PyTorch runs cuDNN's convolutions in
TF32 by default (torch.backends.cudnn.allow_tf32) and timm's train.py turns it on for matmuls on
CUDA, so strict FP32 is a switch to set, not a default. No torch."""
from __future__ import annotations

from typing import Any, Dict, List, Optional, Tuple

from utils.modes import MODES, Spelling

FRAMEWORKS = ("lightning", "transformers", "timm", "pytorch")


# How each mode the adviser may advise is switched on there: its row's (utils/modes.py)
SPELLINGS = {name: mode.spelling for name, mode in MODES.items() if mode.spelling is not None}
# The levers' spellings: (Lightning, TrainingArguments, timm's flags, PyTorch's lines); None where it has none.
LEVERS: Dict[str, Tuple[Optional[str], Optional[Dict[str, Any]], Optional[Tuple[str, ...]], Tuple[str, ...]]] = {
    "channels_last": ("model.to(memory_format=torch.channels_last) in the LightningModule", None, ("--channels-last",),
                      ("model = model.to(memory_format=torch.channels_last)  # once; each batch of images too",)),
    "compile": ("torch.compile(model) in the LightningModule", {"torch_compile": True}, ("--torchcompile",),
                ("model = torch.compile(model)  # once",)),
    "cuda graphs": ('torch.compile(model, mode="reduce-overhead") in the LightningModule',
                    {"torch_compile": True, "torch_compile_mode": "reduce-overhead"},
                    ("--torchcompile", "--torchcompile-mode", "reduce-overhead"),
                    ('model = torch.compile(model, mode="reduce-overhead")  # once',)),
    "fused": (None, None, None, ("optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9, fused=True)"
                                 "  # once: fused=True in the optimizer you use",)),
}


def levers_of(settings: Dict[str, Any]) -> Tuple[str, ...]:
    """The levers an advice's settings switch on (levers.py's settings), in LEVERS' order."""
    on = []
    if settings.get("channels_last"):
        on.append("channels_last")
    if settings.get("compile"):
        on.append("cuda graphs" if settings.get("compile_mode") == "reduce-overhead" else "compile")
    if settings.get("optimizer_impl") == "fused":
        on.append("fused")
    return tuple(on)


def python_call(name: str, arguments: Dict[str, Any]) -> str:
    return f"{name}(..., {', '.join(f'{key}={value!r}' for key, value in arguments.items())})"


def pytorch_lines(spelling: Spelling, levers: Tuple[str, ...], device: str) -> List[str]:
    """Plain PyTorch, line by line as PyTorch's AMP recipe writes it: what is set once (the TF32
    switches, FP8's conversion, the levers, the scaler), then one step."""
    once = [f"torch.backends.cuda.matmul.allow_tf32 = {spelling.matmul_precision == 'high'}",
            f"torch.backends.cudnn.allow_tf32 = {spelling.cudnn_tf32}"] \
        if device == "cuda" and spelling.matmul_precision is not None else []
    if spelling.float8:
        once += ["from torchao.float8 import Float8LinearConfig, convert_to_float8_training",
                 f'convert_to_float8_training(model, config=Float8LinearConfig.from_recipe_name("{spelling.float8}"))'
                 "  # once, before the optimizer"]
    once += [line for lever in levers for line in LEVERS[lever][3]]
    if spelling.scaler:
        once.append(f'scaler = torch.amp.GradScaler("{device}")  # once, beside the optimizer')
    step = "loss = criterion(model(images), labels)"
    if spelling.autocast:
        step = f'with torch.autocast("{device}", dtype=torch.{spelling.autocast}):\n    {step}'
    ending = ["scaler.scale(loss).backward()", "scaler.step(optimizer)", "scaler.update()"] if spelling.scaler else \
        ["loss.backward()", "optimizer.step()"]
    return [*once, step, *ending]


def lines(mode: str, settings: Dict[str, Any], device: str) -> Dict[str, str]:
    """{framework: the advised `mode` and levers (`settings`) as that framework sets them} on
    `device` ("cuda" or "cpu"); PyTorch's is code, one statement a line."""
    spelling = SPELLINGS[mode]
    levers = levers_of(settings)
    said: Dict[str, str] = {}
    if spelling.lightning is not None:
        matmul = f'torch.set_float32_matmul_precision("{spelling.matmul_precision}")'
        cudnn = "" if spelling.cudnn_tf32 else " and torch.backends.cudnn.allow_tf32 = False"
        said["lightning"] = f'Trainer(precision="{spelling.lightning}")' + (
            f", after {matmul}{cudnn}" if device == "cuda" and spelling.matmul_precision else "") + "".join(
            f"; {LEVERS[lever][0]}" for lever in levers if LEVERS[lever][0])
    if spelling.transformers is not None:  # TF32 is a CUDA setting; on a CPU, use_cpu
        arguments = dict(spelling.transformers) if device == "cuda" else \
            {"use_cpu": True, **{key: value for key, value in spelling.transformers.items() if key != "tf32"}}
        for lever in levers:
            arguments.update(LEVERS[lever][1] or {})
        said["transformers"] = python_call("TrainingArguments", arguments)
    if spelling.timm is not None:
        flags = [*(() if device == "cuda" else ("--device", "cpu")), *spelling.timm,
                 *(flag for lever in levers for flag in LEVERS[lever][2] or ())]
        said["timm"] = " ".join(["train.py", *flags]) + ("" if spelling.timm else " (no --amp)")
    for framework, note in spelling.notes.items():
        said[framework] = f"{said[framework]} ({note})" if framework in said else note
    said["pytorch"] = "\n".join(pytorch_lines(spelling, levers, device))
    return {framework: said[framework] for framework in FRAMEWORKS if framework in said}
