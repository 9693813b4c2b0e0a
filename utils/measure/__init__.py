"""Measurement stage: step times without host syncs, peak memory, FLOPs and MFU, the
progress bar, and the environment a result depends on. Knows nothing of training."""
