"""What a result records of the code it ran."""
import shutil
import subprocess

import pytest
import torch

from conftest import ROOT
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


def committed_tree(folder):
    """A checkout of a made-up project at its first commit: code, tests, docs and results."""
    for path, text in {"main.py": "import utils.a\n", "utils/a.py": "x = 1\n", "run_pbs.sh": "#!/bin/sh\n",
                       "requirements.txt": "numpy\n", "tests/test_a.py": "def test(): pass\n",
                       "docs/a.md": "# a\n", "results/GPU/2026-12-01/a.json": "{}\n"}.items():
        (folder / path).parent.mkdir(parents=True, exist_ok=True)
        (folder / path).write_text(text)
    git(folder, "init", "-q")
    git(folder, "add", ".")
    git(folder, "commit", "-qm", "a")
    return subprocess.run(["git", "rev-parse", "HEAD"], cwd=folder, capture_output=True, text=True).stdout.strip()


def test_the_source_digest_is_the_same_with_or_without_a_git_and_is_the_commits_tree(tmp_path, monkeypatch):
    """The digest read from the files equals the one git reads from the commit's tree, and a copy
    without .git has it too; docs, tests and results leave it as it is, a changed source file does
    not, and a file git never tracked counts as much as one it does."""
    checkout = tmp_path / "checkout"
    commit = committed_tree(checkout)
    monkeypatch.setattr(provenance, "PROJECT_DIR", str(checkout))
    provenance.tree_digest.cache_clear()
    digest = provenance.source_digest()
    assert len(digest) == 64 and provenance.tree_digest(commit) == digest
    assert provenance.tree_digest("0" * 40) is None  # a commit this git does not know proves nothing
    copy = tmp_path / "copy"
    shutil.copytree(checkout, copy, ignore=shutil.ignore_patterns(".git"))
    assert provenance.source_digest(str(copy)) == digest
    for path in ("docs/a.md", "tests/test_a.py", "results/GPU/2026-12-01/a.json"):
        (copy / path).write_text("changed\n")
    assert provenance.source_digest(str(copy)) == digest
    (copy / "utils" / "b.py").write_text("y = 2\n")  # untracked by any git, yet code that runs
    assert provenance.source_digest(str(copy)) != digest
    (copy / "utils" / "b.py").unlink()
    (copy / "utils" / "a.py").write_text("x = 2\n")
    assert provenance.source_digest(str(copy)) != digest


def test_the_digest_leaves_out_only_files_no_run_executes():
    """Every file this checkout's git tracks is a source file, or documentation, a test, a result,
    CI's and the tools' settings, or the suite's FLOPs table (which --plan estimates by: no run
    reads it, so no measured figure depends on it)."""
    tracked = subprocess.run(["git", "ls-files"], cwd=ROOT, capture_output=True, text=True)
    if tracked.returncode:
        pytest.skip("this copy of the checkout has no .git to list its files")
    left_out = [path for path in tracked.stdout.splitlines() if not provenance.is_source(path)]
    others = [path for path in left_out if path.split("/")[0] not in ("docs", "tests", "results", ".ci")
              and path not in ("README.md", "pyproject.toml", "pytest.ini", ".gitignore",
                               "benchmarks/suite/flops.json")]
    assert others == [] and provenance.is_source("utils/measure/envinfo.py") and provenance.is_source("main.py")


def test_every_result_records_the_digest_of_the_files_that_ran(monkeypatch):
    monkeypatch.setenv(provenance.COMMIT_VARIABLE, "deadbeef")
    env = envinfo.collect(torch.device("cpu"))
    assert env["git_commit"] == "deadbeef" and env["source_sha256"] == provenance.source_digest()
