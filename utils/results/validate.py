"""Checking a result document before utils.report uses it: every section and field that the
merge, the comparison and the table read, with its type and range, so that a damaged or
forged file is refused with one sentence naming the field instead of failing deep inside.

The run fields and their types come from RunRecord (record.py); NARROWER tightens every field
that the table, the notes, the merge, the plot or the scaling study read to the range its
figures need, and spells out the nested sections they read (profile, numerics, memory, fp8).
Fields nobody reads are checked for their type only. A field that files of earlier releases lack
may be missing; upgrade.py fills in those a reader needs. What one field cannot say alone (40
Linear layers converted of 37, a median above its p90) the RULES below check across fields."""
from __future__ import annotations

import json
import math
import typing
from dataclasses import MISSING, fields
from typing import TYPE_CHECKING, Any, Callable, Dict, Iterable, List, NoReturn, Optional, Union

from utils.config import ACCURACY_KEYS, RECORDED_ALWAYS, SETTINGS, SETUP_KEYS, record_kind
from utils.explain.categories import ADDED
from utils.explain.categories import NAMES as CATEGORIES
from utils.explain.fp8_predict import FP8_GPUS, LARGEST_DIMENSION
from utils.grad_comm import GRAD_COMM
from utils.measure.nvml_meter import MAX_PLAUSIBLE_WATTS, MIN_ENERGY_WINDOW_S, UTILIZATION_SAMPLES, window_too_short
from utils.modes import MODES
from utils.numerics.fp16 import FP16_MAX
from utils.results.record import RunRecord
from utils.results.upgrade import BEFORE_BUSY, EARLIER_SCHEMAS
from utils.settings import Range

LARGEST = 1e300  # no measurement comes near it, and a larger integer overflows a float


class Invalid(Exception):
    """The sentence's middle: which field is wrong and what it holds."""


def value_in_words(value: Any) -> str:
    """A short, quoted picture of a JSON value for the sentence."""
    if isinstance(value, int) and not isinstance(value, bool) and abs(value) > LARGEST:
        return f"an integer of {len(str(abs(value)))} digits" if abs(value) < 10 ** 4000 else "a huge integer"
    if isinstance(value, (dict, list)):
        return "an object" if isinstance(value, dict) else "a list" if value else "an empty list"
    text = json.dumps(value)
    return text if len(text) <= 40 else text[:37] + '..."'


def at(where: str, key: str) -> str:
    """The path of `key` inside `where`: runs[0].step_time_ms."""
    return f"{where}.{key}" if where else key


def fail(where: str, value: Any, wanted: str) -> NoReturn:
    raise Invalid(f"{where} is {value_in_words(value)}, not {wanted}")


class Number:
    """A JSON number (never true/false) within +-LARGEST, finite unless `finite` is False."""

    def __init__(self, whole: bool = False, low: Optional[float] = None, above: Optional[float] = None,
                 finite: bool = True, high: Optional[float] = None):
        self.whole, self.low, self.above, self.finite, self.high = whole, low, above, finite, high

    def check(self, value: Any, where: str) -> None:
        kind = "a whole number" if self.whole else "a number"
        if isinstance(value, bool) or not isinstance(value, int if self.whole else (int, float)):
            fail(where, value, kind)
        if isinstance(value, float) and not math.isfinite(value):
            if self.finite:
                fail(where, value, "a finite number")
            return
        if abs(value) > LARGEST:
            fail(where, value, f"{kind} within +-{LARGEST:g}")
        if self.low is not None and value < self.low:
            fail(where, value, f"{kind} of at least {self.low}")
        if self.above is not None and value <= self.above:
            fail(where, value, f"{kind} above {self.above}")
        if self.high is not None and value > self.high:
            fail(where, value, f"{kind} of at most {self.high}")


class Kind:
    """A value of one Python type: str, bool, or any (None: not read, not checked)."""

    def __init__(self, kind: Optional[type], name: str):
        self.kind, self.name = kind, name

    def check(self, value: Any, where: str) -> None:
        if self.kind is not None and not isinstance(value, self.kind):
            fail(where, value, self.name)


TEXT, FLAG, ANY = Kind(str, "text"), Kind(bool, "true or false"), Kind(None, "anything")


class OneOf:
    """Text that names one of `choices`, which a reader looks up or compares with (a mode, a dtype)."""

    def __init__(self, choices: Iterable[str], name: str):
        self.choices, self.name = tuple(choices), name

    def check(self, value: Any, where: str) -> None:
        if not (isinstance(value, str) and value in self.choices):
            fail(where, value, f"{self.name} ({', '.join(self.choices)})")


class Ranged:
    """A number in a setting's range, as its flag takes it (utils/settings.py's Range)."""

    def __init__(self, allowed: Range):
        self.allowed = allowed

    def check(self, value: Any, where: str) -> None:
        if not self.allowed.accepts(value):
            fail(where, value, self.allowed.wording)


class Nullable:
    def __init__(self, spec: Spec):
        self.spec = spec

    def check(self, value: Any, where: str) -> None:
        if value is not None:
            self.spec.check(value, where)


class ListOf:
    def __init__(self, spec: Spec, nonempty: bool = False):
        self.spec, self.nonempty = spec, nonempty

    def check(self, value: Any, where: str) -> None:
        if not isinstance(value, list) or (self.nonempty and not value):
            fail(where, value, "a list of at least one" if self.nonempty else "a list")
        for index, item in enumerate(value):
            self.spec.check(item, f"{where}[{index}]")


class MapOf:
    """An object whose values (under any keys) are all `spec`."""

    def __init__(self, spec: Spec):
        self.spec = spec

    def check(self, value: Any, where: str) -> None:
        if not isinstance(value, dict):
            fail(where, value, "an object")
        for key, item in value.items():
            self.spec.check(item, at(where, key))


class Fields:
    """An object with the `required` keys and, when present, the `optional` ones; others are
    not read."""

    def __init__(self, required: Dict[str, Spec], optional: Optional[Dict[str, Spec]] = None):
        self.required, self.optional = required, optional or {}

    def check(self, value: Any, where: str) -> None:
        if not isinstance(value, dict):
            fail(where, value, "an object")
        for key, spec in self.required.items():
            if key not in value:
                raise Invalid(f"{at(where, key)} is missing")
            spec.check(value[key], at(where, key))
        for key, spec in self.optional.items():
            if key in value:
                spec.check(value[key], at(where, key))


if TYPE_CHECKING:  # what checks a value: each of these has check(value, where)
    Spec = Union[Number, Ranged, Kind, OneOf, Nullable, ListOf, MapOf, Fields]


def from_annotation(kind: Any) -> Spec:
    """The spec of a RunRecord field's type annotation."""
    origin, args = typing.get_origin(kind), typing.get_args(kind)
    if origin is typing.Union:  # Optional[X]
        return Nullable(from_annotation(next(arg for arg in args if arg is not type(None))))
    if origin is list:
        return ListOf(from_annotation(args[0]) if args else ANY)
    if origin is dict:
        return MapOf(from_annotation(args[1]) if args else ANY)
    # a float field may be NaN or infinite in a genuine file (strict.py); NARROWER says where not
    simple: Dict[Any, Spec] = {str: TEXT, bool: FLAG, int: Number(whole=True), float: Number(finite=False)}
    return simple.get(kind, ANY)


SHARE = Number(low=0, high=1)  # of the values the census examined, of the time the GPU ran kernels
PASS = Fields({"flushed_share": SHARE, "subnormal_share": SHARE},
              {"worst_layer": Nullable(TEXT), "worst_flushed_share": Nullable(SHARE),
               "relative_error": Nullable(Number(finite=False, low=0))})  # relative L2: may exceed 1
COUNT = Number(whole=True, low=0)
# the plot draws the histogram's bins from log2_low: float16's range sits well inside +-1100
HISTOGRAM = Fields({"log2_low": Number(whole=True, low=-1100, high=1100), "counts": ListOf(COUNT, nonempty=True),
                    "zeros": COUNT})
# the census examines FP32 and each mode's low-precision dtype; its sentence is written per dtype
CENSUS_DTYPES = tuple(dict.fromkeys(["float32"] + [mode.low_precision_dtype for mode in MODES.values()
                                                   if mode.low_precision_dtype]))
NUMERICS = Fields({"dtype": OneOf(CENSUS_DTYPES, "a dtype the census examines"),
                   "sampled_steps": ListOf(Number(whole=True, low=1), nonempty=True),
                   "passes": Fields({"unscaled": PASS},
                                    {"scaled": Fields({"scale": Number(above=0), "flushed_share": SHARE,
                                                       "subnormal_share": SHARE, "overflow_share": SHARE})}),
                   "activation_max": Fields({"value": Number(low=0), "layer": TEXT,
                                             "share_of_fp16_max": Number(low=0)}),
                   "histogram": HISTOGRAM})
PROFILE = Fields({"steps": Number(whole=True, low=1),
                  "categories": Fields({name: Fields({"ms": Number(low=0)})
                                        for name in CATEGORIES if name not in ADDED},
                                       {name: Fields({"ms": Number(low=0)}) for name in ADDED})},
                 {"total_ms": Number(low=0),
                  "diagnosis": Nullable(ListOf(Fields({"mode": TEXT, "rule": TEXT, "text": TEXT,
                                                       "at_stake_ms": Number()}))),
                  "cpu_fast_half_flags": Nullable(ListOf(TEXT)), "comm_exposed_ms": Nullable(Number(low=0)),
                  "idle_ms": Nullable(Number(low=0)), "wall_ms": Nullable(Number(low=0))})
BYTES = Number(whole=True, low=0)
# the parts the table and the plot stack; the CUDA peaks are null on a CPU
MEMORY = Fields(dict.fromkeys(("parameters_bytes", "gradients_bytes", "optimizer_bytes", "activations_bytes",
                               "weight_copies_bytes"), BYTES),
                {"cuda_peak_allocated_bytes": Nullable(BYTES), "cuda_peak_reserved_bytes": Nullable(BYTES),
                 "activations_by_dtype": MapOf(BYTES)})
ACCURACY = Number(low=0, high=1)  # a share of the test set, as every accuracy field holds it
CURVE_POINT = Fields({"step": COUNT, "epoch": Number(low=0), "train_s": Number(low=0), "accuracy": ACCURACY})
OUTLIER = Fields({"timed_step": Number(whole=True, low=1), "ms": Number(low=0)})
HOST = Fields({"cores": Number(whole=True, low=1), "torch_threads": Number(whole=True, low=1),
               "wall_s": Number(above=0), "process_cpu_cores": Number(low=0), "process_cpu_share": Number(low=0),
               "load_avg_1m_start": Nullable(Number(low=0)), "load_avg_1m_end": Nullable(Number(low=0)),
               "warning": Nullable(TEXT)}, {"segments": Number(whole=True, low=1)})  # segments: since resumes combine
ENERGY = Fields({"joules_per_image": Number(above=0), "mean_watts": Number(above=0), "joules": Number(above=0),
                 "seconds": Number(above=0), "images": Number(whole=True, low=1), "source": TEXT},
                {"power_samples": Nullable(COUNT), "nvml_index": Nullable(COUNT), "window_too_short": FLAG})
GPU_BUSY = Fields({"share": SHARE, "source": OneOf([UTILIZATION_SAMPLES], "a source of the GPU's busy share"),
                   "window_s": Number(above=0), "samples": Number(whole=True, low=1),
                   "sample_period_s": Nullable(Number(above=0))})
RECIPES = tuple(mode.float8 for mode in MODES.values() if mode.float8)
# --explain asks the roofline about the prediction's GPU and the matmul shapes' rows again
FP8_PREDICTION = Fields({"gpu": OneOf(FP8_GPUS, "a GPU with FP8 figures"), "for": TEXT, "compiled": FLAG,
                         "speedup": Number(above=0),
                         "linear_speedup": Number(above=0), "bf16_ms": Number(above=0), "fp8_ms": Number(above=0)})
FP8 = Fields({"recipe": OneOf(RECIPES, "a float8 recipe"), "emulated": FLAG, "linear_layers": Number(whole=True, low=0),
              "converted_layers": Number(whole=True, low=0), "flop_share": Number(low=0, high=1),
              "left_out": ListOf(Fields({"layer": TEXT, "why": TEXT}))},
             {"fp8_flops_per_step": Number(whole=True, low=0),
              "matmul_shapes": ListOf(ListOf(Number(whole=True, low=0, high=LARGEST_DIMENSION))),
              "prediction": Nullable(FP8_PREDICTION), "prediction_note": Nullable(TEXT)})
GRAD_COMM_DTYPE = OneOf(GRAD_COMM, "a dtype gradients travel in")
BUCKET_MB = Number(above=0)  # DDP's bucket size, which the setup line prints
WHOLE_FROM_1 = Number(whole=True, low=1)
NARROWER: Dict[str, Spec] = {
    "step_time_ms": Nullable(Fields({"median": Number(above=0), "p90": Number(low=0)}, {"p10": Number(low=0)})),
    "data_time_ms": Nullable(Fields({"median": Number(low=0)})),
    "step_times_ms": ListOf(Number(above=0)),  # the speedup's bootstrap divides by their medians
    "images_per_sec": Nullable(Number(above=0)),
    "world_size": WHOLE_FROM_1, "batch_size": WHOLE_FROM_1, "steps": WHOLE_FROM_1, "repeat": Number(whole=True, low=0),
    "global_batch_size": WHOLE_FROM_1,
    "peak_memory_bytes": BYTES, "warmup_peak_memory_bytes": Nullable(BYTES),
    "skipped_steps": Number(whole=True, low=0), "max_batch": Nullable(WHOLE_FROM_1),
    "final_loss_scale": Nullable(Number(finite=False, low=0)),
    "loss_scale_curve": Nullable(ListOf(Number(finite=False, low=0))),
    "test_accuracy": Nullable(ACCURACY), "target_accuracy": Nullable(ACCURACY), "best_accuracy": Nullable(ACCURACY),
    "accuracy_curve": Nullable(ListOf(CURVE_POINT)), "outlier_steps": Nullable(ListOf(OUTLIER)),
    "host": Nullable(HOST), "energy": Nullable(ENERGY), "gpu_busy": Nullable(GPU_BUSY),
    "time_to_target_s": Nullable(Number(low=0)), "epochs_to_target": Nullable(Number(above=0)),
    "tflops": Nullable(Number(low=0)), "mfu_pct": Nullable(Number(low=0)),
    "grad_comm": Nullable(GRAD_COMM_DTYPE), "bucket_mb": Nullable(BUCKET_MB),
    "profile": Nullable(PROFILE), "numerics": Nullable(NUMERICS), "memory": Nullable(MEMORY), "fp8": Nullable(FP8),
}
# a field with a default may be missing: older files lack it
RUN_TYPES = typing.get_type_hints(RunRecord)  # record.py's annotations are text until resolved here
RUN = Fields(*[{field.name: NARROWER.get(field.name) or from_annotation(RUN_TYPES[field.name])
                for field in fields(RunRecord) if (field.default is MISSING) == required}
               for required in (True, False)])
ENV = Fields({"timestamp_utc": TEXT, "hostname": TEXT, "device": TEXT, "torch": TEXT, "git_commit": Nullable(TEXT)},
             {"world_size": WHOLE_FROM_1, "device_type": Nullable(TEXT), "source_sha256": Nullable(TEXT)})


def setting(key: str) -> Spec:
    """The spec of the config setting `key`: its flag's range, or its choices, or its kind."""
    flag = SETTINGS[key].flag
    if flag.range is not None:
        return Ranged(flag.range)
    if flag.choices is not None:
        return OneOf(flag.choices, f"a value of {SETTINGS[key].name}")
    return from_annotation(record_kind(key))


# The settings the setup line prints and the merge pools by, in the ranges their flags take (the
# scaling study divides by the batch); those every release wrote may not be missing.
CONFIG = Fields({key: setting(key) for key in RECORDED_ALWAYS},
                {**{key: Nullable(setting(key)) for key in SETUP_KEYS if key not in RECORDED_ALWAYS},
                 **{key: setting(key) if SETTINGS[key].default() is not None else Nullable(setting(key))
                    for key in ACCURACY_KEYS},
                 # every other setting as its flag takes it, where a file holds it (earlier releases' lack some)
                 **{key: Nullable(setting(key)) for key in SETTINGS
                    if key not in (*RECORDED_ALWAYS, *SETUP_KEYS, *ACCURACY_KEYS)},
                 "baseline": OneOf(MODES, "a precision mode"),  # files written before --baseline lack it
                 "model_class": Nullable(TEXT), "model_output": Nullable(TEXT)})  # files before /6 lack them
DATA = Fields({"name": TEXT}, {"num_classes": Number(whole=True, low=2), "fingerprint": Nullable(TEXT)})
DOCUMENT = Fields({"env": ENV, "config": CONFIG, "data": DATA, "runs": ListOf(RUN, nonempty=True)},
                  {"sources": ListOf(TEXT), "upgraded_from": OneOf(EARLIER_SCHEMAS, "an earlier ampbench schema"),
                   "comparison": MapOf(Kind(dict, "an object"))})  # upgrade() renames the keys of its rows


def timed_without_figures(run: Dict[str, Any]) -> Optional[str]:
    """A timed run has every step, the data wait and the throughput (the scaling study reads it)."""
    if run["step_time_ms"] is None:
        return None
    if not (run["step_times_ms"] and run["data_time_ms"] is not None):
        return " has a step_time_ms but no step_times_ms or data_time_ms"
    return " has a step_time_ms but no images_per_sec" if run["images_per_sec"] is None else None


def unordered_statistics(run: Dict[str, Any]) -> Optional[str]:
    """A median between its p10 and p90: the spread column is their distance."""
    times = run["step_time_ms"]
    if times is None:
        return None
    low, median, high = times.get("p10", times["median"]), times["median"], times["p90"]
    if low <= median <= high:
        return None
    return (f".step_time_ms.median is {value_in_words(median)}, not between its p10 ({value_in_words(low)}) and "
            f"p90 ({value_in_words(high)})" if "p10" in times else
            f".step_time_ms.median is {value_in_words(median)}, above its p90 ({value_in_words(high)})")


def half_a_target(run: Dict[str, Any]) -> Optional[str]:
    """The time and the epochs to target come from one evaluation: both, or neither."""
    time, epochs = run.get("time_to_target_s"), run.get("epochs_to_target")
    if (time is None) == (epochs is None):
        return None
    return " has a time_to_target_s but no epochs_to_target" if epochs is None else \
        " has an epochs_to_target but no time_to_target_s"


def fp8_of_another_mode(run: Dict[str, Any]) -> Optional[str]:
    """An fp8 block belongs to a mode that converts layers, records its recipe, and counts no
    more converted layers than there are, nor fewer left out than were not converted."""
    block, mode = run.get("fp8"), MODES.get(run["mode"])
    if block is None:
        return None
    if mode is not None and not mode.float8:
        return f".fp8 is an object, but mode {mode.name} converts no layer to float8"
    if mode is not None and block["recipe"] != mode.float8:
        return f".fp8.recipe is {value_in_words(block['recipe'])}, not mode {mode.name}'s \"{mode.float8}\""
    linear, converted = block["linear_layers"], block["converted_layers"]
    if converted > linear:
        return f".fp8.converted_layers is {converted}, more than its linear_layers ({linear})"
    if len(block["left_out"]) < linear - converted:
        return (f".fp8.left_out names {len(block['left_out'])} layers, fewer than the {linear - converted} Linear "
                "layers not converted")
    return None


def beyond_the_step(run: Dict[str, Any]) -> Optional[str]:
    """The all-reduce no compute overlapped and the GPU's idle time are parts of the profiled
    step they are printed against."""
    profile = run.get("profile") or {}
    for part in ("comm_exposed_ms", "idle_ms"):
        ms = profile.get(part)
        if ms is None:
            continue
        if profile.get("wall_ms") is None:
            return f".profile has no wall_ms beside its {part}"
        if ms > profile["wall_ms"]:
            return (f".profile.{part} is {value_in_words(ms)}, more than its wall_ms "
                    f"({value_in_words(profile['wall_ms'])})")
    return None


def census_contradictions(run: Dict[str, Any]) -> Optional[str]:
    """The gradient histogram counts some value; the largest activation's share of float16's
    maximum is its value over that maximum."""
    numerics = run.get("numerics")  # older files have no numerics
    if not numerics:
        return None
    histogram, top = numerics["histogram"], numerics["activation_max"]
    if not sum(histogram["counts"]) + histogram["zeros"]:
        return ".numerics.histogram counts no value"
    if not math.isclose(top["share_of_fp16_max"], top["value"] / FP16_MAX, rel_tol=1e-6, abs_tol=1e-12):
        return (f".numerics.activation_max.share_of_fp16_max is {value_in_words(top['share_of_fp16_max'])}, not its "
                f"value over {FP16_MAX:g} ({top['value'] / FP16_MAX:.4g})")
    return None


def energy_contradictions(run: Dict[str, Any]) -> Optional[str]:
    """An energy block's figures follow from its joules, no GPU draws beyond MAX_PLAUSIBLE_WATTS
    (more is a counter that went back), and its window is flagged as the rule says."""
    energy = run.get("energy")
    if not energy:
        return None
    joules = energy["joules"]
    for key, follows in (("joules_per_image", joules / energy["images"]), ("mean_watts", joules / energy["seconds"])):
        if not math.isclose(energy[key], follows, rel_tol=1e-6):
            return f".energy.{key} is {value_in_words(energy[key])}, not what its joules give ({follows:.6g})"
    if energy["mean_watts"] > MAX_PLAUSIBLE_WATTS:
        return (f".energy.mean_watts is {value_in_words(energy['mean_watts'])}, beyond any GPU's draw "
                f"({MAX_PLAUSIBLE_WATTS:g} W): a counter that went back")
    flagged = energy.get("window_too_short")
    if flagged is not None and flagged != window_too_short(energy["seconds"]):
        return (f".energy.window_too_short is {value_in_words(flagged)}, but its window of "
                f"{value_in_words(energy['seconds'])} s is {'at least' if flagged else 'under'} the "
                f"{MIN_ENERGY_WINDOW_S:g} s an energy figure needs")
    return None


def busy_share_or_why_not(run: Dict[str, Any]) -> Optional[str]:
    """A run that records the GPU's busy share (from ampbench.result/4) has the share or the
    sentence saying why there is none, never both; and only a GPU run has one."""
    if "gpu_busy" not in run and "gpu_busy_unavailable" not in run:  # written before the share was measured
        return None
    busy, why = run.get("gpu_busy"), run.get("gpu_busy_unavailable")
    if busy is None and why is None:
        return " has neither a gpu_busy nor a gpu_busy_unavailable saying why it has none"
    if busy is not None and why is not None:
        return " has a gpu_busy and a gpu_busy_unavailable saying it has none"
    if busy is not None and not run["device"].startswith("cuda"):
        return f".gpu_busy is an object, but the run trained on {value_in_words(run['device'])}, not a GPU"
    return None


# What a run's fields must agree on: each rule returns the sentence's tail after runs[i], or None.
RULES: List[Callable[[Dict[str, Any]], Optional[str]]] = [
    timed_without_figures, unordered_statistics, half_a_target, fp8_of_another_mode, beyond_the_step,
    census_contradictions, energy_contradictions, busy_share_or_why_not]


def check(document: Dict[str, Any], where: str = "") -> None:
    """Raise Invalid naming the first field of `document` the report cannot use; a run of a
    release that records the GPU's busy share (from /4) that says nothing of it among them."""
    DOCUMENT.check(document, where)
    for index, run in enumerate(document["runs"]):
        busy_said = {"gpu_busy", "gpu_busy_unavailable"} & set(run)
        if document.get("schema", BEFORE_BUSY[0]) not in BEFORE_BUSY and not busy_said:
            raise Invalid(f"{at(where, 'runs')}[{index}] has neither a gpu_busy nor a gpu_busy_unavailable saying why "
                          f"it has none, which every run of {document['schema']} holds")
        for rule in RULES:
            contradiction = rule(run)
            if contradiction:
                raise Invalid(f"{at(where, 'runs')}[{index}]{contradiction}")
