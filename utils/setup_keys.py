"""The settings besides the precision mode that change a run's numbers, named once.

Runs are merged into one comparison only when all of these match (utils/results/record.py's
setup_of, which adds the device, torch, ranks and data); every one is a column of the CSV; a
checkpoint holds them, and a resume refuses a change of those in RESUME_KEYS. No torch here.
"""
from __future__ import annotations

from typing import Any, Dict, Optional

SETUP_KEYS = {  # config field: its type in a results file or a checkpoint
    "model": str, "stem": str, "image_size": int, "batch_size": int, "accum_steps": int, "steps": int, "warmup": int,
    "loader": str, "channels_last": bool, "compile": bool, "optimizer": str, "optimizer_impl": str,
    "lr": float, "lr_schedule": str,
    "warmup_lr_steps": int, "momentum": float, "weight_decay": float, "label_smoothing": float, "clip_grad": float,
    "grad_comm": str, "bucket_mb": float,
}
# The settings that change the accuracy verdict, not the step times: a merge never pools runs
# asked different accuracy questions (utils/results/record.py's setup_of); each is a CSV column.
ACCURACY_KEYS = ("target_accuracy", "accuracy_margin", "eval_every")
# What a resume refuses to change, checked in every checkpoint's config (steps may grow).
RESUME_KEYS = ("model", "stem", "image_size", "batch_size", "accum_steps", "lr_schedule", "loader")
# Also refused when changed, for checkpoints that hold them (earlier releases' lack some): every
# setting that changes the answer, with why, as the refusal says it. The warm-up is not among
# them (each process leaves out its own, and its default follows --steps, which may grow), nor
# are the outputs, the progress display or --accuracy-margin (the verdict is recomputed from the
# results); the mode may change between FP32-weight modes, with a warning.
KEPT_BY_THE_OPTIMIZER = ("the resumed optimizer keeps the checkpoint's, so the results would record a setting that "
                         "never ran")
MIXED_TIMINGS = "the step times would mix two setups"
RESUME_SETTINGS = {
    "model_factory": "the weights are those of the model its factory built",
    "model_class": "the weights are those of a model of that class",
    "num_classes": "the model's head was built for that many classes",
    "optimizer": "the checkpoint's optimizer state is that optimizer's",
    "lr": KEPT_BY_THE_OPTIMIZER, "momentum": KEPT_BY_THE_OPTIMIZER, "weight_decay": KEPT_BY_THE_OPTIMIZER,
    "nesterov": KEPT_BY_THE_OPTIMIZER, "label_smoothing": KEPT_BY_THE_OPTIMIZER, "clip_grad": KEPT_BY_THE_OPTIMIZER,
    "seed": "the weights and the data order are the checkpoint's seed's",
    "dropout": "the weights so far were trained with the checkpoint's dropout",
    "on_nan": "the steps so far met a non-finite loss by the checkpoint's rule",
    "loss_scale": "fp16-master's steps so far were scaled by the checkpoint's loss scale",
    "eval_every": "the accuracy curve would mix two cadences",
    "target_accuracy": "the run would be asked another question than its evaluations so far",
    "stop_at_target": "the run would end by another rule than its evaluations so far",
    "channels_last": MIXED_TIMINGS, "compile": MIXED_TIMINGS, "compile_mode": MIXED_TIMINGS,
    "optimizer_impl": MIXED_TIMINGS, "no_cudnn_benchmark": MIXED_TIMINGS,
    "grad_comm": MIXED_TIMINGS, "bucket_mb": MIXED_TIMINGS,
}
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
