"""Your data at the size you train (--loader stream): an image folder read from disk per batch
through the whole CLI: a comparison, a resume that continues exactly, --check-flags and the
refusals. Runs go through main.main in this process, as `python main.py` does."""
import json

from conftest import assert_user_error, image_tree, read_results, run_main

FAST = ["--image-size", "16", "-b", "8", "--warmup", "2", "--no-progress", "--workers", "1",
        "--model-factory", "user_models:TinyNet"]


def streamed(tree, *argv):
    return run_main("--data", "imagefolder", "--data-dir", tree, "--loader", "stream", *FAST, *argv)


def test_a_streamed_folder_through_a_comparison(tmp_path):
    tree = image_tree(tmp_path / "tree", per_class=8, split="train", size=(40, 30))
    image_tree(tree, per_class=2, split="val")
    result = streamed(tree, "-n", "5", "--modes", "fp32,amp-bf16", "--json", tmp_path / "r.json")
    assert result.returncode == 0, result.stderr
    document = read_results(tmp_path / "r.json")
    data, runs = document["data"], document["runs"]
    assert document["config"]["loader"] == "stream" and {run["loader"] for run in runs} == {"stream"}
    assert (data["train_images"], data["test_images"], data["workers"]) == (24, 6, 1)
    assert data["augmentation"] == "RandomResizedCrop(16, scale=(0.08, 1), ratio=(3/4, 4/3)), RandomHorizontalFlip()"
    assert data["resize"] == "Resize(18), CenterCrop(16)" and data["normalized_by"] == "24 training images"
    assert all(run["test_accuracy"] is not None for run in runs)
    assert len({run["first_batch_sha256"] for run in runs}) == 1  # every mode trains on the same batches
    assert "streamed by 1 workers" in result.stdout


def test_a_streamed_run_resumes_where_it_stopped_with_the_batches_it_would_have_read(tmp_path):
    tree = image_tree(tmp_path / "tree", per_class=8, size=(40, 30))
    constant = ["--lr-schedule", "constant", "--lr-warmup-steps", "0"]  # the same lr at every step, however long
    whole = streamed(tree, *constant, "-n", "6", "--bf16", "--no-eval", "--json", tmp_path / "whole.json")
    assert whole.returncode == 0, whole.stderr
    checkpointed = [*constant, "--bf16", "--no-eval", "--checkpoint", tmp_path / "ck.pt"]
    assert streamed(tree, *checkpointed, "-n", "3").returncode == 0
    resumed = streamed(tree, *checkpointed, "-n", "6", "--resume", "--json", tmp_path / "resumed.json")
    assert resumed.returncode == 0, resumed.stderr
    (run,) = json.loads((tmp_path / "resumed.json").read_text())["runs"]
    (reference,) = json.loads((tmp_path / "whole.json").read_text())["runs"]
    assert (run["resumed_from_step"], run["completed_steps"]) == (3, 6)
    assert run["loss_curve"] == reference["loss_curve"]
    held = run_main("--data", "imagefolder", "--data-dir", tree, "--loader", "device", *FAST, *checkpointed, "-n", "8",
                    "--resume")
    assert_user_error(held, "holds a run with --loader stream, not device")


def test_streaming_is_refused_where_nothing_is_read_from_files_and_checked_where_it_is(tmp_path):
    assert_user_error(run_main("--data", "cifar10", "--loader", "stream", "--check-flags"),
                      "--loader stream reads an image folder's files from disk per batch, and --data cifar10 is "
                      "held in memory")
    tree = image_tree(tmp_path / "tree", per_class=2)
    checked = streamed(tree, "--check-flags")
    assert checked.returncode == 0 and checked.stderr == "", checked.stderr
