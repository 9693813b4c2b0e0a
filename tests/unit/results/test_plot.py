"""--plot: one colour per mode in every panel, and labels that never run into each other."""
import itertools
from dataclasses import replace

import pytest

from conftest import ROOT
from utils.results import merge, plot

EXPLAINED = ROOT / "tests" / "unit" / "results" / "data" / "explained.json"  # --explain --numerics, fp32 and amp-fp16


pytest.importorskip("matplotlib")
from matplotlib.collections import PathCollection  # noqa: E402  (after the skip: matplotlib is optional)
from matplotlib.colors import to_rgba  # noqa: E402


@pytest.fixture
def document():
    (merged,) = merge.merge(merge.load_result(EXPLAINED))  # its comparison rows computed again from its runs
    return merged


def panel_colours(axis):
    """{x tick label: bar face colour} of a bar panel."""
    labels = [label.get_text() for label in axis.get_xticklabels()]
    return {label: bar.get_facecolor() for label, bar in zip(labels, axis.patches)}


def test_a_mode_has_one_colour_in_every_panel(document):
    import matplotlib.pyplot as plt
    figure = plot.figure_of(document)
    try:
        axes = figure.axes
        want = {mode: to_rgba(plot.colour_of(mode)) for mode in ("fp32", "amp-fp16")}
        assert want["fp32"] != want["amp-fp16"]
        for axis in (axes[1], axes[2]):  # the speedups and the memory
            figure.canvas.draw()
            assert panel_colours(axis) == want
        steps = [tuple(collection.get_facecolor()[0][:3]) for collection in axes[0].collections
                 if isinstance(collection, PathCollection)]
        assert steps == [want["fp32"][:3], want["amp-fp16"][:3]]
        speeds = next(axis for axis in axes if "speed of each category" in axis.get_title())
        assert [tuple(collection.get_facecolor()[0]) for collection in speeds.collections
                if isinstance(collection, PathCollection)] == [want["amp-fp16"]]
        scales = next(axis for axis in axes if "loss scale after each step" in axis.get_title())
        assert [to_rgba(line.get_color()) for line in scales.get_lines()] == [want["amp-fp16"]]
    finally:
        plt.close(figure)


def test_bar_labels_never_overlap_and_extreme_ratios_do_not_flatten_the_axis(document):
    """Two modes that did not learn (their labels once read "9.7% (did not learn)10.4% (did
    not learn)"), and a category 300x slower than in fp32 (cast 0.0031x set the log axis)."""
    import matplotlib.pyplot as plt
    rows = document["comparison"]
    stuck = dict(document, comparison={
        "fp32": replace(rows["fp32"], test_accuracy=0.097, learned=False),
        "amp-fp16": replace(rows["amp-fp16"], test_accuracy=0.104, learned=False,
                            profile_speedup=dict(rows["amp-fp16"].profile_speedup, cast=0.0031))})
    figure = plot.figure_of(stuck)
    try:
        figure.set_size_inches(8, figure.get_figheight())  # narrower than drawn: harder
        figure.canvas.draw()
        renderer = figure.canvas.get_renderer()
        accuracy = next(axis for axis in figure.axes if axis.get_title().startswith("test accuracy ("))
        labels = [text for text in accuracy.texts if text.get_text()]
        assert [text.get_text() for text in labels] == ["9.7%\ndid not learn", "10.4%\ndid not learn"]
        boxes = [text.get_window_extent(renderer) for text in labels]
        assert not any(a.overlaps(b) for a, b in itertools.combinations(boxes, 2))
        speeds = next(axis for axis in figure.axes if "speed of each category" in axis.get_title())
        low, high = speeds.get_xlim()
        assert low >= 1 / plot.RATIO_LIMIT / 2 and high <= plot.RATIO_LIMIT * 2
        assert "0.0031x" in [text.get_text() for text in speeds.texts]
    finally:
        plt.close(figure)
