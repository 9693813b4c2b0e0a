"""Your data at the size you train (--loader stream): an image folder read from disk per batch
through the whole CLI: a comparison, a resume that continues exactly, --check-flags and the
refusals. Runs go through main.main in this process, as `python main.py` does."""
import contextlib
import io
import json

from conftest import assert_user_error, image_tree, read_results, run_main
from utils import report

# In the training process (--workers 0) but where a test is of the workers: starting them takes a second a run
FAST = ["--image-size", "16", "-b", "8", "--warmup", "2", "--no-progress", "--model-factory", "user_models:TinyNet"]


def streamed(tree, *argv, workers=0):
    return run_main("--data", "imagefolder", "--data-dir", tree, "--loader", "stream", *FAST, "--workers",
                    workers, *argv)


def test_a_streamed_folder_through_a_comparison(tmp_path):
    tree = image_tree(tmp_path / "tree", per_class=8, split="train", size=(40, 30))
    image_tree(tree, per_class=2, split="val")
    result = streamed(tree, "-n", "4", "--modes", "fp32,amp-bf16", "--json", tmp_path / "r.json", workers=1)
    assert result.returncode == 0, result.stderr
    document = read_results(tmp_path / "r.json")
    data, runs = document["data"], document["runs"]
    assert document["config"]["loader"] == "stream" and {run["loader"] for run in runs} == {"stream"}
    assert (data["train_images"], data["test_images"], data["workers"]) == (24, 6, 1)
    assert data["augmentation"] == "RandomResizedCrop(16, scale=(0.08, 1), ratio=(3/4, 4/3)), RandomHorizontalFlip()"
    assert data["resize"] == "Resize(18), CenterCrop(16)" and data["normalized_by"] == "24 training images"
    assert all(run["test_accuracy"] is not None for run in runs)
    assert len({run["first_batch_sha256"] for run in runs}) == 1  # every mode trains on the same batches
    assert "streamed by 1 worker," in result.stdout


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
                    "--workers", "0", "--resume")
    assert_user_error(held, "holds a run with --loader stream, not device")


def test_streaming_is_refused_where_nothing_is_read_from_files_and_checked_where_it_is(tmp_path):
    assert_user_error(run_main("--data", "cifar10", "--loader", "stream", "--check-flags"),
                      "--loader stream reads an image folder's files (or shards) per batch, and --data cifar10 is "
                      "held in memory")
    tree = image_tree(tmp_path / "tree", per_class=2)
    checked = streamed(tree, "--check-flags")
    assert checked.returncode == 0 and checked.stderr == "", checked.stderr


def not_an_image(path):
    """A file named and begun like a PNG that is none: read whole by the listing, refused by the decoder."""
    path.write_bytes(b"\x89PNG\r\n\x1a\n" + bytes(range(256)) * 2)
    return path


def test_a_file_met_mid_epoch_that_is_no_image_stops_the_run_keeping_what_it_trained(tmp_path):
    tree = image_tree(tmp_path / "tree", per_class=8, size=(40, 30))
    bad = not_an_image(tree / "dog" / "9.png")
    argv = ["-n", "20", "--bf16", "--no-eval", "--checkpoint", tmp_path / "ck.pt", "--json", tmp_path / "r.json"]
    stopped = streamed(tree, *argv)
    assert_user_error(stopped, f"main.py: error: --data imagefolder: {bad} cannot be read as an image "
                      "(UnidentifiedImageError", "or pass --skip-bad-images to skip them.",
                      "main.py: interrupted by a file that is no whole image after step ", "resume with: ")
    (run,) = json.loads((tmp_path / "r.json").read_text())["runs"]
    assert run["incomplete"] and run["stopped_by"] == "a file that is no whole image"
    assert 1 <= run["completed_steps"] < 20 and (tmp_path / "ck.pt").exists()
    assert run["skipped_images"] is None and "more)" not in stopped.stderr  # one file, however often met
    skipped = streamed(tree, *argv[:3], "--skip-bad-images", "--json", tmp_path / "s.json")
    assert skipped.returncode == 0, skipped.stderr
    (run,) = json.loads((tmp_path / "s.json").read_text())["runs"]
    assert not run["incomplete"] and run["skipped_images"]["count"] == 1  # met once an epoch, counted once
    assert run["skipped_images"]["examples"][0]["path"] == str(bad)


def test_a_file_that_is_no_image_in_the_evaluation_stops_it_and_is_left_out_when_skipped(tmp_path):
    tree = image_tree(tmp_path / "tree", per_class=6, split="train")
    image_tree(tree, per_class=2, split="val")
    bad = not_an_image(tree / "val" / "eel" / "7.png")
    stopped = streamed(tree, "-n", "3", "--bf16", "--json", tmp_path / "r.json")
    assert_user_error(stopped, f"{bad} cannot be read as an image", "during the test-set evaluation, after all 3 steps")
    (run,) = json.loads((tmp_path / "r.json").read_text())["runs"]
    assert run["test_accuracy"] is None and run["stopped_by"] == "a file that is no whole image"
    skipped = streamed(tree, "-n", "3", "--bf16", "--skip-bad-images", "--json", tmp_path / "s.json")
    assert skipped.returncode == 0, skipped.stderr
    (run,) = json.loads((tmp_path / "s.json").read_text())["runs"]
    assert run["test_accuracy"] is not None and run["skipped_images"]["count"] == 1


def sharded(tmp_path, per_class=8, shard_images=5):
    """An image folder of `per_class` images a class written as shards: the shards' folder."""
    from utils.data import shard_writer

    tree = image_tree(tmp_path / "tree", per_class=per_class, size=(40, 30))
    assert shard_writer.main([str(tree), str(tmp_path / "shards"), "--workers", "0", "--shard-images",
                              str(shard_images)]) == 0
    return tmp_path / "shards"


def from_shards(folder, *argv):
    return run_main("--data", "webdataset", "--data-dir", folder, *FAST, "--workers", 0, *argv)


def test_shards_through_a_comparison_and_a_resume_that_continues_exactly(tmp_path):
    folder = sharded(tmp_path)
    result = from_shards(folder, "-n", "3", "--modes", "fp32,amp-bf16", "--json", tmp_path / "r.json")
    assert result.returncode == 0, result.stderr
    document = read_results(tmp_path / "r.json")
    data, runs = document["data"], document["runs"]
    assert (data["name"], data["train_images"], data["test_images"], data["train_shards"]) == ("webdataset", 21, 3, 5)
    assert data["epoch_from"] == "index" and {run["loader"] for run in runs} == {"stream"}
    assert all(run["test_accuracy"] is not None for run in runs)
    assert len({run["first_batch_sha256"] for run in runs}) == 1
    constant = ["--lr-schedule", "constant", "--lr-warmup-steps", "0", "--bf16", "--no-eval"]
    assert from_shards(folder, *constant, "-n", "6", "--json", tmp_path / "whole.json").returncode == 0
    checkpointed = [*constant, "--checkpoint", tmp_path / "ck.pt"]
    assert from_shards(folder, *checkpointed, "-n", "3").returncode == 0
    resumed = from_shards(folder, *checkpointed, "-n", "6", "--resume", "--json", tmp_path / "resumed.json")
    assert resumed.returncode == 0, resumed.stderr
    (run,) = json.loads((tmp_path / "resumed.json").read_text())["runs"]
    (reference,) = json.loads((tmp_path / "whole.json").read_text())["runs"]
    assert run["resumed_from_step"] == 3 and run["loss_curve"] == reference["loss_curve"]


def test_a_sample_that_is_no_image_stops_a_run_on_shards_and_a_shard_cut_short_is_refused_before_it(tmp_path):
    import io
    import tarfile

    folder = sharded(tmp_path)
    with tarfile.open(folder / "train-000002.tar", "a") as tar:
        for name, content in (("bogus.png", b"\x89PNG\r\n\x1a\n" + bytes(range(256))), ("bogus.cls", b"0")):
            member = tarfile.TarInfo(name)
            member.size = len(content)
            tar.addfile(member, io.BytesIO(content))
    index = json.loads((folder / "index.json").read_text())
    index["splits"]["train"]["shards"][2]["bytes"] = (folder / "train-000002.tar").stat().st_size
    (folder / "index.json").write_text(json.dumps(index))
    stopped = from_shards(folder, "-n", "12", "--bf16", "--no-eval", "--json", tmp_path / "r.json")
    assert_user_error(stopped, f"--data webdataset: {folder / 'train-000002.tar'}:bogus cannot be read as an image",
                      "or pass --skip-bad-images to skip them.", "interrupted by a file that is no whole image")
    assert json.loads((tmp_path / "r.json").read_text())["runs"][0]["stopped_by"] == "a file that is no whole image"
    skipped = from_shards(folder, "-n", "12", "--bf16", "--no-eval", "--skip-bad-images", "--json", tmp_path / "s.json")
    assert skipped.returncode == 0, skipped.stderr
    assert json.loads((tmp_path / "s.json").read_text())["runs"][0]["skipped_images"]["count"] == 1
    with open(folder / "train-000004.tar", "r+b") as f:
        f.truncate(1024)
    for argv in (["-n", "3"], ["--check-flags"]):
        assert_user_error(from_shards(folder, *argv), "train-000004.tar is 1,024 bytes and index.json says")


def test_the_flags_of_shards_are_refused_where_they_do_nothing(tmp_path, monkeypatch):
    assert_user_error(run_main("--data", "webdataset", "--loader", "device", "--check-flags"),
                      "--loader device holds the data set in memory, and --data webdataset is read from its shards")
    assert_user_error(run_main("--data", "cifar10", "--epoch-images", "100", "--check-flags"),
                      "--epoch-images gives the images an epoch of tar shards holds")
    monkeypatch.setitem(__import__("sys").modules, "webdataset", None)
    assert_user_error(from_shards(tmp_path, "--check-flags"), "pip install webdataset")


def test_a_run_whose_loader_cannot_keep_up_says_it_is_input_bound_and_names_the_loaders_levers(tmp_path):
    """Large PNGs (no draft scale to decode them at) decoded in the main process feed a model that
    trains a batch of 16x16 images in a millisecond: the loader alone is many times slower."""
    tree = image_tree(tmp_path / "tree", per_class=6, size=(320, 320))
    result = run_main("--data", "imagefolder", "--data-dir", tree, "--loader", "stream", "--image-size", "16",
                      "-b", "8", "--warmup", "1", "--no-progress", "--workers", "0", "--model-factory",
                      "user_models:mlp", "-n", "3", "--modes", "fp32,amp-bf16", "--explain", "--explain-steps", "1",
                      "--json", tmp_path / "r.json")
    assert result.returncode == 0, result.stderr
    document = read_results(tmp_path / "r.json")
    for run in document["runs"]:
        fed = run["feed"]
        assert fed["bound"] == "input" and fed["loader_images_per_sec"] < fed["step_images_per_sec"], fed
        assert (fed["workers"], fed["decode"], fed["loader"]) == (0, "cpu", "stream")
        assert [lever["lever"] for lever in fed["levers"]][-2:] == ["shards", "a pre-resized copy"]
        assert run["profile"]["diagnosis"][0]["rule"] == "input-bound"
    assert document["comparison"]["amp-bf16"].feed["bound"] == "input"
    said = " ".join(result.stdout.split())
    assert "amp-bf16's step alone could take " in said and "; the loader alone delivers " in said
    assert "in the training process (--workers 0); training ran at " in said
    assert "input-bound, precision is not what limits this run" in said
    assert "the loader's levers: " in said and "shards (ampbench-shards DIR SHARDS, then --data webdataset" in said
    out = io.StringIO()  # utils.report says it of the file as the run said it
    with contextlib.redirect_stdout(out):
        assert report.main([str(tmp_path / "r.json")]) == 0
    assert "input-bound, precision is not what limits this run" in " ".join(out.getvalue().split())
    advice = run_main("--advise", "--from", tmp_path / "r.json", "--advice-dir", tmp_path / "advice")
    assert advice.returncode not in (1, 2), advice.stderr
    said = " ".join(advice.stdout.split())
    assert "The input pipeline bounds amp-bf16: its step alone could take " in said or \
        "The input pipeline bounds fp32: its step alone could take " in said, said
    assert "the loader's levers: " in said and "shards (ampbench-shards DIR SHARDS, then --data webdataset" in said


def test_a_run_whose_step_is_slower_than_its_loader_says_the_step_bounds_it(tmp_path):
    tree = image_tree(tmp_path / "tree", per_class=6, size=(8, 8))
    result = run_main("--data", "imagefolder", "--data-dir", tree, "--loader", "stream", "--image-size", "32",
                      "-b", "4", "--warmup", "1", "--no-progress", "--workers", "0", "--model", "resnet18",
                      "-n", "3", "--modes", "fp32,amp-bf16", "--json", tmp_path / "r.json")
    assert result.returncode == 0, result.stderr
    for run in json.loads((tmp_path / "r.json").read_text())["runs"]:
        assert run["feed"]["bound"] == "step" and \
            run["feed"]["step_images_per_sec"] < run["feed"]["loader_images_per_sec"], run["feed"]
    said = " ".join(result.stdout.split())
    assert "the step bounds this run, so its number format sets the pace" in said and "input-bound" not in said
    advice = run_main("--advise", "--from", tmp_path / "r.json", "--advice-dir", tmp_path / "advice")
    assert advice.returncode not in (1, 2), advice.stderr
    said = " ".join(advice.stdout.split())
    assert "The input pipeline keeps up with " in said and "input pipeline bounds" not in said
    assert "loader's levers" not in said
