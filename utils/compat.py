"""The torch and torchvision releases ampbench runs on, and which later APIs this one has.

Every version check lives here, so that the code runs from torch 1.11 (NVIDIA's NGC 22.01
container) to the newest. Where this torch lacks an API, the caller takes a degraded path and
records it with `degrade`; a run's results list those notes (env.degraded).
"""
from __future__ import annotations

import re
from typing import Dict, Optional, Sequence, Tuple

from utils import console
from utils.errors import UserError, not_installed

MIN_TORCH = (1, 11)
MIN_TORCHVISION = (0, 12)
PYTHONS = ((3, 8), (3, 13))  # the oldest and the newest Python ampbench runs on (docs/torch-releases.md)
# The torchao release requirements-fp8.txt pins, whose float8 recipes and Float8Linear the fp8 modes are
# built on, and the torch it is built for.
MIN_TORCHAO = (0, 18)
MIN_FLOAT8_TORCH = (2, 11)  # torchao 0.18 is built for torch 2.11 on
_degraded: Dict[str, str] = {}


def release(version: str) -> Tuple[int, int]:
    """(major, minor) of a version string such as '2.3.1+cu121' or NGC's '1.11.0a0+17540c5'."""
    match = re.match(r"(\d+)\.(\d+)", version)
    return (int(match.group(1)), int(match.group(2))) if match else (0, 0)


def check_versions() -> None:
    """Refuse a torch or torchvision older than the oldest release ampbench is tested on."""
    try:
        import torch
        import torchvision
    except ImportError as error:
        raise UserError(not_installed(error.name or "torch")) from None
    for name, module, minimum in (("torch", torch, MIN_TORCH), ("torchvision", torchvision, MIN_TORCHVISION)):
        if release(module.__version__) < minimum:
            raise UserError(f"{name} {module.__version__} is too old: ampbench needs {name} "
                            f"{minimum[0]}.{minimum[1]} or newer (an NGC PyTorch container from 22.01 on).")


def distribution_version(name: str) -> Optional[str]:
    """The installed version of the package `name`, read from its metadata without importing it
    (an import may fail for the very reason it is asked about), or None."""
    from importlib import metadata

    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return None


def torch_release() -> Tuple[int, int]:
    import torch
    return release(torch.__version__)


def torchvision_release() -> Tuple[int, int]:
    import torchvision
    return release(torchvision.__version__)


def has_flop_counter() -> bool:
    return torch_release() >= (2, 1)  # torch.utils.flop_counter


def runs_on_meta() -> bool:
    return torch_release() >= (2, 1)  # every model's forward on the meta device, torch.func.functional_call


def has_fused_sgd() -> bool:
    return torch_release() >= (2, 3)  # torch.optim.SGD(fused=True), on CUDA; on the CPU later


def has_fused_adamw() -> bool:
    return torch_release() >= (2, 0)  # torch.optim.AdamW(fused=True), on CUDA; on the CPU later


def has_compile() -> bool:
    return torch_release() >= (2, 0)  # torch.compile


def has_scaled_dot_product_attention() -> bool:
    return torch_release() >= (2, 0)  # F.scaled_dot_product_attention


def has_default_device() -> bool:
    return torch_release() >= (2, 3)  # torch.get_default_device (set_default_device came in 2.0)


def has_weights_only_load() -> bool:
    return torch_release() >= (1, 13)  # torch.load(weights_only=True)


def has_device_grad_scaler() -> bool:
    return torch_release() >= (2, 3)  # torch.amp.GradScaler(device_type), CPU included


def has_ddp_device_id() -> bool:
    return torch_release() >= (2, 3)  # init_process_group(device_id=)


def has_float8_training() -> bool:
    return torch_release() >= MIN_FLOAT8_TORCH  # torchao.float8 training (torchao 0.18)


def has_model_registry() -> bool:
    return torchvision_release() >= (0, 14)  # torchvision.models.list_models / get_model


def cuda_pci_bus_id(index: int) -> Optional[str]:
    """cuda:`index`'s PCI bus id as NVML spells it ("00000000:3B:00.0"), or None where this
    torch's device properties lack it (older releases)."""
    import torch
    properties = torch.cuda.get_device_properties(index)
    if not hasattr(properties, "pci_bus_id"):
        return None
    # torch's stub of the device properties lacks the pci_ fields its binding has
    return f"{properties.pci_domain_id:08X}:{properties.pci_bus_id:02X}:{properties.pci_device_id:02X}.0"  # type: ignore[attr-defined]


def degrade(key: str, note: str) -> None:
    """Record that this run took a degraded path (`note` says which, and what it costs)."""
    _degraded[key] = note


def degraded() -> Dict[str, str]:
    """The degraded paths taken so far, as {key: note}."""
    return dict(_degraded)


def describe() -> Tuple[str, int]:
    """One line on this Python, torch and its GPUs (what the cluster scripts print before training),
    and the number of GPUs this process sees."""
    import platform

    import torch
    import torchvision

    gpus = torch.cuda.device_count() if torch.cuda.is_available() else 0
    names = sorted({torch.cuda.get_device_name(i) for i in range(gpus)})
    cuda = f"CUDA {torch.version.cuda}" if torch.version.cuda else "no CUDA"
    seen = f"{gpus} GPU(s): {', '.join(names)}" if gpus else "no GPU visible"
    return (f"Python {platform.python_version()}, torch {torch.__version__} ({cuda}), torchvision "
            f"{torchvision.__version__}, {seen}"), gpus


def main(argv: Optional[Sequence[str]] = None) -> int:
    """python -m utils.compat: check this torch, describe it, end with a line `gpus=N`; exit 2 if too old."""
    console.Parser("utils.compat", prog="python -m utils.compat",
                   description="Check this torch, describe it and its GPUs, end with a line gpus=N.").parse_args(argv)
    check_versions()
    line, gpus = describe()
    print(line)
    print(f"gpus={gpus}")
    return 0


if __name__ == "__main__":
    raise SystemExit(console.run("utils.compat", main))
