"""The hostile campaign over the user's own code as it really is (--model-factory): models as
libraries build them and as research code writes them. Each case is a user's command, main.main
in this process as `python main.py` runs it (or, for the threads, a process of its own), and what
a careful user expects of it: success with nothing lost and what was done to their code said, or
a refusal in one sentence with exit 2 that names whose the fault is and the fix.

Families (each case's id starts with its own):
  outputs   models whose output holds its logits in an object (Hugging Face's, a dict, a
            dataclass), or holds something else
  library   errors raised inside an installed library: a made-up one in a site-packages folder,
            timm and transformers (where installed)
  lazy      lazy layers, which take their shapes from a first batch
  script    TorchScript modules
  import    modules whose import (or factory) changes torch's or the process's state
  threads   threads the user's code leaves running (long: a process each)
  names     module names another module holds (Python's, ampbench's, a library's), a file given
            for a module, positional-only parameters
"""
import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from test_lease_advice_userdata_campaign import refused

from conftest import ROOT, image_tree, run_main

OWN = ["--image-size", "16", "-b", "4", "--warmup", "1", "--no-progress", "--workers", "0"]
BUILD = "from torch import nn\n\n\ndef build(num_classes):\n    return nn.Sequential(nn.Flatten(), " \
        "nn.Linear(3 * 16 * 16, num_classes))\n"


@pytest.fixture(autouse=True)
def process_state(monkeypatch, forget_imports):
    """What a hostile module may change in this process, put back after each case (a case that
    fails must not change the next), and the modules imported from the case's folder forgotten
    (forget_imports), so that a name imports afresh in the next case."""
    import torch

    kept = (torch.is_grad_enabled(), torch.get_default_dtype(), torch.is_anomaly_enabled())
    handlers = {number: signal.getsignal(number) for number in (signal.SIGINT, signal.SIGTERM)}
    monkeypatch.chdir(ROOT)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    yield
    torch.set_grad_enabled(kept[0])
    torch.set_default_dtype(kept[1])
    torch.set_anomaly_enabled(kept[2])
    if hasattr(torch, "get_default_device"):
        torch.set_default_device(None)
    for number, handler in handlers.items():
        signal.signal(number, handler)


def trains(result, json_path=None):
    """Exit 0, no traceback; the runs of `json_path` each completed."""
    assert result.returncode == 0 and "Traceback" not in result.stderr, result.stderr
    if json_path is not None:
        document = json.loads(Path(json_path).read_text())
        assert all(run["completed_steps"] == document["config"]["steps"] for run in document["runs"])
        return document
    return None


def own(spec, *argv):
    return run_main("--model-factory", spec, "--data", "synthetic", *OWN, *argv)


# outputs: user_code.py's models, whose Tiny logits each wraps in what it returns
OUTPUTS_TAKEN = {
    "outputs-a-model-output-object": ("AsModelOutput", "ModelOutput.logits"),
    "outputs-a-dict-of-logits": ("AsDict", "dict['logits']"),
    "outputs-a-dataclass": ("AsDataclass", "ClassifierOutput.logits"),
    "outputs-a-named-tuple": ("AsNamedTuple", "Prediction.logits"),
}


@pytest.mark.parametrize("case", OUTPUTS_TAKEN)
def test_an_output_holding_its_logits_trains_said_once_and_recorded(case, tmp_path):
    name, taken = OUTPUTS_TAKEN[case]
    result = own(f"user_code:{name}", "-n", "3", "--modes", "fp32,amp-bf16", "--json", tmp_path / "r.json")
    document = trains(result, tmp_path / "r.json")
    assert document["config"]["model_output"] == taken
    assert result.stderr.count(f"({taken}, recorded as config.model_output)") == 1, result.stderr


def test_outputs_an_object_in_training_and_the_logits_in_evaluation_evaluates(tmp_path):
    tree = image_tree(tmp_path / "tree", per_class=4)
    result = run_main("--model-factory", "user_code:ObjectWhileTraining", "--data", "imagefolder", "--data-dir", tree,
                      *OWN, "-n", "3", "--json", tmp_path / "r.json")
    (run,) = trains(result, tmp_path / "r.json")["runs"]
    assert run["test_accuracy"] is not None


OUTPUTS_REFUSED = {
    "outputs-logits-none": ("LogitsNone", "returns a ModelOutput for a batch of images, not a tensor of logits nor "
                                          "an object holding them as `logits`"),
    "outputs-logits-a-list": ("LogitsAList", "returns an Estimate for a batch of images"),
    "outputs-logits-detached": ("LogitsDetached", "carries no gradient back to its parameters"),
    "outputs-logits-whole-numbers": ("LogitsWholeNumbers", "returns int64 values"),
    "outputs-logits-one-row": ("LogitsOneRow", "outputs a tensor of shape [1, 10] for 2 images"),
    "outputs-scores-not-logits": ("ScoresOnly", "returns a dict for a batch of images"),
    "outputs-an-object-of-scores": ("ScoredObject", "returns a Scored for a batch of images"),
    "outputs-an-object-named-with-a-vowel": ("AsEmbedding", "returns an Embedding for a batch of images"),
    "outputs-a-logits-property-that-raises": ("LogitsPropertyRaises", "returns a RaisingOutput for a batch"),
    "outputs-seven-classes-in-an-object": ("seven_classes_in_an_object", "outputs 7 classes, and this run's labels "
                                                                         "have 10"),
}


@pytest.mark.parametrize("case", OUTPUTS_REFUSED)
def test_an_output_that_holds_no_usable_logits_is_refused_before_the_first_step(case):
    name, phrase = OUTPUTS_REFUSED[case]
    refused(own(f"user_code:{name}", "--check-flags"), f"user_code:{name}", phrase)


# library: a made-up installed library (a site-packages folder on sys.path), and timm and transformers
VISIONLIB = '''__version__ = "2.1"
import torch
from torch import nn


def create(name, num_classes, channels=3):
    if name not in ("small", "fails-in-training", "fails-in-evaluation"):
        raise RuntimeError(f"Unknown model ({name})")
    return Net(name, num_classes, channels)


class Net(nn.Module):
    def __init__(self, name, num_classes, channels):
        super().__init__()
        self.name, self.channels, self.calls = name, channels, 0
        self.head = nn.Sequential(nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(channels, num_classes))

    def forward(self, images):
        self.calls += self.training
        if images.shape[1] != self.channels:
            raise ValueError(f"expected {self.channels} channels, got {images.shape[1]}")
        if self.name == "fails-in-training" and self.calls > 4:
            raise RuntimeError("the fused kernel failed")
        if self.name == "fails-in-evaluation" and not self.training:
            raise NotImplementedError("evaluation is not supported")
        return self.head(images)
'''
USES_VISIONLIB = '''import visionlib


def small(num_classes):
    return visionlib.create("small", num_classes)


def gray(num_classes):
    return visionlib.create("small", num_classes, channels=1)


def unknown(num_classes):
    return visionlib.create("nope", num_classes)


def in_training(num_classes):
    return visionlib.create("fails-in-training", num_classes)


def in_evaluation(num_classes):
    return visionlib.create("fails-in-evaluation", num_classes)
'''
BROKEN_LIBRARIES = {"oldlib": 'raise ImportError("oldlib needs a newer torch")\n',
                    "needylib": "import a_module_nobody_installed\n"}


@pytest.fixture
def libraries(tmp_path, monkeypatch):
    """visionlib and the broken libraries installed in a site-packages folder, and the user's
    modules that use them in the working directory; returns that directory."""
    site = tmp_path / "site-packages"
    for name, source in {"visionlib": VISIONLIB, **BROKEN_LIBRARIES}.items():
        (site / name).mkdir(parents=True)
        (site / name / "__init__.py").write_text(source)
    work = tmp_path / "work"
    work.mkdir()
    (work / "uses_visionlib.py").write_text(USES_VISIONLIB)
    for name in BROKEN_LIBRARIES:
        (work / f"uses_{name}.py").write_text(f"import {name}\n\n\ndef build(num_classes):\n    pass\n")
    monkeypatch.syspath_prepend(str(site))
    monkeypatch.chdir(work)
    return work


LIBRARY_REFUSED = {
    "library-raises-on-the-checks-batch": (
        "uses_visionlib:gray", [], "its model raised ValueError: expected 1 channels, got 3 inside the library "
        "visionlib 2.1 (visionlib/__init__.py:21) on a batch of 2 images of 3x16x16; visionlib raised it, so check how "
        "the factory builds and configures the model with visionlib"),
    "library-raises-when-the-factory-calls-it": (
        "uses_visionlib:unknown", [], "raised RuntimeError: Unknown model (nope) inside the library visionlib 2.1 "
        "(visionlib/__init__.py:8), called from {work}/uses_visionlib.py:13 when called with num_classes=10; "
        "visionlib raised it"),
    "library-raises-as-the-run-trains": (
        "uses_visionlib:in_training", ["-n", "8"], "its model raised RuntimeError: the fused kernel failed inside the "
        "library visionlib 2.1 (visionlib/__init__.py:23) as the run trained or evaluated it; visionlib raised it"),
    "library-raises-as-it-is-imported": (
        "uses_oldlib:build", [], "importing uses_oldlib raised ImportError: oldlib needs a newer torch inside the "
        "library oldlib (oldlib/__init__.py:1), called from {work}/uses_oldlib.py:1; oldlib raised it"),
    "library-lacks-a-dependency": (
        "uses_needylib:build", [], "importing uses_needylib failed, as it imports ModuleNotFoundError: No module "
        "named 'a_module_nobody_installed' inside the library needylib (needylib/__init__.py:1), called from "
        "{work}/uses_needylib.py:1; install what it needs"),
}


@pytest.mark.parametrize("case", LIBRARY_REFUSED)
def test_an_error_raised_inside_a_library_names_the_library_and_its_line(case, libraries):
    spec, argv, phrase = LIBRARY_REFUSED[case]
    result = own(spec, *(argv or ["--check-flags"]))
    refused(result, spec, phrase.format(work=libraries))
    assert "--image-size" not in result.stderr


def test_library_raising_as_the_run_evaluates_is_one_sentence_naming_it(libraries):
    tree = image_tree(libraries / "tree", per_class=4)
    result = run_main("--model-factory", "uses_visionlib:in_evaluation", "--data", "imagefolder", "--data-dir", tree,
                      *OWN, "-n", "2")
    refused(result, "NotImplementedError: evaluation is not supported inside the library visionlib 2.1",
            "as the run trained or evaluated it")


def test_library_a_model_of_it_trains_as_it_is(libraries, tmp_path):
    trains(own("uses_visionlib:small", "-n", "3", "--bf16", "--json", tmp_path / "r.json"), tmp_path / "r.json")


REAL_LIBRARIES = {  # tests/cli/library_models.py's factories: (library, factory, argv, phrase; None: it trains)
    "library-transformers-return-dict-false": ("transformers", "hf_vit_tuple", [], "AttributeError: 'tuple' object "
                                               "has no attribute 'last_hidden_state' inside the library transformers"),
    "library-transformers-built-for-one-channel": ("transformers", "hf_vit_gray", [], "inside the library "
                                                   "transformers"),
    "library-transformers-seven-labels": ("transformers", "hf_vit_seven_labels", [], "its model outputs 7 classes, "
                                          "and this run's labels have 10"),
    "library-transformers-a-convnet-trains": ("transformers", "hf_resnet", ["-n", "3", "--bf16"], None),
    "library-timm-an-unknown-model": ("timm", "timm_unknown", [], "RuntimeError: Unknown model "
                                      "(resnet_nobody_made) inside the library timm"),
    "library-timm-built-for-another-size": ("timm", "timm_vit_for_32", [], "AssertionError: Input height (16) "
                                            "doesn't match model (32) inside the library timm"),
}


@pytest.mark.parametrize("case", REAL_LIBRARIES)
def test_a_model_of_timm_or_transformers_as_its_factory_builds_it(case, tmp_path):
    library, factory, argv, phrase = REAL_LIBRARIES[case]
    pytest.importorskip(library)
    result = own(f"tests.cli.library_models:{factory}", *(argv or ["--check-flags"]))
    if phrase is None:
        trains(result)
    else:
        refused(result, phrase)
        assert "--image-size" not in result.stderr


# lazy: lazy layers settled by one batch before anything counts or trains them
@pytest.mark.parametrize("case, name, argv", [
    ("lazy-a-lazy-linear-head", "lazy_head", []),
    ("lazy-every-layer-lazy", "lazy_all_through", []),
    ("lazy-in-bfloat16-channels-last", "lazy_head", ["--bf16", "--channels-last"]),
])
def test_lazy_layers_are_settled_by_one_batch_and_train(case, name, argv, tmp_path):
    document = trains(own(f"user_code:{name}", "-n", "3", *argv, "--json", tmp_path / "r.json"), tmp_path / "r.json")
    assert document["runs"][0]["train_flops_per_step"] > 0


def test_lazy_a_checkpoint_of_a_lazy_model_resumes(tmp_path):
    checkpointed = ["--checkpoint", tmp_path / "ck.pt"]
    trains(own("user_code:lazy_head", "-n", "3", *checkpointed))
    result = own("user_code:lazy_head", "-n", "5", *checkpointed, "--resume", "--json", tmp_path / "r.json")
    (run,) = trains(result, tmp_path / "r.json")["runs"]
    assert run["resumed_from_step"] == 3


@pytest.mark.parametrize("case, name, phrase", [
    ("lazy-a-layer-the-forward-never-reaches", "LazySpare", "lazy layers spare (LazyLinear) got no shape"),
    ("lazy-a-batch-that-cannot-settle-them", "lazy_gray", "take their shapes from a first batch, and a batch of 2 "
                                                          "images of 3x16x16 raised RuntimeError"),
])
def test_lazy_layers_no_batch_can_settle_are_refused_with_the_fix(case, name, phrase):
    refused(own(f"user_code:{name}", "--check-flags"), phrase)


# script: TorchScript modules, whose copies no optimizer can train
@pytest.mark.parametrize("case, name, where", [
    ("script-a-scripted-model", "scripted", "the model itself"),
    ("script-a-traced-model", "traced", "the model itself"),
    ("script-a-scripted-block-inside", "WithScriptedBlock", "conv"),
])
def test_a_torchscript_module_is_refused_with_the_reason(case, name, where):
    refused(own(f"user_code:{name}", "--check-flags"), f"compiled by TorchScript (torch.jit.script or trace: {where})",
            "no optimizer can train", "return the nn.Module before scripting or tracing it")


# import: a module of the case's own, whose import (or factory) changes the process's state
IMPORTS = {  # the module's lines before its factory, what the warning says
    "import-turns-gradients-off": ("torch.set_grad_enabled(False)", "turned torch's gradient mode off"),
    "import-sets-float64-the-default": ("torch.set_default_dtype(torch.float64)",
                                        "set torch's default dtype to float64"),
    "import-turns-anomaly-detection-on": ("torch.autograd.set_detect_anomaly(True)",
                                          "turned autograd's anomaly detection on"),
    "import-sets-the-default-device-to-meta": ("torch.set_default_device('meta')",
                                               "set torch's default device to meta"),
    "import-ignores-sigterm": ("signal.signal(signal.SIGTERM, signal.SIG_IGN)", "set its own handler of SIGTERM"),
    "import-changes-the-working-directory": ("os.chdir(os.path.dirname(os.path.abspath(__file__)))",
                                             "changed the working directory to {folder}"),
    "import-changes-three-at-once": ("torch.set_grad_enabled(False)\ntorch.set_default_dtype(torch.float64)\n"
                                     "os.chdir('/')", "turned torch's gradient mode off, set torch's default dtype to "
                                     "float64 and changed the working directory to /; each is put back as it was"),
}


def module_of(tmp_path, case, lines, monkeypatch):
    """A module named after `case` (each imports afresh) in tmp_path, on sys.path, that runs `lines`
    as it is imported; the working directory a folder beside it. Returns the module's name."""
    name = case.replace("-", "_")
    (tmp_path / f"{name}.py").write_text(f"import os\nimport signal\nimport torch\n{lines}\n{BUILD}")
    (tmp_path / "work").mkdir(exist_ok=True)
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.chdir(tmp_path / "work")
    return name


@pytest.mark.parametrize("case", IMPORTS)
def test_what_importing_the_module_changes_is_put_back_and_named(case, tmp_path, monkeypatch):
    import torch

    lines, said = IMPORTS[case]
    if "default_device" in lines and not hasattr(torch, "get_default_device"):
        pytest.skip("this torch has no default device")
    before = (torch.is_grad_enabled(), torch.get_default_dtype(), torch.is_anomaly_enabled(),
              signal.getsignal(signal.SIGTERM))
    name = module_of(tmp_path, case, lines, monkeypatch)
    result = own(f"{name}:build", "-n", "3", "--json", "r.json")
    trains(result, tmp_path / "work" / "r.json")
    assert f"{name}:build: importing {name} {said.format(folder=tmp_path)}" in result.stderr, result.stderr
    assert (torch.is_grad_enabled(), torch.get_default_dtype(), torch.is_anomaly_enabled(),
            signal.getsignal(signal.SIGTERM)) == before
    assert not (tmp_path / "r.json").exists()


def test_import_a_module_that_changes_state_then_raises_is_refused_leaving_none_changed(tmp_path, monkeypatch):
    import torch

    name = module_of(tmp_path, "import-then-raises", "torch.set_grad_enabled(False)\nraise ValueError('no GPU')",
                     monkeypatch)
    refused(own(f"{name}:build", "--check-flags"), f"importing {name} raised ValueError: no GPU at {tmp_path}")
    assert torch.is_grad_enabled() and Path.cwd() == tmp_path / "work"


def test_import_a_factory_that_changes_state_is_named_as_the_factorys(tmp_path, monkeypatch):
    name = module_of(tmp_path, "import-factory-changes", "", monkeypatch)
    (tmp_path / f"{name}.py").write_text(
        "import torch\nfrom torch import nn\n\n\ndef build(num_classes):\n    torch.set_default_dtype(torch.float64)\n"
        "    return nn.Sequential(nn.Flatten(), nn.Linear(768, num_classes)).float()\n")
    result = own(f"{name}:build", "--check-flags")
    assert result.returncode == 0 and result.stderr == "", result.stderr  # --check-flags says no warning
    result = own(f"{name}:build", "-n", "3")
    trains(result)
    assert f"{name}:build: its factory set torch's default dtype to float64; it is put back" in result.stderr


# threads: a process each, as a user runs main.py, which must end soon after its work
THREADS = {  # the factory, its exit status, the note's thread (None: no note)
    "threads-a-thread-the-factory-leaves": ("user_code:starts_a_thread", 0, "watchdog"),
    "threads-a-thread-its-forward-starts": ("user_code:ThreadInForward", 0, "logger"),
    "threads-a-thread-then-a-refusal": ("user_code:starts_a_thread_then_raises", 2, "loader"),
    "threads-a-daemon-thread": ("user_code:starts_a_daemon_thread", 0, None),
    "threads-a-thread-that-ends-by-itself": ("user_code:starts_a_short_thread", 0, None),
    "threads-a-thread-its-import-starts": ("threading_module:build", 0, "prefetcher"),
}


@pytest.mark.long  # a process each, some ten seconds on a 2-core CPU
@pytest.mark.parametrize("case", THREADS)
def test_a_thread_the_users_code_leaves_running_does_not_hold_the_process(case, tmp_path):
    spec, status, thread = THREADS[case]
    (tmp_path / "threading_module.py").write_text(
        "import threading\nimport time\n\nthreading.Thread(target=lambda: time.sleep(3600), name='prefetcher')"
        f".start()\n{BUILD}")
    paths = [str(tmp_path), str(ROOT / "tests" / "campaigns"), os.environ.get("PYTHONPATH", "")]
    result = subprocess.run([sys.executable, str(ROOT / "main.py"), "--model-factory", spec, "--data", "synthetic",
                             *OWN, "-n", "3"], cwd=ROOT, capture_output=True, text=True, timeout=240,
                            env={**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, paths))})
    lines = result.stderr.strip().splitlines()
    assert result.returncode == status and "Traceback" not in result.stderr, result.stderr
    note = ("main.py: note: its work is done, and code it ran left 1 thread running "
            f"({thread}), which Python would wait for; ending without it.")
    assert (lines[-1] == note) if thread else not any("thread" in line for line in lines), result.stderr
    if status == 2:
        assert lines[-2].startswith("main.py: error: --model-factory user_code:starts_a_thread_then_raises raised "
                                    "ValueError: the weights are not there yet")


# names: what `import` finds under the name the user gave
@pytest.fixture
def code(tmp_path, monkeypatch):
    """A folder of research code, the working directory: modules named like Python's (json,
    colorsys, mailbox) and like a library's (numpy), and packages utils and models of its own
    (ampbench's names) that its modules import."""
    folder = tmp_path / "code"
    for package in ("utils", "models"):
        (folder / package).mkdir(parents=True)
        (folder / package / "__init__.py").write_text("")
        (folder / package / "blocks.py").write_text(BUILD)
    for module in ("json", "colorsys", "numpy", "mailbox", "plain"):
        (folder / f"{module}.py").write_text(BUILD)
    (folder / "net.py").write_text("from utils.blocks import build\n")
    (folder / "from_models.py").write_text("from models import blocks\n\nbuild = blocks.build\n")
    (folder / "dotted_models.py").write_text("import models.blocks\n\nbuild = models.blocks.build\n")
    monkeypatch.chdir(folder)
    return folder


NAMES_REFUSED = {  # the spec, the sentence's phrases ({code}: the folder, {root}: ampbench's checkout)
    "names-a-module-named-json": ("json:build", ["'json' is a name taken by Python's standard library (",
                                                 "before your module {code}/json.py; rename your module",
                                                 "make {code} a package of its own (an __init__.py in it) and run "
                                                 "from {parent} with --model-factory code.json:build"]),
    "names-a-module-named-colorsys": ("colorsys:build", ["'colorsys' is a name taken by Python's standard library"]),
    "names-a-module-named-numpy": ("numpy:build", ["'numpy' is a name taken by the installed library numpy ("]),
    "names-its-own-utils-package": ("net:build", ["importing net failed, as it imports utils.blocks, and 'utils' is "
                                                  "a name taken by ampbench's own package ({root}/utils)",
                                                  "before your package {code}/utils; rename your package",
                                                  "its imports of utils relative: from .utils import ...",
                                                  "--model-factory code.net:build"]),
    "names-from-models-import": ("from_models:build", ["as it imports models, and 'models' is a name taken by "
                                                       "ampbench's own package"]),
    "names-import-models-submodule": ("dotted_models:build", ["as it imports models.blocks, and 'models' is a name "
                                                              "taken by ampbench's own package"]),
    "names-its-own-package-as-the-factorys-module": ("models.blocks:build", ["'models' is a name taken by "
                                                                             "ampbench's own package",
                                                                             "before your package {code}/models"]),
    "names-a-py-file-for-the-module": ("plain.py:build", ["not a file: for plain.py give --model-factory plain:build, "
                                                          "run from the folder that holds it"]),
    "names-a-path-for-the-module": ("code/plain.py:build", ["give --model-factory plain:build, run from code or "
                                                            "with that folder on PYTHONPATH"]),
}


@pytest.mark.parametrize("case", NAMES_REFUSED)
def test_a_name_another_module_holds_is_refused_saying_whose_and_the_fix(case, code):
    spec, phrases = NAMES_REFUSED[case]
    refused(own(spec, "--check-flags"), *(phrase.format(code=code, parent=code.parent, root=ROOT)
                                          for phrase in phrases))


def test_names_a_module_named_utils_says_it_is_ampbenchs(tmp_path, monkeypatch):
    (tmp_path / "utils.py").write_text(BUILD)
    monkeypatch.chdir(tmp_path)
    refused(own("utils:build", "--check-flags"), "'utils' is a name taken by ampbench's own package",
            f"before your module {tmp_path / 'utils.py'}")


def test_names_a_folder_no_package_can_be_named_after_is_not_offered_as_one(tmp_path, monkeypatch):
    (tmp_path / "my-code").mkdir()
    (tmp_path / "my-code" / "json.py").write_text(BUILD)
    monkeypatch.chdir(tmp_path / "my-code")
    result = own("json:build", "--check-flags")
    refused(result, "rename your module (and what imports it).")
    assert "package of its own" not in result.stderr


def test_names_a_standard_librarys_name_no_program_imported_is_the_users(code):
    assert "mailbox" not in sys.modules  # else it would be Python's, and refused as json is
    trains(own("mailbox:build", "-n", "3"))


@pytest.mark.parametrize("case, name, argv", [
    ("names-positional-only-num-classes", "positional_only", []),
    ("names-positional-only-num-classes-and-image-size", "positional_only_both", []),
    ("names-positional-only-then-keyword-only", "positional_only_default_then_keyword", []),
    ("names-positional-only-dropout-given", "positional_only_dropout", ["--dropout", "0.2"]),
    ("names-positional-only-dropout-not-given", "positional_only_dropout", []),
])
def test_a_factory_with_positional_only_parameters_is_called_with_them(case, name, argv, tmp_path):
    """Five classes: a factory called without num_classes would build its default of ten."""
    trains(own(f"user_code:{name}", "--num-classes", "5", "-n", "3", *argv))


def test_names_a_positional_only_dropout_it_requires_is_asked_of_dropout():
    refused(own("user_code:dropout_first", "--check-flags"), "user_code:dropout_first requires dropout, and ampbench "
            "gives a factory only num_classes, image_size, dropout (dropout with --dropout alone)")
    trains(own("user_code:dropout_first", "--dropout", "0.1", "-n", "3"))
