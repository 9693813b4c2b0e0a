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
