"""float16's limits, as numpy describes the format: what the gradient census (census.py)
measures against and the figure (plot.py) draws. No torch here, so that utils.report --plot
runs without it."""
import numpy as np

FLOAT16 = np.finfo(np.float16)
FP16_MAX = float(FLOAT16.max)  # 65504
FP16_MIN_NORMAL = float(FLOAT16.tiny)  # 2 ** -14
# numpy names the smallest subnormal from 1.22 on; it is the smallest normal's last mantissa bit
FP16_MIN_SUBNORMAL = float(getattr(FLOAT16, "smallest_subnormal", FP16_MIN_NORMAL * float(FLOAT16.eps)))  # 2 ** -24
