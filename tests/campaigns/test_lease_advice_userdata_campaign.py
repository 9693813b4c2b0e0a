"""The hostile campaign over the GPU lease's planning and labels, the adviser and your own model
and images: the quick cases (no case trains more than three steps of a tiny model; the slow ones
are in test_lease_advice_userdata_campaign_long.py). Each case is a user's command, main.main or
gpu_suite's main in this process as the programs run them, and what a careful user expects of it:
a refusal in one sentence with exit 2 that changes nothing, or success with nothing lost.

Families (each case's id starts with its own):
  advice    --advise --from on damaged, forged and awkward files and folders (utils/advice)
  factory   --model-factory models that raise, return the wrong thing, or change global state
  images    --data imagefolder trees of awkward layouts, files and sizes
  plan      gpu_suite.py --plan --budget on forged saved results (benchmarks/suite/due.py)
  labels    the commit labels of README's rows on forged commits and digests (utils/provenance.py)
  blocks    the docs' gpu-figures blocks and README's section on damaged saved files
  busy      the busy share's sample minimum against a made-up NVML's odd samples
  standin   the generated CIFAR-10 stand-in the tests train on
  session   --advise's session with a stop signal at each phase, under a made-up runner
"""
import contextlib
import io
import json
import os
import re
import shutil
import signal
import sys
import time
from pathlib import Path

import pytest

import cifar10_standin
from benchmarks import gpu_suite
from benchmarks.suite import docblocks, history
from conftest import ROOT, FakeGpu, image_tree, run_main
from utils import console, provenance
from utils.measure import nvml_meter

H200 = ROOT / "results" / "NVIDIA-H200" / "2026-11-26"
HEADLINE = H200 / "headline-resnet18.json"
SAMPLE = ROOT / "docs" / "samples" / "advice"
OWN = ["--image-size", "16", "-b", "4", "--warmup", "1", "--no-progress", "--workers", "0"]
ADVISE = ["--image-size", "16", "-b", "4", "--no-progress", "--workers", "0"]  # --advise chooses the warm-up


@pytest.fixture(autouse=True)
def process_state(monkeypatch):
    """What a hostile factory may change in this process, put back after each case, and each
    case's warnings said afresh (the suite says each damaged file once per command)."""
    import torch

    grad, dtype, handlers = torch.is_grad_enabled(), torch.get_default_dtype(), \
        {number: signal.getsignal(number) for number in (signal.SIGINT, signal.SIGTERM)}
    monkeypatch.setattr(history, "WARNED", set())
    monkeypatch.chdir(ROOT)
    yield
    torch.set_grad_enabled(grad)
    torch.set_default_dtype(dtype)
    for number, handler in handlers.items():
        signal.signal(number, handler)


def refused(result, *phrases):
    """Exit 2 and one sentence, `main.py: error: ...`, holding `phrases`, and no traceback."""
    err = result.stderr
    problems = [] if result.returncode == 2 else [f"exit {result.returncode}"]
    closing = (err.strip().splitlines() or [""])[-1]
    if "Traceback" in err or not (closing.startswith("main.py: error: ") and closing.endswith((".", "?"))):
        problems.append(f"no closing sentence: {err[-600:]!r}")
    problems += [f"{phrase!r} not said" for phrase in phrases if phrase not in closing]
    assert not problems, f"{'; '.join(problems)}\n{err[-1500:]}"


class TookTooLong(BaseException):
    """Not an Exception: no `except Exception` of the code under test may take it for its own."""


@contextlib.contextmanager
def within(seconds):
    """Fail the case, rather than hang the suite, where the block takes longer than `seconds`."""
    def late(number, frame):
        raise TookTooLong(f"still running after {seconds} s")
    previous = signal.signal(signal.SIGALRM, late)
    signal.alarm(seconds)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)


def files_under(folder):
    return {str(path.relative_to(folder)): path.read_bytes() if path.is_file() else None
            for path in Path(folder).rglob("*")}


# advice: --advise --from. Each edit forges advice.json (the sample's copy) or the results file.
def forged_advice(tmp_path, edit):
    folder = tmp_path / "advice"
    folder.mkdir()
    shutil.copy(SAMPLE / "results.json", folder / "results.json")
    advice = json.loads((SAMPLE / "advice.json").read_text())
    edit(advice)
    (folder / "advice.json").write_text(json.dumps(advice))
    return folder / "advice.json"


def forged_results(tmp_path, edit):
    document = json.loads(HEADLINE.read_text())
    edit(document)
    path = tmp_path / "r.json"
    path.write_text(json.dumps(document))
    return path


def untimed(document):
    """Every run stopped by a signal before its first timed step, as main.py writes it."""
    for run in document["runs"]:
        run.update(step_time_ms=None, step_times_ms=[], timed_steps=0, incomplete=True, stopped_by="SIGTERM")
    document["incomplete"] = True


ADVICE_REFUSED = {
    "advice-preflight-fp8-a-list": (lambda a: a["preflight"].update(fp8=[1]), "preflight.fp8"),
    "advice-preflight-fp8-entry-text": (lambda a: a["preflight"].update(fp8={"fp8": "fast"}), "preflight.fp8.fp8"),
    "advice-preflight-not-timed-a-list": (lambda a: a["preflight"].update(not_timed=["fp8"]), "preflight.not_timed"),
    "advice-preflight-speedup-without-its-gpu": (lambda a: a["preflight"].update(fp8={"fp8": {"speedup": 1.5}}),
                                                 "preflight.fp8.fp8"),
    "advice-preflight-speedup-text": (lambda a: a["preflight"].update(fp8={"fp8": {"speedup": "1.5", "for": "x"}}),
                                      "preflight.fp8.fp8.speedup"),
    "advice-results-missing": (lambda a: a.update(results="nothere.json"), "nothere.json"),
    "advice-results-a-folder": (lambda a: a.update(results="."), "is not a result file but a folder"),
    "advice-results-itself": (lambda a: a.update(results="advice.json"), "is not an ampbench result file"),
    "advice-results-a-device": (lambda a: a.update(results="/dev/zero"), "a character device"),
    "advice-not-run-estimate-nan": (lambda a: a["not_run"].update(x={"why": "w", "estimate_s": float("nan")}),
                                    "not_run.x.estimate_s is NaN"),
    "advice-budget-huge": (lambda a: a.update(budget={"minutes": 1e308, "spent_s": 1}), "budget.minutes"),
    "advice-status-and-exit-disagree": (lambda a: a.update(status="complete"), "exit_code is 4"),
    "advice-evidence-twice": (lambda a: a["evidence"].append(a["evidence"][0]), "lists E1 twice"),
    "advice-plan-unknown-mode": (lambda a: a.update(plan=[{"name": "x", "modes": ["fp64"], "estimate_s": 1,
                                                            "runs": True}]), "plan[0].modes[0]"),
    "advice-schema-of-tomorrow": (lambda a: a.update(schema="ampbench.advice/3"), "is not an advice file of schema"),
}


@pytest.mark.parametrize("case", ADVICE_REFUSED)
def test_a_forged_advice_file_is_refused_naming_the_field(case, tmp_path):
    edit, phrase = ADVICE_REFUSED[case]
    path = forged_advice(tmp_path, edit)
    before = files_under(tmp_path)
    refused(run_main("--advise", "--from", path), phrase)
    assert files_under(tmp_path) == before


def test_advice_an_advice_file_without_its_preflight_facts_decides_again(tmp_path):
    result = run_main("--advise", "--from", forged_advice(tmp_path, lambda a: a.update(preflight={})))
    assert result.returncode == 4 and result.stdout.startswith("Which precision should resnet18"), result.stderr


RESULTS_REFUSED = {
    "advice-results-truncated": (lambda path: path.write_text(HEADLINE.read_text()[:5000]), "cannot read result file"),
    "advice-results-garbage": (lambda path: path.write_bytes(bytes(range(256)) * 8), "cannot read result file"),
    "advice-results-empty": (lambda path: path.write_text(""), "cannot read result file"),
    "advice-results-bare-nan": (lambda path: path.write_text("NaN"), "it is NaN"),
    "advice-results-median-nan": (lambda path: path.write_text(HEADLINE.read_text().replace(
        '"median": ', '"median": NaN, "x": ', 1)), "median is NaN"),
    "advice-results-no-timed-step": (lambda path: path.write_text(json.dumps(forged_document(untimed))),
                                     "timed no step"),
    "advice-results-dangling-link": (lambda path: path.symlink_to(path.parent / "gone.json"), "cannot read"),
    "advice-results-a-fifo": (lambda path: os.mkfifo(path), "a FIFO"),
    "advice-results-a-folder": (lambda path: path.mkdir(), "a folder"),
}


def forged_document(edit):
    document = json.loads(HEADLINE.read_text())
    edit(document)
    return document


@pytest.mark.parametrize("case", RESULTS_REFUSED)
def test_a_damaged_results_file_given_to_from_is_refused(case, tmp_path):
    make, phrase = RESULTS_REFUSED[case]
    path = tmp_path / "r.json"
    make(path)
    with within(30):
        refused(run_main("--advise", "--from", path, "--advice-dir", tmp_path / "out"), phrase)
    assert not (tmp_path / "out").exists()


def test_advice_an_empty_from_is_refused_not_taken_for_a_measuring_run(tmp_path):
    refused(run_main("--advise", "--from", "", "--advice-dir", tmp_path / "out"), "--from needs")
    assert not (tmp_path / "out").exists()


ADVICE_DIRS = {
    "advice-dir-empty": (lambda tmp: "", "--advice-dir needs a path"),
    "advice-dir-a-file": (lambda tmp: str(HEADLINE), "is not a folder"),
    "advice-dir-a-fifo": (lambda tmp: os.mkfifo(tmp / "fifo") or str(tmp / "fifo"), "is not a folder"),
    "advice-dir-under-dev-null": (lambda tmp: "/dev/null/advice", "cannot write --advice-dir"),
    "advice-dir-holding-a-fifo-named-advice-json": (
        lambda tmp: (tmp / "out").mkdir() or os.mkfifo(tmp / "out" / "advice.json") or str(tmp / "out"),
        "advice.json"),
    "advice-dir-holding-a-folder-named-report-txt": (
        lambda tmp: (tmp / "out" / "report.txt").mkdir(parents=True) or str(tmp / "out"), "report.txt"),
}


@pytest.mark.parametrize("case", ADVICE_DIRS)
def test_an_unusable_advice_dir_is_refused_before_the_advice_is_decided(case, tmp_path):
    where, phrase = ADVICE_DIRS[case]
    folder = where(tmp_path)
    before = files_under(tmp_path)
    result = run_main("--advise", "--from", HEADLINE, "--advice-dir", folder)
    refused(result, phrase)
    assert result.stdout == "" and files_under(tmp_path) == before
    assert not (ROOT / "advice.json").exists() and not (ROOT / "report.txt").exists()


def linked(path, target):
    path.symlink_to(target)
    return path


ADVICE_WRITTEN = {
    "advice-from-a-relative-path": lambda tmp: (os.path.relpath(HEADLINE, ROOT), tmp / "out"),
    "advice-from-a-symlink": lambda tmp: (linked(tmp / "link.json", HEADLINE), tmp / "out"),
    "advice-unicode-and-spaces": lambda tmp: (shutil.copy(HEADLINE, tmp / "r é s 結果.json"), tmp / "ü n i" / "out"),
    "advice-dir-created-two-levels-down": lambda tmp: (str(HEADLINE), tmp / "a" / "b"),
    "advice-without-fp32": lambda tmp: (forged_results(tmp, lambda d: d.update(
        runs=[run for run in d["runs"] if run["mode"] != "fp32"])), tmp / "out"),
    "advice-one-run-stopped-untimed": lambda tmp: (forged_results(tmp, lambda d: d["runs"][0].update(
        step_time_ms=None, step_times_ms=[], timed_steps=0, incomplete=True, stopped_by="SIGTERM")), tmp / "out"),
    "advice-results-of-schema-1": lambda tmp: (forged_results(tmp, lambda d: d.update(schema="ampbench.result/1")),
                                               tmp / "out"),
}


@pytest.mark.parametrize("case", ADVICE_WRITTEN)
def test_advice_from_awkward_but_genuine_results_is_written_whole(case, tmp_path):
    given, folder = ADVICE_WRITTEN[case](tmp_path)
    result = run_main("--advise", "--from", given, "--advice-dir", folder)
    advice = json.loads((Path(folder) / "advice.json").read_text())
    assert result.returncode == advice["exit_code"] != 2 and "Traceback" not in result.stderr, result.stderr
    assert (Path(folder) / "report.txt").read_text().strip() == result.stdout.split("\nwritten to ")[0].strip()
    again = run_main("--advise", "--from", Path(folder) / "advice.json")
    assert again.returncode == advice["exit_code"], again.stderr


def test_advice_from_results_of_one_mode_is_refused_with_the_command_that_compares(tmp_path):
    given = forged_results(tmp_path, lambda d: d.update(runs=[run for run in d["runs"] if run["mode"] == "amp-bf16"]))
    refused(run_main("--advise", "--from", given, "--advice-dir", tmp_path / "out"),
            "these results time one mode, amp-bf16, so they compare nothing", "--modes fp32,")
    assert not (tmp_path / "out").exists()


def test_advice_dir_inside_the_image_folder_is_refused_before_anything_is_made(tmp_path):
    tree = image_tree(tmp_path / "tree", per_class=4)
    before = files_under(tree)
    result = run_main("--advise", "--model-factory", "hostile_models:tiny", "--data", "imagefolder", "--data-dir",
                      tree, *ADVISE, "--budget", "1", "--advice-dir", tree / "advice")
    refused(result, "--advice-dir", "is in the image folder")
    assert files_under(tree) == before


# factory: --model-factory hostile_models:NAME (tests/campaigns/hostile_models.py)
FACTORY_REFUSED = {
    "factory-detached-output": ("Detached", "no gradient"),
    "factory-whole-number-output": ("WholeNumbers", "int64"),
    "factory-no-path-to-its-parameters": ("NoPathToParameters", "no gradient"),
    "factory-on-the-meta-device": ("on_the_meta_device", "meta device"),
    "factory-calls-sys-exit": ("exits", "SystemExit"),
    "factory-one-row-for-two-images": ("OneRow", "shape [1, 10]"),
    "factory-three-dims": ("ThreeDims", "shape [2, 1, 10]"),
    "factory-flat-output": ("Flat", "shape [20]"),
    "factory-only-buffers": ("OnlyBuffers", "no parameters to train"),
    "factory-returns-the-class": ("returns_the_class", "returned a type"),
    "factory-returns-nothing": ("returns_nothing", "returned a NoneType"),
    "factory-recurses": ("recurses", "RecursionError"),
    "factory-out-of-memory": ("out_of_memory", "MemoryError"),
    "factory-asks-for-4-tib": ("too_large", "allocate"),
}


@pytest.mark.parametrize("case", FACTORY_REFUSED)
def test_a_factory_whose_model_cannot_train_is_refused_before_the_first_step(case, tmp_path):
    name, phrase = FACTORY_REFUSED[case]
    refused(run_main("--model-factory", f"hostile_models:{name}", "--data", "synthetic", *OWN, "--check-flags"),
            f"hostile_models:{name}", phrase)


def own_run(tmp_path, name, *argv):
    return run_main("--model-factory", f"hostile_models:{name}", "--data", "synthetic", *OWN, "-n", "3", *argv)


def test_factory_a_model_raising_in_training_is_one_sentence_naming_its_line(tmp_path):
    result = own_run(tmp_path, "RaisesInTraining", "-n", "8", "--json", tmp_path / "r.json")
    refused(result, "hostile_models:RaisesInTraining", "ValueError: the fifth batch is not welcome",
            "hostile_models.py:")


def test_factory_a_model_raising_in_evaluation_is_one_sentence_naming_its_line(tmp_path):
    tree = image_tree(tmp_path / "tree", per_class=4)
    result = run_main("--model-factory", "hostile_models:RaisesInEvaluation", "--data", "imagefolder", "--data-dir",
                      tree, *OWN, "-n", "2")
    refused(result, "RuntimeError: evaluation is not implemented", "hostile_models.py:")


@pytest.mark.parametrize("case", ["factory-nan-output", "factory-inf-output"])
def test_a_model_whose_loss_is_not_finite_keeps_what_it_measured(case, tmp_path):
    result = own_run(tmp_path, "NaNOut" if "nan" in case else "InfOut", "--json", tmp_path / "r.json")
    assert result.returncode == 1 and "Traceback" not in result.stderr, result.stderr
    assert "the loss became nan at step 1" in result.stderr
    assert json.loads((tmp_path / "r.json").read_text())["runs"][0]["incomplete"]


FACTORY_TRAINS = {
    "factory-float64-logits": "DoubleOut",
    "factory-a-layer-it-never-uses": "UnusedLayer",
    "factory-prints-while-building": "talks",
    "factory-unicode-function-name": "ünïcode_näme",
    "factory-switches-off-gradients": "switches_off_gradients",
    "factory-leaves-float64-the-default": "sets_double_default",
}


@pytest.mark.parametrize("case", FACTORY_TRAINS)
def test_a_factory_that_builds_a_trainable_model_trains_whatever_else_it_does(case, tmp_path):
    result = own_run(tmp_path, FACTORY_TRAINS[case], "--json", tmp_path / "r.json")
    assert result.returncode == 0 and "Traceback" not in result.stderr, result.stderr
    (run,) = json.loads((tmp_path / "r.json").read_text())["runs"]
    assert run["completed_steps"] == 3 and run["final_loss"] is not None


def test_factory_changing_the_directory_leaves_relative_outputs_where_the_user_asked(tmp_path, monkeypatch):
    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.chdir(work)
    try:
        result = own_run(tmp_path, "changes_directory", "--json", "r.json")
        assert result.returncode == 0, result.stderr
        assert (work / "r.json").exists() and not (tmp_path / "r.json").exists()
    finally:
        (tmp_path / "r.json").unlink(missing_ok=True)


def test_factory_ignoring_stop_signals_still_stops_at_sigterm_keeping_its_results(tmp_path, monkeypatch):
    from utils.training import loop

    original, calls = loop.train_step, []

    def train_step(*args, **kwargs):
        calls.append(1)
        if len(calls) == 2:
            os.kill(os.getpid(), signal.SIGTERM)
        return original(*args, **kwargs)
    monkeypatch.setattr(loop, "train_step", train_step)
    with within(60):
        result = own_run(tmp_path, "ignores_stop_signals", "-n", "6", "--json", tmp_path / "r.json")
    assert result.returncode == 143, result.stderr
    assert json.loads((tmp_path / "r.json").read_text())["runs"][0]["completed_steps"] == 2


def test_factory_that_never_returns_after_a_signal_in_the_start_up_is_never_waited_for(tmp_path, monkeypatch):
    from utils import compat

    original = compat.check_versions

    def signalled(*args, **kwargs):  # as torch is imported: before the factory is called
        os.kill(os.getpid(), signal.SIGTERM)
        return original(*args, **kwargs)
    monkeypatch.setattr(compat, "check_versions", signalled)
    with within(30):
        result = own_run(tmp_path, "hangs", "--json", tmp_path / "r.json")
    assert result.returncode == 143 and not (tmp_path / "r.json").exists(), result.stderr
    assert result.stderr.strip().splitlines()[-1] == ("main.py: SIGTERM received before building the model of "
                                                     "--model-factory hostile_models:hangs: stopping now, before any "
                                                     "step was trained.")


def test_factory_a_module_of_the_folder_it_runs_in_under_the_checkout_is_not_taken_for_ampbenchs(monkeypatch):
    monkeypatch.chdir(ROOT / "tests" / "campaigns")
    result = run_main("--model-factory", "hostile_models:tiny", "--data", "synthetic", *OWN, "--check-flags")
    assert result.returncode == 0 and result.stderr == "", result.stderr


# images: --data imagefolder --data-dir TREE (conftest.image_tree's PNGs, then changed by each case)
def save(path, mode, size, **options):
    from PIL import Image

    Image.new(mode, size).save(path, **options)


def animated(path):
    from PIL import Image

    frames = [Image.new("RGB", (20, 20), (40 * index, 0, 0)) for index in range(5)]
    frames[0].save(path, save_all=True, append_images=frames[1:])


def renamed(tree, old, new):
    os.rename(tree / old, tree / new)


def truncated(path):
    path.write_bytes(path.read_bytes()[:len(path.read_bytes()) // 2])


TREES_THAT_TRAIN = {
    "images-one-pixel": lambda tree: save(tree / "cat" / "dot.png", "RGB", (1, 1)),
    "images-a-2x3000-strip": lambda tree: save(tree / "cat" / "strip.png", "RGB", (3000, 2)),
    "images-16-bit-grey": lambda tree: save(tree / "cat" / "deep.png", "I;16", (20, 20)),
    "images-cmyk-jpeg": lambda tree: save(tree / "cat" / "print.jpg", "CMYK", (20, 20)),
    "images-rgba-png": lambda tree: save(tree / "cat" / "alpha.png", "RGBA", (20, 20)),
    "images-palette-gif": lambda tree: save(tree / "cat" / "palette.gif", "P", (20, 20)),
    "images-animated-gif": lambda tree: animated(tree / "cat" / "moving.gif"),
    "images-upper-case-extension": lambda tree: renamed(tree, "cat/0.png", "cat/0.PNG"),
    "images-unicode-and-spaces": lambda tree: (renamed(tree, "cat", "chat é 猫"), renamed(tree, "dog/0.png",
                                                                                           "dog/ü n i.png")),
    "images-a-class-with-a-newline": lambda tree: renamed(tree, "cat", "ca\nt"),
    "images-a-hidden-folder": lambda tree: (tree / ".ipynb_checkpoints").mkdir(),
    "images-a-folder-named-like-an-image": lambda tree: (tree / "cat" / "zz.png").mkdir(),
    "images-a-file-named-train": lambda tree: (tree / "train").write_text("notes"),
    "images-a-symlinked-class-folder-inside-itself": lambda tree: (tree / "cat" / "again").symlink_to(tree / "cat"),
}


@pytest.mark.parametrize("case", TREES_THAT_TRAIN)
def test_an_image_folder_of_awkward_but_readable_files_trains_each_image_once(case, tmp_path):
    tree = image_tree(tmp_path / "tree", per_class=4)
    TREES_THAT_TRAIN[case](tree)
    from torchvision.datasets.folder import IMG_EXTENSIONS

    listed = [path for path in tree.rglob("*") if path.is_file() and path.name.lower().endswith(IMG_EXTENSIONS)]
    with within(60):
        result = run_main("--data", "imagefolder", "--data-dir", tree, "--model-factory", "hostile_models:tiny",
                          *OWN, "-n", "2", "--json", tmp_path / "r.json")
    assert result.returncode == 0 and "Traceback" not in result.stderr, result.stderr
    data = json.loads((tmp_path / "r.json").read_text())["data"]
    assert data["train_images"] + data["test_images"] == len({path.resolve() for path in listed})


def split(tree, empty_classes):
    """TREE/train/CLASS beside a TREE/val of empty class folders `empty_classes`."""
    (tree / "train").mkdir()
    for name in ("cat", "dog", "eel"):
        renamed(tree, name, f"train/{name}")
    (tree / "val").mkdir()
    for name in empty_classes:
        (tree / "val" / name).mkdir()


TREES_REFUSED = {
    "images-a-truncated-png": (lambda tree: truncated(tree / "dog" / "1.png"), "1.png cannot be read as an image"),
    "images-text-named-png": (lambda tree: (tree / "cat" / "notes.png").write_text("hi"), "notes.png cannot be read"),
    "images-a-dangling-link": (lambda tree: (tree / "cat" / "gone.png").symlink_to(tree / "nowhere.png"),
                               "gone.png cannot be read"),
    "images-a-fifo-named-png": (lambda tree: os.mkfifo(tree / "cat" / "pipe.png"), "pipe.png cannot be read"),
    "images-a-link-to-a-device": (lambda tree: (tree / "cat" / "zero.png").symlink_to("/dev/zero"),
                                  "zero.png cannot be read"),
    "images-an-empty-class": (lambda tree: (tree / "fox").mkdir(), "fox holds no images"),
    "images-one-class": (lambda tree: [shutil.rmtree(tree / name) for name in ("dog", "eel")], "only the class folder"),
    "images-train-beside-an-empty-val": (lambda tree: split(tree, []), "val holds no class folder"),
    "images-val-with-an-empty-class": (lambda tree: split(tree, ["dog"]), "dog holds no images"),
}


@pytest.mark.parametrize("case", TREES_REFUSED)
def test_an_image_folder_with_a_file_that_is_no_image_is_refused_in_one_sentence(case, tmp_path):
    tree = image_tree(tmp_path / "tree", per_class=4)
    make, phrase = TREES_REFUSED[case]
    make(tree)
    with within(30):
        result = run_main("--data", "imagefolder", "--data-dir", tree, "--model-factory", "hostile_models:tiny",
                          *OWN, "-n", "2", "--json", tmp_path / "r.json")
    refused(result, phrase)
    assert not (tmp_path / "r.json").exists()


@pytest.mark.parametrize("case, argv, phrase", [
    ("images-data-dir-empty", ["--data-dir", ""], "--data-dir  does not exist"),
    ("images-image-size-15", ["--image-size", "15"], "from 16 to 1024, got 15"),
    ("images-image-size-huge", ["--image-size", "100000"], "from 16 to 1024, got 100000"),
    ("images-image-size-nan", ["--image-size", "nan"], "got nan"),
    ("images-num-classes-fewer-than-folders", ["--num-classes", "2"], "holds 3 class folders"),
    ("images-num-classes-zero", ["--num-classes", "0"], "from 2 to"),
    ("images-num-classes-beyond-int32", ["--num-classes", str(2 ** 31)], "from 2 to"),
])
def test_image_folder_flags_out_of_range_are_refused(case, argv, phrase, tmp_path):
    tree = image_tree(tmp_path / "tree", per_class=2)
    given = ["--data", "imagefolder", "--data-dir", tree, "--model-factory", "hostile_models:tiny", *OWN, *argv]
    refused(run_main(*given, "--check-flags"), phrase)


def test_images_a_relative_and_a_symlinked_data_dir_read_the_same_tree(tmp_path, monkeypatch):
    tree = image_tree(tmp_path / "tree", per_class=4)
    (tmp_path / "link").symlink_to(tree)
    monkeypatch.chdir(tmp_path)
    prints = []
    for given in ("tree", tmp_path / "link"):
        result = run_main("--data", "imagefolder", "--data-dir", given, "--model-factory", "hostile_models:tiny",
                          *OWN, "-n", "2", "--json", tmp_path / "r.json")
        assert result.returncode == 0, result.stderr
        prints.append(json.loads((tmp_path / "r.json").read_text())["data"]["fingerprint"])
    assert prints[0] == prints[1]


def test_images_a_stop_signal_while_decoding_ends_the_decoding_at_once(tmp_path, monkeypatch):
    from utils.data import inmemory

    tree = image_tree(tmp_path / "tree", per_class=30)
    original, decoded = inmemory.Decoded.__getitem__, []

    def getitem(self, index):
        decoded.append(index)
        if len(decoded) == 3:
            os.kill(os.getpid(), signal.SIGINT)
        return original(self, index)
    monkeypatch.setattr(inmemory.Decoded, "__getitem__", getitem)
    result = run_main("--data", "imagefolder", "--data-dir", tree, "--model-factory", "hostile_models:tiny", *OWN,
                      "-n", "2", "--json", tmp_path / "r.json")
    assert result.returncode == 130 and "Traceback" not in result.stderr, result.stderr
    assert len(decoded) < 90 and not (tmp_path / "r.json").exists()
    assert result.stderr.strip().splitlines()[-1].startswith("main.py: SIGINT received while decoding")


# plan: gpu_suite.py --plan --budget N over a results root holding a copy of the H200's folder
def suite(*args):
    """`python benchmarks/gpu_suite.py ARGS` in this process: (exit status, stdout, stderr)."""
    saved_argv = sys.argv
    sys.argv = ["gpu_suite.py", *map(str, args)]
    out, err = io.StringIO(), io.StringIO()
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            status = console.run("gpu_suite.py", gpu_suite.main)
    finally:
        sys.argv = saved_argv
    return status, out.getvalue(), err.getvalue()


def results_root(tmp_path, files=None, record=None):
    """A results root of one device folder, the H200's, with `files` (name: text, or a function of
    the path) written over its own and `record` changing its suite.json."""
    folder = tmp_path / "results" / "NVIDIA-H200" / "2026-11-26"
    shutil.copytree(H200, folder)
    for name, content in (files or {}).items():
        target = folder / name
        target.unlink(missing_ok=True)
        content(target) if callable(content) else target.write_text(content)
    if record:
        found = json.loads((folder / "suite.json").read_text())
        record(found)
        (folder / "suite.json").write_text(json.dumps(found))
    return tmp_path / "results"


def headline_with(edit):
    return json.dumps(forged_document(edit))


def suite_refused(found, *phrases):
    status, out, err = found
    closing = (err.strip().splitlines() or [""])[-1]
    assert status == 2 and closing.startswith("gpu_suite.py: error: ") and "Traceback" not in err, err
    assert all(phrase in closing for phrase in phrases), err


@pytest.mark.parametrize("budget", ["0", "-1", "nan", "inf", "1e400", "", "0x10"])
def test_plan_a_budget_that_is_no_positive_number_of_minutes_is_refused(budget, tmp_path):
    suite_refused(suite("--plan", "--budget", budget, "--results-root", results_root(tmp_path)),
                  "argument --budget: takes a positive number of minutes")


@pytest.mark.parametrize("case", ["plan-root-missing", "plan-root-a-fifo", "plan-root-a-file"])
def test_plan_a_results_root_with_no_device_folder_is_refused(case, tmp_path):
    root = {"plan-root-missing": tmp_path / "missing", "plan-root-a-file": HEADLINE,
            "plan-root-a-fifo": tmp_path / "fifo"}[case]
    if case == "plan-root-a-fifo":
        os.mkfifo(root)
    with within(30):
        suite_refused(suite("--plan", "--budget", "5", "--results-root", root), "holds no device's results")


PLANNED_DESPITE = {
    "plan-step-file-repeats-as-text": {"headline-resnet18.json": headline_with(
        lambda d: d["config"].update(repeats="3"))},
    "plan-step-file-runs-as-text": {"headline-resnet18.json": headline_with(lambda d: d.update(runs="x"))},
    "plan-step-file-without-config": {"headline-resnet18.json": headline_with(lambda d: d.pop("config"))},
    "plan-step-file-a-fifo": {"headline-resnet18.json": os.mkfifo},
    "plan-step-file-a-list": {"headline-resnet18.json": "[1, 2]"},
}


@pytest.mark.parametrize("case", PLANNED_DESPITE)
def test_plan_a_forged_step_file_is_left_out_with_one_warning_and_the_step_is_due(case, tmp_path):
    root = results_root(tmp_path, PLANNED_DESPITE[case])
    with within(120):
        status, out, err = suite("--plan", "--budget", "1e9", "--results-root", root)
    warning = f"gpu_suite.py: warning: {root / 'NVIDIA-H200' / '2026-11-26' / 'headline-resnet18.json'}: "
    assert status == 0 and err.startswith(warning) and err.count("\n") == 1, err
    assert "headline-resnet18: about " in out and "; due: " in out.split("headline-resnet18: about ")[1]


def test_plan_a_step_time_too_small_to_be_true_plans_no_more_steps_than_main_py_takes(tmp_path):
    def tiny(document):
        for run in document["runs"]:
            run["step_time_ms"] = dict.fromkeys(run["step_time_ms"], 1e-300)
    root = results_root(tmp_path, {"headline-resnet18.json": headline_with(tiny)})
    status, out, err = suite("--plan", "--budget", "30", "--results-root", root)
    assert status == 0 and err == "", err
    line = out.split("headline-resnet18: about ")[1].split("\n")[0]
    steps = [int(found) for found in re.findall(r"(\d+) steps of", line)]
    assert len(steps) == 4 and max(steps) <= 2 ** 31 - 1, line


# labels: the commit a row of README names (history.code_that_ran), from forged files
def rendered_row(tmp_path, files=None, record=None):
    """(exit status, stderr, the run page's resnet18 headline row, README and the page) of --render on a
    forged H200 folder."""
    root = results_root(tmp_path, files, record)
    readme = tmp_path / "README.md"
    readme.write_text("# x\n\n## Results\n")
    status, out, err = suite("--render", root / "NVIDIA-H200" / "2026-11-26", "--readme", readme)
    page = root / "NVIDIA-H200" / "2026-11-26" / "README.md"
    text = readme.read_text() + (page.read_text() if status == 0 else "")
    rows = [line for line in text.splitlines() if line.startswith("| resnet18 | synthetic | 256 |")]
    return status, err, rows[0] if rows else "", text


def columns(row):
    """A Markdown table row's cells (a `\\|` inside a cell does not split it)."""
    return row.replace("\\|", "\0").split("|")[1:-1]


LABELS = {
    "labels-git-commit-with-a-pipe": (lambda d: d["env"].update(git_commit="e4b76bf9|d53c"), None),
    "labels-git-commit-with-a-newline": (lambda d: d["env"].update(git_commit="9412504d\n| a | forged | row |"),
                                         None),
    "labels-git-commit-with-backticks": (lambda d: d["env"].update(git_commit="`rm -rf`"), None),
    "labels-pass-commit-with-a-pipe": (None, lambda r: [entry.update(commit="bd15|ebfd") for entry in r["passes"]]),
    "labels-suite-commit-with-a-newline": (None, lambda r: r.update(commit="bd15ebfd\n# heading")),
    "labels-digest-not-hex": (lambda d: d["env"].update(source_sha256="zz"), None),
    "labels-digest-of-another-tree": (lambda d: d["env"].update(source_sha256="ab" * 32), None),
    "labels-a-commit-git-does-not-have": (lambda d: d["env"].update(git_commit="0" * 40, source_sha256="ab" * 32),
                                          None),
    "labels-describe-of-a-tag": (lambda d: d["env"].update(git_commit="v1.2-3-g9412504d8443-dirty"), None),
}


@pytest.mark.parametrize("case", LABELS)
def test_a_forged_commit_or_digest_is_labelled_claimed_and_never_breaks_the_row(case, tmp_path):
    edit, record = LABELS[case]
    files = {"headline-resnet18.json": headline_with(edit)} if edit else None
    status, err, row, text = rendered_row(tmp_path, files, record)
    assert status == 0 and "Traceback" not in err, err
    cells = columns(row)
    assert len(cells) == 16 and " claimed (" in cells[-1], row
    assert "`rm" not in text and "\n# heading" not in text and "| a | forged" not in text


def test_labels_a_step_file_with_an_empty_commit_is_refused_naming_it(tmp_path):
    found = rendered_row(tmp_path, {"headline-resnet18.json": headline_with(lambda d: d["env"].update(git_commit=""))})
    assert found[0] == 2 and "records no commit (env.git_commit)" in found[1], found[1]


@pytest.mark.parametrize("case, key, value", [("labels-git-commit-a-number", "git_commit", 7),
                                              ("labels-digest-a-number", "source_sha256", 5)])
def test_a_step_file_whose_commit_or_digest_is_no_text_is_left_out_with_one_warning(case, key, value, tmp_path):
    status, err, row, text = rendered_row(tmp_path, {"headline-resnet18.json": headline_with(
        lambda d: d["env"].update({key: value}))})
    assert status == 0 and row == "" and "| resnet50 | synthetic | 256 |" in text, err
    assert err.startswith("gpu_suite.py: warning: ") and f"headline-resnet18.json: env.{key} is {value}" in err


@pytest.mark.parametrize("case, record", [
    ("labels-pass-started-utc-a-number", lambda r: [entry.update(started_utc=5) for entry in r["passes"]]),
    ("labels-device-with-a-newline", lambda r: r.update(device="NVIDIA H200\n# injected")),
])
def test_a_suite_json_whose_labels_cannot_be_shown_is_refused_for_render(case, record, tmp_path):
    status, err, _, _ = rendered_row(tmp_path, record=record)
    assert status == 2 and err.startswith("gpu_suite.py: error: --render ") and "Traceback" not in err, err
    assert err.count("\n") == 1


def source_tree(tmp_path):
    """A copy of the checkout's source files, as provenance digests them."""
    copy_root = tmp_path / "tree"
    for path, content in provenance.source_files(str(ROOT)):
        (copy_root / path).parent.mkdir(parents=True, exist_ok=True)
        (copy_root / path).write_bytes(content)
    return copy_root


@pytest.mark.parametrize("case", ["labels-digest-beside-a-fifo", "labels-digest-beside-a-dangling-link",
                                  "labels-digest-beside-a-folder-named-py", "labels-digest-beside-an-editors-copy"])
def test_the_source_digest_is_of_the_files_git_would_hold_whatever_else_lies_there(case, tmp_path):
    tree = source_tree(tmp_path)
    digest = provenance.source_digest(str(tree))
    extra = tree / "utils" / "extra.py"
    if case == "labels-digest-beside-a-fifo":
        os.mkfifo(extra)
    elif case == "labels-digest-beside-a-dangling-link":
        extra.symlink_to(tree / "missing.py")
    elif case == "labels-digest-beside-a-folder-named-py":
        extra.mkdir()
    else:
        (tree / "utils" / ".config.py.swp").write_text("editor state")
    with within(30):
        assert provenance.source_digest(str(tree)) == digest


@pytest.mark.parametrize("value", ["main", "E4B76BF9", "e4b76b", "", "x" * 41])
def test_labels_a_variable_that_is_no_commit_is_not_recorded_as_one(value, monkeypatch):
    monkeypatch.setenv(provenance.COMMIT_VARIABLE, value)
    commit, where = provenance.commit()
    assert where == provenance.GIT_DESCRIBE and commit != value


# blocks: the gpu-figures blocks docs/ pages carry, rendered from a results root of forged files
def ran_steps(*names):
    return lambda record: record["steps_run"].extend({"name": name, "rc": 0, "elapsed_s": 1.0} for name in names)


PLAIN = json.loads((H200 / "plain-1.json").read_text())
BLOCKS = {
    "blocks-loaders-log-empty": ("loaders", {"loaders.log": ""}, ran_steps("loaders")),
    "blocks-loaders-log-garbled": ("loaders", {"loaders.log": "torchvision DataLoader: many\ndevice loader: x\n"},
                                   ran_steps("loaders")),
    "blocks-loaders-log-missing": ("loaders", {}, ran_steps("loaders")),
    "blocks-resume-weights-without-a-comparison": (
        "resume", {"resume-weights.json": json.dumps({"resumed_vs_uninterrupted": {"bitwise_equal": True}}),
                   "resume.json": json.dumps(PLAIN)}, ran_steps("resume-resumed", "resume")),
    "blocks-resume-weights-a-list": ("resume", {"resume-weights.json": "[1]", "resume.json": json.dumps(PLAIN)},
                                     ran_steps("resume-resumed", "resume")),
    "blocks-sweep-without-rows": ("fp8-sweeps", {"transformers-sweep.json": json.dumps({"rows": []})},
                                  ran_steps("transformers-sweep")),
    "blocks-sweep-rows-as-text": ("fp8-sweeps", {"transformers-sweep.json": json.dumps({"rows": "x"})},
                                  ran_steps("transformers-sweep")),
    "blocks-results-without-env": ("gpu-torch", {"plain-1.json": json.dumps({"schema": PLAIN["schema"], "runs": []})},
                                   None),
    "blocks-env-as-text": ("multi-gpu", {"plain-1.json": json.dumps(dict(PLAIN, env="x"))}, None),
    "blocks-world-size-as-text": ("multi-gpu", {"plain-1.json": json.dumps(dict(PLAIN, env=dict(PLAIN["env"],
                                                                                               world_size="2")))},
                                  None),
    "blocks-profile-without-categories": ("busy-beside-profile", {"plain-1.json": json.dumps(dict(PLAIN, runs=[dict(
        PLAIN["runs"][0], profile={"idle_ms": 1.0, "wall_ms": 2.0})]))}, None),
}


@pytest.mark.parametrize("case", BLOCKS)
def test_a_damaged_file_costs_a_docs_block_only_its_own_figures_with_one_warning(case, tmp_path, capsys):
    name, files, record = BLOCKS[case]
    root = results_root(tmp_path, files, record)
    page = tmp_path / "page.md"
    page.write_text(f"before\n{docblocks.BEGIN.format(name=name)}\nold\n{docblocks.END}\nafter\n")
    docblocks.render_pages(root, [page])
    text, err = page.read_text(), capsys.readouterr().err
    assert text.startswith(f"before\n{docblocks.BEGIN.format(name=name)}\n") and text.endswith(
        f"{docblocks.END}\nafter\n") and "\nold\n" not in text, text
    damaged = [file for file in files if file != "resume.json"]
    assert all(f"gpu_suite.py: warning: {root / 'NVIDIA-H200' / '2026-11-26' / file}" in err for file in damaged) \
        or not damaged, err


@pytest.mark.parametrize("case, text, phrase", [
    ("blocks-unknown-name", f"{docblocks.BEGIN.format(name='nonsense')}\nold\n{docblocks.END}\n", "'nonsense'"),
])
def test_a_block_of_a_name_nobody_renders_is_refused_naming_it(case, text, phrase, tmp_path):
    from utils.errors import UserError

    page = tmp_path / "page.md"
    page.write_text(text)
    with pytest.raises(UserError, match=phrase):
        docblocks.render_pages(results_root(tmp_path), [page])
    assert page.read_text() == text


@pytest.mark.parametrize("case", ["blocks-unterminated-block-is-left-alone", "blocks-page-without-blocks"])
def test_a_page_without_a_whole_block_is_left_as_it_is(case, tmp_path):
    page = tmp_path / "page.md"
    text = f"{docblocks.BEGIN.format(name='gpu-torch')}\nold\n" if "unterminated" in case else "plain text\n"
    page.write_text(text)
    docblocks.render_pages(results_root(tmp_path), [page])
    assert page.read_text() == text


README_SECTION = "# ampbench\n\n## Results\n\nafter\n"


@pytest.mark.parametrize("case", ["blocks-readme-a-fifo", "blocks-readme-a-dangling-link", "blocks-readme-crlf",
                                  "blocks-readme-through-a-link"])
def test_readmes_generated_section_goes_into_a_readme_or_is_refused_changing_nothing(case, tmp_path):
    root = results_root(tmp_path)
    readme, target = tmp_path / "README.md", tmp_path / "real.md"
    if case == "blocks-readme-a-fifo":
        os.mkfifo(readme)
    elif case == "blocks-readme-a-dangling-link":
        readme.symlink_to(tmp_path / "gone.md")
    elif case == "blocks-readme-crlf":
        readme.write_bytes(README_SECTION.replace("\n", "\r\n").encode())
    else:
        target.write_text(README_SECTION)
        readme.symlink_to(target)
    with within(30):
        status, out, err = suite("--render", root / "NVIDIA-H200" / "2026-11-26", "--readme", readme)
    if case in ("blocks-readme-a-fifo", "blocks-readme-a-dangling-link"):
        suite_refused((status, out, err), "--readme")
        return
    assert status == 0, err
    written = (target if readme.is_symlink() else readme).read_bytes().decode()
    assert written.count("<!-- gpu-suite:begin") == 1 and "| resnet18 | 32 |" in written
    assert readme.is_symlink() == (case == "blocks-readme-through-a-link")


# busy: the meter's share over made-up utilization samples (conftest.fake_nvml), stamped by a fake clock
BUS = "00000000:3B:00.0"
BASE = 1_000.0  # the fake clock at the case's second 0


def busy_figure(install_nvml, samples_in_span, opened=1.0, closed=4.0, before=()):
    """gpu_busy and its reason over one span from `opened` to `closed` (the case's seconds) while the
    driver buffers `before` (seconds, percent) before it and `samples_in_span` during it."""
    clock = [BASE]
    buffered = []
    install_nvml(FakeGpu(0, BUS, energy=lambda: 1000, utilization=lambda: list(buffered)))
    meter = nvml_meter.open_meter(0, BUS, clock=lambda: clock[0], interval_s=3600.0, wall=lambda: clock[0])
    buffered += [(int(round((BASE + at) * 1e6)), busy) for at, busy in before]
    clock[0] = BASE + opened
    meter.start()
    buffered += [(int(round((BASE + at) * 1e6)), busy) for at, busy in samples_in_span]
    clock[0] = BASE + closed
    found = meter.finish(8)
    return found["gpu_busy"], found["gpu_busy_unavailable"]


def every(start, count, period, busy):
    return [(start + period * (index + 1), busy(index) if callable(busy) else busy) for index in range(count)]


def test_busy_a_sample_beyond_100_percent_gives_no_share_and_says_why(install_nvml):
    busy, why = busy_figure(install_nvml, every(1.0, 12, 0.25, lambda index: 255 if index == 5 else 50))
    assert busy is None and "255" in why


def test_busy_the_minimum_of_samples_exactly_filling_the_span_gives_the_share(install_nvml):
    count = nvml_meter.MIN_BUSY_SAMPLES
    busy, why = busy_figure(install_nvml, every(1.0, count, 0.25, 40), closed=1.0 + 0.25 * count,
                            before=every(0.0, 4, 0.25, 100))
    assert why is None and (busy["samples"], busy["share"]) == (count, pytest.approx(0.4))


def test_busy_one_sample_short_of_the_minimum_says_the_count(install_nvml):
    count = nvml_meter.MIN_BUSY_SAMPLES - 1
    busy, why = busy_figure(install_nvml, every(1.0, count, 0.25, 40), closed=1.0 + 0.25 * count + 0.1,
                            before=every(0.0, 4, 0.25, 100))
    assert busy is None and nvml_meter.too_few_count(why) == count


def test_busy_a_clock_stepped_back_mid_run_counts_no_sample_twice_and_none_outside(install_nvml):
    stepped = every(1.0, 6, 0.25, 50) + every(-29.0, 8, 0.25, 90)  # the host's clock set back 30 s
    busy, why = busy_figure(install_nvml, stepped, closed=4.0)
    assert busy is None and nvml_meter.too_few_count(why) == 6


def test_busy_samples_of_a_clock_half_a_minute_ahead_lie_outside_the_span(install_nvml):
    busy, why = busy_figure(install_nvml, every(31.0, 12, 0.25, 50))
    assert busy is None and nvml_meter.too_few_count(why) == 0


# standin: tests/cifar10_standin.py, as conftest builds it and as its command writes it
def test_standin_two_builds_are_the_same_bytes_and_each_is_removed_alone():
    first, second = cifar10_standin.build(), cifar10_standin.build()
    try:
        assert first != second
        assert all((first / name).read_bytes() == (second / name).read_bytes()
                   for name in [*dict(cifar10_standin.BATCHES), "batches.meta"])
    finally:
        cifar10_standin.remove(first)
    assert not first.parent.exists() and second.exists()
    cifar10_standin.remove(second)
    cifar10_standin.remove(second)  # twice: nothing left to remove, nothing raised


def test_standin_remove_leaves_a_folder_it_did_not_build(tmp_path):
    folder = tmp_path / cifar10_standin.FOLDER
    folder.mkdir()
    (folder / "data_batch_1").write_text("a user's")
    cifar10_standin.remove(folder)
    assert (folder / "data_batch_1").read_text() == "a user's"


def test_standin_the_readers_take_it_as_cifar10_with_its_classes_in_every_batch(subset):
    from utils.data import cifar10

    folder = cifar10_standin.build()
    try:
        for name, count in cifar10_standin.BATCHES:
            images, labels = cifar10.read_batch(str(folder / name))
            assert tuple(images.shape) == (count, 3, 32, 32) and set(labels.tolist()) == set(range(10))
    finally:
        cifar10_standin.remove(folder)


def test_standin_its_command_never_writes_over_cifar10_files_already_there(tmp_path):
    import subprocess

    folder = tmp_path / cifar10_standin.FOLDER
    folder.mkdir()
    (folder / "data_batch_1").write_bytes(b"the genuine batch")
    result = subprocess.run([sys.executable, str(ROOT / "tests" / "cifar10_standin.py"), str(tmp_path)],
                            capture_output=True, text=True, timeout=120)
    assert result.returncode != 0 and "Traceback" not in result.stderr, result.stderr
    assert "data_batch_1" in result.stderr and (folder / "data_batch_1").read_bytes() == b"the genuine batch"
    assert sorted(path.name for path in folder.iterdir()) == ["data_batch_1"]


# session: --advise's phases under tests/unit/advice's made-up clock, preflight and runner
def advice_session():
    """tests/unit/advice/test_session.py's made-up clock, preflight, runner and config."""
    from tests.unit.advice import test_session

    return test_session


def signalling(action, number):
    """`action` (a preflight or runner) that sends `number` to this process as it ends."""
    def sends(*args):
        found = action(*args)
        os.kill(os.getpid(), number)
        return found
    return sends


@pytest.mark.parametrize("case, number", [("session-sigint-in-the-preflight", signal.SIGINT),
                                          ("session-sigterm-in-the-preflight", signal.SIGTERM)])
def test_a_signal_in_the_preflight_runs_no_phase_and_says_nothing_was_measured(case, number, tmp_path, capsys):
    from utils.stop import StopRequest

    fakes = advice_session()
    clock = fakes.FakeClock()
    runner = fakes.FakeRunner(clock, 1.0)
    with StopRequest() as stop:
        code = fakes.advise(fakes.config_of(tmp_path, 10.0), stop, clock, runner,
                                    signalling(fakes.fake_preflight(clock), number))
    assert code == 128 + number and runner.ran == []
    assert f"{signal.Signals(number).name} arrived before the comparison ran" in capsys.readouterr().out
    assert not (tmp_path / "advice" / "advice.json").exists()


@pytest.mark.parametrize("case, after", [("session-signal-between-compare-and-the-levers", 1),
                                         ("session-signal-between-two-levers", 2),
                                         ("session-signal-as-the-accuracy-check-ends", 5)])
def test_a_signal_between_phases_starts_no_other_and_the_advice_says_so(case, after, tmp_path):
    from utils.advice import document
    from utils.stop import StopRequest

    fakes = advice_session()
    clock = fakes.FakeClock()
    runner = fakes.FakeRunner(clock, 0.5)
    calls = []

    def counting(*args):
        calls.append(1)
        found = runner(*args)
        if len(calls) == after:
            os.kill(os.getpid(), signal.SIGINT)
        return found
    with StopRequest() as stop:
        code = fakes.advise(fakes.config_of(tmp_path, 60.0), stop, clock, counting,
                                    fakes.fake_preflight(clock))
    advice = document.load(str(tmp_path / "advice" / "advice.json"))
    assert code == 130 and len(runner.ran) == after
    stopped = [name for name, entry in advice["not_run"].items() if entry["why"] == "stopped by SIGINT"]
    assert len(stopped) == len(advice["plan"]) - after or after == 5


def test_session_a_preflight_that_never_returns_ends_at_the_budget(tmp_path):
    from utils.errors import UserError
    from utils.stop import StopRequest

    fakes = advice_session()

    def never(config):
        while True:
            time.sleep(0.05)
    started = time.monotonic()
    with within(60), StopRequest() as stop, pytest.raises(UserError, match="--budget 0.02 ran out before the "):
        fakes.advise(fakes.config_of(tmp_path, 0.02), stop, time.monotonic, fakes.FakeRunner(
            fakes.FakeClock(), 1.0), never)
    assert time.monotonic() - started < 0.02 * 60 + 5


def test_session_a_comparison_whose_process_wrote_nothing_is_one_sentence(tmp_path):
    from utils.errors import UserError
    from utils.stop import StopRequest

    fakes = advice_session()
    clock = fakes.FakeClock()

    def killed(phase, argv, deadline):
        return fakes.session.Outcome(None, -9, "main.py: SIGTERM received: finishing the current step, then saving.",
                                     1.0)
    with StopRequest() as stop, pytest.raises(UserError, match="the comparison's run failed"):
        fakes.advise(fakes.config_of(tmp_path, 10.0), stop, clock, killed, fakes.fake_preflight(clock))
