import pytest
import torch
from torch import nn

from models import factory, families
from utils.config import RunConfig
from utils.errors import UserError


def test_cifar_stem_changes_only_the_resnet_stem():
    cifar, imagenet = factory.build_model("resnet18", "cifar"), factory.build_model("resnet18", "imagenet")
    assert (cifar.conv1.kernel_size, cifar.conv1.stride, cifar.conv1.padding) == ((3, 3), (1, 1), (1, 1))
    assert cifar.conv1.bias is None and isinstance(cifar.maxpool, nn.Identity)
    assert (imagenet.conv1.kernel_size, imagenet.conv1.stride) == ((7, 7), (2, 2))
    assert isinstance(imagenet.maxpool, nn.MaxPool2d)
    assert [n for n, _ in cifar.named_parameters()] == [n for n, _ in imagenet.named_parameters()]


@pytest.mark.parametrize("name", ["resnet18", "resnext50_32x4d", "wide_resnet50_2"])
def test_resnet_family_keeps_32x32_resolution_into_layer1(name):
    model = factory.build_model(name, "cifar").eval()
    with torch.no_grad():
        stem = model.maxpool(model.relu(model.bn1(model.conv1(torch.zeros(1, 3, 32, 32)))))
    assert stem.shape[-2:] == (32, 32)


@pytest.mark.parametrize("name", ["resnet18", "mobilenet_v3_small", "googlenet", "squeezenet1_1"])
def test_models_have_ten_outputs_and_train_mode(name):
    model = factory.build_model(name)
    assert model.training
    assert model(torch.randn(2, 3, 32, 32)).shape == (2, 10)


def test_other_families_keep_their_stem():
    a, b = factory.build_model("mobilenet_v3_small", "cifar"), factory.build_model("mobilenet_v3_small", "imagenet")
    assert str(a) == str(b)


def test_unknown_and_unusable_models_are_user_errors():
    with pytest.raises(UserError, match="did you mean resnet50"):
        factory.build_model("resnet51")
    with pytest.raises(UserError, match="--list-models"):
        factory.build_model("definitely-not-a-model")
    with pytest.raises(UserError, match="needs images of at least 63x63 .* this run's are 32x32: run it with "
                                        "--image-size 63"):
        factory.build_model("alexnet")


def test_model_names_are_classification_models():
    names = factory.model_names()
    assert "resnet50" in names and "fasterrcnn_resnet50_fpn" not in names and names == sorted(names)


def least_size(name):
    return next(size for size in range(families.IMAGE_SIZES[0], families.IMAGE_SIZES[1] + 1)
                if families.family_of(name).takes(size))


@pytest.mark.long
def test_every_model_builds_at_the_least_size_the_table_gives_it_and_fails_below():
    """The table is the models' truth, so --list-models lists exactly what builds at a size:
    every torchvision model is built (its weights made) at its least size and runs two images
    there on the CPU, and, where the table's least is not the range's and not its builder's
    choice (the ViTs'), two images a pixel smaller fail (some eight minutes on 2 cores)."""
    for name in factory.model_names():
        size = least_size(name)
        model = factory.build_model(name, image_size=size, batch_size=2).eval()
        with torch.no_grad():
            assert model(torch.zeros(2, 3, size, size)).shape == (2, 10), name
            if size > families.IMAGE_SIZES[0] and families.family_of(name).size_option is None:
                with pytest.raises((RuntimeError, ValueError, AssertionError)):
                    model(torch.zeros(2, 3, size - 1, size - 1))
        del model


def test_list_models_lists_what_the_table_takes_and_says_why_for_the_rest(capsys):
    from utils.app import list_models

    listed = {}
    for size in (16, 32, 1024):
        assert list_models(size) == 0
        out, said = capsys.readouterr()
        listed[size] = out.split()
        assert listed[size] == [name for name in factory.model_names() if families.family_of(name).takes(size)]
        assert said.count("\n") == 1 + len(factory.model_names()) - len(listed[size])
    assert "squeezenet1_0" not in listed[16] and "convnext_tiny" in listed[32] and "vit_t4" not in listed[1024]


@pytest.mark.parametrize("family", sorted(families.FAMILIES))
def test_every_refusal_suggests_a_size_the_program_takes(family):
    name = (families.FAMILIES[family].names or families.FAMILIES[family].prefixes)[0]
    for size in range(families.IMAGE_SIZES[0], families.IMAGE_SIZES[1] + 1):
        refusal = families.size_refusal(name, size)
        if refusal:
            suggested = int(refusal.rsplit("--image-size ", 1)[1].rstrip("."))
            assert families.size_refusal(name, suggested) is None, (family, size, suggested)
            assert RunConfig.build(model=name, image_size=suggested).data.image_size == suggested


def test_a_vit_takes_at_most_64_patches_a_side_and_the_refusal_names_one_it_takes():
    assert families.size_refusal("vit_t4", 1024) == (
        "model 'vit_t4' needs images of at most 256x256 with sides a multiple of 4 (64 patches a side at most: "
        "self-attention's work grows with the square of the patches), and this run's are 1024x1024: run it with "
        "--image-size 256.")
    assert families.size_refusal("vit_h_14", 1024).endswith("run it with --image-size 896.")
    assert families.size_refusal("vit_t4", 256) is None and families.size_refusal("vit_b_16", 1024) is None


def test_a_family_that_takes_no_size_in_range_says_so(monkeypatch):
    monkeypatch.setitem(families.FAMILIES, "huge", families.Family("convnet", names=("huge",), min_image_size=2000,
                                                                    size_reason="its stem"))
    assert families.size_refusal("huge", 32) == (
        "model 'huge' needs images of at least 2000x2000 (its stem), and no --image-size from 16 to 1024 is one: "
        "choose another model (--list-models).")


def test_cifar_vits_are_torchvision_vits_at_32x32_with_their_widths():
    from torchvision.models.vision_transformer import VisionTransformer

    for name, width, layers, heads, mlp in (("vit_t4", 192, 12, 3, 768), ("vit_s4", 384, 12, 6, 1536),
                                            ("vit_b4", 768, 12, 12, 3072), ("vit_l4", 1024, 24, 16, 4096)):
        with torch.device("meta"):  # shapes alone: vit_l4 holds 300M weights
            model = factory.build_model(name)
            assert model(torch.randn(2, 3, 32, 32)).shape == (2, 10)
        assert isinstance(model, VisionTransformer)
        assert (model.image_size, model.patch_size, model.hidden_dim, model.mlp_dim) == (32, 4, width, mlp)
        assert len(model.encoder.layers) == layers and model.encoder.layers[0].self_attention.num_heads == heads
    assert "vit_t4" in factory.model_names() and families.size_refusal("vit_t4", 32) is None


def test_torchvisions_vits_are_refused_below_their_size_naming_the_cifar_ones():
    with pytest.raises(UserError) as refused:
        factory.build_model("vit_b_16", image_size=64)
    assert str(refused.value) == (
        "model 'vit_b_16' needs images of at least 224x224 with sides a multiple of 16 (torchvision's vision "
        "transformers are built for 224x224 images and up, in whole patches; vit_t4, vit_s4, vit_b4, vit_l4 are "
        "the same class with 4x4 patches for smaller images), and this run's are 64x64: run it with --image-size 224.")
    assert "--image-size 240" in families.size_refusal("vit_b_16", 230)  # the next whole number of patches
    assert families.size_refusal("vit_b_32", 224) is None and families.size_refusal("maxvit_t", 224) is None


def test_sizes_the_table_allows_build_and_take_batches_of_that_size():
    for name, size in (("inception_v3", 75), ("alexnet", 63), ("vit_t4", 64)):
        model = factory.build_model(name, image_size=size)
        assert model(torch.randn(2, 3, size, size)).shape == (2, 10)
    assert families.size_refusal("inception_v3", 74) and families.size_refusal("vit_t4", 62)
    assert factory.build_model("vit_t4", image_size=64).image_size == 64


def test_the_default_stem_follows_the_image_size():
    from utils.config import RunConfig

    assert families.default_stem(families.CIFAR_STEM_UP_TO) == "cifar"
    assert families.default_stem(families.CIFAR_STEM_UP_TO + 1) == "imagenet"
    assert [RunConfig.build(model="resnet50", image_size=size).training.stem for size in (32, 64, 96, 224)] == [
        "cifar", "cifar", "imagenet", "imagenet"]
    assert RunConfig.build(model="resnet50", image_size=224, stem="cifar").training.stem == "cifar"  # a given stem wins
    assert RunConfig.build(model="vgg11", image_size=224).training.stem == "imagenet"  # as recorded, changing nothing


@pytest.mark.parametrize("model", ["vit_t4", "squeezenet1_1", "vgg11", "mobilenet_v2"])
def test_a_stem_a_model_does_not_have_is_refused_not_recorded(model):
    from conftest import assert_user_error, run_main

    assert_user_error(run_main("-m", model, "--stem", "imagenet", "--check-flags"),
                      f"--stem imagenet changes the first conv and max-pool of ResNet-family models, and {model} has "
                      "no such stem")
    assert run_main("-m", model, "--stem", "cifar", "--check-flags").returncode == 0  # the default, as recorded
    assert run_main("-m", "resnet18", "--stem", "imagenet", "--check-flags").returncode == 0
