"""Reads one file path per line on stdin and answers one line per path: how ampbench's own
readers treat that file. Run as a separate process by test_hostile_files.py, so that a crash
(a segfault from a forged array) ends this process and fails the test instead of pytest.

    PYTHONPATH=. python tests/campaigns/hostile_worker.py batch|checkpoint [CHECKPOINT_ARGS...]

Answers: "valid" (the reader returned what it promises), "refused: <sentence>" (a UserError),
"broken: <what>" (anything else: a wrong result or another exception).
"""
import sys
import traceback

import torch

from utils.errors import UserError


def check_batch(path):
    from utils.data import cifar10
    images, labels = cifar10.read_batch(path)
    if not (images.dtype == torch.uint8 and images.dim() == 4 and tuple(images.shape[1:]) == (3, 32, 32)
            and labels.dtype == torch.int64 and labels.shape == (len(images),) and len(images) > 0
            and 0 <= int(labels.min()) and int(labels.max()) <= 9):
        return f"broken: read_batch returned {images.dtype} {tuple(images.shape)} and {labels.dtype} {labels.shape}"
    return "valid"


def checkpoint_checker():
    """load, check_compatible, restore into a fresh trainer of the run that the genuine
    checkpoint came from, and one training step: what a --resume does."""
    from models import factory
    from utils import launch
    from utils.config import RunConfig
    from utils.data import dataset
    from utils.training import checkpoint
    from utils.training.step import advance, train_step
    from utils.training.trainer import build_trainer
    cpu = torch.device("cpu")
    config = RunConfig.build(model="squeezenet1_1", batch_size=4, steps=6, warmup=1, data="synthetic")
    model = factory.build_model(config.training.model, config.training.stem)
    data, _ = dataset.load(config.data, cpu, config.training.seed)
    plan = config.plan(factory.has_batch_norm(model), 1, len(data.train_images),
                       model_class=factory.class_name(model))  # as utils/app.py plans a run
    mode = config.modes[0]
    setup = checkpoint.resume_setup(data, launch.World())

    def check(path):
        state = checkpoint.load(path, cpu)
        checkpoint.check_compatible(state, config.record(plan), mode, path, setup)
        trainer = build_trainer(model, mode, data, plan, config.training, config.precision, config.data, config.speed,
                                config.distributed, cpu, launch.World())
        checkpoint.restore(trainer, state, cpu, path)
        train_step(trainer.step_model, [next(trainer.loader)], trainer.criterion, trainer.optimizer, trainer.scaler,
                   mode, cpu)  # and one step of training from it, as --resume goes on
        advance(trainer.scheduler)
        return "valid"
    return check


def main():
    kind = sys.argv[1]
    check = check_batch if kind == "batch" else checkpoint_checker()
    print("ready", flush=True)
    for line in sys.stdin:
        path = line.rstrip("\n")
        try:
            answer = check(path)
        except UserError as error:
            answer = "refused: " + str(error).replace("\n", " ")
        except BaseException as error:  # noqa: B902 - every other outcome is the finding
            answer = f"broken: {type(error).__name__}: {error} | " + traceback.format_exc().replace("\n", " | ")[-600:]
        print(answer, flush=True)


if __name__ == "__main__":
    main()
