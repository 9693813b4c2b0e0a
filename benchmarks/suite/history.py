"""The GPU suite's saved results across dates and commits: every results/<device>/<date>/ folder a
suite wrote, the documents its steps saved, and the changes to ampbench after which figures
measured by older code read differently. README's Results merge these folders, and --budget
estimates from their times.

A saved file that cannot be read (not JSON, not an object, a suite.json of another shape) is left
out with one warning naming it, and the rest is read: one damaged file of a device's history
must not cost README the others' rows, nor a GPU allocation its pass."""
from __future__ import annotations

import functools
import json
import re
import stat
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Dict, Iterable, Iterator, List, Optional, Set, Tuple, Union

from utils.errors import UserError
from utils.fileio import kind_of

ROOT = Path(__file__).resolve().parents[2]
SOFTWARE = ("torch", "cuda", "driver")  # what a folder's passes must share besides the device
# what a run page and README's part of a device read from a suite.json, beyond the keys checked where present
RENDERED = ("device", "quick", "date", "elapsed_s", "batch", "steps", "models", "steps_run")
PASS_KEYS = ("elapsed_s", "budget_min", "ran", "waiting")  # what every pass the suite saved holds


class BadResults(UserError):
    """A saved results folder the suite cannot read as it is: one sentence naming the file and what
    is wrong with it (the suite exits 2 and changes nothing)."""


@dataclass(frozen=True)
class Change:
    """A commit after which one kind of saved figure reads differently: `moves` names the figures
    (the renderer's words: "memory", "amp-fp16", "overhead"; "synthetic-memory" for runs on synthetic
    images of 112 pixels and up, due.large_synthetic), `before` what they measured before it."""
    commit: str
    moves: Tuple[str, ...]
    before: str


# Add a change here in the commit that makes it: each pass records the commits this table held when
# it ran (suite.json's passes[].changes_in_code), and a row from a pass without a change is marked older.
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
    Change("600acff030ccd5aa35827f9bd662dd0888a81720", ("busy",),
           "the GPU busy share was the mean of every NVML utilization sample stamped in the timed steps, however "
           "few, some of them begun in the warm-up or a pause; it now rests on ten or more samples wholly inside them"),
    Change("1771c88fe855311872bfe1f454a98d027c345210", ("synthetic-memory",),
           "synthetic data held its 4,096 images side by side on the device, so above 112x112 pixels (0.6 GB at 224) "
           "the data set weighed in every peak memory and memory ratio; they are now windows of one 0.15 GiB buffer"),
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

    def pass_of(self, step: str) -> Optional[Dict[str, Any]]:
        """The latest pass that ran `step` (a folder's passes may run different commits on
        different days), or None where no pass names it."""
        return next((entry for entry in reversed(self.record.get("passes", []))
                     if any(ran["step"] == step for ran in entry.get("ran", []))), None)

    def commit_of(self, step: str) -> Optional[str]:
        """The commit suite.json gives for `step`: its latest pass's, else the suite's."""
        entry = self.pass_of(step)
        return entry.get("commit") if entry else self.commit

    def source_digest_of(self, step: str) -> Optional[str]:
        """The digest of the source files its latest pass ran `step` with (passes record it from
        ampbench.result/5's release on), else None."""
        entry = self.pass_of(step)
        digest = entry.get("source_sha256") if entry else None
        return digest if isinstance(digest, str) else None

    def date_of(self, step: str) -> str:
        """The day `step` ran: its latest pass's, else the folder's."""
        entry = self.pass_of(step)
        return entry["started_utc"][:10] if entry and entry.get("started_utc") else self.date

    def anchor(self) -> Optional[Dict[str, Any]]:
        """The first convnet comparison in the folder, whose env and data stand for the folder's."""
        names = [f"{prefix}{model}{layout}" for prefix, layout in (("headline-", ""), ("", ""), ("", "-cl"))
                 for model in self.record.get("models", [])] + ["native-synthetic"]  # the native section alone
        return next((document for document in (upgraded(self.folder, name) for name in names) if document), None)

    def software(self) -> Optional[Dict[str, Optional[str]]]:
        """The torch, CUDA and driver that every pass of this folder ran: as each pass recorded
        them, or, for passes from before they did, as the folder's first comparison recorded them;
        None for a folder without either. BadResults when the passes disagree."""
        found = {tuple(entry["software"].get(key) for key in SOFTWARE)
                 for entry in self.record.get("passes", []) if isinstance(entry.get("software"), dict)}
        if not found or any("software" not in entry for entry in self.record.get("passes", [])):
            anchor = self.anchor()
            if anchor is not None:
                found.add(tuple(anchor["env"].get(key) for key in SOFTWARE))
        if len(found) > 1:
            described = " and ".join(describe_software(dict(zip(SOFTWARE, each))) for each in sorted(found, key=str))
            raise BadResults(f"{self.folder / 'suite.json'}: its passes ran different software ({described}), "
                             "and a folder holds one machine's figures; move one pass's files to a folder of its own.")
        return dict(zip(SOFTWARE, found.pop())) if found else None

    def predates(self, change: Change, step: str) -> bool:
        """Was `step` run by code without `change`? Each pass records the changes its code held;
        a step whose pass did not, the suite's changes_in_code (what the passes before the
        per-pass record ran with); a suite.json without either was written before this table
        existed, by code older than every change in it."""
        entry = self.pass_of(step)
        held = entry["changes_in_code"] if entry and "changes_in_code" in entry else self.record.get(
            "changes_in_code", [])
        return change.commit not in held

    def older_than(self, figures: Tuple[str, ...], step: str) -> List[Change]:
        """The changes that move any of `figures` and that the code which ran `step` lacked."""
        return [change for change in CHANGES if set(change.moves) & set(figures) and self.predates(change, step)]


def describe_software(software: Dict[str, Optional[str]]) -> str:
    return f"torch {software['torch']}, CUDA {software['cuda'] or '-'}, driver {software['driver'] or '-'}"


def recorded_commit(folder: Path, step: str) -> Tuple[bool, Optional[str], Optional[str]]:
    """What the step's own results file records of the code that ran it: (whether it has such a
    file, its commit, the digest of the source files that ran: env.source_sha256, null before
    ampbench.result/5). A results document (env) or the FP8 sweep's (its top level); a step that
    wrote neither, as the overhead benchmark's log, has none, and a file without a commit is refused."""
    document = saved(folder, step)
    if document is None or not isinstance(document, dict) or not ("env" in document or "commit" in document):
        return False, None, None
    env = document["env"] if isinstance(document.get("env"), dict) else document
    commit = env.get("git_commit", env.get("commit"))
    if not isinstance(commit, str) or not commit:
        raise BadResults(f"{folder / (step + '.json')} records no commit (env.git_commit), so no label can say which "
                         "code measured it; rerun the step, or restore the file as the run wrote it.")
    digest = env.get("source_sha256")
    return True, commit, digest if isinstance(digest, str) else None


@dataclass(frozen=True)
class CodeThatRan:
    """The commit a row names and whether it is proven: the digest of the source files that ran
    is that commit's tree (provenance.tree_digest); else `why` it is only claimed."""
    commit: Optional[str]
    proven: bool
    why: str = ""


def code_that_ran(saved_suite: SavedSuite, step: str) -> CodeThatRan:
    """Which code measured `step`: the digest of the files that ran, from the step's own results
    file or, for a step that writes none, from its pass in suite.json, checked against the trees
    of the commits the pass and the file name (the file's without its -dirty: a tree dirty in
    its docs alone still ran the commit's code). A commit nobody can check is only claimed."""
    given = saved_suite.commit_of(step)
    has_file, recorded, digest = recorded_commit(saved_suite.folder, step)
    return code_of(given, recorded, digest if has_file else saved_suite.source_digest_of(step))


def code_of(given: Optional[str], recorded: Optional[str], digest: Optional[str]) -> CodeThatRan:
    """CodeThatRan of a run whose pass names `given`, whose own file names `recorded` (either may
    be None) and which ran source files of `digest`."""
    from utils.provenance import tree_digest

    candidates = [commit for commit in (given, recorded) if commit]
    if digest:
        proven = next((commit for commit in candidates if tree_digest(commit) == digest), None)
        if proven:
            return CodeThatRan(proven.replace("-dirty", ""), True)
    claimed = given or recorded
    other = (f"its files record `{short_commit(recorded)}`; "
             if recorded and given and recorded.replace("-dirty", "")[:7] != given[:7] else "")
    if not digest:
        return CodeThatRan(claimed, False, other + "no digest of the files that ran")
    if all(tree_digest(commit) is None for commit in candidates):
        return CodeThatRan(claimed, False, other + "a commit this checkout's git does not have")
    return CodeThatRan(claimed, False, other + "the files that ran are not its tree")


def short_commit(commit: Optional[str]) -> str:
    """A commit as labels show it: 12 hex digits, and whether the tree had uncommitted changes. A
    character that no commit or `git describe` name holds (a forged file's `|`, backtick or line
    break) shows as `?`, so that no label breaks the table or the page it is in."""
    if not commit:
        return "-"
    return re.sub(r"[^\w.+/-]", "?", commit[:12]) + ("-dirty" if commit.endswith("-dirty") else "")


def device_folders(results_root: Path) -> List[Path]:
    """Each device's folder under `results_root` (results/<device>/), in name order."""
    return sorted(path for path in results_root.iterdir() if path.is_dir()) if results_root.is_dir() else []


def saved_suites(device_folder: Path, rendered: bool = False) -> List[SavedSuite]:
    """Every suite saved for one device, newest first (folders are named by date); a suite.json
    that cannot be read, or (`rendered`) lacks what a page shows, is left out with a warning."""
    try:
        folders = sorted(device_folder.iterdir(), key=lambda path: path.name, reverse=True)
    except (FileNotFoundError, NotADirectoryError):
        return []
    except OSError as error:  # another user's folder, or one a full restore left without permissions
        warn(device_folder, f"it cannot be read ({error.strerror or error}); its results are left out")
        return []
    suites = []
    for folder in folders:
        try:
            if not (folder / "suite.json").is_file():
                continue
        except OSError as error:
            warn(folder, f"it cannot be read ({error.strerror or error}); that folder is left out")
            continue
        record, problem = suite_record(folder / "suite.json", rendered)
        if record is None:
            warn(folder / "suite.json", f"{problem}; that folder is left out")
        else:
            suites.append(SavedSuite(folder, record))
    return suites


def suite_record(path: Path, rendered: bool = False) -> Tuple[Optional[Dict[str, Any]], str]:
    """(the suite.json at `path`, None where it cannot be read; what is wrong with it, in words)."""
    record, problem = parsed(path)
    if record is not None:
        problem = suite_problem(record, rendered) or ""
    return (record, "") if record is not None and not problem else (None, problem)


def suite_problem(record: Dict[str, Any], rendered: bool) -> Optional[str]:
    """What in a suite.json the suite cannot read, in words, or None. Keys are checked where
    present, as suites saved by older code lack some; `rendered` also asks for RENDERED."""
    missing = [key for key in RENDERED if key not in record] if rendered else []
    if missing:
        return f"it has no {', '.join(missing)}"
    kinds: Dict[str, Union[type, Tuple[type, ...]]] = {
        "device": str, "date": str, "quick": bool, "elapsed_s": (int, float), "batch": int, "steps": int,
        "models": list, "steps_run": list, "passes": list, "commit": (str, type(None))}
    wrong = next((key for key, kind in kinds.items() if key in record and not isinstance(record[key], kind)), None)
    if wrong:
        return f"its {wrong} is {json.dumps(record[wrong])[:40]}"
    if not all(isinstance(step, dict) and isinstance(step.get("name"), str) and timed(step, "elapsed_s")
               for step in record.get("steps_run", [])):
        return "an entry of its steps_run is not an object with a name and its seconds"
    if "device" in record and not re.fullmatch(r"[^\x00-\x1f|`*]+", record["device"]):
        return f"its device is {json.dumps(record['device'])[:40]}, not one line of a device's name"
    for entry in record.get("passes", []):
        if not isinstance(entry, dict):
            return "an entry of its passes is not an object"
        missing = [key for key in PASS_KEYS if key not in entry]
        if missing:
            return f"a pass has no {', '.join(missing)}"
        if entry["elapsed_s"] is None or not timed(entry, "elapsed_s"):
            return f"a pass's elapsed_s is {json.dumps(entry['elapsed_s'])[:40]}, not its seconds"
        if not timed(entry, "budget_min"):
            return f"a pass's budget_min is {json.dumps(entry['budget_min'])[:40]}, not its minutes or null"
        wrong = next((key for key in ("started_utc", "commit", "source_sha256")
                      if not isinstance(entry.get(key), (str, type(None)))), None)
        if wrong:
            return f"a pass's {wrong} is {json.dumps(entry[wrong])[:40]}, not text"
        for key in ("ran", "waiting"):
            steps = entry.get(key, [])
            if not isinstance(steps, list) or not all(isinstance(step, dict) and isinstance(step.get("step"), str)
                                                      and timed(step, "elapsed_s") and timed(step, "estimate_s")
                                                      for step in steps):
                return f"a pass's {key} is not a list of steps with their seconds"
    return None


def timed(entry: Dict[str, Any], key: str) -> bool:
    """Whether `entry`'s `key`, where present, is a number or null, as seconds and budgets are."""
    value = entry.get(key)
    return value is None or (isinstance(value, (int, float)) and not isinstance(value, bool))


WARNED: Set[Path] = set()  # the files already said to be left out: each is said once per command


def warn(path: Path, problem: str) -> None:
    """Say once, on stderr, that `path` is left out and why."""
    if path not in WARNED:
        WARNED.add(path)
        print(f"gpu_suite.py: warning: {path}: {problem}.", file=sys.stderr, flush=True)


def parsed(path: Path) -> Tuple[Optional[Dict[str, Any]], str]:
    """(the JSON object in `path`, None where it is none; what is wrong, in words)."""
    try:
        if not stat.S_ISREG(path.stat().st_mode):  # reading a FIFO would wait for a writer forever
            return None, f"it is {kind_of(str(path))}, not a file"
        document = json.loads(path.read_bytes())
    except (OSError, ValueError, RecursionError) as error:  # ValueError: not JSON, not UTF-8
        return None, f"it cannot be read as JSON ({getattr(error, 'strerror', None) or error})"
    if not isinstance(document, dict):
        return None, f"it holds a JSON {type(document).__name__}, not an object"
    return document, ""


def load(out: Path, name: str) -> Optional[Dict[str, Any]]:
    """A saved document; a results document upgraded to this version's form and its comparison recomputed
    from its runs by this version's statistics (intervals, the learned flag), as utils.report does when it
    merges."""
    from utils.results.compare import compare_modes

    document = upgraded(out, name)
    if document is not None and "runs" not in document and record_spec(name) is None:
        warn(out / f"{name}.json", "it holds no runs, which a step's results do; it is left out")
        return None
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
    """A saved document; a results document checked as utils.report checks one (one it cannot
    read is left out with a warning) and upgraded to this version's form."""
    from utils.results.upgrade import upgrade

    document = saved(out, name)
    if document is not None and "runs" in document:  # resume-weights.json is a record of its own
        problem = results_problem(document)
        if problem:
            warn(out / f"{name}.json", f"{problem}; it is left out")
            return None
        document = upgrade(document)
    return document


def results_problem(document: Dict[str, Any]) -> Optional[str]:
    """What in a results document utils.report would refuse (merge.load_result's checks), in words, or None."""
    from utils.results import validate
    from utils.results.upgrade import READABLE_SCHEMAS

    if document.get("schema") not in READABLE_SCHEMAS:
        return f"its schema is {validate.value_in_words(document.get('schema'))}, not one of ampbench's results"
    try:
        validate.check(document, "")
    except validate.Invalid as error:
        return f"{error}, which no figure can be read from"
    return None


def saved(out: Path, name: str) -> Optional[Dict[str, Any]]:
    """A saved JSON file as it was written, or None; one that cannot be read, or a record of a
    kind record_spec knows that lacks what the pages read of it, is left out with a warning."""
    path = out / f"{name}.json"
    document = readable(path) if path.exists() else None
    spec = record_spec(name)
    if document is not None and spec is not None:
        from utils.results.validate import Invalid

        try:
            spec.check(document, "")
        except Invalid as error:
            warn(path, f"{error}, which the pages read; it is left out")
            return None
    return document


@functools.lru_cache(maxsize=None)
def record_spec(name: str) -> Optional[Any]:
    """What the pages read of the saved records that are no results documents, by file name:
    the FP8 sweep's (the suite's step, or one run by hand) and the resume check's weights."""
    from benchmarks.fp8_sweep import BASELINE, FP8_MODES
    from utils.results.validate import FLAG, TEXT, Fields, ListOf, Nullable, Number

    if name in ("transformers-sweep", "sweep"):
        count, modes = Number(whole=True, low=0), (BASELINE, *FP8_MODES)
        row = Fields({"width": count, "heads": count,
                      "median_step_ms": Fields(dict.fromkeys(modes, Number(above=0))),
                      "measured_speedup": Fields(dict.fromkeys(FP8_MODES, Number(above=0))),
                      "predicted_speedup": Fields(dict.fromkeys(FP8_MODES, Nullable(Number(above=0))))})
        return Fields({"rows": ListOf(row, nonempty=True), "layers": count, "tokens": count, "batch": count,
                       "steps": count, "warmup": count, "emulated": FLAG, "predicted_for": Nullable(TEXT),
                       "no_prediction": Nullable(TEXT)})
    if name == "resume-weights":
        compared = Fields({"bitwise_equal": FLAG, "max_abs_diff": Number(low=0), "max_abs_weight": Number(low=0)})
        return Fields({"resumed_vs_uninterrupted": compared, "uninterrupted_vs_itself": compared})
    return None


def readable(path: Path) -> Optional[Dict[str, Any]]:
    """The JSON object in `path`, or None, said once, where it holds none."""
    document, problem = parsed(path)
    if document is None:
        warn(path, f"{problem}; it is left out")
    return document


def last_line(out: Path, name: str, prefix: str) -> Optional[str]:
    """The last line of NAME.log that starts with `prefix`: what a benchmark script printed last."""
    path = out / f"{name}.log"
    lines = ([line for line in path.read_text(errors="replace").splitlines() if line.startswith(prefix)]
             if path.exists() else [])
    return lines[-1] if lines else None
