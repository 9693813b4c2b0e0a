"""What a result depends on besides the code: versions, hardware, switches, command, time."""
from __future__ import annotations

import os
import platform
import shlex
import socket
import sys
from typing import Any, Dict, Optional

import torch
import torchvision

from utils import compat, provenance
from utils.clock import now_utc
from utils.provenance import command_output


def cpuinfo(field: str) -> Optional[str]:
    """The first value of `field` in /proc/cpuinfo ("model name", "flags"), or None."""
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith(field):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return None


def cpu_name() -> str:
    return cpuinfo("model name") or platform.processor() or platform.machine()


def device_name(device: torch.device) -> str:
    return torch.cuda.get_device_name(device) if device.type == "cuda" else cpu_name()


def driver_version() -> Optional[str]:
    """The NVIDIA driver's version, as nvidia-smi gives it (None without one)."""
    return command_output(["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"])


def tf32_flags() -> Dict[str, bool]:
    """Whether FP32 matmuls (cuBLAS) and convolutions (cuDNN) may use TF32 tensor cores now."""
    return {"matmul": torch.backends.cuda.matmul.allow_tf32, "cudnn_conv": torch.backends.cudnn.allow_tf32}


def collect(device: torch.device) -> Dict[str, Any]:
    """The environment of a run on `device` (the speed levers are in the config and each run)."""
    cuda = device.type == "cuda"
    git_commit, commit_source = provenance.commit()
    return {
        "python": platform.python_version(),
        "torch": torch.__version__,
        "torchvision": torchvision.__version__,
        "cuda": torch.version.cuda if cuda else None,
        "cudnn": torch.backends.cudnn.version() if cuda else None,
        "device": device_name(device),
        "device_type": device.type,
        "gpu_count": torch.cuda.device_count() if cuda else 0,
        "driver": driver_version() if cuda else None,
        "cpu_count": os.cpu_count(),
        "torch_threads": torch.get_num_threads(),
        "tf32": tf32_flags(),
        "degraded": compat.degraded(),  # paths taken because this torch lacks a newer API
        "cudnn_benchmark": torch.backends.cudnn.benchmark if cuda else None,
        "hostname": socket.gethostname(),
        "platform": platform.platform(),
        "git_commit": git_commit,
        "git_commit_source": commit_source,
        # the checkout's own change against its HEAD: it says nothing of a commit the suite names
        "git_diff_sha256": provenance.diff_digest() if commit_source == provenance.GIT_DESCRIBE else None,
        # the source files as they ran, .git or not: the commit whose tree has this digest is the code that ran
        "source_sha256": provenance.source_digest(),
        "command": shlex.join([sys.executable] + sys.argv),
        "timestamp_utc": now_utc(),
    }
