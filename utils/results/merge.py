"""Merging the result files of several jobs (the command for that is utils/report.py): read
each, pool runs of the same setup, compare them again."""
from __future__ import annotations

import json
import os
import stat
from typing import Any, Dict, List, Optional

from utils import fileio
from utils.errors import UserError
from utils.results import strict, validate
from utils.results.compare import compare_modes
from utils.results.files import run_key
from utils.results.record import SCHEMA, setup_of
from utils.results.upgrade import READABLE_SCHEMAS, upgrade

LARGEST_FILE = 256 << 20  # bytes: a result file of 10,000 steps in each of six modes is a few MiB
DEEPEST = 64  # levels of nested objects and lists: a result file has about ten


def load_result(path: str) -> List[Dict[str, Any]]:
    """The result documents in a file: the one a run wrote with --json, or the list that
    utils.report --json wrote; each checked (validate.py) before anything reads it, then
    upgraded to this release's form (upgrade.py)."""
    content = parsed(path)
    documents = content if isinstance(content, list) and content else [content]
    for index, document in enumerate(documents):
        where = f"[{index}]" if documents is content else ""
        if not isinstance(document, dict):
            raise UserError(f"{path} is not an ampbench result file ({where or 'it'} is "
                            f"{validate.value_in_words(document)}, not an object of schema {SCHEMA}).")
        if document.get("schema") not in READABLE_SCHEMAS:
            found = validate.value_in_words(document["schema"]) if "schema" in document else "missing"
            raise UserError(f"{path} is not an ampbench result file ({validate.at(where, 'schema')} is {found}; "
                            f"ampbench writes {SCHEMA}).")
        try:
            validate.check(document, where)
        except validate.Invalid as error:
            raise UserError(f"{path}: {error}; is it an ampbench result file?") from None
    return [upgrade(document) for document in documents]


def parsed(path: str) -> Any:
    """The JSON in `path`, non-finite numbers restored; refused with a sentence when it is too
    large, too deeply nested or not JSON (an integer of thousands of digits included)."""
    try:
        if not stat.S_ISREG(os.stat(path).st_mode):  # a FIFO would block the read, /dev/zero fill it
            raise UserError(f"{path} is not a result file but {fileio.kind_of(path)}; give a file --json wrote.")
        with open(path, "rb") as f:
            raw = f.read(LARGEST_FILE + 1)
        if len(raw) > LARGEST_FILE:
            raise UserError(f"{path} is larger than {LARGEST_FILE >> 20} MiB, more than any ampbench result file; "
                            "is it the right file?")
        content = json.loads(raw, parse_int=whole_number)
        if depth(content) > DEEPEST:
            raise UserError(f"{path} nests more than {DEEPEST} levels deep; it is not an ampbench result file.")
        return strict.restored(content)
    except strict.Conflict as error:
        raise UserError(f"{path}: {error}; is it an ampbench result file?") from None
    except RecursionError:
        raise UserError(f"{path} nests too deeply to read; it is not an ampbench result file.") from None
    except (OSError, ValueError) as error:  # ValueError: not JSON, not UTF-8, an integer too long to convert
        raise UserError(f"cannot read result file {path} ({error}).") from None


def whole_number(text: str) -> int:
    """An integer of the JSON text, refused beyond 1000 digits (a float has 309) before Python
    spends quadratic time converting it."""
    if len(text) > 1000:
        raise ValueError(f"it holds an integer of {len(text)} digits")
    return int(text)


def depth(value: Any) -> int:
    """How deeply lists and objects nest in `value`, counted without recursion."""
    deepest, pending = 0, [(value, 1)]
    while pending:
        item, level = pending.pop()
        if isinstance(item, (dict, list)):
            deepest = max(deepest, level)
            pending.extend((child, level + 1) for child in (item.values() if isinstance(item, dict) else item))
    return deepest


def setup_differences(documents: List[Dict[str, Any]]) -> List[str]:
    """For each of several merged documents, the setup fields that are not the same in all of
    them, as "name value" text: what tells their tables apart."""
    setups = [setup_of(document) for document in documents]
    varying = [key for key in setups[0] if len({json.dumps(setup.get(key)) for setup in setups}) > 1]
    return [", ".join(f"{key} {setup.get(key)}" for key in varying) for setup in setups]


def merge(documents: List[Dict[str, Any]], baseline: Optional[str] = None) -> List[Dict[str, Any]]:
    """Pool the runs of several result files (`documents` as load_result reads them) into one
    document per setup (record.setup_of: everything but the precision mode), with a comparison
    across all of them: e.g. the FP32 and the AMP job of a batch submission become one table
    with speedups, while a channels_last run and a plain one stay two tables. A run met twice
    (a merged file merged again) counts once.
    The comparison is against `baseline`, else the one baseline the files share: files that
    compare against different baselines are refused, as their figures would silently change."""
    if not documents:  # nothing to pool (a study stopped before its first launch finished)
        return []
    found = sorted({document["config"]["baseline"] for document in documents})
    if baseline is None and len(found) > 1:
        raise UserError(f"these files compare against different baselines ({', '.join(found)}); choose the one to "
                        "compare with, e.g. --baseline " + found[0] + ".")
    ran = {run["mode"] for document in documents for run in document["runs"]}
    if baseline is not None and baseline not in ran:
        raise UserError(f"--baseline {baseline} is not among the modes these files hold ({', '.join(sorted(ran))}); "
                        "choose one of them.")
    baseline = baseline or found[0]
    groups, seen = {}, set()
    for document in documents:
        key = json.dumps(setup_of(document), sort_keys=True)
        if key not in groups:
            groups[key] = {**document, "config": dict(document["config"], baseline=baseline), "runs": [],
                           "sources": []}
        group = groups[key]
        for run in document["runs"]:
            if run_key(run) not in seen:
                seen.add(run_key(run))
                group["runs"].append(run)
        sources = document.get("sources") or [document["env"]["hostname"] + " " + document["env"]["timestamp_utc"]]
        group["sources"] += [source for source in sources if source not in group["sources"]]
    merged = list(groups.values())
    for document in merged:
        document["comparison"] = compare_modes(document["runs"], document["config"]["accuracy_margin"], baseline)
    return merged
