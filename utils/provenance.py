"""Which code ran: the commit a result records, from git or from the suite that started the run
(no torch: the GPU suite checks its --commit with it before any import of torch)."""
from __future__ import annotations

import hashlib
import os
import re
import subprocess
from typing import List, Optional, Tuple

PROJECT_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# The commit of the code that runs, where the checkout's own .git cannot tell it (a copy of the tree
# with a stale .git or none, as on a lent GPU node): benchmarks/gpu_suite.py sets it for each step.
COMMIT_VARIABLE = "AMPBENCH_COMMIT"
GIT_DESCRIBE = "git describe"
# A commit as `git rev-parse` prints it (40 hex digits) or an abbreviation of it (7 or more), with
# git describe's -dirty for a tree with uncommitted changes.
COMMIT = re.compile(r"[0-9a-f]{7,40}(-dirty)?")


def command_output(command: List[str]) -> Optional[str]:
    """What `command` prints, run in the checkout; None when it fails or prints nothing."""
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=10, cwd=PROJECT_DIR)
    except (OSError, subprocess.SubprocessError):
        return None
    return done.stdout.strip() or None if done.returncode == 0 else None


def is_commit(text: str) -> bool:
    return COMMIT.fullmatch(text) is not None


def commit() -> Tuple[Optional[str], str]:
    """(the commit of the code that runs, where it was read): $AMPBENCH_COMMIT where it holds a
    commit, else `git describe` of the checkout (None outside git)."""
    given = os.environ.get(COMMIT_VARIABLE, "")
    if is_commit(given):
        return given, COMMIT_VARIABLE
    return command_output(["git", "describe", "--always", "--dirty", "--abbrev=40"]), GIT_DESCRIBE


def diff_digest() -> Optional[str]:
    """The sha256 of the uncommitted change (`git diff HEAD`), so that two "-dirty" results
    can be told apart; None for a clean tree or outside git."""
    done = command_output(["git", "diff", "HEAD", "--no-ext-diff", "--binary"])
    return hashlib.sha256(done.encode()).hexdigest() if done else None
