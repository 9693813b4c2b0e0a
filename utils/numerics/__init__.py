"""--numerics: the gradient census (census.py), why FP16 needs loss scaling, and float16's
limits it measures against (fp16.py). Nothing here imports torch at package level, so that the
figure (utils/results/plot.py) reads float16's limits without it."""
