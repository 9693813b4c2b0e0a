"""ampbench's pipeline, one sub-package per stage (lower layers never import higher ones):

    errors, fileio   shared by every stage: the user-error type and all-or-nothing writes
    data/            CIFAR-10 on disk, synthetic images, the training and test loaders
    measure/         step timing, memory, FLOPs, progress, the environment a result depends on
    training/        precision modes, the training step, setup, the timed loop, checkpoints, DDP
    results/         the result record, comparison, table, JSON, CSV and plot
    config           RunConfig: the validated request, built once from main.py's arguments
    app              what main.py runs: modes x repeats, the results document, outputs, exit status
    report           `python -m utils.report`: merge result files of several jobs
"""
