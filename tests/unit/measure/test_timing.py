"""StepTimer's arithmetic and HostCopy on the CPU, on a fake clock where time matters."""
import torch

from utils.measure import timing
from utils.measure.hostcopy import HostCopy
from utils.measure.timing import StepTimer


class FakeClock:
    def __init__(self, *marks):
        self.marks = list(marks)

    def __call__(self):
        return self.marks.pop(0)


def test_a_step_lasts_from_its_boundary_to_the_next_and_its_data_wait_until_its_batch(monkeypatch):
    # step 1 starts at 0 s, its batch is ready at 1 ms; step 2 starts at 10 ms, batch at 12 ms; closed at 30 ms
    monkeypatch.setattr(timing.time, "perf_counter", FakeClock(0.0, 0.001, 0.010, 0.012, 0.030))
    timer = StepTimer(torch.device("cpu"))
    for _ in range(2):
        timer.start_step()
        timer.batch_ready()
    timer.close()
    assert [round(ms, 9) for ms in timer.step_ms] == [10.0, 20.0]
    assert [round(ms, 9) for ms in timer.data_ms] == [1.0, 2.0]


def test_a_pause_between_closing_and_the_next_step_is_in_no_step(monkeypatch):
    """A checkpoint save closes the segment; its seconds belong to no step."""
    monkeypatch.setattr(timing.time, "perf_counter", FakeClock(0.0, 0.0, 0.005, 9.0, 9.0, 9.002))
    timer = StepTimer(torch.device("cpu"))
    timer.start_step()
    timer.batch_ready()
    timer.close()  # then 9 s of saving
    timer.start_step()
    timer.batch_ready()
    timer.close()
    assert [round(ms, 9) for ms in timer.step_ms] == [5.0, 2.0]
    assert timer.boundaries == [] and timer.data_ready == []


def test_a_host_copy_of_a_cpu_tensor_is_a_snapshot_ready_at_once():
    losses = torch.tensor([1.5, 2.5])
    copy = HostCopy(losses)
    losses.add_(10)  # the loop goes on writing to its tensor
    assert copy.done()
    assert copy.value() == [1.5, 2.5]
    assert HostCopy(torch.tensor(3.0)).value() == 3.0
