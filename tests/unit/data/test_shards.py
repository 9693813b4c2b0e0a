"""WebDataset tar shards (utils/data/shards.py, shard_writer.py): ampbench-shards writes an image
folder as shards with an index, all or nothing; the reader checks them before anything trains
(cut short, empty, a class without images, too few for the workers, webdataset missing), reads
them shuffled with full batches that a resume replays, and reports samples that are no images."""
import io
import json
import sys
import tarfile

import pytest
import torch
from PIL import Image

from conftest import image_tree
from utils.data import imagefolder, shard_writer, shards
from utils.data.images import BadImages
from utils.errors import UserError

CPU = torch.device("cpu")


def written(tmp_path, *flags, per_class=8, size=(40, 30)):
    """An image folder of `per_class` images a class written as shards into tmp_path/out: the folder."""
    tree = image_tree(tmp_path / "tree", per_class=per_class, size=size)
    assert shard_writer.main([str(tree), str(tmp_path / "out"), "--workers", "0", *map(str, flags)]) == 0
    return tmp_path / "out"


def members(path):
    with tarfile.open(path) as tar:
        return {member.name: tar.extractfile(member).read() for member in tar.getmembers()}


def test_the_writer_shards_the_folders_splits_mixed_with_an_index_that_adds_up(tmp_path, capsys):
    out = written(tmp_path, "--shard-images", "5")
    index = json.loads((out / "index.json").read_text())
    listed = imagefolder.listing(str(tmp_path / "tree"), skip_bad=False)
    assert index["classes"] == ["cat", "dog", "eel"] and index["resized"] is None
    assert index["source"]["fingerprint"] == listed.info()["fingerprint"]
    train, evaluation = index["splits"]["train"], index["splits"]["eval"]
    assert sum(train["per_class"]) == len(listed.training) == 21 and sum(evaluation["per_class"]) == 3
    assert [shard["images"] for shard in train["shards"]] == [5, 5, 5, 5, 1]
    for shard in train["shards"]:
        assert (out / shard["name"]).stat().st_size == shard["bytes"]
    first = members(out / "train-000000.tar")
    assert sorted(first)[:2] == ["000000000.cls", "000000000.png"]
    assert len({first[name] for name in first if name.endswith(".cls")}) > 1  # a shard holds several classes
    assert "wrote 21 training images in 5 shards and 3 evaluation images in 1 shard to " in capsys.readouterr().out


def test_the_writer_resizes_refuses_an_occupied_out_and_leaves_nothing_when_it_fails(tmp_path, monkeypatch):
    out = written(tmp_path, "--resize", "12", per_class=4)
    picture = members(out / "train-000000.tar")["000000000.jpg"]
    assert min(Image.open(io.BytesIO(picture)).size) == 12
    with pytest.raises(UserError, match="exists and is not an empty folder"):
        shard_writer.main([str(tmp_path / "tree"), str(out)])
    monkeypatch.setattr(shards, "write_split", lambda *args: (_ for _ in ()).throw(KeyboardInterrupt))
    with pytest.raises(KeyboardInterrupt):
        shard_writer.main([str(tmp_path / "tree"), str(tmp_path / "stopped"), "--workers", "0"])
    assert sorted(path.name for path in tmp_path.iterdir()) == ["out", "tree"]  # no OUT, no half-written folder


def test_the_writer_refuses_or_skips_a_file_that_is_no_image(tmp_path):
    tree = image_tree(tmp_path / "tree", per_class=4)
    (tree / "dog" / "9.png").write_bytes(b"\x89PNG\r\n\x1a\n" + b"x" * 100)
    with pytest.raises(UserError, match=r"IMAGE_FOLDER: .*dog/9.png cannot be read as an image .* or pass "
                                        r"--skip-bad-images"):
        shard_writer.main([str(tree), str(tmp_path / "out"), "--workers", "0"])
    assert not (tmp_path / "out").exists()
    assert shard_writer.main([str(tree), str(tmp_path / "out"), "--workers", "0", "--skip-bad-images"]) == 0
    index = json.loads((tmp_path / "out" / "index.json").read_text())
    assert sum(index["splits"]["train"]["per_class"]) + sum(index["splits"]["eval"]["per_class"]) == 12


def test_shards_cut_short_emptied_or_without_a_class_are_refused_before_training(tmp_path):
    out = written(tmp_path, "--shard-images", "5")
    assert shards.read(str(out), None, None).train_images == 21
    index_path = out / "index.json"
    index = json.loads(index_path.read_text())
    with open(out / "train-000001.tar", "r+b") as f:
        f.truncate(4096)
    with pytest.raises(UserError, match=r"train-000001.tar is 4,096 bytes and index.json says .*: it was cut short"):
        shards.read(str(out), None, None)
    index["splits"]["train"]["shards"][1]["bytes"] = 4096
    index["splits"]["train"]["shards"][2]["images"] = 0
    index["splits"]["train"]["per_class"][0] -= 5
    index_path.write_text(json.dumps(index))
    with pytest.raises(UserError, match="train-000002.tar holds no images"):
        shards.read(str(out), None, None)
    index["splits"]["train"]["shards"][2]["images"] = 5
    index["splits"]["train"]["per_class"] = [0, 14, 7]
    index_path.write_text(json.dumps(index))
    with pytest.raises(UserError, match="the training shards of .* hold no images of class cat: a model cannot learn"):
        shards.read(str(out), None, None)
    index_path.write_text("{not json")
    with pytest.raises(UserError, match="cannot be read as ampbench-shards' index"):
        shards.read(str(out), None, None)


def test_shards_without_an_index_need_the_epoch_and_the_classes_and_a_pattern_must_name_files(tmp_path):
    out = written(tmp_path, "--shard-images", "5")
    (out / "index.json").unlink()
    with pytest.raises(UserError, match="has no index.json to say .*: give --epoch-images N and --num-classes K"):
        shards.read(str(out), None, None)
    found = shards.read(str(out), 21, 3)
    assert (found.train_images, found.evaluation, len(found.train.paths)) == (21, None, 6)  # eval-000000 too
    pattern = str(out / "train-{000000..000004}.tar")
    assert len(shards.read(pattern, 21, 3).train.paths) == 5
    with pytest.raises(UserError, match=r"train-000005.tar is not a file \(nor are 4 more\)"):
        shards.read(str(out / "train-{000005..000009}.tar"), 21, 3)
    with pytest.raises(UserError, match="2 training shards cannot feed 1 rank\\(s\\) x 3 worker\\(s\\)"):
        shards.check_feeds(shards.read(str(out / "train-{000000..000001}.tar"), 10, 3), 1, 3)


def test_without_the_webdataset_package_shards_are_refused_with_what_to_install(tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "webdataset", None)
    with pytest.raises(UserError, match="through the webdataset package, which is not installed in this Python; pip "
                                        "install webdataset"):
        shards.read(str(tmp_path), None, None)


def loader_of(found, workers, position=0):
    stream = shards.ShardStream(16, workers, ((0.5,) * 3, (0.25,) * 3), BadImages(False, shards.SOURCE),
                                found.train_images, found.test_images, False, found)
    loader = stream.train_loader(batch_size=4, device=CPU, seed=2, channels_last=False, shard=(0, 1))
    if position:
        loader.load_state_dict({"position": position})
    return stream, loader


@pytest.mark.parametrize("workers", [0, 2])
def test_batches_are_full_every_class_comes_and_a_resume_replays_the_rest(tmp_path, workers):
    found = shards.read(str(written(tmp_path, "--shard-images", "5")), None, None)
    _, loader = loader_of(found, workers)
    first = [next(loader) for _ in range(8)]
    assert all(images.shape == (4, 3, 16, 16) for images, _ in first) and len(loader) == 6
    assert set(torch.cat([labels for _, labels in first]).tolist()) == {0, 1, 2}
    _, resumed = loader_of(found, workers, position=5)
    for step in range(5, 8):
        images, labels = next(resumed)
        assert torch.equal(images, first[step][0]) and torch.equal(labels, first[step][1])


def test_a_sample_that_is_no_image_and_a_shard_cut_short_are_reported_and_the_batch_stays_full(tmp_path):
    out = written(tmp_path, "--shard-images", "5")
    with tarfile.open(out / "train-000000.tar", "a") as tar:  # appended: a sample of bytes no decoder reads
        for name, content in (("bogus.png", b"\x89PNG\r\n\x1a\nno image"), ("bogus.cls", b"1")):
            member = tarfile.TarInfo(name)
            member.size = len(content)
            tar.addfile(member, io.BytesIO(content))
    with open(out / "train-000003.tar", "r+b") as f:
        f.truncate(3000)
    (out / "index.json").unlink()
    found = shards.read(str(out / "train-{000000..000004}.tar"), 21, 3)
    stream, loader = loader_of(found, 0)
    for _ in range(7):
        assert len(next(loader)[0]) == 4
    reasons = dict(stream.bad.examples)
    assert f"{out / 'train-000000.tar'}:bogus" in reasons  # what PIL says of its bytes
    assert reasons[str(out / "train-000003.tar")].startswith("not a whole tar file: ")
    assert stream.bad.failure.startswith("--data webdataset: ")
