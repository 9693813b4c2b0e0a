"""ampbench's pipeline, one sub-package per stage (lower layers never import higher ones):

    errors, fileio   shared by every stage: the user-error type and all-or-nothing writes
    compat           the supported torch releases, every version check, the degraded paths taken
    safepickle       unpickling that rebuilds only what it is allowed to
    stop             stop signals, caught from argument parsing on (no torch)
    grad_comm        how gradients travel between processes: --grad-comm's dtypes and DDP's bucket
    spellings        the spellings kept for old scripts (--fp16 -s, --warmup), settled into current ones
    data/            CIFAR-10 on disk, synthetic images, the training and test loaders
    measure/         step timing, memory and a step's memory by kind, FLOPs, progress, the
                     environment a result depends on
    training/        precision modes, the training step, a mode's trainer, the timed loop, the run
                     context, rank agreement, checkpoints, DDP, --max-batch
    explain/         --explain's profile and diagnosis
    numerics/        --numerics' gradient census and float16's limits
    results/         the result record, comparison, table, JSON, CSV, plot and TensorBoard
    settings         a setting is a section's field that carries its flag and its roles
    config           RunConfig: the validated request in sections of settings, built once from
                     main.py's arguments; -h, docs/flags.md and the results record come from them
    app              what main.py runs: prepare, every (repeat, mode), finish
    report           `python -m utils.report`: merge result files of several jobs
"""
