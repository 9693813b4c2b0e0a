"""How a job's gradients travel between its processes: the dtypes --grad-comm takes and DDP's own
bucket size, which the config, the record and the validator read. No torch here. (Which settings
change a run's numbers is said on each setting's field: utils/config.py's SETUP_KEYS.)
"""
from __future__ import annotations

from typing import Any, Dict, Optional

# How DDP's gradients may travel (--grad-comm), and DDP's own bucket size (--bucket-mb's default).
GRAD_COMM = ("fp32", "fp16", "bf16")
DDP_BUCKET_MB = 25.0


def communication(grad_comm: Optional[str], bucket_mb: Optional[float], world_size: int) -> Dict[str, Any]:
    """How a job's gradients travelled, from its --grad-comm and --bucket-mb: {"grad_comm",
    "bucket_mb"}, both None in one process, where nothing travels; unset (as in files older than
    --grad-comm), fp32 gradients in DDP's own buckets."""
    if world_size <= 1:
        return {"grad_comm": None, "bucket_mb": None}
    return {"grad_comm": grad_comm or "fp32", "bucket_mb": bucket_mb or DDP_BUCKET_MB}
