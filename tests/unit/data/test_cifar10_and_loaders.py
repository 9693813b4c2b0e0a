import os
import pickle

import pytest
import torch

from conftest import copy_subset
from utils.data import cifar10
from utils.data.loaders import MEAN, STD, DeviceLoader, Normalize, eval_batches, random_crop_flip, synthetic_images
from utils.errors import UserError


@pytest.fixture(scope="module")
def dataset():
    from conftest import SUBSET
    return cifar10.load(SUBSET, allow_unverified=True)


def test_subset_loads_with_shapes_dtypes_and_labels(dataset):
    assert dataset.train_images.shape == (5438, 3, 32, 32) and dataset.train_images.dtype == torch.uint8
    assert dataset.test_images.shape == (1017, 3, 32, 32)
    assert dataset.train_labels.dtype == torch.int64 and set(dataset.train_labels.tolist()) == set(range(10))
    assert not dataset.verified


def test_the_subset_holds_the_official_images_in_their_order(real_cifar10):
    dataset = cifar10.load(real_cifar10, allow_unverified=True)
    assert dataset.train_labels[:5].tolist() == [6, 9, 9, 4, 1]  # the official first labels


def test_subset_is_refused_without_the_flag(subset):
    with pytest.raises(UserError, match="data_batch_1 does not match the official CIFAR-10 md5 sum"):
        cifar10.load(subset)


def test_parent_folder_is_accepted(subset):
    assert cifar10.is_present(subset.parent) and cifar10.is_present(subset)


def test_missing_data_names_the_folder_and_the_fix(tmp_path):
    with pytest.raises(UserError, match=f"not found in {tmp_path}.*drop --no-download"):
        cifar10.load(tmp_path)


def test_failed_download_is_a_user_error(tmp_path, monkeypatch):
    def no_network(*args, **kwargs):
        raise OSError("Network is unreachable")
    monkeypatch.setattr("torchvision.datasets.utils.download_and_extract_archive", no_network)
    with pytest.raises(UserError, match="could not download CIFAR-10.*Network is unreachable"):
        cifar10.load(tmp_path, allow_download=True)


@pytest.mark.whole_runs
def test_a_first_run_tries_the_download_and_falls_back_to_synthetic_data_in_seconds(tmp_path):
    """With no copy on disk, --data auto tries the official download
    (here the network is a proxy that refuses connections, set in conftest.py) and, failing,
    trains on synthetic data with the reason; --no-download never tries. (A silent network is
    given up on by the timeout: the next test.)"""
    from conftest import run_cli
    empty = tmp_path / "data"
    result = run_cli("-m", "squeezenet1_1", "-b", "8", "-n", "2", "--warmup", "1", "--no-progress", "--data-dir", empty)
    assert result.returncode == 0, result.stderr
    assert "USING SYNTHETIC DATA" in result.stderr and "could not download CIFAR-10 from https://" in result.stderr
    result = run_cli("-m", "squeezenet1_1", "-b", "8", "-n", "2", "--warmup", "1", "--no-progress", "--data-dir", empty,
                     "--no-download")
    assert result.returncode == 0 and "--no-download forbids fetching it" in result.stderr
    assert "could not download" not in result.stderr


def test_the_download_gives_up_on_a_silent_network(tmp_path, monkeypatch):
    """A server that accepts the connection and never answers: the timeout, not a hang."""
    import socket
    import threading
    import urllib.request
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(1)
    held = []  # the accepted connection stays open, silent
    threading.Thread(target=lambda: held.append(server.accept()), daemon=True).start()
    monkeypatch.setattr(cifar10, "DOWNLOAD_TIMEOUT_S", 1)
    monkeypatch.setattr(cifar10, "URL", f"http://127.0.0.1:{server.getsockname()[1]}/cifar-10-python.tar.gz")
    monkeypatch.delenv("http_proxy", raising=False)
    # urlopen keeps the proxies of its first call (an earlier test's main.main may have made it,
    # through the refusing proxy): drop its opener now, and after, so that the next is built anew.
    urllib.request.install_opener(None)
    try:
        with pytest.raises(UserError, match="could not download CIFAR-10.*timed out"):
            cifar10.load(tmp_path, allow_download=True)
    finally:
        urllib.request.install_opener(None)
        server.close()


class RunsCode:
    def __reduce__(self):
        return (os.system, ("touch /tmp/ampbench-pwned",))


def test_pickle_that_runs_code_is_refused_and_nothing_runs(subset, tmp_path):
    folder = copy_subset(subset, tmp_path)
    marker = "/tmp/ampbench-pwned"
    if os.path.exists(marker):
        os.remove(marker)
    with open(folder / "data_batch_3", "wb") as f:
        pickle.dump({"data": RunsCode(), "labels": [0]}, f)
    with pytest.raises(UserError,
                       match="data_batch_3 is not a readable CIFAR-10 batch.*refusing to load 'posix.system'"):
        cifar10.load(folder, allow_unverified=True)
    assert not os.path.exists(marker)


class Forged:
    """Pickles as `callable(*args)` followed by BUILD(state): how numpy pickles dtypes and arrays."""

    def __init__(self, call, args, state):
        self.call, self.args, self.state = call, args, state

    def __reduce__(self):
        return self.call, self.args, self.state


def forged_batch(code, dtype_state, raw, shape=(1,)):
    """A batch file whose images array claims dtype `code` with the given dtype state."""
    import numpy as np
    reconstruct = np.array(0).__reduce__()[0]  # numpy's _reconstruct, under numpy 1 or 2
    dtype = Forged(np.dtype, (code, False, True), dtype_state)
    array = Forged(reconstruct, (np.ndarray, (0,), b"b"), (1, shape, dtype, False, raw))
    return pickle.dumps({"data": array, "labels": [0] * shape[0]}, protocol=2)


# Forged dtypes that make numpy read raw bytes as object pointers (a segfault before this was
# refused), and arrays whose metadata does not match their bytes.
HOSTILE_ARRAYS = {
    "object dtype hidden by its state": ("O8", (3, "|", None, None, None, 8, 8, 0), b"\x41" * 8),
    "object dtype": ("O8", (3, "|", None, None, None, -1, -1, 63), b"\x41" * 8),
    "structured dtype": ("V8", (3, "|", None, ("a",), {"a": (object, 0)}, 8, 1, 16), b"\x41" * 8),
    "forged integer state": ("u1", (3, "|", None, ("a",), {"a": (object, 0)}, 1, 1, 0), b"\x41"),
    "too few bytes": ("u1", (3, "|", None, None, None, -1, -1, 0), b"\x41" * 3),
}


@pytest.fixture(scope="module")
def forged_verdicts(tmp_path_factory):
    """Every forged batch read in one subprocess (importing torch once, not once per case): a
    memory corruption fails the tests instead of killing pytest. {case: what the reader said}."""
    import json
    import subprocess
    import sys

    folder = tmp_path_factory.mktemp("forged")
    paths = {}
    for number, (case, (code, state, raw)) in enumerate(sorted(HOSTILE_ARRAYS.items())):
        paths[case] = str(folder / f"data_batch_{number}")
        with open(paths[case], "wb") as f:
            f.write(forged_batch(code, state, raw, shape=(3072,) if case == "too few bytes" else (1,)))
    probe = ("import json; from utils.data import cifar10; "
             f"from utils.errors import UserError\nverdicts = {{}}\nfor case, path in {paths!r}.items():\n"
             "    try:\n        cifar10.read_batch(path)\n        verdicts[case] = 'read'\n"
             "    except UserError as e:\n        verdicts[case] = 'refused: ' + str(e)\nprint(json.dumps(verdicts))")
    result = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, f"exit {result.returncode}: {result.stderr[-500:]}"
    return json.loads(result.stdout)


@pytest.mark.parametrize("case", sorted(HOSTILE_ARRAYS))
def test_forged_arrays_are_refused_without_a_crash(case, forged_verdicts):
    verdict = forged_verdicts[case]
    assert verdict.startswith("refused:") and "is not a readable CIFAR-10 batch" in verdict, verdict


def test_genuine_batches_read_as_plain_pickle_does(subset):
    import numpy as np
    path = os.path.join(subset, "data_batch_1")
    with open(path, "rb") as f:
        reference = pickle.load(f, encoding="latin1")  # the subset is trusted: compare with plain pickle
    images, labels = cifar10.read_batch(path)
    assert np.array_equal(images.numpy().reshape(len(images), -1), reference["data"])
    assert labels.tolist() == reference["labels"]


def test_truncated_batch_is_a_user_error(subset, tmp_path):
    folder = copy_subset(subset, tmp_path)
    data = (folder / "test_batch").read_bytes()
    (folder / "test_batch").write_bytes(data[: len(data) // 2])
    with pytest.raises(UserError, match="test_batch is not a readable CIFAR-10 batch"):
        cifar10.load(folder, allow_unverified=True)


def test_crop_is_a_shifted_copy_within_the_padding():
    images = torch.randint(1, 256, (64, 3, 32, 32), dtype=torch.uint8)
    generator = torch.Generator().manual_seed(0)
    out = random_crop_flip(images, generator)
    padded = torch.nn.functional.pad(images, (4, 4, 4, 4))
    for i in range(64):
        matches = [(dy, dx, flip) for dy in range(9) for dx in range(9) for flip in (False, True)
                   if torch.equal(out[i], (lambda w: w.flip(-1) if flip else w)(padded[i, :, dy:dy + 32, dx:dx + 32]))]
        assert matches, f"image {i} is not a padded crop (or its mirror) of the original"


def test_flip_happens_about_half_the_time_and_is_an_exact_mirror():
    images = torch.randint(0, 256, (2000, 3, 8, 8), dtype=torch.uint8)
    out = random_crop_flip(images, torch.Generator().manual_seed(1), padding=0)
    flipped = torch.tensor([torch.equal(o, i.flip(-1)) for o, i in zip(out, images)])
    same = torch.tensor([torch.equal(o, i) for o, i in zip(out, images)])
    assert bool((flipped | same).all())
    assert 0.45 < flipped.float().mean().item() < 0.55


def test_normalization_uses_cifar_statistics():
    images = torch.full((1, 3, 2, 2), 255, dtype=torch.uint8)
    out = Normalize(torch.device("cpu"))(images)
    expected = (1 - torch.tensor(MEAN)) / torch.tensor(STD)
    assert out.dtype == torch.float32
    assert torch.allclose(out[0, :, 0, 0], expected, atol=1e-5)


def test_loader_covers_every_image_once_per_epoch_with_aligned_labels():
    images = torch.arange(100, dtype=torch.uint8).view(100, 1, 1, 1).expand(100, 3, 32, 32).contiguous()
    labels = torch.arange(100)
    loader = DeviceLoader(images, labels, batch_size=32, device=torch.device("cpu"), seed=3)
    loader.normalize = lambda x: x  # look at the raw pixels
    seen = []
    for _ in range(7):  # 224 images: two full epochs and part of a third
        batch, batch_labels = next(loader)
        assert batch.shape == (32, 3, 32, 32) and batch_labels.shape == (32,)
        centre = batch[:, 0, 16, 16].long()  # the centre pixel survives any crop
        assert torch.equal(centre, batch_labels)
        seen += batch_labels.tolist()
    assert sorted(seen[:100]) == list(range(100)) and sorted(seen[100:200]) == list(range(100))
    assert len(loader) == 4


def test_same_seed_same_batches():
    images, labels = synthetic_images(200, torch.device("cpu"), seed=0)
    a = DeviceLoader(images, labels, batch_size=50, device=torch.device("cpu"), seed=7)
    b = DeviceLoader(images, labels, batch_size=50, device=torch.device("cpu"), seed=7)
    c = DeviceLoader(images, labels, batch_size=50, device=torch.device("cpu"), seed=8)
    first_a, first_b, first_c = next(a), next(b), next(c)
    assert torch.equal(first_a[0], first_b[0]) and torch.equal(first_a[1], first_b[1])
    assert not torch.equal(first_a[0], first_c[0])


def test_synthetic_data_is_fixed_and_cifar_shaped():
    images, labels = synthetic_images(10, torch.device("cpu"), seed=0)
    again, _ = synthetic_images(10, torch.device("cpu"), seed=0)
    assert images.shape == (10, 3, 32, 32) and images.dtype == torch.uint8 and torch.equal(images, again)
    assert labels.min() >= 0 and labels.max() <= 9


def test_real_batches_are_normalized(dataset):
    batch, _ = next(eval_batches(dataset.test_images, dataset.test_labels, batch_size=1017, device=torch.device("cpu")))
    assert abs(batch.mean().item()) < 0.15 and 0.85 < batch.std().item() < 1.15


def malformed(case):
    """Batch contents as numpy itself pickles them, each wrong in one way."""
    import numpy as np
    images = np.zeros((2, 3072), dtype=np.uint8)
    return {
        "empty batch": ({"data": np.zeros((0, 3072), dtype=np.uint8), "labels": []}, "holds no images"),
        "one label for two images": ({"data": images, "labels": [1]}, "has 2 images but 1 labels"),
        "label 10": ({"data": images, "labels": [0, 10]}, "has labels outside 0..9 (from 0 to 10)"),
        "negative label": ({"data": images, "labels": [-1, 3]}, "has labels outside 0..9 (from -1 to 3)"),
        "labels as text": ({"data": images, "labels": ["cat", "dog"]}, "a list where an array or a list of integers"),
        "pixels above 255": ({"data": images.astype(np.int16) + 300, "labels": [0, 1]},
                             "values outside the range of uint8"),
        "images of 31 x 31": ({"data": np.zeros((2, 3 * 31 * 31), dtype=np.uint8), "labels": [0, 1]},
                              "holds data of shape (2, 2883), not N x 3072"),
        "flat data": ({"data": np.zeros(3072, dtype=np.uint8), "labels": [0]}, "holds data of shape (3072,)"),
        "no labels": ({"data": images}, "it has no 'fine_labels' entry"),
        "a list, not a dict": ([images, [0, 1]], "a list, not a dict"),
        "float data": ({"data": images.astype(np.float32), "labels": [0, 1]}, "refusing dtype"),
        "2-D labels": ({"data": images, "labels": np.zeros((2, 1), dtype=np.int64)}, "has 2 images but 2 labels"),
    }[case]


@pytest.mark.parametrize("case", ["empty batch", "one label for two images", "label 10", "negative label",
                                  "labels as text", "pixels above 255", "images of 31 x 31", "flat data",
                                  "no labels", "a list, not a dict", "float data", "2-D labels"])
@pytest.mark.parametrize("protocol", [2, 4])
def test_malformed_batches_are_refused_with_the_problem(case, protocol, tmp_path):
    content, phrase = malformed(case)
    path = tmp_path / "data_batch_1"
    path.write_bytes(pickle.dumps(content, protocol=protocol))
    with pytest.raises(UserError) as refused:
        cifar10.read_batch(str(path))
    message = str(refused.value)
    assert str(path) in message and phrase in message and " ();" not in message, message


def test_every_loader_gives_batches_upsampled_to_the_image_size(dataset):
    """--image-size: the device and torchvision loaders and the test batches come at N x N, the
    augmented 32x32 batch upsampled bilinearly; synthetic images are made at N."""
    from torch.nn import functional as F

    from utils.data.loaders import TorchvisionLoader, make_train_loader, upsample

    images, labels = dataset.train_images[:16], dataset.train_labels[:16]
    cpu = torch.device("cpu")
    for kind in ("device", "torchvision"):
        batch, _ = next(make_train_loader(kind, images, labels, batch_size=4, device=cpu, seed=0, workers=0,
                                          channels_last=False, input_shape=(3, 64, 64)))
        assert batch.shape == (4, 3, 64, 64) and batch.dtype == torch.float32
    test_batch, _ = next(eval_batches(dataset.test_images[:4], dataset.test_labels[:4], batch_size=4, device=cpu,
                                      input_shape=(3, 64, 64)))
    plain, _ = next(eval_batches(dataset.test_images[:4], dataset.test_labels[:4], batch_size=4, device=cpu))
    assert torch.equal(test_batch, F.interpolate(plain, size=(64, 64), mode="bilinear", align_corners=False))
    assert upsample(plain, (3, 32, 32)) is plain  # at its own size the batch is left alone
    assert isinstance(make_train_loader("torchvision", images, labels, batch_size=4, device=cpu, seed=0, workers=0,
                                        channels_last=False), TorchvisionLoader)
    synthetic, _ = synthetic_images(3, cpu, 0, input_shape=(3, 64, 64))
    assert synthetic.shape == (3, 3, 64, 64) and synthetic.dtype == torch.uint8
    loader = DeviceLoader(synthetic, torch.zeros(3, dtype=torch.long), batch_size=2, device=cpu, seed=0,
                          input_shape=(3, 64, 64))
    assert next(loader)[0].shape == (2, 3, 64, 64)


def test_synthetic_data_holds_cifar10s_bytes_but_a_few_batches_at_large_sizes():
    from utils.data.sizes import FEWEST_SYNTHETIC_IMAGES, SYNTHETIC_TRAIN_IMAGES, synthetic_count

    assert synthetic_count((3, 32, 32)) == SYNTHETIC_TRAIN_IMAGES
    assert synthetic_count((3, 64, 64)) == SYNTHETIC_TRAIN_IMAGES // 4
    assert synthetic_count((3, 224, 224)) == FEWEST_SYNTHETIC_IMAGES


def test_synthetic_images_at_1024_hold_cifar10s_bytes_not_gigabytes_and_batch_as_before():
    """4,096 images of 1024x1024 would take 12.0 GiB held side by side: they overlap in one buffer."""
    from utils.data.dataset import synthetic
    from utils.data.loaders import copied_to
    from utils.data.sizes import FEWEST_SYNTHETIC_IMAGES, SYNTHETIC_BYTES

    cpu, shape = torch.device("cpu"), (3, 1024, 1024)
    data = synthetic(cpu, seed=0, input_shape=shape)
    images = data.train_images
    assert images.shape == (FEWEST_SYNTHETIC_IMAGES, *shape) and images.dtype == torch.uint8
    assert images.untyped_storage().nbytes() <= SYNTHETIC_BYTES + 3 * 1024 * 1024
    assert data.info["train_images"] == len(data.train_labels) == FEWEST_SYNTHETIC_IMAGES
    some = images[torch.tensor([0, 1, 2048, 4095])]
    assert all(not torch.equal(some[i], some[j]) for i in range(4) for j in range(i))  # each image its own
    host = copied_to(images, cpu)  # as the torchvision loader takes them from a GPU: the buffer, not 12 GiB
    assert host.untyped_storage().nbytes() == images.untyped_storage().nbytes()
    assert torch.equal(host[4095], images[4095])
    batch, labels = next(DeviceLoader(images, data.train_labels, batch_size=2, device=cpu, seed=0, input_shape=shape))
    assert batch.shape == (2, *shape) and labels.shape == (2,)


def test_overlapping_synthetic_images_are_fixed_by_the_seed_and_side_by_side_up_to_cifar10s_bytes():
    cpu = torch.device("cpu")
    images, labels = synthetic_images(4096, cpu, seed=0, input_shape=(3, 224, 224))
    again, again_labels = synthetic_images(4096, cpu, seed=0, input_shape=(3, 224, 224))
    other, _ = synthetic_images(4096, cpu, seed=1, input_shape=(3, 224, 224))
    assert torch.equal(images, again) and torch.equal(labels, again_labels) and not torch.equal(images[7], other[7])
    assert not images.is_contiguous()
    plain, _ = synthetic_images(50_000, cpu, seed=0)  # CIFAR-10's count and size: a plain tensor, as before
    assert plain.is_contiguous() and torch.equal(plain[:10], torch.randint(
        0, 256, (10, 3, 32, 32), dtype=torch.uint8, generator=torch.Generator().manual_seed(0)))


def test_the_files_and_sums_are_torchvision_s():
    """cifar10.py names them itself, so that finding a copy takes no torch (the GPU suite's --plan)."""
    from torchvision.datasets import CIFAR10

    assert (cifar10.FOLDER, cifar10.TRAIN_FILES, cifar10.TEST_FILES, cifar10.META_FILE) == (
        CIFAR10.base_folder, CIFAR10.train_list, CIFAR10.test_list, [CIFAR10.meta["filename"], CIFAR10.meta["md5"]])
    assert (cifar10.URL, cifar10.ARCHIVE, cifar10.ARCHIVE_MD5) == (CIFAR10.url, CIFAR10.filename, CIFAR10.tgz_md5)
