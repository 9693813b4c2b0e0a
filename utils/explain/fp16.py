"""float16's limits: what the gradient census (numerics.py) measures against and the figure
(plot.py) draws. No torch here, so that utils.report --plot runs without it."""
FP16_MAX = 65504.0
FP16_MIN_NORMAL = 2.0 ** -14
FP16_MIN_SUBNORMAL = 2.0 ** -24
