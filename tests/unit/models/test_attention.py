"""The ViTs' attention with nn.Linear projections (models/attention.py): the same function,
weights and state dicts as torchvision's nn.MultiheadAttention, with and without
F.scaled_dot_product_attention."""
import copy
import json

import pytest
import torch
from torch import nn
from torchvision.models.vision_transformer import VisionTransformer

from conftest import run_cli
from models import factory
from models.attention import SelfAttention, swap_attention
from models.vit import build_cifar_vit
from utils import compat
from utils.training import checkpoint


def small_vit(attention_dropout=0.0):
    """A torchvision-layout ViT small enough to compare quickly (patch 8: 17 tokens)."""
    torch.manual_seed(0)
    return with_a_head(VisionTransformer(32, 8, num_layers=2, num_heads=4, hidden_dim=64, mlp_dim=128,
                                         num_classes=10, attention_dropout=attention_dropout))


def with_a_head(model):
    """`model` with random head weights: torchvision starts the head at zero, whose outputs and
    gradients would be zero whatever the attention computed."""
    nn.init.normal_(model.heads.head.weight)
    return model


def as_torchvision(name):
    """A swapped model's parameter name as torchvision's nn.MultiheadAttention names it."""
    return name.replace("self_attention.qkv.weight", "self_attention.in_proj_weight").replace(
        "self_attention.qkv.bias", "self_attention.in_proj_bias")


def assert_same_function(reference, swapped, training):
    """Equal outputs and gradients of every parameter, for the same images (all nonzero)."""
    images = torch.randn(3, 3, 32, 32)
    outputs = []
    assert reference.heads.head.weight.abs().sum() > 0
    for model in (reference, swapped):
        model.train(training)
        model.zero_grad()
        output = model(images)
        output.square().sum().backward()
        outputs.append(output)
    torch.testing.assert_close(outputs[1], outputs[0])
    grads = {as_torchvision(name): param.grad for name, param in reference.named_parameters()}
    swapped_grads = {as_torchvision(name): param.grad for name, param in swapped.named_parameters()}
    assert swapped_grads.keys() == grads.keys()
    for name, grad in grads.items():  # equal but for float32 rounding, which the backward orders differently
        scale = grad.abs().max().item()
        assert scale > 0 and (swapped_grads[name] - grad).abs().max().item() <= 1e-5 * scale, name


@pytest.mark.parametrize("training", [False, True])
@pytest.mark.parametrize("build", [lambda: with_a_head(build_cifar_vit("vit_t4", 10)), small_vit],
                         ids=["vit_t4", "small"])
def test_the_swapped_vit_computes_torchvisions_outputs_and_gradients(build, training):
    reference = build()
    swapped = swap_attention(copy.deepcopy(reference))
    assert not any(isinstance(module, nn.MultiheadAttention) for module in swapped.modules())
    assert sum(isinstance(module, SelfAttention) for module in swapped.modules()) == len(swapped.encoder.layers)
    assert_same_function(reference, swapped, training)


def test_the_swap_keeps_the_weights_and_draws_no_random_numbers():
    """The same seed gives the same initial weights (and the same random state after) as
    torchvision's own ViT."""
    torch.manual_seed(0)
    reference, after = build_cifar_vit("vit_t4", 10).state_dict(), torch.rand(4)
    torch.manual_seed(0)
    model = factory.build_model("vit_t4")
    assert torch.equal(torch.rand(4), after)
    swapped = {as_torchvision(name): tensor for name, tensor in model.state_dict().items()}
    assert swapped.keys() == reference.keys()
    assert all(torch.equal(swapped[name], tensor) for name, tensor in reference.items())


def test_torchvision_state_dicts_load_into_the_swapped_model_and_its_own_load_back():
    reference = small_vit()
    swapped = swap_attention(VisionTransformer(32, 8, num_layers=2, num_heads=4, hidden_dim=64, mlp_dim=128,
                                               num_classes=10))
    swapped.load_state_dict(reference.state_dict())  # strict: every key matched, none left over
    assert_same_function(reference, swapped, training=False)
    state = swapped.state_dict()
    assert "encoder.layers.encoder_layer_0.self_attention.qkv.weight" in state
    assert not any("in_proj" in name for name in state)
    again = swap_attention(small_vit())
    again.load_state_dict(state)
    assert all(torch.equal(again.state_dict()[name], tensor) for name, tensor in state.items())


@pytest.mark.parametrize("training", [False, True])
def test_without_scaled_dot_product_attention_the_matmuls_give_the_same(monkeypatch, training):
    """torch before 2.0: softmax(q k^T / sqrt(head width)) v, recorded as a degraded path."""
    monkeypatch.setattr(compat, "_degraded", {})
    reference = small_vit()
    fused = swap_attention(copy.deepcopy(reference))
    monkeypatch.setattr(compat, "has_scaled_dot_product_attention", lambda: False)
    unfused = swap_attention(copy.deepcopy(reference))
    assert not any(module.fused for module in unfused.modules() if isinstance(module, SelfAttention))
    assert "attention" in compat.degraded()
    assert_same_function(reference, unfused, training)
    assert_same_function(fused, unfused, training)


def test_attention_dropout_applies_in_training_alone_without_scaled_dot_product_attention(monkeypatch):
    monkeypatch.setattr(compat, "_degraded", {})
    monkeypatch.setattr(compat, "has_scaled_dot_product_attention", lambda: False)
    model = swap_attention(small_vit(attention_dropout=0.5))
    images = torch.randn(2, 3, 32, 32)
    with torch.no_grad():
        model.eval()
        assert torch.equal(model(images), model(images))
        model.train()
        assert not torch.equal(model(images), model(images))


def test_the_attention_refuses_other_calls_than_self_attention():
    attention = SelfAttention(nn.Linear(8, 24), nn.Linear(8, 8), num_heads=2)
    x = torch.randn(1, 3, 8)
    assert attention(x, x, x)[0].shape == (1, 3, 8)
    for call in (lambda: attention(x, x.clone(), x), lambda: attention(x, x, x, need_weights=True)):
        with pytest.raises(ValueError, match="attends a sequence to itself"):
            call()


def test_every_vit_the_factory_builds_is_swapped_and_torchvisions_own_are_swappable():
    import torchvision.models as tvm

    with torch.device("meta"):  # shapes alone: vit_l4 and vit_h_14 hold hundreds of millions of weights
        models = [factory.build_model(name) for name in ("vit_t4", "vit_s4", "vit_b4", "vit_l4")]
        models += [swap_attention(getattr(tvm, name)()) for name in ("vit_b_16", "vit_l_32", "vit_h_14")]
    for model in models:
        assert not any(isinstance(module, nn.MultiheadAttention) for module in model.modules())
        assert sum(isinstance(module, SelfAttention) for module in model.modules()) == len(model.encoder.layers)


@pytest.mark.whole_runs
def test_a_checkpoint_in_torchvisions_layout_resumes(tmp_path):
    """A checkpoint whose ViT holds nn.MultiheadAttention's in_proj_weight and in_proj_bias (as
    written before the swap) resumes: the weights load under their new names."""
    common = ["-m", "vit_t4", "-b", "4", "--warmup", "1", "--data", "synthetic", "--no-progress",
              "--modes", "amp-bf16", "--checkpoint", tmp_path / "c.pt"]
    first = run_cli(*common, "-n", "2")
    assert first.returncode == 0, first.stderr
    state = checkpoint.read(str(tmp_path / "c.pt"), "cpu")
    state["model"] = {as_torchvision(name): tensor for name, tensor in state["model"].items()}
    assert "encoder.layers.encoder_layer_0.self_attention.in_proj_weight" in state["model"]
    torch.save(state, tmp_path / "c.pt")
    second = run_cli(*common, "-n", "3", "--resume", "--json", tmp_path / "r.json")
    assert second.returncode == 0, second.stderr
    run = json.loads((tmp_path / "r.json").read_text())["runs"][0]
    assert (run["resumed_from_step"], run["completed_steps"]) == (2, 3)
