"""Images streamed from disk per batch (utils/data/streamed.py, --loader stream): torchvision's
recipe with JPEGs drafted at a smaller scale, the order (every image once per epoch, every
batch full, ranks disjoint), batches that neither the worker count nor a resume changes, files
that are no whole images replaced in training and left out in evaluation, and --loader auto's
choice between holding a folder and streaming it."""
import random

import numpy as np
import pytest
import torch
from PIL import Image

from conftest import image_tree
from utils.config import RunConfig
from utils.data import dataset, imagefolder, recipe, streamed
from utils.data.images import BadImages

CPU = torch.device("cpu")


def photo(path, size=(400, 300)):
    """A JPEG of `size` (width, height): a gradient a crop can be told apart by."""
    pixels = np.zeros((size[1], size[0], 3), dtype=np.uint8)
    pixels[..., 0] = np.linspace(0, 255, size[0], dtype=np.uint8)[None, :]
    pixels[..., 1] = np.linspace(0, 255, size[1], dtype=np.uint8)[:, None]
    Image.fromarray(pixels).save(path, quality=95)
    return path


def test_the_crop_is_random_resized_crops_and_the_same_for_the_same_draw():
    boxes = [recipe.crop_box(400, 300, random.Random(f"0:{sample}")) for sample in range(500)]
    for top, left, height, width in boxes:
        assert 0 <= top and top + height <= 300 and 0 <= left and left + width <= 400
    shares = [height * width / (400 * 300) for _, _, height, width in boxes]
    assert min(shares) >= 0.07 and max(shares) <= 1.0 and 0.35 < np.mean(shares) < 0.7  # uniform in [0.08, 1]
    assert recipe.crop_box(400, 300, random.Random("0:7")) == boxes[7]
    assert recipe.crop_box(10, 1000, random.Random("x")) == (493, 0, 13, 10)  # no try fits: the centre, at 3/4


def test_a_jpeg_is_decoded_at_the_smallest_scale_that_keeps_the_crop_at_the_size(tmp_path):
    with Image.open(photo(tmp_path / "a.jpg", (800, 600))) as image:
        assert recipe.drafted(image, (100, 80)) == (0.25, 0.25) and image.size == (200, 150)
    with Image.open(photo(tmp_path / "a.jpg", (800, 600))) as image:
        assert recipe.drafted(image, (700, 80)) == (1.0, 1.0)
    picture = recipe.train_transform(32, "0:3")(Image.open(tmp_path / "a.jpg"))
    assert picture.size == (32, 32) and picture.mode == "RGB"
    picture = recipe.eval_transform(32)(Image.open(tmp_path / "a.jpg"))
    assert picture.size == (32, 32) and recipe.eval_resize(224) == 256


def test_the_order_takes_every_image_once_an_epoch_in_full_batches_and_ranks_share_each_global_batch():
    def batches(shard=(0, 1), start=0, count=6):
        order = iter(streamed.StreamOrder(10, 4, seed=3, shard=shard, start=start))
        return [next(order) for _ in range(count)]

    alone = batches()
    items = [item for batch in alone for item, _ in batch]
    assert all(len(batch) == 4 for batch in alone)
    assert sorted(items[:10]) == list(range(10)) and sorted(items[10:20]) == list(range(10))  # epochs 0 and 1
    assert len({draw for batch in alone for _, draw in batch}) == 24  # every sample its own draw
    assert batches(start=2, count=4) == alone[2:]  # a resume at batch 2 reads no batch before it
    pair = [batches(shard=(rank, 2), count=3) for rank in (0, 1)]
    globally = iter(streamed.StreamOrder(10, 8, seed=3))
    for step in range(3):
        assert pair[0][step] + pair[1][step] == next(globally)
    assert streamed.StreamOrder(10, 4, seed=4).permutation(0).tolist() != items[:10]  # another seed, another order


def stream_of(tree, size=16, workers=0, skip=False):
    listing = imagefolder.listing(str(tree), skip_bad=skip)
    normalization = streamed.sample_normalization(listing.index, listing.training, size, workers)
    return streamed.FolderStream(size, workers, normalization, BadImages(skip, "--data imagefolder"),
                                 len(listing.training), len(listing.evaluation), False, listing)


@pytest.mark.parametrize("workers", [0, 2])
def test_batches_are_the_same_whatever_the_workers_and_after_a_resume(tmp_path, workers):
    stream = stream_of(image_tree(tmp_path / "tree", per_class=7, size=(30, 40)))
    loader = stream.train_loader(batch_size=5, device=CPU, seed=1, channels_last=False, shard=(0, 1))
    first = [next(loader) for _ in range(5)]
    assert first[0][0].shape == (5, 3, 16, 16) and first[0][0].dtype == torch.float32
    assert abs(float(torch.cat([images for images, _ in first]).mean())) < 0.5  # normalised by the folder's figures
    saved = None
    reference = streamed.FolderStream(16, 0, stream.normalization, stream.bad, 19, 5, False, stream.listing)
    replay = reference.train_loader(batch_size=5, device=CPU, seed=1, channels_last=False, shard=(0, 1))
    for step in range(5):
        images, labels = next(replay)
        assert torch.equal(images, first[step][0]) and torch.equal(labels, first[step][1])
        if step == 2:
            saved = replay.state_dict()
    resumed = stream.train_loader(batch_size=5, device=CPU, seed=1, channels_last=False, shard=(0, 1))
    resumed.load_state_dict(saved)
    assert torch.equal(next(resumed)[0], first[3][0]) and len(resumed) == 4  # 19 images in batches of 5


def test_a_file_that_is_no_image_is_replaced_in_training_left_out_in_evaluation_and_counted(tmp_path):
    tree = image_tree(tmp_path / "tree", per_class=6, split="train")
    image_tree(tree, per_class=2, split="val")
    stream = stream_of(tree)
    (tree / "train" / "dog" / "0.png").write_bytes(b"\x89PNG\r\n\x1a\n" + b"x" * 300)  # no image, of another size
    (tree / "val" / "cat" / "1.png").write_bytes(b"x" * (tree / "val" / "cat" / "1.png").stat().st_size)
    loader = stream.train_loader(batch_size=6, device=CPU, seed=0, channels_last=False, shard=(0, 1))
    for _ in range(3):
        images, _ = next(loader)
        assert len(images) == 6
    assert stream.bad.count == 1 and "changed since the folder was indexed" in stream.bad.examples[0][1]
    assert stream.bad.failure.startswith(f"--data imagefolder: {tree / 'train' / 'dog' / '0.png'} cannot be read")
    evaluated = [labels for _, labels in stream.test_batches(batch_size=4, device=CPU, channels_last=False,
                                                             shard=(0, 1))]
    assert sum(len(labels) for labels in evaluated) == 5 and stream.bad.count == 2
    assert "UnidentifiedImageError" in stream.bad.examples[1][1]


def test_auto_holds_a_folder_within_the_budget_and_streams_one_beyond_it(tmp_path, monkeypatch):
    tree = image_tree(tmp_path / "tree", per_class=6)
    settings = RunConfig.build(data="imagefolder", data_dir=str(tree), image_size=16, workers=0).data
    assert settings.loader == "auto"
    held = dataset.image_folder(settings, CPU, lambda said: None)
    assert (held.loader, held.stream, held.train_count) == ("device", None, 15)
    assert "within the in-memory budget of 4.0 GiB (the least of 4 GiB and 25% of the memory free" in held.notes[0]
    monkeypatch.setattr(dataset, "MEMORY_BUDGET_BYTES", 1000)
    streaming = dataset.image_folder(settings, CPU, lambda said: None)
    assert (streaming.loader, streaming.train_images, streaming.train_count, streaming.test_count) == \
        ("stream", None, 15, 3)
    assert "18 images take 13.5 KiB decoded at 16x16, more than the in-memory budget of 1000 B" in streaming.notes[0]
    assert "streamed from disk per batch by 0 DataLoader workers" in streaming.notes[0]
    assert streaming.info["augmentation"].startswith("RandomResizedCrop(16")
    assert streaming.info["fingerprint"] == held.info["fingerprint"]
    forced = dataset.image_folder(RunConfig.build(data="imagefolder", data_dir=str(tree), image_size=16, workers=0,
                                                  loader="torchvision").data, CPU, lambda said: None)
    assert (forced.loader, forced.notes) == ("torchvision", [])
