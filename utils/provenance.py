"""Which code ran: the commit a result records, from git or from the suite that started the run,
and the digest of the project's source files as they ran, which proves or disproves that commit
(no torch: the GPU suite checks its --commit with it before any import of torch)."""
from __future__ import annotations

import functools
import hashlib
import os
import re
import stat
import subprocess
from typing import Iterable, List, Optional, Tuple

PROJECT_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# The commit of the code that runs, where the checkout's own .git cannot tell it (a copy of the tree
# with a stale .git or none, as on a lent GPU node): benchmarks/gpu_suite.py sets it for each step.
COMMIT_VARIABLE = "AMPBENCH_COMMIT"
GIT_DESCRIBE = "git describe"
# A commit as `git rev-parse` prints it (40 hex digits) or an abbreviation of it (7 or more), with
# git describe's -dirty for a tree with uncommitted changes.
COMMIT = re.compile(r"[0-9a-f]{7,40}(-dirty)?")
# The project's source files, the code a run executes: main.py and the other files at the top that
# end in .py or .sh, the requirements files, and every .py and .sh file of these folders. Chosen by
# path alone, so that a copy of the tree with a stale .git or none digests the same files as git
# finds in a commit's tree (tree_digest); tests/unit/measure/test_envinfo.py checks that it leaves
# out only what no run executes (tests, docs, results, CI's and the tools' settings).
SOURCE_FOLDERS = ("benchmarks", "cluster", "models", "utils")


def other_checkout(script: Optional[str]) -> Optional[str]:
    """The checkout that the program `script` (run by its path) lies in, where that is not the
    checkout whose code this Python imports: `python B/benchmarks/gpu_suite.py` with ampbench
    installed (editable) from checkout A imports A's packages, so B's runs would be measured by
    A's code and labelled with B's commit. None where they are one, or `script` lies in none."""
    if not script:
        return None
    imported = os.path.realpath(PROJECT_DIR)
    folder = os.path.dirname(os.path.realpath(script))
    while True:
        if os.path.isfile(os.path.join(folder, "utils", "provenance.py")):
            first = os.path.relpath(os.path.realpath(script), folder).split(os.sep)[0]
            ours = first in (*SOURCE_FOLDERS, "docs", "main.py")  # not a venv's file inside the checkout
            return None if folder == imported or not ours else folder
        parent = os.path.dirname(folder)
        if parent == folder:
            return None
        folder = parent
SOURCE_SUFFIXES = (".py", ".sh")


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


def is_source(path: str) -> bool:
    """Whether `path`, relative to the checkout and '/'-separated, is one of its source files
    (SOURCE_FOLDERS); names starting with a dot (an editor's copies) and __pycache__ are not."""
    parts = path.split("/")
    if any(part.startswith(".") or part == "__pycache__" for part in parts):
        return False
    if len(parts) == 1:
        return path.endswith(SOURCE_SUFFIXES) or (path.startswith("requirements") and path.endswith(".txt"))
    return parts[0] in SOURCE_FOLDERS and path.endswith(SOURCE_SUFFIXES)


def digest_of(files: Iterable[Tuple[str, bytes]]) -> str:
    """The sha256 of (path, content) pairs: of the lines `sha256sum` would print for them, sorted
    by path, so that neither the order they are read in nor a file's mode changes it."""
    lines = sorted(f"{hashlib.sha256(content).hexdigest()}  {path}\n" for path, content in files)
    return hashlib.sha256("".join(lines).encode()).hexdigest()


def source_files(root: str) -> Iterable[Tuple[str, bytes]]:
    """(path, content) of every source file under `root`: regular files alone, as a git tree
    holds them (a link's target, a FIFO's or a device's content never; reading a FIFO would wait
    for a writer forever)."""
    for folder, subfolders, names in os.walk(root):
        relative = os.path.relpath(folder, root)
        prefix = "" if relative == "." else relative.replace(os.sep, "/") + "/"
        subfolders[:] = sorted(name for name in subfolders
                               if (prefix or name in SOURCE_FOLDERS) and not name.startswith("."))
        for name in sorted(names):
            path = os.path.join(folder, name)
            if is_source(prefix + name) and stat.S_ISREG(os.lstat(path).st_mode):
                with open(path, "rb") as file:
                    yield prefix + name, file.read()


def source_digest(root: Optional[str] = None) -> str:
    """The digest of the source files under `root` (the checkout's) as they are on disk now: what
    ran, whatever git says."""
    return digest_of(source_files(root or PROJECT_DIR))


@functools.lru_cache(maxsize=None)
def tree_digest(commit: str) -> Optional[str]:
    """The digest of the source files of `commit`'s tree, as this checkout's git holds it; None
    where git cannot tell (no .git, a commit it does not know)."""
    listing = git_bytes(["ls-tree", "-r", "-z", commit.replace("-dirty", "")])
    if listing is None:
        return None
    blobs = []  # (path, object) of each source file: blobs, not links (mode 120000) nor submodules
    for entry in listing.split(b"\0"):
        if entry:
            meta, name_bytes = entry.split(b"\t", 1)
            mode, kind, obj = meta.split()
            if kind == b"blob" and mode != b"120000" and is_source(name_bytes.decode()):
                blobs.append((name_bytes.decode(), obj.decode()))
    contents = git_bytes(["cat-file", "--batch"], "".join(obj + "\n" for _, obj in blobs).encode())
    if contents is None:
        return None
    files: List[Tuple[str, bytes]] = []
    at = 0
    for path, _ in blobs:  # each answer: "<object> blob <size>\n<content>\n"
        header_end = contents.index(b"\n", at)
        size = int(contents[at:header_end].split()[2])
        files.append((path, contents[header_end + 1:header_end + 1 + size]))
        at = header_end + 1 + size + 1
    return digest_of(files)


def git_bytes(arguments: List[str], given: bytes = b"") -> Optional[bytes]:
    """What `git ARGUMENTS` prints (bytes), run in the checkout with `given` on its input; None
    when it fails."""
    try:
        done = subprocess.run(["git", *arguments], input=given, capture_output=True, timeout=60, cwd=PROJECT_DIR)
    except (OSError, subprocess.SubprocessError):
        return None
    return done.stdout if done.returncode == 0 else None
