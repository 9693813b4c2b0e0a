"""Merging the result files of several jobs (the command for that is utils/report.py): read
each, pool runs of the same setup, compare them again."""
import json

from utils.errors import UserError
from utils.results import strict
from utils.results.accuracy import DEFAULT_MARGIN_POINTS
from utils.results.compare import compare_modes
from utils.results.record import READABLE_SCHEMAS, REQUIRED_RUN_FIELDS, SCHEMA, setup_of
from utils.results.report import run_key


def load_result(path):
    """The result documents in a file: the one a run wrote with --json, or the list that
    utils.report --json wrote."""
    try:
        with open(path) as f:
            content = strict.restored(json.load(f))
    except (OSError, ValueError) as error:
        raise UserError(f"cannot read result file {path} ({error}).") from None
    documents = content if isinstance(content, list) and content else [content]
    for document in documents:
        runs = document.get("runs") if isinstance(document, dict) else None
        if not isinstance(runs, list) or not runs or document.get("schema") not in READABLE_SCHEMAS or \
                not all(isinstance(run, dict) and set(REQUIRED_RUN_FIELDS) <= set(run) for run in runs):
            raise UserError(f"{path} is not an ampbench result file (schema {SCHEMA}).")
    return documents


def setup_differences(documents):
    """For each of several merged documents, the setup fields that are not the same in all of
    them, as "name value" text: what tells their tables apart."""
    setups = [setup_of(document) for document in documents]
    varying = [key for key in setups[0] if len({json.dumps(setup.get(key)) for setup in setups}) > 1]
    return [", ".join(f"{key} {setup.get(key)}" for key in varying) for setup in setups]


def merge(documents):
    """Pool the runs of several result files into one document per setup (record.setup_of:
    everything but the precision mode), with a comparison across all of them: e.g. the FP32 and
    the AMP job of a batch submission become one table with speedups, while a channels_last
    run and a plain one stay two tables. A run met twice (a merged file merged again) counts once."""
    groups, seen = {}, set()
    for document in documents:
        key = json.dumps(setup_of(document), sort_keys=True)
        if key not in groups:
            groups[key] = {**document, "runs": [], "sources": []}
        group = groups[key]
        for run in document["runs"]:
            run = dict(run, finished_utc=run.get("finished_utc") or document["env"]["timestamp_utc"])
            if run_key(run) not in seen:
                seen.add(run_key(run))
                group["runs"].append(run)
        sources = document.get("sources") or [document["env"]["hostname"] + " " + document["env"]["timestamp_utc"]]
        group["sources"] += [source for source in sources if source not in group["sources"]]
    merged = list(groups.values())
    for document in merged:
        document["comparison"] = compare_modes(document["runs"], document["config"].get("accuracy_margin",
                                                                                        DEFAULT_MARGIN_POINTS))
    return merged
