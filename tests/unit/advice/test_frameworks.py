"""The advised setting in the user's framework, held against each library's own spelling:
Lightning's precision strings and float32 matmul precisions, the fields of Hugging Face's
TrainingArguments, timm's train.py flags (tests/unit/advice/data/timm-train-flags.txt), and plain
PyTorch's lines, which run one training step on the CPU (and compile, naming only what torch has,
for CUDA)."""
import dataclasses
import typing
from pathlib import Path

import pytest
import torch

from utils.advice.frameworks import LEVERS, SPELLINGS, lines
from utils.modes import MODES, NO_FP8

HERE = Path(__file__).resolve().parent
SETTINGS = [{}, {"channels_last": True}, {"compile": True, "compile_mode": "default"},
            {"compile": True, "compile_mode": "reduce-overhead"}, {"optimizer_impl": "fused"}]


def test_every_mode_the_adviser_weighs_has_its_spelling_on_its_row():
    assert all(mode.spelling is not None for mode in MODES.values() if mode.weighed)
    assert SPELLINGS == {name: mode.spelling for name, mode in MODES.items() if mode.spelling is not None}


def test_lightnings_precisions_are_its_own():
    from lightning.fabric.connector import _PRECISION_INPUT_STR

    for spelling in SPELLINGS.values():
        assert spelling.lightning is None or spelling.lightning in typing.get_args(_PRECISION_INPUT_STR)
    before = torch.get_float32_matmul_precision()
    try:
        for spelling in SPELLINGS.values():
            if spelling.matmul_precision is not None:
                torch.set_float32_matmul_precision(spelling.matmul_precision)
                assert torch.get_float32_matmul_precision() == spelling.matmul_precision
    finally:
        torch.set_float32_matmul_precision(before)


def test_training_arguments_fields_are_hugging_faces_own():
    from transformers import TrainingArguments

    fields = {field.name: field for field in dataclasses.fields(TrainingArguments)}
    given = [*(spelling.transformers or {} for spelling in SPELLINGS.values()),
             *(lever[1] or {} for lever in LEVERS.values()), {"use_cpu": True}]
    for arguments in given:
        for name, value in arguments.items():
            assert name in fields, name
            assert isinstance(value, (bool, str))


def timm_flags():
    """{flag: the values its code accepts} of timm's train.py, as the fixture lists them."""
    found = {}
    for line in (HERE / "data" / "timm-train-flags.txt").read_text().splitlines():
        if line.startswith("--"):
            flag, _, *values = line.split()
            found[flag] = values
    return found


@pytest.mark.parametrize("device", ["cuda", "cpu"])
@pytest.mark.parametrize("mode", sorted(SPELLINGS))
@pytest.mark.parametrize("settings", SETTINGS, ids=lambda settings: ",".join(settings) or "no lever")
def test_timms_flags_are_its_own(mode, settings, device):
    said = lines(mode, settings, device).get("timm")
    if SPELLINGS[mode].timm is None:
        assert said == NO_FP8
        return
    known = timm_flags()
    words = said.split(" (")[0].split()[1:]
    for index, word in enumerate(words):
        if word.startswith("--"):
            assert word in known, word
        elif known[words[index - 1]]:  # a value its code checks
            assert word in known[words[index - 1]], (words[index - 1], word)


class Tiny(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = torch.nn.Conv2d(3, 4, 3)
        self.head = torch.nn.Linear(4, 10)

    def forward(self, images):
        return self.head(self.conv(images).mean((2, 3)))


@pytest.mark.parametrize("mode", ["fp32", "tf32", "amp-bf16"])
@pytest.mark.parametrize("settings", [{}, {"channels_last": True}, {"optimizer_impl": "fused"}],
                         ids=["no lever", "channels_last", "fused"])
def test_pytorchs_lines_train_a_step_on_the_cpu(mode, settings):
    code = lines(mode, settings, "cpu")["pytorch"]
    model = Tiny()
    scope = {"torch": torch, "model": model, "images": torch.randn(2, 3, 8, 8), "labels": torch.tensor([1, 2]),
             "criterion": torch.nn.CrossEntropyLoss(),
             "optimizer": torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)}
    before = [parameter.detach().clone() for parameter in model.parameters()]
    exec(compile(code, "<advice>", "exec"), scope)
    assert torch.isfinite(scope["loss"])
    moved = scope["model"].parameters() if "optimizer =" not in code else scope["optimizer"].param_groups[0]["params"]
    assert any(not torch.equal(old, new) for old, new in zip(before, moved))


def names_in(code):
    """The dotted names `code` reads from torch (torch.backends.cudnn.allow_tf32, torch.amp.GradScaler, ...)."""
    import ast

    found = []
    for node in ast.walk(ast.parse(code)):
        if isinstance(node, ast.Attribute):
            parts, inner = [node.attr], node.value
            while isinstance(inner, ast.Attribute):
                parts.append(inner.attr)
                inner = inner.value
            if isinstance(inner, ast.Name) and inner.id == "torch":
                found.append(["torch", *reversed(parts)])
    return found


@pytest.mark.parametrize("mode", sorted(SPELLINGS))
@pytest.mark.parametrize("settings", SETTINGS, ids=lambda settings: ",".join(settings) or "no lever")
def test_pytorchs_lines_for_cuda_name_only_what_torch_has(mode, settings):
    code = lines(mode, settings, "cuda")["pytorch"]
    for path in names_in(code):
        holder = torch
        for part in path[1:]:
            assert hasattr(holder, part), ".".join(path)
            holder = getattr(holder, part)
    if SPELLINGS[mode].scaler:
        assert 'torch.amp.GradScaler("cuda")' in code and "scaler.scale(loss).backward()" in code
    assert ("torch.backends.cudnn.allow_tf32 = False" in code) == (mode == "fp32")


def test_strict_fp32_is_said_where_a_framework_turns_tf32_on():
    said = lines("fp32", {}, "cuda")
    assert 'torch.set_float32_matmul_precision("highest") and torch.backends.cudnn.allow_tf32 = False' in \
        said["lightning"]
    assert "tf32=False" in said["transformers"] and "allow_tf32" in said["timm"]
    assert 'torch.set_float32_matmul_precision("high")' in lines("tf32", {}, "cuda")["lightning"]
