"""--max-batch: the largest batch a mode trains in the GPU's memory, found by doubling then
bisection, and the refusal without a GPU."""
from conftest import assert_user_error, run_main
from utils.training.max_batch import largest_batch


def test_the_largest_batch_is_found_by_doubling_then_bisection():
    tried = []

    def fits(batch):
        tried.append(batch)
        return batch <= 300

    assert largest_batch(fits, 32) == 300
    assert tried[:5] == [32, 64, 128, 256, 512] and len(tried) <= 5 + 9  # bisection of 256..512
    assert largest_batch(lambda batch: batch <= 20, 32) == 20  # below the start: bisection from 0
    assert largest_batch(lambda batch: True, 32, limit=100) == 64


def test_max_batch_needs_a_gpu():
    assert_user_error(run_main("--max-batch", "-n", "2", "--data", "synthetic"), "--max-batch", "add -p/--gpu")


def test_each_try_trains_on_labels_of_the_runs_classes(monkeypatch):
    """A try's random labels are of the plan's classes: a label beyond a head of 3 classes would
    be a device-side assert on CUDA. Checked on the CPU, the step and the sync stood in for."""
    import torch

    from utils.config import RunConfig
    from utils.modes import MODES
    from utils.training import max_batch

    seen = []
    monkeypatch.setattr(max_batch, "train_step", lambda model, batches, *rest: seen.append(batches.first[1]))
    monkeypatch.setattr(torch.cuda, "synchronize", lambda device: None)
    config = RunConfig.build(data="synthetic", num_classes=3, batch_size=4)
    plan = config.plan(batch_norm=True, world_size=1, num_classes=3)
    fits = max_batch.fits_on_gpu(torch.nn.Linear(3, 3), MODES["fp32"], config.training, config.precision, config.data,
                                 plan, torch.device("cpu"))
    assert fits(64) and seen and all(int(labels.max()) <= 2 for labels in seen)
