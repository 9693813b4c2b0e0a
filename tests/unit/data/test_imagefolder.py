"""--data imagefolder (utils/data/imagefolder.py, inmemory.py): the tree's layouts and classes, the
images held out, decoding at --image-size, the normalisation computed, the fingerprint, both
loaders on the decoded images, and the memory check; on folders of tiny PNGs written here."""
import numpy as np
import pytest
import torch
from PIL import Image

from conftest import image_tree
from utils.config import RunConfig
from utils.data import dataset, imagefolder, inmemory
from utils.data.index import TRAIN, index_of
from utils.data.loaders import Normalize, eval_batches, make_train_loader
from utils.errors import UserError

CPU = torch.device("cpu")


def test_a_flat_tree_holds_out_a_tenth_of_each_class_the_same_for_every_seed(tmp_path):
    image_tree(tmp_path, classes=("b", "a", "c"), per_class=6)
    (tmp_path / ".ipynb_checkpoints").mkdir()
    (tmp_path / "a" / "._0.png").write_bytes(b"macOS metadata")
    tree = imagefolder.layout(str(tmp_path))
    assert tree.classes == ("a", "b", "c") and tree.eval_folder is None  # sorted, as ImageFolder numbers them
    listed = imagefolder.listing(str(tmp_path), skip_bad=False)
    assert len(listed.index) == 18 and listed.index.labels[:6].tolist() == [0] * 6
    assert len(listed.evaluation) == 3 and sorted(listed.index.labels[listed.evaluation]) == [0, 1, 2]
    again = imagefolder.listing(str(tmp_path), skip_bad=False)
    assert (again.training.tolist(), again.evaluation.tolist()) == (listed.training.tolist(),
                                                                     listed.evaluation.tolist())
    labels = np.array([0] + [1] * 2 + [2] * 30)
    _, held = imagefolder.held_out(labels, np.arange(len(labels)))
    assert labels[held].tolist() == [1, 2, 2, 2]  # none of 1, 1 of 2, 3 of 30


def test_a_split_tree_trains_on_train_and_evaluates_on_val_else_test(tmp_path):
    image_tree(tmp_path, split="train")
    image_tree(tmp_path, classes=("dog",), per_class=2, split="test")
    listed = imagefolder.listing(str(tmp_path), skip_bad=False)
    assert (listed.tree.train_folder, listed.tree.eval_folder) == (str(tmp_path / "train"), str(tmp_path / "test"))
    assert set(listed.index.labels[listed.evaluation].tolist()) == {1}  # dog is label 1 of cat, dog, eel
    image_tree(tmp_path, classes=("cat",), per_class=1, split="val")
    assert imagefolder.layout(str(tmp_path)).eval_folder == str(tmp_path / "val")


def test_validation_evaluates_beside_train_and_the_splits_left_out_are_said(tmp_path):
    image_tree(tmp_path, split="train")
    image_tree(tmp_path, classes=("cat",), per_class=2, split="validation")
    tree = imagefolder.layout(str(tmp_path))
    assert (tree.eval_folder, tree.left_out, tree.notes()) == (str(tmp_path / "validation"), (), [])
    image_tree(tmp_path, classes=("cat",), per_class=2, split="test")
    image_tree(tmp_path, classes=("cat",), per_class=2, split="val")
    tree = imagefolder.layout(str(tmp_path))
    assert (tree.eval_folder, tree.left_out) == (str(tmp_path / "val"), ("validation", "test"))
    assert tree.notes() == [f"--data imagefolder: validation/ and test/ beside train/ in {tmp_path} are left out: "
                            "val/ evaluates (the first of val/, validation/, test/ found)."]


def test_a_folder_beside_train_that_is_no_split_is_refused_as_a_class_put_in_the_wrong_place(tmp_path):
    image_tree(tmp_path, split="train")
    image_tree(tmp_path, split="val")
    image_tree(tmp_path, classes=("owl", "yak"))
    with pytest.raises(UserError, match=r"holds train/ and val/ and also owl/ \(and 1 more\), which is none of "
                                        r"train/, val/, validation/, test/: move a class folder into train/"):
        imagefolder.layout(str(tmp_path))


def test_the_listing_refuses_an_empty_class_folder_and_a_tree_with_nothing_to_hold_out(tmp_path):
    image_tree(tmp_path / "flat", per_class=2)
    assert imagefolder.listing(str(tmp_path / "flat"), skip_bad=False).tree.classes == ("cat", "dog", "eel")
    (tmp_path / "flat" / "fox" / "deeper").mkdir(parents=True)
    (tmp_path / "flat" / "fox" / "notes.txt").write_text("not an image")
    with pytest.raises(UserError, match="fox holds no images"):
        imagefolder.listing(str(tmp_path / "flat"), skip_bad=False)
    image_tree(tmp_path / "flat" / "fox" / "deeper", classes=("x",), per_class=1)  # below the class folder counts
    imagefolder.listing(str(tmp_path / "flat"), skip_bad=False)
    image_tree(tmp_path / "lonely", per_class=1)
    with pytest.raises(UserError, match="no class of .* has two images or more"):
        imagefolder.listing(str(tmp_path / "lonely"), skip_bad=False)
    image_tree(tmp_path / "split", split="train")
    (tmp_path / "split" / "val" / "dog").mkdir(parents=True)
    with pytest.raises(UserError, match="val/dog holds no images"):
        imagefolder.listing(str(tmp_path / "split"), skip_bad=False)


def test_images_are_resized_on_their_shorter_side_centre_cropped_and_made_rgb(tmp_path):
    wide = np.zeros((20, 60, 3), dtype=np.uint8)
    wide[:, :20, 0] = wide[:, 20:40, 1] = wide[:, 40:, 2] = 255  # red, green, blue thirds
    Image.fromarray(wide).save(tmp_path / "wide.png")
    Image.fromarray(np.full((10, 10), 128, dtype=np.uint8)).save(tmp_path / "gray.png")
    Image.fromarray(np.full((10, 10, 4), 200, dtype=np.uint8)).save(tmp_path / "rgba.png")
    index = index_of(str(tmp_path), [(TRAIN, str(tmp_path.parent))], (tmp_path.name,))
    assert [index.relative(position) for position in range(3)] == ["gray.png", "rgba.png", "wide.png"]
    images, failed = inmemory.decode(index, np.array([2, 0, 1]), 16, workers=1)  # in a worker, as a run decodes
    assert images.shape == (3, 3, 16, 16) and images.dtype == torch.uint8 and failed == []
    assert images[0, 1, 8, 8] == 255 and images[0, 0, 8, 8] == 0  # the centre is the green third
    assert images[1, :, 5, 5].tolist() == [128] * 3 and images[2, :, 5, 5].tolist() == [200] * 3


def test_the_normalisation_is_the_training_images_own(tmp_path):
    images = torch.zeros(4, 3, 2, 2, dtype=torch.uint8)
    images[:2, 0] = 255  # red: half 0, half 255; green 0 everywhere; blue 51 everywhere
    images[:, 2] = 51
    mean, std = inmemory.normalization_of(images)
    assert mean == pytest.approx((0.5, 0.0, 0.2)) and std == pytest.approx((0.5, 1 / 255, 1 / 255))
    normalized = Normalize(CPU, (mean, std))(images)
    assert normalized[:, 0].mean().item() == pytest.approx(0.0, abs=1e-6)
    assert normalized[:, 0].std(unbiased=False).item() == pytest.approx(1.0, abs=1e-5)


def test_the_fingerprint_tells_trees_apart_wherever_they_lie(tmp_path):
    def fingerprint(root):
        return imagefolder.listing(str(root), skip_bad=False).info()["fingerprint"]

    image_tree(tmp_path / "here")
    image_tree(tmp_path / "there")
    assert fingerprint(tmp_path / "here") == fingerprint(tmp_path / "there")
    (tmp_path / "there" / "cat" / "0.png").write_bytes(b"another size")
    assert fingerprint(tmp_path / "here") != fingerprint(tmp_path / "there")


@pytest.mark.parametrize("loader", ["device", "torchvision"])
def test_both_loaders_serve_the_folder_at_its_size_normalised_with_its_own_figures(tmp_path, loader):
    image_tree(tmp_path, per_class=6)
    settings = RunConfig.build(data="imagefolder", data_dir=str(tmp_path), image_size=16, loader=loader,
                               workers=0).data
    data, warnings = dataset.load(settings, CPU, seed=0)
    assert not warnings and data.name == "imagefolder" and data.identity == f"imagefolder {data.fingerprint}"
    assert data.train_images.shape == (15, 3, 16, 16) and data.test_images.shape == (3, 3, 16, 16)
    assert data.info["mean"] == list(data.normalization[0]) and dataset.class_count(settings) == 3
    batch, labels = next(make_train_loader(loader, data.train_images, data.train_labels, batch_size=5, device=CPU,
                                           seed=0, workers=0, channels_last=False, input_shape=(3, 16, 16),
                                           normalization=data.normalization))
    assert batch.shape == (5, 3, 16, 16) and labels.max() <= 2
    test_batch, _ = next(eval_batches(data.test_images, data.test_labels, batch_size=3, device=CPU,
                                      input_shape=(3, 16, 16), normalization=data.normalization))
    assert test_batch.mean().abs() < 1.0  # the folder's own figures centre it; CIFAR-10's would not


def test_a_folder_too_large_for_the_memory_free_is_refused_before_decoding(tmp_path, monkeypatch):
    image_tree(tmp_path)
    monkeypatch.setattr(inmemory, "available_host_bytes", lambda: 10_000)
    with pytest.raises(UserError, match=r"18 images of 64x64 take 0.0 GiB decoded, more than the 0.0 GiB of host "):
        inmemory.load(imagefolder.listing(str(tmp_path), skip_bad=False), 64, 0, CPU, False, lambda said: None)


def test_synthetic_labels_take_the_class_count_asked_for():
    data = dataset.synthetic(CPU, seed=0, count=200, input_shape=(3, 16, 16), classes=3)
    assert set(data.train_labels.tolist()) == {0, 1, 2} and data.info["num_classes"] == 3
