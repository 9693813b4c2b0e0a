"""Training stage: precision modes, the one training step, building a mode's trainer, the
timed loop, stop signals and rank agreement, checkpoints, and data-parallel processes."""
