"""The GPU suite's saved results across dates and commits: every results/<device>/<date>/ folder a
suite wrote, the documents its steps saved, and the changes to ampbench after which figures
measured by older code read differently. README's Results merge these folders, and --budget
estimates from their times."""
from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Dict, Iterable, Iterator, List, Optional, Tuple


@dataclass(frozen=True)
class Change:
    """A commit after which one kind of saved figure reads differently: `moves` names the figures
    (the renderer's words: "memory", "amp-fp16", "overhead"), `before` what they measured before it."""
    commit: str
    moves: Tuple[str, ...]
    before: str


# Add a change here in the commit that makes it: a suite records the commits this table held when
# it ran (suite.json's changes_in_code), and a row from a suite without a change is marked older.
CHANGES = [
    Change("12d42e8397db16a5be1990f49019d6c687889760", ("memory",),
           "the amp-fp16 memory ratios included cuDNN's autotuning in fp32's first repeat (on the H100, 0.15 to "
           "0.26 where the steady state's is about 0.53); the peak is now the steady state's"),
    Change("12d42e8397db16a5be1990f49019d6c687889760", ("amp-fp16",),
           "every amp-fp16 and fp16-master step waited for the host in GradScaler.step, so amp-fp16's speedups "
           "measured that sync, not float16; the fused SGD now takes the scaler's inf check on the device"),
    Change("b4e5c9b532edc236340484fd5aa00864fdb4d299", ("overhead",),
           "benchmarks/overhead.py compared ampbench with a bare loop that skipped the augmentation, the schedule "
           "and a division of the loss (0.935 on the H100); the bare loop now does the same work"),
]


@dataclass(frozen=True)
class SavedSuite:
    """One results/<device>/<date>/ folder and its suite.json."""
    folder: Path
    record: Dict[str, Any]

    @property
    def date(self) -> str:
        return self.record.get("date") or self.folder.name

    @property
    def commit(self) -> Optional[str]:
        return self.record.get("commit")

    def commit_of(self, step: str) -> Optional[str]:
        """The commit of the code that ran `step`: its latest pass's (a folder's passes may run
        different commits), else the suite's."""
        for entry in reversed(self.record.get("passes", [])):
            if any(ran["step"] == step for ran in entry.get("ran", [])):
                return entry.get("commit")
        return self.commit

    def predates(self, change: Change) -> bool:
        """Was this suite run by code without `change`? A suite.json without changes_in_code was
        written before this table existed, by code older than every change in it."""
        return change.commit not in self.record.get("changes_in_code", [])

    def older_than(self, figures: Tuple[str, ...]) -> List[Change]:
        """The changes this suite predates that move any of `figures`."""
        return [change for change in CHANGES if set(change.moves) & set(figures) and self.predates(change)]


def saved_suites(device_folder: Path) -> List[SavedSuite]:
    """Every suite saved for one device, newest first (folders are named by date)."""
    if not device_folder.is_dir():
        return []
    folders = sorted((path for path in device_folder.iterdir() if (path / "suite.json").is_file()),
                     key=lambda path: path.name, reverse=True)
    return [SavedSuite(folder, json.loads((folder / "suite.json").read_text())) for folder in folders]


def load(out: Path, name: str) -> Optional[Dict[str, Any]]:
    """A saved document; a results document upgraded to this version's form and its comparison recomputed
    from its runs by this version's statistics (intervals, the learned flag), as utils.report does when it
    merges."""
    from utils.results.compare import compare_modes

    document = upgraded(out, name)
    if document is not None and "runs" in document:
        document["comparison"] = compare_modes(document["runs"], baseline=document["config"]["baseline"])
    return document


def saved_steps(out: Path, names: Iterable[str]) -> Iterator[Tuple[str, Dict[str, Any]]]:
    """(name, load()'s document) of each of `names` saved in `out`, in order, each loaded once and
    only when asked for: load() recomputes a comparison's intervals."""
    for name in names:
        document = load(out, name)
        if document is not None:
            yield name, document


def upgraded(out: Path, name: str) -> Optional[Dict[str, Any]]:
    """A saved document; a results document upgraded to this version's form."""
    from utils.results.upgrade import upgrade

    document = saved(out, name)
    if document is not None and "runs" in document:  # resume-weights.json is a record of its own
        document = upgrade(document)
    return document


def saved(out: Path, name: str) -> Optional[Dict[str, Any]]:
    """A saved JSON file as it was written, or None."""
    path = out / f"{name}.json"
    return json.loads(path.read_text()) if path.exists() else None


def last_line(out: Path, name: str, prefix: str) -> Optional[str]:
    """The last line of NAME.log that starts with `prefix`: what a benchmark script printed last."""
    path = out / f"{name}.log"
    lines = [line for line in path.read_text().splitlines() if line.startswith(prefix)] if path.exists() else []
    return lines[-1] if lines else None
