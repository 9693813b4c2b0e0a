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
