"""The folders a pass of the GPU suite writes, proven before any step: a device's results folder,
created and held under its lock for the whole pass (one suite at a time writes a device's
folders), the run's folder a file can be made in, a damaged suite.json moved aside, and the
folder --render renders. What cannot be used is refused in one sentence (SuiteRefusal, exit 2),
having changed nothing."""
from __future__ import annotations

import contextlib
import datetime
import os
import sys
from pathlib import Path
from typing import Iterator, Optional

from benchmarks.suite.history import suite_record
from utils.errors import UserError
from utils.fileio import held_or_refused, prove_creatable

NAME = "gpu_suite.py"


class SuiteRefusal(UserError):
    """What the suite cannot do as asked, in one sentence: it exits 2 having changed nothing."""


@contextlib.contextmanager
def results_folder(folder: Path) -> Iterator[None]:
    """Create `folder` (a device's results) and hold its lock for the block: one suite at a time
    writes a device's folders, or one would overwrite the other's suite.json. A refusal in the
    block removes again the folders this made, where they stay empty."""
    made = [path for path in (folder, *folder.parents) if not path.exists()]
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as error:
        raise SuiteRefusal(f"cannot create {folder} ({error.strerror or error}); give a writable "
                           "--results-root.") from None
    try:
        with held_or_refused(str(folder), f"another {NAME} is writing into {folder}; wait for it to finish, or "
                                          "give another --results-root."):
            yield
    except UserError:
        for path in made:  # innermost first
            try:
                path.rmdir()
            except OSError:
                break
        raise


def writable_folder(folder: Path) -> None:
    """Create the folder a pass writes, and prove that a file can be made in it, or refuse."""
    try:
        folder.mkdir(parents=True, exist_ok=True)
        prove_creatable(str(folder / "suite.json"))
    except OSError as error:
        raise SuiteRefusal(f"cannot write into {folder} ({error.strerror or error}); give a writable "
                           "--results-root.") from None


@contextlib.contextmanager
def unreadable_set_aside(path: Path) -> Iterator[None]:
    """For the block (a pass's planning, up to its last refusal), a suite.json this code cannot
    read moved to suite.json.unreadable-<UTC time> beside it, never deleted: the pass plans the
    folder anew. Once the block has passed, say so; where it fails (a budget that fits no step),
    put the file back where it was, so that a refused pass leaves the folder as it found it."""
    record, problem = suite_record(path, rendered=True) if os.path.lexists(path) else ({}, "")
    if record is not None:
        yield
        return
    now = datetime.datetime.now(datetime.timezone.utc)
    aside = path.with_name(f"{path.name}.unreadable-{now:%Y%m%dT%H%M%S.%fZ}")  # to the microsecond: none replaced
    try:
        os.replace(path, aside)
    except OSError as error:
        raise SuiteRefusal(f"{path}: {problem}, and it cannot be moved aside ({error.strerror or error}); move it "
                           "yourself, or give another --results-root.") from None
    try:
        yield
    except BaseException:
        os.replace(aside, path)  # nothing is written into the folder before the block ends
        raise
    print(f"{NAME}: warning: {path}: {problem}; moved it to {aside.name} beside it, and this pass plans the "
          "folder anew.", file=sys.stderr, flush=True)


LATE_S = 10.0  # a copy or checkout writes a folder's files within seconds of each other, suite.json among them
LEASE_LOG = "lease.log"  # benchmarks/lease.py's record of all the suite printed, written once the suite has ended


def written_after(folder: Path) -> Optional[str]:
    """One line naming the files of `folder` changed after its suite.json was last saved, or None.
    A pass saves suite.json after every step and writes only its run page after the last (and a
    lease its log, LEASE_LOG), so a later file was written by a step that outlived its suite (or
    one a kill cut short, which left no books of it), or copied or edited since: its figures are
    not what the books say ran."""
    books = folder / "suite.json"
    try:
        saved = books.stat().st_mtime
        late = sorted(str(path.relative_to(folder)) for path in folder.rglob("*")
                      if path not in (books, folder / "README.md", folder / LEASE_LOG) and path.is_file()
                      and path.stat().st_mtime > saved + LATE_S)
    except OSError:  # a folder that cannot be read is said where it is read
        return None
    if not late:
        return None
    shown = ", ".join(late[:3]) + (f" and {len(late) - 3} more" if len(late) > 3 else "")
    return (f"{NAME}: warning: {folder} holds {len(late)} file{'s' if len(late) > 1 else ''} written after its "
            f"last pass saved suite.json ({shown}): by a step that outlived its suite, or a copy or edit since; "
            "check them, or rerun their steps.")


def saved_run(text: str) -> Path:
    """--render's folder: one a suite wrote, with a suite.json a page can be rendered from."""
    if not text:
        raise SuiteRefusal("--render needs a results folder, and got an empty one; give results/<device>/<date>.")
    out = Path(text).resolve()
    if not out.is_dir():
        raise SuiteRefusal(f"--render {text} is {'not a folder' if out.exists() else 'missing'}; give a "
                           "results/<device>/<date> folder a suite wrote.")
    if not (out / "suite.json").exists():
        raise SuiteRefusal(f"--render {text} holds no suite.json; give a results/<device>/<date> folder a suite wrote.")
    problem = suite_record(out / "suite.json", rendered=True)[1]
    if problem:
        raise SuiteRefusal(f"--render {text} has a suite.json no page can be rendered from ({problem}); give a "
                           "folder a suite wrote.")
    return out
