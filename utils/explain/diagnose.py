"""From profiles to reasons: how each category's time changed against fp32, the Amdahl line,
and a ranked diagnosis from the documented rules below (README, "Why is it (not) faster?").

Each finding names its evidence (measured ms and shares) and a remedy ampbench can test; the
findings are ranked by the milliseconds per step at stake. Findings that one run's profile
shows are kept with that run (runs[].profile.diagnosis); those that need the fp32 run are the
comparison's (comparison[mode].diagnosis).
"""
from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any, Dict, Iterable, List, Optional, Sequence

from utils.explain.categories import DATA_LABEL, MEMORY_BOUND, NAMES, SCALER_LABEL, TENSOR_CORE_WORK
from utils.measure import feed
from utils.measure.gpus import TENSOR_CORE_MULTIPLE
from utils.modes import BASELINES, LOW_FP8_SHARE, MODES
from utils.training.cpu_arithmetic import FAST_CPU_FLAGS

if TYPE_CHECKING:
    from typing import Protocol

    from utils.explain.profiler import Profile

    Finding = Dict[str, Any]  # finding(): rule, mode, at_stake_ms, evidence, remedy, text, as results files hold it

    class RunFacts(Protocol):
        """What the rules read of a run besides its profile (a RunRecord has them)."""
        mode: str
        device: str
        loader: str
        channels_last: bool
        world_size: int
        grad_comm: Optional[str]
        bucket_mb: Optional[float]
        optimizer_impl: Optional[str]
        effective_batch_size: int
        feed: Optional[Dict[str, Any]]  # streamed data: the loader's and the step's rates apart (measure/feed.py)

# The rules' thresholds, as shares of a profiled step.
INPUT_BOUND_SHARE = 0.20  # the input pipeline
LAUNCH_BOUND_SHARE = 0.30  # CUDA: the GPU idle, waiting for the host
# ... so a GPU busy under this share of its step waits for the host's launches, whoever measured it
# (the summary reads NVML's runs[].gpu_busy against it): a row of such steps measures the host.
GPU_BOUND_SHARE = 1 - LAUNCH_BOUND_SHARE
MEMORY_BOUND_SHARE = 0.35  # normalisation and elementwise ops
CAST_SHARE = 0.10  # dtype conversions
COMM_BOUND_SHARE = 0.20  # all-reduce that no compute overlapped (a distributed run)
FAR_BELOW_PREDICTION = 0.8  # a measured FP8 speedup under this share of the roofline's is not the shapes' doing
SMALL_FP8_MATMUL = 2048  # an FP8 matmul with a weight dimension below this saves less than its casts and scales cost
SHRINK_EXPECTED = 1.1  # conv+matmul that ran less than this many times as fast as in fp32 failed to shrink
SHOWN_GROWTH = 3  # the fallback names at most this many categories that grew


def low_precision_dtype(mode_name: str) -> Optional[str]:
    """The low-precision dtype of the mode named in a results file (Mode.low_precision_dtype),
    None for an unknown name."""
    mode = MODES.get(mode_name)
    return mode.low_precision_dtype if mode is not None else None


def category_share(profile: Profile, categories: Iterable[str]) -> float:
    """The share of the profiled step that `categories` took together."""
    return sum(profile.categories[name]["share"] for name in categories)


def category_ms(profile: Profile, categories: Iterable[str]) -> float:
    """The milliseconds per profiled step that `categories` took together."""
    return sum(profile.categories[name]["ms"] for name in categories)


def finding(rule: str, mode: str, at_stake_ms: float, evidence: str, remedy: str) -> Finding:
    return {"rule": rule, "mode": mode, "at_stake_ms": at_stake_ms, "evidence": evidence, "remedy": remedy,
            "text": f"{mode}: {rule}: {evidence}; try {remedy}."}


def input_bound(run: RunFacts, profile: Profile, workers: int, cpu_count: int) -> Optional[Finding]:
    """The input-bound finding, or None: streamed data's from the loader's and the step's rates
    timed apart (fed_finding), data held in memory's from the profile's share of the input pipeline."""
    if run.feed:
        return fed_finding(run) if run.feed["bound"] == "input" else None
    step = profile.total_ms
    data_ms = profile.host_ms.get("data", 0.0) if run.device.startswith("cuda") else profile.categories["data"]["ms"]
    if data_ms < INPUT_BOUND_SHARE * step:
        return None
    if run.loader == "torchvision":
        remedy = "--loader device (the dataset on the device, augmented a whole batch at a time)"
        if workers < cpu_count:
            remedy += f", or more --workers than {workers}"
    else:
        remedy = "a larger -b, which spreads each batch's fixed cost over more images"
    return finding("input-bound", run.mode, data_ms,
                   f"the input pipeline takes {data_ms:.1f} ms, {100 * data_ms / step:.0f}% of the step", remedy)


def fed_finding(run: RunFacts) -> Finding:
    """The input-bound finding of a run whose loader alone delivers less than its step alone could
    take (runs[].feed): the milliseconds a step waits for its batch, the loader's levers."""
    fed = run.feed
    assert fed is not None  # only runs that measured it
    waited_ms = 1000.0 * run.effective_batch_size * (1 / fed["train_images_per_sec"] - 1 / fed["step_images_per_sec"])
    levers = ", ".join(lever["flags"] for lever in fed["levers"]) or "a faster input pipeline"
    return finding("input-bound", run.mode, max(waited_ms, 0.0),
                   f"the loader alone delivers {feed.per_second(fed['loader_images_per_sec'])} img/s with "
                   f"{fed['workers']} workers, the step alone could take {feed.per_second(fed['step_images_per_sec'])} "
                   f"and training ran at {feed.per_second(fed['train_images_per_sec'])}: precision is not what limits "
                   "it", levers)


def diagnose_run(run: RunFacts, profile: Profile, workers: int, cpu_count: int) -> List[Finding]:
    """The findings one run's Profile shows by itself; `run` says what it trained (its RunRecord)."""
    mode, cuda, step = run.mode, run.device.startswith("cuda"), profile.total_ms
    input_found = input_bound(run, profile, workers, cpu_count)
    found = [input_found] if input_found else []
    idle = profile.idle_ms or 0.0
    if cuda and idle >= LAUNCH_BOUND_SHARE * step:
        found.append(finding("host-bound", mode, idle,
                             f"the GPU waits for the host {idle:.1f} ms, {100 * idle / step:.0f}% of the step",
                             "a larger -b, or --compile --compile-mode reduce-overhead (CUDA graphs launch the "
                             "whole step at once)"))
    if profile.host_syncs_per_step:
        found.append(host_sync_finding(run, profile, idle if cuda else 0.0))
    bound_share = category_share(profile, MEMORY_BOUND)
    if bound_share >= MEMORY_BOUND_SHARE:
        remedy = "--compile, which fuses them" if run.channels_last else "--channels-last and --compile (fusion)"
        bound_ms = category_ms(profile, MEMORY_BOUND)
        found.append(finding("memory-bound", mode, bound_ms,
                             f"normalisation and elementwise ops take {bound_ms:.1f} ms, "
                             f"{100 * bound_share:.0f}% of the step: they move data, and lower precision speeds them "
                             "up by 2x at most", remedy))
    exposed = profile.comm_exposed_ms or 0.0
    if run.world_size > 1 and profile.wall_ms and exposed >= COMM_BOUND_SHARE * profile.wall_ms:
        found.append(communication_finding(run, exposed, profile.wall_ms))
    cast = profile.categories["cast"]
    if cast["share"] >= CAST_SHARE:
        found.append(finding("cast overhead", mode, cast["ms"],
                             f"dtype conversions take {cast['ms']:.1f} ms, {100 * cast['share']:.0f}% of the step "
                             "(autocast casts the weights at every forward and the gradients back)",
                             "--compile, which fuses the casts into their neighbours"))
    unaligned = profile.unaligned_layers
    if cuda and low_precision_dtype(mode) and unaligned:
        listed = ", ".join(unaligned[:4]) + (f" and {len(unaligned) - 4} more" if len(unaligned) > 4 else "")
        found.append(finding("tensor-core shapes", mode, 0.0,
                             f"{listed} {'has' if len(unaligned) == 1 else 'have'} sizes that are not multiples of "
                             f"{TENSOR_CORE_MULTIPLE}, which FP16/BF16 tensor cores need",
                             f"-b a multiple of {TENSOR_CORE_MULTIPLE}; a layer's widths are the model's "
                             "(CIFAR-10's 3-channel input and 10-class head are inherent)"))
    return found


def communication_finding(run: RunFacts, exposed_ms: float, wall_ms: float) -> Finding:
    """The step waits for gradients that no compute hides: send fewer bytes, in fewer and larger
    buckets, or give each all-reduce more compute to hide behind."""
    remedies = ["--grad-comm bf16 (half the bytes; fp16 where the backend lacks bfloat16)"] \
        if run.grad_comm == "fp32" else []
    remedies += [f"a larger --bucket-mb than {run.bucket_mb:g}",
                 "a larger -b per process (more compute per all-reduce)"]
    return finding("communication-bound", run.mode, exposed_ms,
                   f"the all-reduce of the gradients waits {exposed_ms:.1f} ms that no compute overlaps, "
                   f"{100 * exposed_ms / wall_ms:.0f}% of the profiled step on {run.world_size} ranks",
                   ", ".join(remedies[:-1]) + " or " + remedies[-1])


PLACES = {SCALER_LABEL: "the loss scaler's step", DATA_LABEL: "the input pipeline"}  # the labels, in words


def host_sync_finding(run: RunFacts, profile: Profile, at_stake_ms: float) -> Finding:
    """The host waited for the device inside the step (a tensor read as a number), so the CPU
    cannot queue the next step's kernels ahead of the GPU."""
    where = profile.host_syncs[0]["in"]
    count = profile.host_syncs_per_step
    in_scaler = where in (SCALER_LABEL, "Optimizer.step#SGD.step")
    where = PLACES.get(where, where)
    if in_scaler and run.optimizer_impl == "foreach":
        remedy = "--optimizer-impl fused (its kernel reads the loss scaler's inf check on the device)"
    else:
        remedy = "keeping that value on the device (no .item(), bool() or float() of a tensor in the step)"
    return finding("host sync", run.mode, at_stake_ms,
                   f"the host waits for the device {count:g} time{'' if count == 1 else 's'} per step, in {where}",
                   remedy)


def profile_speedup(base: Dict[str, float], profile: Dict[str, float]) -> Dict[str, float]:
    """Per category, how many times faster it ran than in `base` (fp32); "total" for the step.
    Categories with no time in either are left out."""
    speedups = {name: base[name] / profile[name] for name in NAMES if base[name] > 0 and profile[name] > 0}
    speedups["total"] = sum(base.values()) / sum(profile.values())
    return speedups


def amdahl(base: Dict[str, float], profile: Dict[str, float], measured: float) -> Optional[Dict[str, Any]]:
    """The Amdahl line's figures: the share p of fp32's step in conv+matmul, the speedup s they
    got in this mode, the step's speedup were everything else unchanged, 1/((1-p) + p/s), its
    limit were they free, 1/(1-p), and the measured speedup (the timed steps')."""
    base_total = sum(base.values())
    work = sum(base[name] for name in TENSOR_CORE_WORK)
    now = sum(profile[name] for name in TENSOR_CORE_WORK)
    if not work or not now:
        return None
    p, s = work / base_total, work / now
    return {"share": p, "speedup": s, "predicted": 1.0 / ((1.0 - p) + p / s),
            "limit": 1.0 / (1.0 - p) if p < 1 else None, "measured": measured}


def speedup_text(value: float) -> str:
    """"1.87x", or two significant digits below 0.1 ("0.0089x", where "0.01x" would hide it), in
    digits however small: "5.3e-05x" would read as the figures 5.3 and 05."""
    if value >= 0.1 or value <= 0:
        return f"{value:.2f}x"
    return f"{value:.{1 - math.floor(math.log10(value))}f}x"


def amdahl_line(mode: str, figures: Dict[str, Any]) -> str:
    limit = speedup_text(figures["limit"]) if figures["limit"] else "unbounded"
    return (f"{mode}: conv+matmul are {100 * figures['share']:.0f}% of the fp32 step and ran "
            f"{speedup_text(figures['speedup'])} as fast; with the rest unchanged the step would be "
            f"{speedup_text(figures['predicted'])} as fast ({limit} were they free); measured "
            + (f"{speedup_text(figures['measured'])}." if figures["measured"] is not None else "-."))


def diagnose_comparison(mode: str, base: Dict[str, float], profile: Dict[str, float], device_type: str,
                        cpu_flags: Optional[Sequence[str]], speedup: Optional[float],
                        tf32_speedup: Optional[float]) -> List[Finding]:
    """The findings that need the fp32 profile `base` ({category: ms}) beside this mode's:
    `speedup` is this mode's measured one, `tf32_speedup` the tf32 mode's, if it ran."""
    found, dtype = [], low_precision_dtype(mode)
    work_base = sum(base[name] for name in TENSOR_CORE_WORK)
    work = sum(profile[name] for name in TENSOR_CORE_WORK)
    if dtype and work_base and work > work_base:
        evidence = (f"conv+matmul take {work / work_base:.1f}x as long as in fp32 ({work:.1f} vs {work_base:.1f} ms "
                    "per step)")
        rule = f"no fast {dtype} arithmetic on this device"
        if device_type == "cpu":
            wanted = FAST_CPU_FLAGS[dtype]
            present = [flag for flag in wanted if flag in (cpu_flags or ())]
            if present:  # the CPU has the instructions: the kernels this torch ran did not use them
                rule = f"{dtype} kernels slower than fp32's despite {' and '.join(present)}"
                evidence += (f", although this CPU lists {' and '.join(present)}: the {dtype} kernels this torch "
                             "ran do not use them")
                remedy = f"fp32 here, or a torch whose CPU kernels (oneDNN) use {' and '.join(present)}"
            else:
                if cpu_flags is not None:
                    evidence += f", and this CPU has neither {' nor '.join(wanted)}"
                remedy = (f"running it on a GPU (-p); on a CPU, {dtype} pays off only with {' or '.join(wanted)}, "
                          "so keep fp32 here")
        else:
            remedy = f"fp32 or tf32 on this GPU, or a GPU with {dtype} tensor cores"
        found.append(finding(rule, mode, work - work_base, evidence, remedy))
    if dtype and tf32_speedup is not None and speedup is not None:
        found.append(finding("TF32 already uses tensor cores", mode, 0.0,
                             f"tf32 is already {tf32_speedup:.2f}x faster than fp32, so {mode} gains "
                             f"{speedup / tf32_speedup:.2f}x over it",
                             "reading the speedup over tf32: most FP32 code on Ampere and newer GPUs runs "
                             "convolutions in TF32 by default"))
    return found


def fp8_slower(mode: str, fp8_run: Dict[str, Any], fp8_ms: float, bf16_ms: float) -> Optional[Finding]:
    """An fp8 mode slower than amp-bf16 (`fp8_run` one of its runs), with the causes its run
    shows: emulation, no --compile, small matmuls, a low FP8 share; None when it is faster."""
    if fp8_ms <= bf16_ms:
        return None
    fp8, causes = fp8_run["fp8"], []
    if fp8.get("emulated"):
        causes.append("FP8 was emulated (--fp8-emulate), which measures software, not FP8 tensor cores")
    if not fp8_run.get("compiled"):
        causes.append("no --compile, so every float8 cast, scale and amax is a kernel of its own")
    shapes = [shape for shape in fp8.get("matmul_shapes") or [] if len(shape) == 3]  # [M, K, N]
    largest = max(shapes, key=lambda shape: shape[1] * shape[2]) if shapes else None
    against = against_prediction(fp8, bool(fp8_run.get("compiled")), bf16_ms / fp8_ms, largest)
    if against:
        causes.append(against)
    elif largest and min(largest[1:]) < SMALL_FP8_MATMUL:
        causes.append(f"its FP8 matmuls are small (the largest is {largest[0]} x {largest[1]} x {largest[2]}, "
                      f"M x K x N), and below {SMALL_FP8_MATMUL} wide the casts cost about what FP8 saves")
    if fp8["flop_share"] < LOW_FP8_SHARE:
        causes.append(f"only {100 * fp8['flop_share']:.0f}% of the step's matmul FLOPs run in FP8")
    return finding("fp8 slower than bf16", mode, fp8_ms - bf16_ms,
                   f"{fp8_ms:.1f} ms a step against {BASELINES['fp8']}'s {bf16_ms:.1f} ms" +
                   (": " + "; ".join(causes) if causes else ""),
                   "--compile (it fuses the casts and amax into their neighbours), a wider model or a larger "
                   f"batch, and reading fp8 against {BASELINES['fp8']}")


def against_prediction(fp8: Dict[str, Any], compiled: bool, measured: float,
                       largest: Optional[Sequence[int]]) -> Optional[str]:
    """On FP8 tensor cores, the measured speedup against the roofline's (fp8.prediction): far
    below it, launch overhead or casts not fused; near it, the shapes themselves, with the width
    from which the roofline has FP8 pay at the run's M. None when emulated or not predicted."""
    from utils.explain import fp8_predict

    prediction = fp8.get("prediction")
    if fp8.get("emulated") or not prediction:
        return None
    said = (f"measured {measured:.2f}x {BASELINES['fp8']}'s speed against the {prediction['speedup']:.2f}x the "
            f"roofline predicts for {prediction['for']}")
    if measured < FAR_BELOW_PREDICTION * prediction["speedup"]:
        return (f"{said}: far below it, so the time goes to kernel launches or to casts not fused into their "
                "neighbours" + ("" if compiled else "; run with --compile"))
    rows = largest[0] if largest else None
    width = fp8_predict.pays_from(prediction["gpu"], fp8["recipe"], compiled, rows) if rows else None
    return (f"{said}: near it, so the shapes themselves are too small for FP8 to pay" +
            (f"; at {rows} rows the roofline has FP8 pay from K = N = {width}" if width else
             f"; at {rows} rows the roofline has FP8 pay at no K = N up to 32768" if rows else ""))


def fallback(mode: str, base: Dict[str, float], profile: Dict[str, float],
             speedup: Optional[float]) -> Optional[Finding]:
    """When `mode` is no faster than fp32 (`speedup`, else its profiled step's) and no rule fired:
    why, from its own categories ({category: ms} against fp32's `base`): which grew, whether
    conv+matmul failed to shrink, and the casts' share of its step. None when it is faster."""
    total, base_total = sum(profile.values()), sum(base.values())
    if speedup is None and total:
        speedup = base_total / total
    if mode == BASELINES["reference"] or speedup is None or speedup > 1.0 or not total:
        return None
    grew = sorted((name for name in NAMES if profile.get(name, 0.0) > base.get(name, 0.0)),
                  key=lambda name: base.get(name, 0.0) - profile[name])[:SHOWN_GROWTH]
    parts = [", ".join(f"{name} +{profile[name] - base.get(name, 0.0):.1f} ms" for name in grew) + " grew"] \
        if grew else []
    work_base = sum(base.get(name, 0.0) for name in TENSOR_CORE_WORK)
    work = sum(profile.get(name, 0.0) for name in TENSOR_CORE_WORK)
    shrink = work_base / work if work_base and work else None
    if shrink is not None and shrink < SHRINK_EXPECTED:
        parts.append(f"conv+matmul failed to shrink ({speedup_text(shrink)} as fast as in fp32)")
    parts.append(f"casts are {100 * profile.get('cast', 0.0) / total:.0f}% of its step")
    return finding("no faster, no rule matched", mode, max(total - base_total, 0.0),
                   f"it is {speedup_text(speedup)} as fast as fp32 and no rule fired; by its own categories, "
                   + "; ".join(parts), fallback_remedy(mode, grew, shrink))


def fallback_remedy(mode: str, grew: Sequence[str], shrink: Optional[float]) -> str:
    """What to try for fallback()'s finding: fusion when casts or memory-bound ops grew, another
    device when the arithmetic itself did not speed up, else more profiled steps."""
    if "cast" in grew or set(grew) & set(MEMORY_BOUND):
        return "--compile, which fuses the casts and elementwise ops into their neighbours"
    if set(grew) & set(TENSOR_CORE_WORK) or (shrink is not None and shrink < SHRINK_EXPECTED):
        return f"fp32 on this device, or a device with fast {low_precision_dtype(mode) or 'low-precision'} arithmetic"
    return "more --explain-steps and --repeats, to see whether the difference holds"


def ranked(findings: Iterable[Finding]) -> List[Finding]:
    """Largest stake first; equal stakes in the order found."""
    return sorted(findings, key=lambda found: -found["at_stake_ms"])
