"""What the machine is, asked once per suite command: the device's label and the modes it
refuses (with the reason), and the data main.py's runs will get."""
from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Dict, Iterable, Optional, Tuple


class NoDevice(Exception):
    """No CUDA device is visible to a suite that needs one."""


def device_facts(quick: bool, mode_names: Iterable[str]) -> Tuple[str, Dict[str, str]]:
    """(device label, the modes of `mode_names` this device cannot run, with the reason)."""
    try:
        import torch
    except ImportError as error:  # --plan still plans for the devices saved under the results root
        raise NoDevice(f"this Python cannot import torch ({error}); run the suite in the environment "
                       "ampbench is installed in (README's set-up).") from None

    from utils import modes
    from utils.errors import UserError
    from utils.training import precision

    device = torch.device("cpu" if quick else "cuda")
    if device.type == "cuda" and not torch.cuda.is_available():
        raise NoDevice("no CUDA device is visible; run --quick for the CPU check.")
    refused = {}
    for name in dict.fromkeys(mode_names):
        try:  # --quick emulates FP8 on the CPU, and runs float16 there with --allow-slow-fp16
            precision.check_supported(modes.MODES[name], device, fp8_emulate=quick, allow_slow_fp16=quick)
        except UserError as error:  # the sentence says why
            refused[name] = str(error)
    if device.type == "cuda":
        return torch.cuda.get_device_name(), refused
    from utils.measure.envinfo import cpu_name

    return f"CPU ({cpu_name()})", refused


def software() -> Dict[str, Optional[str]]:
    """What a pass's figures depend on besides the code and the GPU: torch, CUDA and the driver
    (None without them); a folder's passes must agree on them (ledger.py)."""
    import torch

    from utils.measure.envinfo import driver_version

    cuda = torch.cuda.is_available()
    return {"torch": torch.__version__, "cuda": torch.version.cuda if cuda else None,
            "driver": driver_version() if cuda else None}


def folder_name(label: str) -> str:
    """results/<device>/: the device label with only safe characters."""
    return re.sub(r"[^A-Za-z0-9._-]+", "-", label).strip("-")


@dataclass(frozen=True)
class DataFacts:
    """What main.py's runs train on: why they get synthetic data instead of the CIFAR-10 in the
    suite's folder (None when they get it; main.py's own choice, --data auto, which downloads a
    missing copy), and the images an epoch and an evaluation read."""
    without_cifar10: Optional[str]
    train_images: int
    test_images: int


def data_facts(data_dir: str, allow_unverified: bool) -> DataFacts:
    """What main.py's runs, --data auto as the suite runs them, will train on: read without torch
    (--plan prints without it), a missing copy downloaded where torchvision can, as the runs would."""
    from utils.config import RunConfig
    from utils.data import cifar10
    from utils.data.sizes import synthetic_count

    settings = RunConfig.build(data="auto", data_dir=data_dir, allow_unverified=allow_unverified).data
    if cifar10.why_unusable(data_dir, settings.download, allow_unverified):
        return DataFacts(f"no usable CIFAR-10 in {cifar10.batches_folder(data_dir)} (give --data-dir)",
                         synthetic_count(settings.input_shape), 0)
    return DataFacts(None, *cifar10.image_counts(data_dir))
