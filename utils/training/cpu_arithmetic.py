"""Which low-precision arithmetic this CPU runs fast, from /proc/cpuinfo's flags: the evidence
for refusing float16 before a CPU run (utils/training/precision.py's check_supported) and for
--explain's "no fast float16 arithmetic" (utils/explain/diagnose.py). No torch at import, so
that reading results never loads it.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, List, Optional

if TYPE_CHECKING:
    from utils.modes import Mode
# CPU instruction sets that make float16 / bfloat16 arithmetic faster than FP32 (/proc/cpuinfo flags)
FAST_CPU_FLAGS = {"float16": ("avx512_fp16", "amx_fp16"), "bfloat16": ("avx512_bf16", "amx_bf16")}


def cpu_flags() -> Optional[List[str]]:
    """Which of FAST_CPU_FLAGS this CPU lists in /proc/cpuinfo (the evidence for "no fast
    float16 arithmetic"); None where the file is missing."""
    from utils.measure.envinfo import cpuinfo  # imports torch: only when a CPU run is checked or explained

    present = cpuinfo("flags")
    if present is None:
        return None
    return [flag for flags in FAST_CPU_FLAGS.values() for flag in flags if flag in present.split()]


def slow_on_this_cpu(mode: Mode) -> Optional[str]:
    """Why `mode` will run slowly on this CPU, or None: its low-precision dtype has none of
    FAST_CPU_FLAGS here, so it runs on fallback kernels, many times slower than fp32 for float16.
    Read before training, from /proc/cpuinfo."""
    dtype, flags = mode.low_precision_dtype, cpu_flags()
    if dtype is None or flags is None or set(FAST_CPU_FLAGS[dtype]) & set(flags):
        return None
    return (f"this CPU has no fast {dtype} arithmetic (neither {' nor '.join(FAST_CPU_FLAGS[dtype])} in "
            f"/proc/cpuinfo), so {mode.name} runs on fallback kernels: expect it to be slower than fp32, for "
            "float16 often many times slower")
