"""An image folder's file index (utils/data/index.py): built by one walk, cached, reused while the
tree's folders are as they were, built again (and said) when one changed; and the trees that must
not hang it or slip through it: links in a loop, files that are no images, thousands of empty files."""
import os
import time

import numpy as np
import pytest

from conftest import image_tree
from utils.data import imagefolder, index
from utils.errors import UserError

HOUR_AGO_NS = time.time_ns() - 3600 * 10 ** 9


def settle(root):
    """Every folder of `root` as if last changed an hour ago, so that its index may be cached."""
    for where, _, _ in os.walk(root):
        os.utime(where, ns=(HOUR_AGO_NS, HOUR_AGO_NS))
    return root


def listed(root, said=None, skip_bad=False):
    return imagefolder.listing(str(root), skip_bad, (said if said is not None else []).append)


def test_the_index_is_cached_reused_while_the_folders_stand_and_built_again_when_one_changed(tmp_path, monkeypatch):
    monkeypatch.setenv("AMPBENCH_CACHE", str(tmp_path / "cache"))
    tree = settle(image_tree(tmp_path / "tree", per_class=5))
    said = []
    first = listed(tree, said)
    assert said[-1].startswith(f"indexed 15 images of {tree} in ") and said[-1].endswith(
        f"; cached in {index.cache_path(str(tree))}")
    assert os.path.dirname(index.cache_path(str(tree))) == str(tmp_path / "cache" / "index")
    walks = []
    monkeypatch.setattr(index, "file_size", lambda entry: walks.append(entry) or (1, ""))
    again = listed(tree, said)
    assert walks == [] and said[-1] == f"the index of {tree}'s 15 images read from {index.cache_path(str(tree))} " \
                                       "(its folders are as they were)"
    assert again.info() == first.info() and np.array_equal(again.index.sizes, first.index.sizes)
    monkeypatch.undo()
    monkeypatch.setenv("AMPBENCH_CACHE", str(tmp_path / "cache"))
    (tree / "dog" / "0.png").rename(tree / "dog" / "5.png")  # a file renamed changes its folder's time
    changed = listed(tree, said)
    assert "(the tree changed since its index was cached: a folder's files or time differ)" in said[-1]
    assert changed.info()["fingerprint"] != first.info()["fingerprint"]
    assert not said[-1].endswith("cached in " + index.cache_path(str(tree)))  # its folder changed just now


def test_a_cache_that_cannot_be_read_or_written_is_said_and_the_run_goes_on(tmp_path, monkeypatch):
    monkeypatch.setenv("AMPBENCH_CACHE", str(tmp_path / "cache"))
    tree = settle(image_tree(tmp_path / "tree", per_class=3))
    os.makedirs(os.path.dirname(index.cache_path(str(tree))))
    with open(index.cache_path(str(tree)), "wb") as f:
        f.write(b"not an npz")
    said = []
    assert len(listed(tree, said).index) == 9
    assert "(its cached index could not be read: " in said[-1] and said[-1].endswith(index.cache_path(str(tree)))
    (tmp_path / "blocked").write_text("a file where the cache folder would be")
    monkeypatch.setenv("AMPBENCH_CACHE", str(tmp_path / "blocked"))
    assert len(listed(tree, said).index) == 9
    assert "; not cached: could not write " in said[-1]


def test_links_in_a_loop_do_not_hang_the_walk_and_a_link_to_nothing_is_no_image(tmp_path):
    tree = image_tree(tmp_path / "tree", per_class=2)
    (tree / "cat" / "again").symlink_to(tree / "cat")  # a folder inside itself, through a link
    (tree / "dog" / "a.jpg").symlink_to(tree / "dog" / "b.jpg")
    (tree / "dog" / "b.jpg").symlink_to(tree / "dog" / "a.jpg")  # two links to each other
    with pytest.raises(UserError, match=r"dog/a.jpg cannot be read as an image \(Too many levels of symbolic "
                                        r"links\) \(and 1 more\); remove or replace .* or pass --skip-bad-images"):
        listed(tree)
    kept = listed(tree, skip_bad=True)
    assert len(kept.training) + len(kept.evaluation) == 6  # cat/ walked once, however often again/ leads back
    assert [why for _, why in kept.skipped] == ["Too many levels of symbolic links"] * 2


def test_thousands_of_empty_files_are_refused_in_one_sentence_and_skipped_leave_the_class_empty(tmp_path):
    tree = image_tree(tmp_path / "tree", per_class=2)
    os.mkdir(tree / "fox")
    for number in range(3000):
        (tree / "fox" / f"{number}.jpg").touch()
    os.mkfifo(tree / "cat" / "pipe.png")
    with pytest.raises(UserError, match=r"--data imagefolder: .*cat/pipe.png cannot be read as an image \(it is a "
                                        r"FIFO, not a file\) \(and 3,000 more\)"):
        listed(tree)
    with pytest.raises(UserError, match="fox holds no images"):
        listed(tree, skip_bad=True)
