"""Decoding on the GPU without a GPU: --decode gpu's path (utils/data/gpu_decode.py) runs on the CPU
here, as torchvision's decode_jpeg decodes a batch on either device; --loader dali
(utils/data/dali.py) runs on a fake DALI that records the pipeline it is asked to build and hands
back batches. Each is refused in one sentence where it cannot run: no CUDA, a torchvision without
batched GPU decoding or without nvJPEG, no DALI."""
import io
import random
import sys
import types

import numpy as np
import pytest
import torch
from PIL import Image

from conftest import assert_user_error, image_tree, run_main
from utils.data import dali, gpu_decode, imagefolder, recipe, streamed
from utils.data.images import BadImages
from utils.errors import UserError

CPU = torch.device("cpu")


def jpeg_bytes(size=(64, 48), colour=(200, 40, 10)):
    picture = io.BytesIO()
    Image.new("RGB", size, colour).save(picture, "JPEG", quality=95)
    return picture.getvalue()


def test_the_crop_and_flip_drawn_for_the_device_are_those_the_workers_draw():
    for sample in range(50):
        draws = random.Random(f"4:{sample}")
        box = recipe.crop_box(640, 480, draws)
        assert gpu_decode.crop_plan(640, 480, 224, f"4:{sample}") == (box, draws.random() < 0.5)
    box, flip = gpu_decode.crop_plan(640, 480, 224, None)  # Resize(256) then CenterCrop(224), as one box
    assert (box, flip) == ((30, 110, 420, 420), False)


def test_jpegs_are_left_to_the_device_and_decoded_there_in_one_call_other_files_are_not():
    jpeg = gpu_decode.encoded(jpeg_bytes(), "a.jpg", 16, "0:1")
    assert jpeg is not None and jpeg.size == 16 and jpeg.data.dtype == torch.uint8
    png = io.BytesIO()
    Image.new("RGB", (8, 8)).save(png, "PNG")
    assert gpu_decode.encoded(png.getvalue(), "a.png", 16, None) is None
    broken = gpu_decode.Encoded(torch.frombuffer(bytearray(jpeg_bytes()[:200]), dtype=torch.uint8), (0, 0, 10, 10),
                                False, "cut.jpg", 16)
    pictures, failed = gpu_decode.decode_on(CPU, [jpeg, broken, jpeg])
    assert [None if picture is None else tuple(picture.shape) for picture in pictures] == \
        [(3, 16, 16), None, (3, 16, 16)]
    assert failed == [("cut.jpg", "the JPEG decoder on the device could not decode it")]
    assert abs(float(pictures[0][0].float().mean()) - 200) < 6  # the red of the image, cropped and resized


def test_a_streamed_folder_decoded_on_the_device_keeps_its_batches_full_and_names_a_jpeg_it_cannot_decode(tmp_path):
    tree = image_tree(tmp_path / "tree", per_class=6)  # PNGs: decoded by the workers
    for name in ("cat", "dog"):
        (tree / name / "j.jpg").write_bytes(jpeg_bytes())
    (tree / "eel" / "cut.jpg").write_bytes(jpeg_bytes()[:300])  # a JPEG's header, not its image
    listing = imagefolder.listing(str(tree), skip_bad=False)
    stream = streamed.FolderStream(16, 0, ((0.5,) * 3, (0.25,) * 3), BadImages(False, "--data imagefolder"),
                                   len(listing.training), len(listing.evaluation), True, listing)
    loader = stream.train_loader(batch_size=7, device=CPU, seed=0, channels_last=False, shard=(0, 1))
    for _ in range(6):
        images, labels = next(loader)
        assert images.shape == (7, 3, 16, 16) and len(labels) == 7
    assert stream.bad.count == 1 and stream.bad.examples[0][0] == str(tree / "eel" / "cut.jpg")


def test_decoding_on_the_gpu_is_refused_where_it_cannot_run(monkeypatch):
    with pytest.raises(UserError, match="--decode gpu decodes JPEGs on a CUDA GPU, and this run is on the CPU"):
        gpu_decode.check_available(CPU)
    from utils import compat
    monkeypatch.setattr(compat, "torchvision_release", lambda: (0, 18))
    with pytest.raises(UserError, match="--decode gpu needs torchvision 0.19 or newer"):
        gpu_decode.check_available(torch.device("cuda"))
    monkeypatch.setattr(compat, "torchvision_release", lambda: (0, 29))
    import torchvision.io

    def no_nvjpeg(*args, **kwargs):
        raise RuntimeError("Not compiled with GPU support")
    monkeypatch.setattr(torchvision.io, "decode_jpeg", no_nvjpeg)
    with pytest.raises(UserError, match=r"this torchvision cannot decode JPEGs on cuda \(RuntimeError: Not compiled "
                                        r"with GPU support\); install a CUDA build"):
        gpu_decode.check_available(torch.device("cuda"))


@pytest.mark.parametrize("argv, phrases", [
    (["--data", "imagefolder", "--decode", "gpu"], ["--decode gpu decodes JPEGs on a CUDA GPU, and this run is on the "
                                                    "CPU (no -p)"]),
    (["--data", "cifar10", "--decode", "gpu", "-p"], ["--data cifar10 is held in memory, decoded before it"]),
    (["--data", "imagefolder", "--loader", "device", "--decode", "gpu", "-p"], ["--loader device decodes the folder "
                                                                                "once before it"]),
    (["--data", "imagefolder", "--loader", "dali"], ["--loader dali runs NVIDIA DALI's pipeline on a CUDA GPU"]),
    (["--data", "webdataset", "--loader", "dali", "-p"], ["DALI's tar reader cannot parse the text labels"]),
    (["--data", "imagefolder", "--loader", "dali", "-p", "--skip-bad-images"], ["cannot leave it out"]),
    (["--data", "synthetic", "--loader", "dali", "-p"], ["--loader dali reads an image folder's files"]),
])
def test_each_flag_of_the_gpu_pipelines_is_refused_where_it_cannot_apply(argv, phrases):
    assert_user_error(run_main(*argv, "--check-flags"), *phrases)


class FakeNode:
    """What a fake DALI operator returns: its name and arguments, for the test to read."""

    def __init__(self, operator, *inputs, **arguments):
        self.operator, self.inputs, self.arguments = operator, inputs, arguments


def fake_dali(calls, batches):
    """Modules nvidia.dali and nvidia.dali.plugin.pytorch whose operators record their calls in
    `calls` and whose iterator hands back `batches` (dicts of images and labels)."""
    def operator(name, outputs=1):
        def call(*inputs, **arguments):
            calls.append((name, arguments))
            node = FakeNode(name, *inputs, **arguments)
            return (node, FakeNode(name + ".labels")) if outputs == 2 else node
        return call

    fn = types.SimpleNamespace(readers=types.SimpleNamespace(file=operator("readers.file", 2)),
                               decoders=types.SimpleNamespace(image_random_crop=operator("image_random_crop")),
                               resize=operator("resize"), crop_mirror_normalize=operator("crop_mirror_normalize"),
                               random=types.SimpleNamespace(coin_flip=operator("coin_flip")))

    def pipeline_def(**settings):
        def decorate(function):
            def build():
                calls.append(("pipeline", settings))
                outputs = function()
                return types.SimpleNamespace(outputs=outputs, build=lambda: calls.append(("build", {})))
            return build
        return decorate

    def iterator(pipelines, names, **settings):
        calls.append(("iterator", dict(settings, names=names)))
        return iter(batches)

    dali_module = types.ModuleType("nvidia.dali")
    dali_module.fn, dali_module.pipeline_def = fn, pipeline_def
    dali_module.types = types.SimpleNamespace(RGB="RGB", UINT8="UINT8")
    plugin = types.ModuleType("nvidia.dali.plugin.pytorch")
    plugin.DALIGenericIterator = iterator
    plugin.LastBatchPolicy = types.SimpleNamespace(DROP="DROP")
    return {"nvidia": types.ModuleType("nvidia"), "nvidia.dali": dali_module,
            "nvidia.dali.plugin": types.ModuleType("nvidia.dali.plugin"), "nvidia.dali.plugin.pytorch": plugin}


def test_dali_builds_the_streamed_recipe_and_its_batches_are_normalised_like_every_streamed_batch(tmp_path,
                                                                                                 monkeypatch):
    listing = imagefolder.listing(str(image_tree(tmp_path / "tree", per_class=6)), skip_bad=False)
    stream = streamed.FolderStream(16, 0, ((0.5,) * 3, (0.25,) * 3), BadImages(False, "--data imagefolder"),
                                   len(listing.training), len(listing.evaluation), True, listing)
    produced = [[{"images": torch.full((4, 3, 16, 16), 128, dtype=torch.uint8),
                  "labels": torch.tensor([[0], [1], [2], [1]], dtype=torch.int32)}]] * 3
    calls = []
    for name, module in fake_dali(calls, produced).items():
        monkeypatch.setitem(sys.modules, name, module)
    loader = dali.loader(stream, batch_size=4, device=CPU, seed=7, channels_last=False, shard=(1, 2), on_gpu=True)
    images, labels = next(loader)
    assert images.shape == (4, 3, 16, 16) and labels.tolist() == [0, 1, 2, 1] and labels.dtype == torch.long
    assert torch.allclose(images, torch.full_like(images, (128 / 255 - 0.5) / 0.25), atol=1e-5)
    recorded = dict(calls)
    assert recorded["readers.file"]["files"] == [listing.index.path(position) for position in listing.training]
    assert (recorded["readers.file"]["shard_id"], recorded["readers.file"]["num_shards"]) == (1, 2)
    assert recorded["image_random_crop"] == {"device": "mixed", "output_type": "RGB", "random_area": [0.08, 1.0],
                                             "random_aspect_ratio": [0.75, 4 / 3], "num_attempts": 10}
    assert recorded["resize"] == {"resize_x": 16, "resize_y": 16} and recorded["pipeline"]["seed"] == 7
    assert len(loader) == int(np.ceil(len(listing.training) / 2 / 4))
    monkeypatch.setitem(sys.modules, "nvidia.dali", None)
    with pytest.raises(UserError, match=r"--loader dali needs NVIDIA DALI, which is not installed in this Python; "
                                        r"pip install nvidia-dali-cuda\d+0 --extra-index-url"):
        dali.modules()
