"""What a result records of the code it ran."""
import subprocess

import pytest
import torch

from utils import provenance
from utils.measure import envinfo


def git(folder, *args):
    subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@t", *args], cwd=folder, check=True,
                   capture_output=True)


def test_two_dirty_trees_are_told_apart_and_a_clean_one_has_no_diff_digest(tmp_path, monkeypatch):
    monkeypatch.setattr(provenance, "PROJECT_DIR", str(tmp_path))
    git(tmp_path, "init", "-q")
    (tmp_path / "a.py").write_text("x = 1\n")
    git(tmp_path, "add", "a.py")
    git(tmp_path, "commit", "-qm", "a")
    assert provenance.diff_digest() is None
    (tmp_path / "a.py").write_text("x = 2\n")
    first = provenance.diff_digest()
    (tmp_path / "a.py").write_text("x = 3\n")
    second = provenance.diff_digest()
    assert len(first) == 64 and first != second
    assert provenance.command_output(["git", "describe", "--always", "--dirty"]).endswith("-dirty")


def test_the_commit_a_suite_names_is_recorded_instead_of_a_stale_checkouts(tmp_path, monkeypatch):
    """A lent GPU's copy of the tree carries a stale .git: the suite's --commit, passed to each step
    as $AMPBENCH_COMMIT, is what the result records, and the stale tree's diff digest is left out."""
    monkeypatch.setattr(provenance, "PROJECT_DIR", str(tmp_path))
    git(tmp_path, "init", "-q")
    (tmp_path / "a.py").write_text("x = 1\n")
    git(tmp_path, "add", "a.py")
    git(tmp_path, "commit", "-qm", "a")
    (tmp_path / "a.py").write_text("x = 2\n")  # the copy differs from the stale HEAD
    named = "e4b76bf9d53ceca0cfca12dcb09beaafd96b800d"
    monkeypatch.setenv(provenance.COMMIT_VARIABLE, named)
    env = envinfo.collect(torch.device("cpu"))
    assert (env["git_commit"], env["git_commit_source"], env["git_diff_sha256"]) == (named, "AMPBENCH_COMMIT", None)


@pytest.mark.parametrize("value", ["", "main", "e4b76bf9d53c; rm -rf /", "E4B76BF", "e4b76b", "e4b76bf-clean"])
def test_a_variable_that_names_no_commit_is_not_recorded_as_one(value, monkeypatch):
    monkeypatch.setenv(provenance.COMMIT_VARIABLE, value)
    commit, source = provenance.commit()
    assert source == "git describe" and commit != value
