"""The settings besides the precision mode that change a run's numbers, named once.

Runs are merged into one comparison only when all of these match (utils/results/record.py's
setup_of, which adds the device, torch, ranks and data); every one is a column of the CSV; a
checkpoint holds them, and a resume refuses a change of those in RESUME_KEYS. No torch here.
"""
SETUP_KEYS = {  # config field: its type in a results file or a checkpoint
    "model": str, "stem": str, "batch_size": int, "accum_steps": int, "steps": int, "warmup": int, "loader": str,
    "channels_last": bool, "compile": bool, "optimizer_impl": str, "lr": float, "lr_schedule": str,
    "warmup_lr_steps": int, "momentum": float, "weight_decay": float, "label_smoothing": float, "clip_grad": float,
}
# The settings that change the accuracy verdict, not the step times: a merge never pools runs
# asked different accuracy questions (utils/results/record.py's setup_of); each is a CSV column.
ACCURACY_KEYS = ("target_accuracy", "accuracy_margin", "eval_every")
# The models whose --stem applies (their `conv1` and `maxpool`); the table shows it only for them.
RESNET_FAMILY = ("resnet", "resnext", "wide_resnet")
# What a resume refuses to change, checked in every checkpoint's config (steps may grow).
RESUME_KEYS = ("model", "stem", "batch_size", "accum_steps", "lr_schedule", "loader")
# Also refused when changed, for checkpoints that hold them: a resumed optimizer and schedule
# keep their own, so the results would record settings that never ran.
RESUME_SETTINGS = ("lr", "momentum", "weight_decay", "nesterov", "label_smoothing", "clip_grad")
