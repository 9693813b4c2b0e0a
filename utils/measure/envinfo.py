"""What a result depends on besides the code: versions, hardware, switches, command, time."""
from __future__ import annotations

import hashlib
import os
import platform
import shlex
import socket
import subprocess
import sys
from typing import Any, Dict, List, Optional

import torch
import torchvision

from utils import compat
from utils.clock import now_utc

PROJECT_DIR = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def command_output(command: List[str]) -> Optional[str]:
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=10, cwd=PROJECT_DIR)
    except (OSError, subprocess.SubprocessError):
        return None
    return done.stdout.strip() or None if done.returncode == 0 else None


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


def tf32_flags() -> Dict[str, bool]:
    """Whether FP32 matmuls (cuBLAS) and convolutions (cuDNN) may use TF32 tensor cores now."""
    return {"matmul": torch.backends.cuda.matmul.allow_tf32, "cudnn_conv": torch.backends.cudnn.allow_tf32}


def diff_digest() -> Optional[str]:
    """The sha256 of the uncommitted change (`git diff HEAD`), so that two "-dirty" results
    can be told apart; None for a clean tree or outside git."""
    done = command_output(["git", "diff", "HEAD", "--no-ext-diff", "--binary"])
    return hashlib.sha256(done.encode()).hexdigest() if done else None


def collect(device: torch.device) -> Dict[str, Any]:
    """The environment of a run on `device` (the speed levers are in the config and each run)."""
    cuda = device.type == "cuda"
    return {
        "python": platform.python_version(),
        "torch": torch.__version__,
        "torchvision": torchvision.__version__,
        "cuda": torch.version.cuda if cuda else None,
        "cudnn": torch.backends.cudnn.version() if cuda else None,
        "device": device_name(device),
        "device_type": device.type,
        "gpu_count": torch.cuda.device_count() if cuda else 0,
        "driver": command_output(["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"])
        if cuda else None,
        "cpu_count": os.cpu_count(),
        "torch_threads": torch.get_num_threads(),
        "tf32": tf32_flags(),
        "degraded": compat.degraded(),  # paths taken because this torch lacks a newer API
        "cudnn_benchmark": torch.backends.cudnn.benchmark if cuda else None,
        "hostname": socket.gethostname(),
        "platform": platform.platform(),
        "git_commit": command_output(["git", "describe", "--always", "--dirty", "--abbrev=40"]),
        "git_diff_sha256": diff_digest(),
        "command": shlex.join([sys.executable] + sys.argv),
        "timestamp_utc": now_utc(),
    }
