"""The recipe per model family: vision transformers train with AdamW as DeiT and the CIFAR ViT
references do, convnets with SGD; --optimizer and the training flags override each setting."""
import json

import pytest
import torch
from torch import nn

from conftest import assert_user_error, run_main
from models import factory, families
from utils.config import RunConfig
from utils.training.step import make_optimizer, no_decay_flags

TINY = ["-b", "4", "-n", "2", "--warmup", "1", "--no-progress", "--no-eval", "--data", "synthetic"]


def recipe(batch_size=128, world_size=1, batch_norm=False, **flags):
    return RunConfig.build(steps=200, batch_size=batch_size, **flags).plan(batch_norm, world_size).recipe


def test_a_vision_transformer_gets_adamw_with_decay_label_smoothing_and_warm_up():
    config = recipe(model="vit_t4")
    assert (config.family, config.optimizer, config.lr, config.momentum, config.weight_decay,
            config.label_smoothing, config.lr_warmup_steps) == (
        "transformer", "adamw", pytest.approx(1e-3), None, 0.05, 0.1, 10)
    assert recipe(model="vit_s4", batch_size=128, world_size=4).lr == pytest.approx(2e-3)  # sqrt(512 / 128)
    assert recipe(model="swin_t").optimizer == "adamw"


def test_a_convnet_keeps_sgd_and_its_lr_for_the_global_batch():
    config = recipe(model="resnet18", batch_norm=True, world_size=2)
    assert (config.family, config.optimizer, config.lr, config.momentum, config.weight_decay,
            config.label_smoothing) == ("convnet", "sgd", pytest.approx(0.2), 0.9, 5e-4, 0.0)


def test_flags_override_the_family_recipe():
    sgd = recipe(model="vit_t4", optimizer="sgd")
    assert (sgd.optimizer, sgd.lr, sgd.momentum, sgd.weight_decay, sgd.label_smoothing) == (
        "sgd", pytest.approx(0.04), 0.9, 5e-4, 0.1)  # no batch norm in a ViT: the lower SGD lr
    own = recipe(model="vit_t4", lr=3e-4, weight_decay=0.1, label_smoothing=0.0, warmup_lr_steps=20)
    assert (own.optimizer, own.lr, own.weight_decay, own.label_smoothing, own.lr_warmup_steps) == (
        "adamw", 3e-4, 0.1, 0.0, 20)
    adamw = recipe(model="resnet18", batch_norm=True, optimizer="adamw")
    assert (adamw.family, adamw.optimizer, adamw.lr, adamw.weight_decay, adamw.label_smoothing) == (
        "convnet", "adamw", pytest.approx(1e-3), 0.05, 0.0)


@pytest.mark.parametrize("argv, phrase", [
    (["-m", "vit_t4", "--momentum", "0.8"], "--momentum sets SGD's momentum, and vit_t4 trains with AdamW here; "
                                            "drop --momentum or add --optimizer sgd."),
    (["-m", "resnet18", "--optimizer", "adamw", "--nesterov"], "drop --nesterov or add --optimizer sgd"),
    (["-m", "resnet18", "--nesterov", "--momentum", "0"], "--nesterov needs a non-zero --momentum."),
])
def test_sgd_settings_with_adamw_are_refused(argv, phrase):
    assert_user_error(run_main(*TINY, *argv), phrase)


def test_a_family_added_to_the_table_alone_trains_and_builds_as_its_row_says(monkeypatch):
    """Adding a family touches models/families.py alone: a made-up family with a recipe of its
    own gets that recipe's optimizer, label smoothing and lr rule, its parameters spared weight
    decay, the --stem rule and its refusal below 64x64 from its rows, and nothing else."""
    monkeypatch.setitem(families.RECIPES, "mixer", families.Recipe("adamw", 0.2))
    monkeypatch.setitem(families.FAMILIES, "toymixer", families.Family(
        "mixer", prefixes=("toymixer_",), no_decay=("token_bias",), resnet_stem=True,
        min_image_size=64, size_reason="its tokens"))
    config = recipe(model="toymixer_s", world_size=4, image_size=64)
    assert (config.family, config.optimizer, config.lr, config.momentum, config.weight_decay,
            config.label_smoothing) == ("mixer", "adamw", pytest.approx(2e-3), None, 0.05, 0.2)  # sqrt(512 / 128)
    model = nn.Module()
    model.token_bias, model.proj = nn.Parameter(torch.zeros(4, 4)), nn.Linear(4, 4)
    assert dict(zip([name for name, _ in model.named_parameters()], no_decay_flags(model, "toymixer_s"))) == {
        "token_bias": True, "proj.weight": False, "proj.bias": True}
    assert no_decay_flags(model, "resnet18") == [False, False, True]
    assert families.uses_resnet_stem("toymixer_s") and families.size_refusal("toymixer_s", 32) == (
        "model 'toymixer_s' needs images of at least 64x64 (its tokens), and this run's are 32x32: run it with "
        "--image-size 64.")
    assert_user_error(run_main(*TINY, "-m", "toymixer_s", "--image-size", "64", "--momentum", "0.8"),
                      "--momentum sets SGD's momentum, and toymixer_s trains with AdamW here")


def test_adamw_spares_biases_norms_the_class_token_and_the_position_embedding():
    """vit_t4 by hand: per block of 12, four matrices decay (QKV in, attention out, two MLP
    layers); besides, the patch projection and the head; nothing else."""
    model = factory.build_model("vit_t4")
    names = [name for name, param in model.named_parameters() if param.requires_grad]
    decayed = {name for name, spared in zip(names, no_decay_flags(model, "vit_t4")) if not spared}
    per_block = {f"encoder.layers.encoder_layer_{i}.{part}" for i in range(12) for part in (
        "self_attention.qkv.weight", "self_attention.out_proj.weight", "mlp.0.weight", "mlp.3.weight")}
    assert decayed == per_block | {"conv_proj.weight", "heads.head.weight"}
    assert "class_token" in names and "encoder.pos_embedding" in names
    optimizer, _ = make_optimizer(list(model.parameters()), lr=1e-3, momentum=None, weight_decay=0.05, impl="foreach",
                                  kind="adamw",
                                  no_decay=no_decay_flags(model, "vit_t4"))
    assert isinstance(optimizer, torch.optim.AdamW)
    assert [(len(group["params"]), group["weight_decay"]) for group in optimizer.param_groups] == [
        (50, 0.05), (len(names) - 50, 0.0)]


def test_a_vit_run_records_its_recipe_and_trains_with_adamw(tmp_path):
    result = run_main(*TINY, "-m", "vit_t4", "--json", tmp_path / "r.json")
    assert result.returncode == 0, result.stderr
    document = json.loads((tmp_path / "r.json").read_text())
    config = document["config"]
    assert (config["recipe"], config["optimizer"], config["weight_decay"], config["label_smoothing"],
            config["momentum"]) == ("transformer", "adamw", 0.05, 0.1, None)
    assert config["lr"] == pytest.approx(1e-3 * (4 / 128) ** 0.5)
    (run,) = document["runs"]
    assert run["optimizer_impl"] in ("fused", "foreach") and run["completed_steps"] == 2


def test_a_resume_refuses_another_optimizer(tmp_path):
    checkpoint = tmp_path / "c.pt"
    first = run_main(*TINY, "-m", "squeezenet1_1", "--checkpoint", checkpoint)
    assert first.returncode == 0, first.stderr
    changed = run_main(*TINY[:2], "-n", "4", *TINY[4:], "-m", "squeezenet1_1", "--checkpoint", checkpoint,
                       "--resume", "--optimizer", "adamw")
    assert_user_error(changed, f"{checkpoint} holds a run with --optimizer sgd, not adamw (the checkpoint's optimizer "
                               "state is that optimizer's); resume with the same settings or use another --checkpoint.")
    assert len(changed.stderr.strip().splitlines()) == 1


def test_an_adamw_run_resumes_to_the_same_weights_as_an_uninterrupted_one(tmp_path):
    """AdamW's state (two moments per parameter and a step count) is checked and restored: two
    steps, then a resume to four, end bitwise where four steps in one go end (constant lr, so
    the schedule does not stretch)."""
    from utils.training import checkpoint
    common = [*TINY[:2], *TINY[4:], "-m", "squeezenet1_1", "--optimizer", "adamw", "--lr-schedule", "constant",
              "--warmup-lr-steps", "0"]
    full = run_main(*common, "-n", "4", "--checkpoint", tmp_path / "full.pt")
    assert full.returncode == 0, full.stderr
    first = run_main(*common, "-n", "2", "--checkpoint", tmp_path / "run.pt")
    assert first.returncode == 0, first.stderr
    resumed = run_main(*common, "-n", "4", "--checkpoint", tmp_path / "run.pt", "--resume")
    assert resumed.returncode == 0, resumed.stderr
    a, b = checkpoint.read(tmp_path / "full.pt", "cpu"), checkpoint.read(tmp_path / "run.pt", "cpu")
    assert a["step"] == b["step"] == 4 and "exp_avg_sq" in b["optimizer"]["state"][0]
    for name in a["model"]:
        assert torch.equal(a["model"][name], b["model"][name]), name
