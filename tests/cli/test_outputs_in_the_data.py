"""No output writes into the CIFAR-10 folder: every output, a file or a folder, is refused
before training when it lies in cifar-10-batches-py at any depth, whether --data-dir names that
folder or the one holding it, and whatever symlink leads there."""
import os

import pytest

from conftest import assert_user_error, run_main

TINY = ["--data", "synthetic", "-n", "3", "--warmup", "1", "--model", "squeezenet1_1", "-b", "4", "--no-progress"]
FILES = [("--json", "r.json"), ("--csv", "r.csv"), ("--plot", "r.png"), ("--checkpoint", "c.pt"),
         ("--jsonl", "r.jsonl")]


def batches(tmp_path):
    folder = tmp_path / "data" / "cifar-10-batches-py"
    folder.mkdir(parents=True, exist_ok=True)
    return folder


def linked(tmp_path, target):
    os.symlink(target, tmp_path / "link")
    return tmp_path / "link"


# (the --data-dir given, the folder an output is written in)
WHERE = [
    pytest.param(lambda t: batches(t), lambda t: t / "data" / "cifar-10-batches-py", id="the-batches-folder"),
    pytest.param(lambda t: batches(t).parent, lambda t: t / "data" / "cifar-10-batches-py",
                 id="the-batches-folder-of-the-data-dir"),
    pytest.param(lambda t: batches(t), lambda t: t / "data" / "cifar-10-batches-py" / "runs" / "today",
                 id="a-folder-inside-it"),
    pytest.param(lambda t: linked(t, batches(t).parent), lambda t: t / "data" / "cifar-10-batches-py",
                 id="a-data-dir-through-a-link"),
    pytest.param(lambda t: batches(t), lambda t: linked(t, batches(t)), id="an-output-through-a-link"),
]


@pytest.mark.parametrize("flag", ["--tensorboard", "--trace-dir"])
@pytest.mark.parametrize("data_dir, folder", WHERE)
def test_an_output_folder_in_the_cifar10_folder_is_refused_before_training(flag, data_dir, folder, tmp_path):
    data_dir, folder = data_dir(tmp_path), folder(tmp_path)
    result = run_main(*TINY, "--data-dir", data_dir, flag, folder)
    assert_user_error(result, f"main.py: error: {flag} {folder} is in the CIFAR-10 folder; write results elsewhere.")
    assert list((tmp_path / "data" / "cifar-10-batches-py").iterdir()) == []


@pytest.mark.parametrize("flag, name", FILES)
def test_an_output_file_in_a_folder_inside_the_cifar10_folder_is_refused_before_training(flag, name, tmp_path):
    path = batches(tmp_path) / "runs" / name
    result = run_main(*TINY, "--data-dir", tmp_path / "data", flag, path)
    assert_user_error(result, f"main.py: error: {flag} {path} is in the CIFAR-10 folder; write results elsewhere.")
    assert list((tmp_path / "data" / "cifar-10-batches-py").iterdir()) == []
