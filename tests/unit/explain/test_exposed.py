"""Exposed communication: interval arithmetic against hand-computed figures."""
from utils.explain.exposed import exposed, length, subtract, union


def test_union_merges_overlaps_and_drops_empty_intervals():
    assert union([(5, 9), (0, 3), (2, 4), (7, 7), (9, 10)]) == [(0, 4), (5, 10)]


def test_subtract_keeps_what_lies_outside():
    assert subtract([(0, 10), (20, 30)], [(2, 4), (8, 22), (25, 26)]) == [(0, 2), (4, 8), (22, 25), (26, 30)]
    assert length(subtract([(0, 10)], [(0, 10)])) == 0


def test_overlapped_all_reduce_is_free_and_the_rest_is_exposed():
    # all-reduce 0-10 and 5-20 (20 units), compute 2-4 and 8-12 (6 of them overlapped): 14 exposed
    assert exposed([(0, 10), (5, 20)], [(2, 4), (8, 12)]) == 14
    assert exposed([(0, 10)], [(0, 10)]) == 0


def test_the_training_threads_own_all_reduce_calls_are_not_busy():
    # a gradient hook (busy 0-100) calls all-reduce 30-50; gloo's worker reduces 40-70
    assert exposed([(30, 50), (40, 70)], [(0, 100)], [(30, 50)]) == 20


def event(name, start, end, thread=1, parent=None, device="CPU"):
    """What exposed_comm_us reads of a profiler event."""
    import types

    import torch
    return types.SimpleNamespace(name=name, time_range=types.SimpleNamespace(start=start, end=end), thread=thread,
                                 cpu_parent=parent, device_type=getattr(torch.autograd.DeviceType, device),
                                 is_async=False)


def test_the_profilers_cpu_events_give_the_exposed_all_reduce():
    """A gradient hook (40-60) launches an all-reduce (45-50) that gloo's worker runs 45-80: the
    training thread is busy 0-45 and 50-60, so 45-50 and 60-80 are exposed, 25 µs."""
    from utils.explain.profiler import exposed_comm_us

    hook = event("autograd::engine::evaluate_function: torch::autograd::AccumulateGrad", 40, 60)
    events = [event("ProfilerStep#1", 0, 100), event("aten::convolution_backward", 0, 40), hook,
              event("c10d::allreduce_", 45, 50, parent=hook), event("gloo:all_reduce", 45, 80, thread=2)]
    assert exposed_comm_us(events, cuda=False) == 25


def test_the_profilers_kernels_give_the_exposed_all_reduce_on_cuda():
    from utils.explain.profiler import exposed_comm_us

    events = [event("aten::conv2d", 0, 10), event("sm90_xmma_fprop_implicit_gemm", 0, 50, device="CUDA"),
              event("ncclDevKernel_AllReduce_Sum_f32_RING_LL", 30, 70, device="CUDA")]
    assert exposed_comm_us(events, cuda=True) == 20
