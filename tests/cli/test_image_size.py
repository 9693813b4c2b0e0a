"""--image-size: runs at 64x64 (the CPU tests' size) in every mode that runs on the CPU, on
CIFAR-10 (upsampled) and on synthetic data; refusals below a model's size; resumes and merges
that keep sizes apart."""
import copy
import json

import pytest

from conftest import assert_user_error, run_cli, run_main
from utils.results import merge

SMALL = ["-n", "3", "--warmup", "1", "--no-progress"]


def ran_at_64(path, modes):
    document = json.loads(path.read_text())
    assert document["config"]["image_size"] == 64
    assert [(run["mode"], run["completed_steps"]) for run in document["runs"]] == [(mode, 3) for mode in modes]
    return document


@pytest.mark.whole_runs
def test_cifar10_upsampled_to_64_trains_in_every_cpu_mode_but_fp8(subset, tmp_path):
    modes = ["fp32", "amp-fp16", "amp-fp16-noscale", "amp-bf16", "fp16-master"]
    result = run_cli(*SMALL, "-m", "resnet18", "--stem", "imagenet", "-b", "4", "--image-size", "64", "--no-eval",
                     "--data-dir", subset,
                     "--allow-unverified", "--allow-slow-fp16", "--modes", ",".join(modes), "--json",
                     tmp_path / "r.json")
    assert result.returncode == 0, result.stderr
    document = ran_at_64(tmp_path / "r.json", modes)
    assert document["data"]["name"] == "cifar10"
    assert "resnet18 (stem imagenet), 64x64 images, batch 4" in result.stdout


@pytest.mark.whole_runs
def test_synthetic_images_at_64_train_a_vit_in_the_fp8_modes(tmp_path):
    modes = ["amp-bf16", "fp8", "fp8-rowwise"]
    result = run_cli(*SMALL, "-m", "vit_t4", "-b", "2", "--image-size", "64", "--data", "synthetic",
                     "--fp8-emulate", "--modes", ",".join(modes), "--json", tmp_path / "r.json")
    assert result.returncode == 0, result.stderr
    document = ran_at_64(tmp_path / "r.json", modes)
    assert document["data"]["name"] == "synthetic"


def test_a_model_below_its_size_is_refused_with_the_size_it_needs():
    assert_user_error(run_main("-m", "vit_b_16", "--image-size", "64", "--check-flags"),
                      "model 'vit_b_16' needs images of at least 224x224", "this run's are 64x64",
                      "--image-size 224")
    assert_user_error(run_main("-m", "inception_v3", "--check-flags"), "this run's are 32x32",
                      "--image-size 75")
    assert_user_error(run_main("--image-size", "8", "--check-flags"), "--image-size: must be a whole number of "
                      "pixels from 16 to 1024, got 8")
    assert run_main("-m", "vit_b_16", "--image-size", "224", "--check-flags").returncode == 0


def test_a_size_above_a_models_most_is_refused_with_a_size_main_py_takes():
    """vit_t4 at 1024x1024 would attend over 65,536 tokens an image; vit_h_14's next whole number of
    patches above 1024 is 1036, beyond --image-size's range: each refusal names a size that runs."""
    for model, size, offered in (("vit_t4", 1024, 256), ("vit_h_14", 1024, 896), ("squeezenet1_0", 16, 21)):
        assert_user_error(run_main("-m", model, "--image-size", size, "--check-flags"),
                          f"this run's are {size}x{size}: run it with --image-size {offered}.")
        assert run_main("-m", model, "--image-size", offered, "--check-flags").returncode == 0


@pytest.mark.whole_runs
def test_a_resume_at_another_image_size_is_refused(tmp_path):
    flags = [*SMALL, "-m", "squeezenet1_1", "-b", "4", "--data", "synthetic", "--checkpoint", tmp_path / "c.pt"]
    assert run_cli(*flags).returncode == 0
    assert_user_error(run_cli(*flags, "-n", "4", "--image-size", "64", "--resume"),
                      "holds a run with --image-size 32, not 64")


def test_results_at_different_sizes_never_merge_and_older_files_read_as_32():
    from conftest import ROOT

    document = json.loads((ROOT / "docs" / "samples" / "why.json").read_text())  # written before --image-size
    at_64 = copy.deepcopy(document)
    at_64["config"]["image_size"] = 64
    for run in at_64["runs"]:
        run["finished_utc"] += "-at-64"
    merged = merge.merge([merge.upgrade(document), merge.upgrade(at_64)])
    assert [group["config"]["image_size"] for group in merged] == [32, 64]
    assert any("image_size 64" in line for line in merge.setup_differences(merged))
