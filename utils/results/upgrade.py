"""Result files of earlier ampbench releases, read as this release's: upgrade() gives such a file
this release's keys and schema, and fills in what it lacks with what its runs did, once, where a
file is read (merge.load_result and the GPU suite's report), so that every reader after it reads
one form. A document this release writes has all of it already, and upgrade() leaves it as it is.

Run fields an earlier release did not record and that mean nothing when absent (numerics, fp8,
host, ...) stay absent: their readers take a missing one as null, as validate.py accepts it.
docs/results-schema.md lists what each release's files hold."""
from __future__ import annotations

from typing import Any, Dict

from models.families import DEFAULT_IMAGE_SIZE, DEFAULT_NUM_CLASSES
from utils.config import DEFAULT_MARGIN_POINTS
from utils.explain.categories import ADDED
from utils.measure.nvml_meter import MIN_BUSY_SAMPLES, too_few_samples, window_too_short
from utils.modes import BASELINES
from utils.results.record import SCHEMA, WARMUP_IN_PEAK

# Every earlier release is still read. /1's peak_memory_bytes included the warm-up, so its runs
# never pool with later ones (record.setup_of holds the schema written) and the table says so
# under them (summary.notes). /2 was written before and after --baseline under one name. /3 is
# /4 without runs[].gpu_busy and runs[].energy.window_too_short. /4 is /5 without env.source_sha256,
# and its busy shares took every sample stamped in the timed steps, however few. /5 is /6 before
# --model-factory and --data imagefolder: a torchvision model, CIFAR-10's 10 classes or synthetic images.
# /6 is /7 without the comparison's cut_short_runs, cut_short and repeat_speedups, which merge() computes again.
EARLIER_SCHEMAS = (WARMUP_IN_PEAK, "ampbench.result/2", "ampbench.result/3", "ampbench.result/4", "ampbench.result/5",
                   "ampbench.result/6")
READABLE_SCHEMAS = EARLIER_SCHEMAS + (SCHEMA,)
BEFORE_BUSY = EARLIER_SCHEMAS[:3]  # the releases before runs[].gpu_busy (/4): their runs have no say on it
# The comparison's keys that /3 renamed: before --baseline (/1, and /2 files written before it)
# every ratio was against fp32; now it is against config.precision.baseline.
RENAMED_IN_COMPARISON = {
    "speedup_vs_fp32": "speedup_vs_baseline", "memory_ratio_vs_fp32": "memory_ratio_vs_baseline",
    "accuracy_delta_vs_fp32": "accuracy_delta_vs_baseline", "max_batch_ratio_vs_fp32": "max_batch_ratio_vs_baseline",
    "time_to_target_speedup_vs_fp32": "time_to_target_speedup_vs_baseline"}
BUSY_NOT_YET_MEASURED = "recorded before ampbench measured the GPU's busy share (ampbench.result/4)"


def upgrade(document: Dict[str, Any]) -> Dict[str, Any]:
    """A copy of `document` (validate.py checked it) with every rule below applied; one of an
    earlier release keeps the schema it was written in as "upgraded_from" (record.written_schema)."""
    env, config = dict(document["env"]), dict(document["config"])
    env.setdefault("world_size", 1)  # before DDP (torchrun, mpirun): one process
    env.setdefault("source_sha256", None)  # before /5: no digest of the source files, so no commit can be proved
    config["optimizer"] = config.get("optimizer") or "sgd"  # before --optimizer (AdamW beside SGD): SGD
    config.setdefault("optimizer_impl", "foreach")  # before fused SGD (ampbench.result/2): foreach SGD
    config["baseline"] = config.get("baseline") or BASELINES["default"]  # before --baseline: against fp32
    # before the accuracy verdict (--seeds, --accuracy-margin): the margin's default
    config.setdefault("accuracy_margin", DEFAULT_MARGIN_POINTS)
    config["grad_comm"] = config.get("grad_comm") or "fp32"  # before --grad-comm: fp32 gradients
    config["image_size"] = config.get("image_size") or DEFAULT_IMAGE_SIZE  # before --image-size: CIFAR-10's 32x32
    # before --model-factory and --num-classes: a torchvision model (its class unrecorded) of CIFAR-10's classes
    config.setdefault("model_factory", None)
    config.setdefault("model_class", None)
    config["num_classes"] = config.get("num_classes") or DEFAULT_NUM_CLASSES
    upgraded = dict(document, schema=SCHEMA, env=env, config=config,
                    runs=[upgrade_run(run, env["timestamp_utc"]) for run in document["runs"]])
    if document["schema"] != SCHEMA:
        upgraded["upgraded_from"] = document["schema"]
    if "data" in document:  # benchmarks/suite/history.py upgrades partial documents too (its tests make some)
        upgraded["data"] = {"num_classes": config["num_classes"], **document["data"]}
    if "comparison" in document:  # merge() computes it again; whoever else reads it reads this release's keys
        upgraded["comparison"] = {mode: {RENAMED_IN_COMPARISON.get(key, key): value for key, value in row.items()}
                                  for mode, row in document["comparison"].items()}
    return upgraded


def upgrade_run(run: Dict[str, Any], written_utc: str) -> Dict[str, Any]:
    """A copy of `run`, of a file written at `written_utc`, with the rules for runs applied."""
    run = dict(run)
    run["optimizer_impl"] = run.get("optimizer_impl") or "foreach"  # before fused SGD (ampbench.result/2)
    # before CSV rows had run ids (finished_utc tells runs apart): the run ended by the time the file was written
    run["finished_utc"] = run.get("finished_utc") or written_utc
    if "gpu_busy" not in run:  # before /4: a reader takes a missing share for one nobody measured
        run.update(gpu_busy=None, gpu_busy_unavailable=BUSY_NOT_YET_MEASURED)
    busy = run.get("gpu_busy")
    if busy and busy.get("samples", MIN_BUSY_SAMPLES) < MIN_BUSY_SAMPLES:  # /4 gave a share of any count
        run.update(gpu_busy=None, gpu_busy_unavailable=too_few_samples(busy["samples"], busy["window_s"],
                                                                       busy.get("sample_period_s")))
    if run.get("energy") and "window_too_short" not in run["energy"]:  # before /4: the rule, from its seconds
        run["energy"] = dict(run["energy"], window_too_short=window_too_short(run["energy"]["seconds"]))
    if run.get("profile"):
        # before the fp8 modes, --explain had no float8 category (categories.ADDED): no time was spent in one
        categories = dict(run["profile"]["categories"])
        for name in ADDED:
            categories.setdefault(name, {"ms": 0.0, "share": 0.0})
        run["profile"] = dict(run["profile"], categories=categories)
    return run
