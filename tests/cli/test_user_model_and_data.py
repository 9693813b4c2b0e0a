"""Your own model (--model-factory, the models of user_models.py) and your own images (--data
imagefolder, folders of tiny PNGs written here) through the whole CLI: a comparison, a resume,
fp8's Linear layers, a model the meta device cannot run, --check-flags, and every refusal, each
one sentence and exit 2. Runs go through main.main in this process, as `python main.py` does."""
import json
import os
import subprocess
import sys

import pytest

from conftest import ROOT, assert_user_error, image_tree, read_results, run_main

FAST = ["--image-size", "16", "-b", "8", "--warmup", "2", "--no-progress", "--workers", "0"]
TREE_FLAGS = ["--data", "imagefolder", "--workers", "0"]


def own(tmp_path, *argv):
    """main.py on the tree under tmp_path with FAST's settings and `argv`."""
    return run_main("--data", "imagefolder", "--data-dir", tmp_path / "tree", *FAST, *argv)


def test_your_model_on_your_images_through_a_comparison(tmp_path):
    image_tree(tmp_path / "tree", per_class=8, split="train")
    image_tree(tmp_path / "tree", per_class=2, split="val")
    result = own(tmp_path, "--model-factory", "user_models:TinyNet", "-n", "6", "--modes", "fp32,amp-bf16",
                 "--seeds", "2", "--explain", "--explain-steps", "1", "--json", tmp_path / "r.json")
    assert result.returncode == 0, result.stderr
    document = read_results(tmp_path / "r.json")
    config, data, runs = document["config"], document["data"], document["runs"]
    assert config["model"] == config["model_factory"] == "user_models:TinyNet"
    assert (config["model_class"], config["num_classes"]) == ("user_models.TinyNet", 3)
    assert (config["recipe"], config["optimizer"], config["label_smoothing"]) == ("user", "adamw", 0.0)
    assert (data["name"], data["classes"], data["num_classes"]) == ("imagefolder", ["cat", "dog", "eel"], 3)
    assert (data["train_images"], data["test_images"], data["held_out_share"]) == (24, 6, None)
    assert data["eval_folder"].endswith("val") and len(data["mean"]) == len(data["std"]) == 3
    assert [(run["mode"], run["seed"]) for run in runs] == [("fp32", 0), ("amp-bf16", 0), ("fp32", 1), ("amp-bf16", 1)]
    assert all(run["test_accuracy"] is not None and run["data"] == "imagefolder" for run in runs)
    assert all(run["profile"]["categories"]["conv"]["ms"] > 0 for run in runs)  # --explain
    for seed in (0, 1):  # the modes of a seed start from its weights and batches: they differ by precision alone
        pair = [run for run in runs if run["seed"] == seed]
        assert len({(run["initial_weights_sha256"], run["first_batch_sha256"]) for run in pair}) == 1
    assert runs[0]["initial_weights_sha256"] != runs[2]["initial_weights_sha256"]
    assert document["comparison"]["amp-bf16"].accuracy_verdict in ("holds", "differs", "inconclusive")
    assert "user_models:TinyNet, 16x16 images" in result.stdout


def test_a_resume_continues_your_model_and_refuses_another_factory_or_folder(tmp_path):
    image_tree(tmp_path / "tree", per_class=6)  # no train/: a tenth of each class, one image here, held out
    checkpointed = ["--model-factory", "user_models:TinyNet", "--bf16", "--checkpoint", tmp_path / "ck.pt"]
    assert own(tmp_path, *checkpointed, "-n", "4").returncode == 0
    resumed = own(tmp_path, *checkpointed, "-n", "6", "--resume", "--json", tmp_path / "r.json")
    assert resumed.returncode == 0, resumed.stderr
    (run,) = json.loads((tmp_path / "r.json").read_text())["runs"]
    assert (run["resumed_from_step"], run["completed_steps"]) == (4, 6)
    assert json.loads((tmp_path / "r.json").read_text())["data"]["held_out_share"] == 0.1
    other = own(tmp_path, "--model-factory", "user_models:tiny_net", *checkpointed[2:], "-n", "8", "--resume")
    assert_user_error(other, "holds a run with --model-factory user_models:TinyNet, not user_models:tiny_net")
    image_tree(tmp_path / "tree", classes=("cat",), per_class=7)  # the same count of classes, a new image
    moved = own(tmp_path, *checkpointed, "-n", "8", "--resume")
    assert_user_error(moved, "was trained on imagefolder ", "and this run loaded imagefolder ")


def test_the_folders_loader_paths_and_fp8_take_your_linear_layers(tmp_path):
    """The DataLoader path at the images' own size, channels_last, and fp8 (emulated) converting
    the model's Linear layers but its head."""
    pytest.importorskip("torchao")
    image_tree(tmp_path / "tree", per_class=8)
    result = own(tmp_path, "--model-factory", "user_models:mlp", "-n", "4", "--loader", "torchvision",
                 "--channels-last", "--modes", "amp-bf16,fp8", "--fp8-emulate", "--json", tmp_path / "r.json")
    assert result.returncode == 0, result.stderr
    fp8 = json.loads((tmp_path / "r.json").read_text())["runs"][1]["fp8"]
    assert (fp8["linear_layers"], fp8["converted_layers"], fp8["left_out"][0]["layer"]) == (3, 2, "5")
    assert fp8["prediction"] is not None


def test_a_model_the_meta_device_cannot_run_trains_and_says_its_flops_were_not_counted(tmp_path):
    result = run_main("--model-factory", "user_models:CpuPositions", "--data", "synthetic", "--num-classes", "5",
                      *FAST, "-n", "3", "--json", tmp_path / "r.json")
    assert result.returncode == 0, result.stderr
    assert "the FLOPs of a step could not be counted" in result.stderr
    (run,) = json.loads((tmp_path / "r.json").read_text())["runs"]
    assert run["train_flops_per_step"] is None and "meta device" in run["mfu_note"]


def test_check_flags_lists_the_folder_and_builds_your_model_writing_nothing(tmp_path):
    image_tree(tmp_path / "tree", per_class=2)
    before = sorted(tmp_path.rglob("*"))
    checked = own(tmp_path, "--model-factory", "user_models:TinyNet", "--check-flags", "--json", tmp_path / "r.json")
    assert checked.returncode == 0 and checked.stderr == "", checked.stderr
    assert sorted(tmp_path.rglob("*")) == before
    assert_user_error(own(tmp_path, "--model-factory", "user_models:raises", "--check-flags"),
                      "user_models:raises raised FileNotFoundError")
    assert_user_error(own(tmp_path, "--num-classes", "4", "--check-flags"),
                      "--num-classes 4 does not fit --data imagefolder", "holds 3 class folders")
    assert_user_error(own(tmp_path, "--model-factory", "user_models:fixed_head", "--check-flags"),
                      "its model outputs 7 classes, and this run's labels have 3")
    (tmp_path / "tree" / "fox").mkdir()  # what the run refuses, a listing shows: --check-flags refuses it too
    assert_user_error(own(tmp_path, "--check-flags"), f"{tmp_path / 'tree' / 'fox'} holds no images")


def test_a_run_says_which_split_it_left_out_and_refuses_a_class_folder_beside_train(tmp_path):
    image_tree(tmp_path / "tree", per_class=4, split="train")
    image_tree(tmp_path / "tree", per_class=1, split="validation")
    image_tree(tmp_path / "tree", per_class=1, split="test")
    result = own(tmp_path, "--model-factory", "user_models:TinyNet", "-n", "3", "--json", tmp_path / "r.json")
    assert result.returncode == 0, result.stderr
    assert f"test/ beside train/ in {tmp_path / 'tree'} is left out: validation/ evaluates" in result.stderr
    data = json.loads((tmp_path / "r.json").read_text())["data"]
    assert (data["eval_folder"], data["left_out"], data["test_images"]) == (str(tmp_path / "tree" / "validation"),
                                                                            ["test"], 3)
    image_tree(tmp_path / "tree", classes=("owl",), per_class=2)
    for argv in (["-n", "3"], ["--check-flags"]):
        assert_user_error(own(tmp_path, *argv), "and also owl/, which is none of train/, val/, validation/, test/")


@pytest.mark.parametrize("argv, phrases", [
    (["--model-factory", "user_models"], ["--model-factory takes MODULE:FUNCTION", "got 'user_models'"]),
    (["--model-factory", "no_such_module_here:build"], ["no module named 'no_such_module_here' in the working "
                                                        "directory"]),
    (["--model-factory", "user_models:nope"], ["user_models (", "has no attribute 'nope'"]),
    (["--model-factory", "user_models:NOT_CALLABLE"], ["NOT_CALLABLE is not a function or class (it is of type int)"]),
    (["--model-factory", "user_models:raises"], ["raised FileNotFoundError: no weights at /nowhere/weights.pt at ",
                                                 "user_models.py:", "when called with num_classes=10"]),
    (["--model-factory", "user_models:not_a_module"], ["returned a dict, not a torch.nn.Module"]),
    (["--model-factory", "user_models:no_parameters"], ["no parameters to train (it has none)"]),
    (["--model-factory", "user_models:frozen"], ["all 6 of its parameters are frozen"]),
    (["--model-factory", "user_models:half_precision"], ["a model with float16 parameters; build it in float32"]),
    (["--model-factory", "user_models:fixed_head"], ["its model outputs 7 classes, and this run's labels have 10",
                                                     "num_classes=10"]),
    (["--model-factory", "user_models:WithFeatures"], ["its model returns a tuple for a batch of images"]),
    (["--model-factory", "user_models:FeaturesOnly"], ["returns an ImageFeatures for a batch of images, not a tensor "
                                                       "of logits nor an object holding them as `logits`"]),
    (["--model-factory", "user_models:scripted"], ["returned a model compiled by TorchScript", "no optimizer can train",
                                                   "return the nn.Module before scripting or tracing it"]),
    (["--model-factory", "user_models.py:TinyNet"], ["not a file: for user_models.py give --model-factory "
                                                     "user_models:TinyNet"]),
    (["--model-factory", "user_models:FeatureMap"], ["outputs a tensor of shape [2, 10, 32, 32] for 2 images",
                                                     "a classifier's is [2, 10]"]),
    (["--model-factory", "user_models:gray_only"], ["its model raised RuntimeError", "3x32x32"]),
    (["--model-factory", "user_models:needs_config"], ["requires config", "give the other parameters defaults"]),
    (["--model-factory", "user_models:tiny_net", "--dropout", "0.1"], ["takes no dropout argument"]),
    (["--model-factory", "user_models:norm_head", "-b", "1"], ["user_models:norm_head' has a batch norm that sees 1 "
                                                               "value", "a batch of at least 2"]),
    (["--model-factory", "user_models:TinyNet", "-m", "resnet18"], ["-m/--model resnet18 names a torchvision one"]),
    (["--model-factory", "user_models:TinyNet", "--stem", "cifar"], ["drop --stem"]),
    (["--model-factory", "user_models:TinyNet", "--momentum", "0.9"], ["trains with AdamW here"]),
    (["--num-classes", "5"], ["--num-classes 5 does not fit --data auto: CIFAR-10 has 10 classes"]),
    (["--num-classes", "1"], ["--num-classes: must be a whole number of classes from 2"]),
    (["--data", "imagefolder", "--allow-unverified"], ["drop --allow-unverified"]),
])
def test_each_way_a_model_or_its_flags_can_be_wrong_is_one_sentence(argv, phrases):
    assert_user_error(run_main(*argv, "--check-flags"), *phrases)


def test_a_factory_is_imported_from_the_working_directory_and_its_import_errors_are_one_sentence(tmp_path,
                                                                                                  monkeypatch):
    (tmp_path / "mine.py").write_text("from torch import nn\n\ndef build(num_classes):\n"
                                      "    return nn.Sequential(nn.Flatten(), nn.Linear(3 * 32 * 32, num_classes))\n")
    (tmp_path / "needs_more.py").write_text("import a_package_nobody_installed\n")
    (tmp_path / "broken.py").write_text("def build(:\n")
    (tmp_path / "models.py").write_text("def build(num_classes):\n    pass\n")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "path", [entry for entry in sys.path if entry not in ("", str(tmp_path))])
    before = list(sys.path)
    assert run_main("--model-factory", "mine:build", "--check-flags").returncode == 0
    assert sys.path == before  # the working directory was on it while the model was imported and built, only
    assert_user_error(run_main("--model-factory", "needs_more:build", "--check-flags"),
                      "importing needs_more failed, as it imports ModuleNotFoundError: No module named "
                      "'a_package_nobody_installed'", "needs_more.py:1")
    assert_user_error(run_main("--model-factory", "broken:build", "--check-flags"),
                      "importing broken raised SyntaxError")
    assert_user_error(run_main("--model-factory", "models:build", "--check-flags"),
                      "'models' is a name taken by ampbench's own package",
                      f"before your module {tmp_path / 'models.py'}", "rename your module")


def test_each_way_an_image_folder_can_be_wrong_is_one_sentence(tmp_path):
    tree = tmp_path / "tree"
    assert_user_error(own(tmp_path, "-n", "3"), f"--data-dir {tree} does not exist")
    tree.mkdir()
    assert_user_error(own(tmp_path, "-n", "3"), "holds no class folder, and a classifier needs two classes")
    image_tree(tree, classes=("cat",))
    assert_user_error(own(tmp_path, "-n", "3"), "holds only the class folder cat")
    (tree / "dog").mkdir()
    assert_user_error(own(tmp_path, "-n", "3"), f"{tree / 'dog'} holds no images (files ending in")
    image_tree(tree, classes=("cat", "dog"))
    (tree / "dog" / "9.png").write_bytes(b"\x89PNG\r\n\x1a\nnot an image")
    (tree / "dog" / "8.jpg").write_bytes(b"")
    (tree / "dog" / "7.jpg").write_bytes(b"")
    assert_user_error(own(tmp_path, "-n", "3"), f"{tree / 'dog' / '7.jpg'} cannot be read as an image (an empty "
                      "file) (and 1 more)", "or pass --skip-bad-images to skip them")  # said by the listing
    (tree / "dog" / "8.jpg").unlink()
    (tree / "dog" / "7.jpg").unlink()
    assert_user_error(own(tmp_path, "-n", "3"), f"{tree / 'dog' / '9.png'} cannot be read as an image "
                      "(UnidentifiedImageError")  # said by the decoding
    skipped = own(tmp_path, "-n", "3", "--skip-bad-images", "--json", tmp_path / "r.json")
    assert skipped.returncode == 0, skipped.stderr
    data = json.loads((tmp_path / "r.json").read_text())["data"]
    assert data["skipped_images"]["count"] == 1 and data["train_images"] + data["test_images"] == 12
    assert data["skipped_images"]["examples"][0]["path"] == str(tree / "dog" / "9.png")
    (tree / "dog" / "9.png").unlink()
    assert_user_error(own(tmp_path, "-n", "3", "--json", tree / "r.json"), "is in the image folder --data-dir")
    image_tree(tmp_path / "lonely", per_class=1)
    assert_user_error(run_main(*TREE_FLAGS, "--data-dir", tmp_path / "lonely", "-b", "2", "-n", "2"),
                      "no class of", "has two images or more")
    image_tree(tmp_path / "split", split="train")
    image_tree(tmp_path / "split", classes=("cat", "yak"), split="val")
    assert_user_error(run_main(*TREE_FLAGS, "--data-dir", tmp_path / "split", "--check-flags"),
                      "has class folders that", "lacks (yak)")


def test_your_model_trains_on_synthetic_images_of_your_class_count_and_a_torchvision_model_too(tmp_path):
    for model in (["--model-factory", "user_models:tiny_net"], ["-m", "resnet18", "--stem", "imagenet"]):
        result = run_main(*model, "--data", "synthetic", "--num-classes", "5", *FAST, "-n", "3", "--json",
                          tmp_path / "r.json")
        assert result.returncode == 0, result.stderr
        document = json.loads((tmp_path / "r.json").read_text())
        assert document["config"]["num_classes"] == document["data"]["num_classes"] == 5


@pytest.mark.long  # torch.compile's first step takes 10 to 20 s on a 2-core CPU
def test_your_model_compiles(tmp_path):
    image_tree(tmp_path / "tree", per_class=8)
    result = own(tmp_path, "--model-factory", "user_models:TinyNet", "-n", "5", "--compile", "--channels-last",
                 "--bf16", "--json", tmp_path / "r.json")
    assert result.returncode == 0, result.stderr
    (run,) = json.loads((tmp_path / "r.json").read_text())["runs"]
    assert run["compiled"] and run["compile_time_s"] > 0 and run["completed_steps"] == 5


def test_a_factory_on_pythonpath_is_found_from_any_working_directory(tmp_path):
    """As a user runs it: main.py from another folder, the module's folder on PYTHONPATH."""
    result = subprocess.run([sys.executable, str(ROOT / "main.py"), "--model-factory", "user_models:TinyNet",
                             "--check-flags"], cwd=tmp_path, capture_output=True, text=True, timeout=300,
                            env={**os.environ, "PYTHONPATH": str(ROOT / "tests" / "cli")})
    assert result.returncode == 0, result.stderr


@pytest.mark.long  # --advise's phases, each a process of its own: half a minute on a 2-core CPU
def test_advise_passes_your_model_and_images_to_every_phase_and_advises_a_command_that_trains_them(tmp_path):
    from conftest import run_cli
    from utils.advice import document

    image_tree(tmp_path / "tree", per_class=8)
    mine = ["--model-factory", "tests.cli.user_models:TinyNet", "--data", "imagefolder", "--data-dir",
            tmp_path / "tree"]
    result = run_cli("--advise", *mine, "--image-size", "16", "-b", "8", "--workers", "0", "--budget", "2",
                     "--advice-dir", tmp_path / "advice", timeout=240)
    # on a busy 2-core host the advice may be "measure again" (unsteady, too few runs): it measured them either way
    ran = ("cpu-only", "complete", "unsteady", "too-few-runs")
    assert result.returncode in [document.STATUSES[status] for status in ran], result.stderr
    compared = json.loads((tmp_path / "advice" / "results.json").read_text())[0]
    assert compared["config"]["model_factory"] == "tests.cli.user_models:TinyNet"
    assert compared["data"]["name"] == "imagefolder" and compared["data"]["num_classes"] == 3
    advice = json.loads((tmp_path / "advice" / "advice.json").read_text())
    if advice["recommendation"] is None:  # the line that measures again carries them too
        again = advice["measure_again"]["here"].split()
        assert again[:3] == ["python", "main.py", "--advise"] and again[3:11] == ["--batch-size", "8", *map(str, mine)]
        command = ["python", "main.py", *again[3:11], "--image-size", "16"]
    else:
        command = advice["recommendation"]["command"]
    assert command[2:10] == ["--batch-size", "8", *map(str, mine)] and "--model" not in command
    trained = run_cli(*command[2:], "-n", "4", "--warmup", "1", "--json", tmp_path / "advised.json", timeout=240)
    assert trained.returncode == 0, trained.stderr


def test_a_thread_your_module_leaves_running_does_not_hold_the_process_at_its_end(tmp_path):
    (tmp_path / "prefetching.py").write_text(
        "import threading\nimport time\nfrom torch import nn\n\n"
        "threading.Thread(target=lambda: time.sleep(3600), name='prefetcher').start()\n\n\n"
        "def build(num_classes):\n    return nn.Sequential(nn.Flatten(), nn.Linear(3 * 16 * 16, num_classes))\n")
    result = subprocess.run([sys.executable, str(ROOT / "main.py"), "--model-factory", "prefetching:build", "--data",
                             "synthetic", *FAST, "-n", "3", "--json", "r.json"], cwd=tmp_path, capture_output=True,
                            text=True, timeout=300)
    assert result.returncode == 0, result.stderr
    assert result.stderr.strip().splitlines()[-1] == (
        "main.py: note: its work is done, and code it ran left 1 thread running (prefetcher), which Python would "
        "wait for; ending without it.")
    assert json.loads((tmp_path / "r.json").read_text())["runs"][0]["completed_steps"] == 3


@pytest.fixture
def torch_state():
    """torch's gradient mode and default dtype put back after a test whose module changes them."""
    import torch

    grad, dtype = torch.is_grad_enabled(), torch.get_default_dtype()
    yield
    torch.set_grad_enabled(grad)
    torch.set_default_dtype(dtype)


def test_what_importing_your_module_changes_is_put_back_and_named(tmp_path, monkeypatch, torch_state,
                                                                  forget_imports):
    (tmp_path / "careless.py").write_text(
        "import os\nimport torch\nfrom torch import nn\n\ntorch.set_grad_enabled(False)\n"
        "torch.set_default_dtype(torch.float64)\nos.chdir(os.path.dirname(os.path.abspath(__file__)))\n\n\n"
        "def build(num_classes):\n    return nn.Sequential(nn.Flatten(), nn.Linear(3 * 16 * 16, num_classes))\n")
    (tmp_path / "work").mkdir()
    monkeypatch.chdir(tmp_path / "work")
    monkeypatch.syspath_prepend(str(tmp_path))
    result = run_main("--model-factory", "careless:build", "--data", "synthetic", *FAST, "-n", "3", "--json", "r.json")
    assert result.returncode == 0, result.stderr
    assert "careless:build: importing careless turned torch's gradient mode off, set torch's default dtype to " \
        f"float64 and changed the working directory to {tmp_path}; each is put back as it was" in result.stderr
    assert (tmp_path / "work" / "r.json").exists() and not (tmp_path / "r.json").exists()


def test_an_output_object_holding_logits_is_taken_as_them_said_once_and_recorded(tmp_path):
    """As a Hugging Face *ForImageClassification returns them: every mode, seed, evaluation and
    --explain takes the output's logits, with no wrapper."""
    image_tree(tmp_path / "tree", per_class=8)
    result = own(tmp_path, "--model-factory", "user_models:WithLogits", "-n", "4", "--modes", "fp32,amp-bf16",
                 "--seeds", "2", "--explain", "--explain-steps", "1", "--json", tmp_path / "r.json")
    assert result.returncode == 0, result.stderr
    assert result.stderr.count("user_models:WithLogits: its model returns a ClassifierOutput, whose logits every "
                               "mode trains on and evaluates (ClassifierOutput.logits") == 1, result.stderr
    document = json.loads((tmp_path / "r.json").read_text())
    assert (document["config"]["model_class"], document["config"]["model_output"]) == \
        ("user_models.WithLogits", "ClassifierOutput.logits")
    assert len(document["runs"]) == 4 and all(run["test_accuracy"] is not None and run["train_flops_per_step"]
                                              and run["profile"] for run in document["runs"])


@pytest.mark.parametrize("factory, output", [("LogitsByKey", "dict['logits']"), ("positional_only", None),
                                             ("lazy_head", None)])
def test_a_factory_as_users_write_them_trains_as_it_is(factory, output, tmp_path):
    """A dict of logits, a factory whose num_classes and image_size are positional-only, a
    LazyLinear head (its shape settled by one batch before its parameters are counted)."""
    result = run_main("--model-factory", f"user_models:{factory}", "--data", "synthetic", "--num-classes", "5",
                      *FAST, "-n", "3", "--json", tmp_path / "r.json")
    assert result.returncode == 0, result.stderr
    document = json.loads((tmp_path / "r.json").read_text())
    assert document["config"]["model_output"] == output
    (run,) = document["runs"]
    assert run["completed_steps"] == 3 and run["train_flops_per_step"] > 0


LIBRARY = """__version__ = "0.3"
import torch
from torch import nn


class Net(nn.Module):
    def __init__(self, num_classes, channels):
        super().__init__()
        self.channels, self.calls = channels, 0
        self.head = nn.Sequential(nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(3, num_classes))

    def forward(self, images):
        self.calls += 1
        if images.shape[1] != self.channels:
            raise ValueError(f"expected {self.channels} channels, got {images.shape[1]}.")
        if self.calls > 5:
            raise RuntimeError("the library's kernel failed")
        return self.head(images)
"""


def test_an_error_raised_inside_an_installed_library_names_it_and_guesses_nothing(tmp_path, monkeypatch,
                                                                                 forget_imports):
    """A library (here a made-up one in a site-packages folder) whose model raises on the check's
    batch, or later as the run trains it (no frame of the user's code in between)."""
    (tmp_path / "site-packages" / "visionlib").mkdir(parents=True)
    (tmp_path / "site-packages" / "visionlib" / "__init__.py").write_text(LIBRARY)
    (tmp_path / "uses_visionlib.py").write_text("import visionlib\n\n\ndef rgba(num_classes):\n"
                                                "    return visionlib.Net(num_classes, 4)\n\n\n"
                                                "def rgb(num_classes):\n    return visionlib.Net(num_classes, 3)\n")
    monkeypatch.syspath_prepend(str(tmp_path / "site-packages"))
    monkeypatch.chdir(tmp_path)
    refused = run_main("--model-factory", "uses_visionlib:rgba", "--check-flags")
    assert_user_error(refused, "its model raised ValueError: expected 4 channels, got 3 inside the library "
                      "visionlib 0.3 (visionlib/__init__.py:15) on a batch of 2 images of 3x32x32; visionlib raised "
                      "it, so check how the factory builds and configures the model with visionlib")
    assert "--image-size" not in refused.stderr
    failed = run_main("--model-factory", "uses_visionlib:rgb", "--data", "synthetic", *FAST, "-n", "8")
    assert_user_error(failed, "uses_visionlib:rgb: its model raised RuntimeError: the library's kernel failed inside "
                      "the library visionlib 0.3 (visionlib/__init__.py:17) as the run trained or evaluated it")


def test_a_name_taken_by_the_standard_library_or_by_ampbench_says_whose_and_how_to_fix_it(tmp_path, monkeypatch,
                                                                                         forget_imports):
    """Research code as it often is: a module named like one of Python's, a package of its own
    named utils or models imported by the factory's module."""
    build = "from torch import nn\n\n\ndef build(num_classes):\n    return nn.Linear(3, num_classes)\n"
    (tmp_path / "code").mkdir()
    (tmp_path / "code" / "json.py").write_text(build)
    for package in ("utils", "models"):
        (tmp_path / "code" / package).mkdir()
        (tmp_path / "code" / package / "__init__.py").write_text("")
        (tmp_path / "code" / package / "blocks.py").write_text(build)
    (tmp_path / "code" / "net.py").write_text("from utils.blocks import build\n")
    (tmp_path / "code" / "other_net.py").write_text("from models import blocks\n")
    monkeypatch.chdir(tmp_path / "code")
    assert_user_error(run_main("--model-factory", "json:build", "--check-flags"),
                      "json:build: 'json' is a name taken by Python's standard library (",
                      f"before your module {tmp_path / 'code' / 'json.py'}; rename your module (and what imports "
                      f"it), or make {tmp_path / 'code'} a package of its own (an __init__.py in it) and run from "
                      f"{tmp_path} with --model-factory code.json:build.")
    for module, imported in (("net", "utils.blocks"), ("other_net", "models")):
        top = imported.split(".")[0]
        assert_user_error(run_main("--model-factory", f"{module}:build", "--check-flags"),
                          f"importing {module} failed, as it imports {imported}, and '{top}' is a name taken by "
                          f"ampbench's own package ({ROOT / top})", f"before your package {tmp_path / 'code' / top}; "
                          f"rename your package (and what imports it), or make {tmp_path / 'code'} a package of its "
                          f"own (an __init__.py in it, its imports of {top} relative: from .{top} import ...) and run "
                          f"from {tmp_path} with --model-factory code.{module}:build.")
