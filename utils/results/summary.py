"""The text printed at the end of a run and by utils.report: the setup line, the comparison
table, the notes under it, --explain's breakdown and --numerics' census."""
from __future__ import annotations

import textwrap
from typing import Any, Dict, List, Optional, Sequence, Tuple

from models.families import DEFAULT_IMAGE_SIZE, uses_resnet_stem
from utils.console import human_bytes, one_line, plural
from utils.explain.categories import NAMES as CATEGORIES
from utils.explain.diagnose import GPU_BOUND_SHARE, amdahl_line, ranked, speedup_text
from utils.measure import feed
from utils.measure.nvml_meter import COUNTER_UPDATE_S, MIN_BUSY_SAMPLES, MIN_ENERGY_WINDOW_S
from utils.measure.step_stats import OUTLIER_FACTOR
from utils.modes import BASELINES
from utils.results.compare import (
    CHANCE_LOSS,
    SPREAD_WARNING_PCT,
    communication_share,
    cut_short,
    profiled_communication,
    ratios_text,
    unsteady_speedups,
)
from utils.results.comparison_row import ComparisonRow
from utils.results.record import WARMUP_IN_PEAK, setup_of, written_schema

TABLE_WIDTH = 80


def fmt(value: Optional[float], spec: str, scale: float = 1.0, suffix: str = "") -> str:
    return "-" if value is None else f"{value * scale:{spec}}{suffix}"


def with_interval(value: Optional[float], interval: Optional[Sequence[float]], spec: str, suffix: str = "") -> str:
    """"1.27x [1.21, 1.33]": a ratio and its 95% interval, when it has one."""
    if value is None:
        return "-"
    text = f"{value:{spec}}{suffix}"
    return text if interval is None else f"{text} [{interval[0]:{spec}}, {interval[1]:{spec}}]"


def speedup_cell(row: ComparisonRow) -> str:
    cell = with_interval(row.speedup_vs_baseline, row.speedup_ci95, ".2f", "x")
    return cell + " n.s." if row.speedup_significant is False else cell


def format_table(header: List[str], rows: List[List[str]]) -> str:
    widths = [max(len(str(cell)) for cell in column) for column in zip(header, *rows)]
    lines = ["  ".join(str(cell).rjust(width) for cell, width in zip(row, widths)) for row in [header] + rows]
    lines.insert(1, "  ".join("-" * width for width in widths))
    return "\n".join(line.rstrip() for line in lines)


def describe(setup: Dict[str, Any], env: Dict[str, Any]) -> str:
    """The setup line above a table: only what applies to these runs."""
    ranks = setup["world_size"]
    batch = f"batch {setup['batch_size']}" + (f" per process x {ranks} processes" if ranks > 1 else "")
    if setup.get("grad_comm"):
        batch += f" (gradients sent in {setup['grad_comm']}, {setup['bucket_mb']:g} MB buckets)"
    named = [f"accum {setup['accum_steps']}" if (setup.get("accum_steps") or 1) > 1 else None,
             "channels_last" if setup.get("channels_last") else None,
             f"compile ({setup.get('compile_mode') or 'default'})" if setup.get("compile") else None,
             f"loader torchvision ({setup.get('workers')} workers)" if setup.get("loader") == "torchvision" else None,
             f"streamed by {plural(setup.get('workers'), 'worker')}" if setup.get("loader") in ("stream", "dali")
             else None,
             "AdamW" if setup.get("optimizer") == "adamw" else None]
    levers = "".join(f", {lever}" for lever in named if lever)
    stem = f" (stem {setup['stem']})" if uses_resnet_stem(setup["model"]) else ""
    size = setup.get("image_size") or DEFAULT_IMAGE_SIZE
    stem += f", {size}x{size} images" if size != DEFAULT_IMAGE_SIZE else ""
    tf32 = " | TF32 off except in mode tf32" if env.get("device_type") == "cuda" else ""
    own = f", {setup['mode_steps'].replace('=', ' ')} by --mode-steps" if setup.get("mode_steps") else ""
    return (f"{setup['model']}{stem}, {batch}{levers}, {setup['steps']} steps ({setup['warmup']} warm-up{own}), "
            f"data {setup['data']} | {setup['device']} | torch {env['torch']}{tf32}")


# (header, cell) per column after "mode", in four blocks: speed; data wait, memory and compute;
# what NVML read of the GPU, its busy share and energy, each column shown only when some run
# measured it (NVML_COLUMNS); learning. Without --wide each block is a table of its own (split
# again should one exceed TABLE_WIDTH characters); --wide prints them all as one table.
BLOCKS = [
    [("median ms", lambda row: fmt(row.median_step_ms, ".2f")),
     ("p90 ms", lambda row: fmt(row.p90_step_ms, ".2f")),
     ("spread", lambda row: fmt(row.spread_pct, ".1f", suffix="%")),
     ("img/s", lambda row: fmt(row.images_per_sec, ".0f")),
     ("speedup [95% CI]", speedup_cell)],
    [("data ms", lambda row: fmt(row.data_time_ms, ".2f")),
     ("peak mem", lambda row: human_bytes(row.peak_memory_bytes)),
     ("mem ratio", lambda row: with_interval(row.memory_ratio_vs_baseline, row.memory_ratio_ci95, ".2f")),
     ("TFLOP/s", lambda row: fmt(row.tflops, ".3g")),
     ("MFU", lambda row: fmt(row.mfu_pct, ".1f", suffix="%"))],
    [("GPU busy", lambda row: fmt(row.gpu_busy_share, ".0f", 100, "%")),
     ("J/img", lambda row: fmt(row.joules_per_image, ".3g")),
     ("energy vs base", lambda row: WINDOW_TOO_SHORT if row.energy_window_too_short
      else with_interval(row.energy_ratio_vs_baseline, row.energy_ratio_ci95, ".2f"))],
    [("final loss", lambda row: fmt(row.final_loss, ".4f")),
     ("test acc", lambda row: fmt(row.test_accuracy, ".2f", 100, "%")),
     ("acc diff", lambda row: fmt(row.accuracy_delta_vs_baseline, "+.2f", 100, " pt")),
     ("skipped", lambda row: str(row.skipped_steps)),
     ("loss scale", lambda row: fmt(row.final_loss_scale, "g")),
     ("scale drops", lambda row: fmt(row.scale_drops, ".0f"))],
]
WINDOW_TOO_SHORT = "window too short"  # in place of a ratio from an energy window that cannot resolve it
# The columns of NVML's readings and the row's figure each shows: none where no row has it (a
# CPU's runs, or a GPU's without nvidia-ml-py).
NVML_COLUMNS = {"GPU busy": "gpu_busy_share", "J/img": "joules_per_image", "energy vs base": "joules_per_image"}
AGAINST_BASELINE = ("speedup [95% CI]", "mem ratio", "energy vs base", "acc diff", "vs base [95% CI]", "verdict",
                    "speedup to target")
# Does accuracy hold? Shown when several seeds ran or a target was given (over seeds, paired with the baseline).
LEARNING = [
    ("seeds", lambda row: str(row.seeds)),
    ("acc [95% CI]", lambda row: with_interval(percent_points(row.accuracy_mean), points(row.accuracy_ci95), ".2f",
                                                "%")),
    ("vs base [95% CI]", lambda row: with_interval(percent_points(row.accuracy_mean_delta),
                                                   points(row.accuracy_delta_ci95), "+.2f")),
    ("verdict", lambda row: row.accuracy_verdict or "-"),
    ("epochs to target", lambda row: fmt(row.epochs_to_target, ".2f")),
    ("time to target", lambda row: fmt(row.time_to_target_s, ".1f", suffix=" s")),
    ("reached", lambda row: fmt(row.target_reached_share, ".0f", 100, "%")),
    ("speedup to target", lambda row: fmt(row.time_to_target_speedup_vs_baseline, ".2f", suffix="x")),
]


def percent_points(fraction: Optional[float]) -> Optional[float]:
    return None if fraction is None else 100.0 * fraction


def points(interval: Optional[Sequence[float]]) -> Optional[List[float]]:
    """An interval of fractions in percentage points."""
    return None if interval is None else [100.0 * value for value in interval]


def fit_tables(label_header: str, labels: List[str], columns: List[Tuple[str, List[str]]],
               wide: bool = False) -> List[str]:
    """Tables of one row per label and the (header, cells) `columns`: one table with `wide`,
    else as many as it takes to keep each within TABLE_WIDTH."""
    label_width = max(len(text) for text in [label_header] + labels)
    tables = []
    while columns:
        width, count = label_width, 0
        for header, cells in columns:
            width += 2 + max(len(text) for text in [header] + cells)
            if count and width > TABLE_WIDTH and not wide:
                break
            count += 1
        shown, columns = columns[:count], columns[count:]
        tables.append(format_table([label_header] + [header for header, _ in shown],
                                   [[label] + [cells[r] for _, cells in shown] for r, label in enumerate(labels)]))
    return tables


def comparison_table(comparison: Dict[str, ComparisonRow], wide: bool = False) -> str:
    """One row per mode: one table with `wide`, else one per block, each within TABLE_WIDTH."""
    modes = list(comparison)
    blocks = BLOCKS + ([LEARNING] if any(row.seeds > 1 or row.target_accuracy is not None
                                         for row in comparison.values()) else [])
    if len(modes) == 1:  # nothing to compare with: no 1.00x, 1.00 or +0.00 columns
        blocks = [[column for column in block if column[0] not in AGAINST_BASELINE] for block in blocks]
    unmeasured = [header for header, figure in NVML_COLUMNS.items()
                  if all(getattr(row, figure) is None for row in comparison.values())]
    blocks = [[column for column in block if column[0] not in unmeasured] for block in blocks]
    tables = []
    for block in [[column for group in blocks for column in group]] if wide else blocks:
        tables += fit_tables("mode", modes, [(header, [cell(comparison[mode]) for mode in modes])
                                             for header, cell in block], wide)
    return "\n\n".join(tables)


def milliseconds(value: float) -> str:
    return f"{value:.0f}" if value >= 100 else f"{value:.1f}" if value >= 10 else f"{value:.2f}"


PROFILE_TOLERANCE = 0.20  # a profiled step this far from the timed median is warned about


def explanation(document: Dict[str, Any], wide: bool = False) -> List[str]:
    """--explain's block: ms per step and share by category per mode (and each category's
    speedup against fp32), the Amdahl lines, then the diagnosis, largest stake first."""
    comparison = document["comparison"]
    modes = [mode for mode, row in comparison.items() if row.profile_ms]
    if not modes:
        return []
    shown = [name for name in CATEGORIES if any(comparison[mode].profile_ms.get(name, 0.0) > 0 for mode in modes)]
    columns = []
    for mode in modes:
        row = comparison[mode]
        total = sum(row.profile_ms.values())
        speedups = row.profile_speedup if mode != BASELINES["reference"] else None
        cells = []
        for name in shown + ["total"]:
            value = total if name == "total" else row.profile_ms[name]
            cell = milliseconds(value) + ("" if name == "total" else f" {100 * value / total:3.0f}%")
            if speedups is not None:
                cell += f" {speedup_text(speedups[name]):>7}" if name in speedups else " " * 8
            cells.append(cell)
        columns.append((mode, cells + [milliseconds(row.profiled_vs_timed * row.median_step_ms)]))
    steps = next(run["profile"]["steps"] for run in document["runs"] if run.get("profile"))
    lines = [f"Where the time goes: ms per step by category, scaled to the timed median, share of the step and "
             f"speed against fp32 ({steps} profiled steps per mode after the timed ones; categories: docs/explain.md)",
             "\n\n".join(fit_tables("category", shown + ["total", "profiled step"], columns, wide))]
    stretched = [f"{mode} {comparison[mode].profiled_vs_timed:.2f}x" for mode in modes
                 if abs(comparison[mode].profiled_vs_timed - 1) > PROFILE_TOLERANCE]
    if stretched:
        lines.append(f"warning: the profiled step differs from the timed median by over {PROFILE_TOLERANCE:.0%} "
                     f"({', '.join(stretched)}): the profiler's own cost or a busy machine; the categories are "
                     "scaled to the timed median, so read their shares and ratios, which stay comparable.")
    lines += [amdahl_line(mode, comparison[mode].amdahl) for mode in modes if comparison[mode].amdahl]
    lines += communication_lines(document["runs"], modes)
    found: List[Dict[str, Any]] = []
    for run in document["runs"]:
        found += (run.get("profile") or {}).get("diagnosis") or []
    for mode in modes:
        found += comparison[mode].diagnosis or []
    first: Dict[Tuple[str, str], Dict[str, Any]] = {}  # a mode's rule once, where it ranks highest
    for item in ranked(found):
        first.setdefault((item["mode"], item["rule"]), item)
    found = list(first.values())
    if found:
        lines.append("Diagnosis, largest stake first:")
        lines += [f"{number}. {item['text']}" for number, item in enumerate(found, 1)]
    else:
        lines.append("Diagnosis: no rule fired (docs/explain.md lists them).")
    return lines


def communication_lines(runs: List[Dict[str, Any]], modes: List[str]) -> List[str]:
    """A distributed run: per mode, the profiled step split into the all-reduce that no compute
    overlapped and the rest (compute, and communication hidden behind it): compare.communication_share,
    the scaling study's figures."""
    lines = []
    for mode in modes:
        profiled = [run for run in runs if run["mode"] == mode and run.get("world_size", 1) > 1
                    and profiled_communication(run)]
        if profiled:
            exposed, wall, share = communication_share(profiled)
            lines.append(f"{mode}: communication on {profiled[0]['world_size']} ranks (gradients in "
                         f"{profiled[0]['grad_comm']}): {milliseconds(exposed)} ms of the {milliseconds(wall)} ms "
                         f"profiled step ({100 * share:.0f}%) waits for all-reduce that no compute overlaps; "
                         f"compute and hidden all-reduce take the other {milliseconds(wall - exposed)} ms.")
    return lines


def first_of(document: Dict[str, Any], key: str) -> Dict[str, Any]:
    """{mode: run[key] of its first run that has one}, in the comparison's order."""
    found = {}
    for run in document["runs"]:
        if run.get(key) and run["mode"] not in found:
            found[run["mode"]] = run[key]
    return {mode: found[mode] for mode in document["comparison"] if mode in found}


def percent(share: float) -> str:
    return f"{100 * share:.2g}%" if 0 < share < 0.001 else f"{100 * share:.1f}%"


def census_line(mode: str, numerics: Dict[str, Any]) -> str:
    """One sentence per mode: what the gradient census found."""
    passes, dtype = numerics["passes"], numerics["dtype"]
    plain = passes["unscaled"]
    if dtype == "float32":
        return f"{mode}: FP32 is the reference: nothing flushes (flushed {percent(plain['flushed_share'])})."
    worst = f" ({plain['worst_layer']} worst, {percent(plain['worst_flushed_share'])})" \
        if plain["worst_flushed_share"] else ""
    if dtype == "bfloat16":
        return (f"{mode}: bfloat16 has FP32's range: {percent(plain['flushed_share'])} of activation-gradient values "
                f"flush to zero{worst}; the price of its 8-bit significand (float16 has 11) is precision: its "
                f"gradients differ from FP32's by {percent(plain['relative_error'] or 0)} (relative L2, the forward's "
                "rounding included).")
    line = (f"{mode}: without loss scaling {percent(plain['flushed_share'])} of activation-gradient values flush to "
            f"zero in float16{worst} and {percent(plain['subnormal_share'])} are subnormal (below 2^-14)")
    scaled = passes.get("scaled")
    if scaled:
        line += (f"; with the scale at {scaled['scale']:g}: {percent(scaled['flushed_share'])} flush, "
                 f"{percent(scaled['subnormal_share'])} subnormal, {percent(scaled['overflow_share'])} overflow")
    top = numerics["activation_max"]
    return line + (f". Largest activation {top['value']:.4g} ({top['layer']}), {percent(top['share_of_fp16_max'])} of "
                   "float16's 65504.")


MEMORY_COLUMNS = [("params", "parameters_bytes"), ("grads", "gradients_bytes"), ("optimizer", "optimizer_bytes"),
                  ("activations", "activations_bytes"), ("weight copies", "weight_copies_bytes"),
                  ("CUDA allocated", "cuda_peak_allocated_bytes"), ("CUDA reserved", "cuda_peak_reserved_bytes")]


def numerics_block(document: Dict[str, Any], wide: bool = False) -> List[str]:
    """--numerics: the census sentences, then where one step's memory goes per mode."""
    found = first_of(document, "numerics")
    if not found:
        return []
    steps = sorted({step for numerics in found.values() for step in numerics["sampled_steps"]})
    lines = [f"Gradient census (--numerics; sampled at step {', '.join(map(str, steps))}): each layer's output "
             "gradient against an FP32 backward of the same batch"]
    lines += [census_line(mode, numerics) for mode, numerics in found.items()]
    footprints = first_of(document, "memory")
    if footprints:
        modes = list(footprints)
        columns = [(header, [human_bytes(footprints[mode].get(key)) for mode in modes])
                   for header, key in MEMORY_COLUMNS if any(footprints[mode].get(key) is not None for mode in modes)]
        base = footprints.get(BASELINES["reference"])
        if base and base["activations_bytes"]:
            columns.insert(4, ("act. ratio", [f"{footprints[mode]['activations_bytes'] / base['activations_bytes']:.2f}"
                                              for mode in modes]))
        lines.append("Where the memory of a step goes (activations: what autograd saves for backward; weight "
                     "copies: autocast's low-precision casts of the weights, saved too)")
        lines.append("\n\n".join(fit_tables("mode", modes, columns, wide)))
    return lines


def accuracy_notes(document: Dict[str, Any]) -> List[str]:
    """What the accuracy columns rest on: the verdict's rule and margin, or how little one run
    per mode tells; the time-to-target rule."""
    comparison, lines = document["comparison"], []
    verdicts = {mode: row for mode, row in comparison.items() if row.accuracy_verdict}
    if verdicts:
        margin = document["config"]["accuracy_margin"]
        lines.append(f"verdict: the 95% interval of each mode's accuracy minus {document['config']['baseline']}'s, "
                     "paired by seed, against "
                     f"+-{margin:g} points (--accuracy-margin): holds inside it, differs when it excludes 0 and leaves "
                     "it, else inconclusive." + "".join(f" {mode}: {row.accuracy_verdict_why}."
                                                        for mode, row in verdicts.items()
                                                        if row.accuracy_verdict_why))
    elif any(row.accuracy_delta_vs_baseline is not None for row in comparison.values()):
        runs = min(row.runs for row in comparison.values())
        steps = document["runs"][0]["steps"]
        lines.append(f"acc diff: from {runs} run{'s' if runs > 1 else ''} of {steps} steps per mode, indicative "
                     "only: differences of a point or two are within run-to-run noise; --seeds 3 or more gives a "
                     "verdict.")
    target = next((row.target_accuracy for row in comparison.values() if row.target_accuracy), None)
    if target is not None:
        lines.append(f"time to target {100 * target:g}%: training time (steps and warm-up, never the evaluations) "
                     "until the first evaluation at or above it, median over the seeds that reached it = epochs to "
                     "target x seconds per epoch.")
    return lines


def notes(document: Dict[str, Any]) -> List[str]:
    """The lines under the table: what the marks mean and what cannot be compared."""
    comparison, lines, baseline = document["comparison"], [], document["config"]["baseline"]
    unclear = [mode for mode, row in comparison.items() if row.speedup_significant is False]
    if unclear:
        lines.append(f"n.s.: not significant, the 95% interval of {', '.join(unclear)} holds 1.00x; "
                     "run more steps or --repeats.")
    bases = sorted({row.speedup_interval for row in comparison.values() if row.speedup_interval})
    lines += [f"95% CI: {basis}." for basis in bases]
    each = {mode: row.repeat_speedups for mode, row in comparison.items()
            if row.repeat_speedups and len(row.repeat_speedups) > 1 and row.speedup_ci95 is None}
    if each:
        lines.append("per repeat (speedup over " + baseline + " of each repeat's pair of runs): " +
                     "; ".join(f"{mode} {ratios_text(ratios)}" for mode, ratios in each.items()) + ".")
    lines += cut_short_notes(document)
    lines += spread_notes(comparison, baseline)
    for mode, row in comparison.items():
        if row.learned is False:
            lines.append(f"warning: {mode} did not learn (final loss {fmt(row.final_loss, '.4f')}, ln 10 = "
                         f"{CHANCE_LOSS:.4f}; accuracy {fmt(row.test_accuracy, '.1f', 100, '%')}, chance 10%): "
                         "its accuracy is not compared; lower --lr or train longer.")
    lines += accuracy_notes(document) + outlier_notes(document) + fp8_notes(document) + host_notes(document)
    lines += busy_notes(document) + energy_notes(document) + feed_notes(document)
    largest = {mode: row for mode, row in comparison.items() if row.max_batch is not None}
    if largest:
        lines.append("Largest batch in this GPU's memory (--max-batch): " + ", ".join(
            f"{mode} {row.max_batch}" + (f" ({row.max_batch_ratio_vs_baseline:.2f}x {baseline}'s)"
                                         if row.max_batch_ratio_vs_baseline and mode != baseline else "")
            for mode, row in largest.items()) + ".")
    if written_schema(document) != WARMUP_IN_PEAK:
        warmup = [row.warmup_peak_memory_bytes for row in comparison.values() if row.warmup_peak_memory_bytes]
        lines.append("peak mem: the steady state, over the timed steps" + (
            f"; the warm-up (cuDNN autotuning, compilation) peaked at up to {human_bytes(max(warmup))}, "
            "runs[].warmup_peak_memory_bytes" if warmup else "") + ".")
    else:
        lines.append(f"peak mem: warm-up included ({WARMUP_IN_PEAK}, an older ampbench's result file).")
    found = {run["mfu_note"] for run in document["runs"] if run.get("mfu_note")}
    if found:
        lines.append("MFU not shown: " + "; ".join(sorted(found)) + ".")
    if len(comparison) > 1 and baseline not in comparison:
        lines.append(f"No {baseline} run, the baseline: speedup, memory ratio and accuracy difference need one "
                     f"(--modes {baseline},...).")
    elif len(comparison) > 1 and baseline != BASELINES["default"]:
        lines.append(f"baseline: {baseline} (--baseline): speedup, mem ratio, acc diff and vs base compare each "
                     "mode with it.")
    return lines


def fp8_notes(document: Dict[str, Any]) -> List[str]:
    """One line per fp8 mode: its recipe, the Linear layers and the share of the step's matmul
    FLOPs in FP8, and the layers left out, counted by why (runs[].fp8.left_out names them)."""
    lines = []
    for mode, block in first_of(document, "fp8").items():
        reasons: Dict[str, List[str]] = {}
        for layer in block["left_out"]:
            reasons.setdefault(layer["why"], []).append(layer["layer"])
        left = "; ".join(f"{len(names)} {'layer' if len(names) == 1 else 'layers'} ({names[0]}"
                         f"{', ...' if len(names) > 1 else ''}): {why}" for why, names in reasons.items())
        emulated = ", EMULATED: times are not FP8 speed" if block["emulated"] else ""
        lines.append(f"{mode} ({block['recipe']} scaling{emulated}"
                     f"): {block['converted_layers']} of {block['linear_layers']} Linear layers in FP8, "
                     f"{100 * block['flop_share']:.1f}% of the step's matmul FLOPs; left in bfloat16: {left}.")
        lines.append(prediction_note(mode, block, document["comparison"]))
    return lines


def prediction_note(mode: str, block: Dict[str, Any], comparison: Dict[str, ComparisonRow]) -> str:
    """The roofline's FP8 speedup over amp-bf16 (runs[].fp8.prediction) beside the measured one."""
    bf16 = comparison.get(BASELINES["fp8"])
    measured = (f"measured here {bf16.median_step_ms / comparison[mode].median_step_ms:.2f}x"
                + (" in software, not FP8's speed" if block["emulated"] else "")
                if bf16 and bf16.median_step_ms and comparison[mode].median_step_ms
                else f"no {BASELINES['fp8']} run here to measure it against")
    prediction = block.get("prediction")
    if prediction is None:
        why = block.get("prediction_note") or "a file written before predictions"
        return f"{mode} predicted: none, {why}; {measured}."
    return (f"{mode} predicted {prediction['speedup']:.2f}x {BASELINES['fp8']}'s speed by the roofline for "
            f"{prediction['for']} ({'compiled' if prediction['compiled'] else 'eager'}; its converted layers "
            f"{prediction['linear_speedup']:.2f}x), {measured} (python -m utils.explain.fp8_predict).")


def cut_short_notes(document: Dict[str, Any]) -> List[str]:
    """One line per mode with runs a stop signal cut short: left out of its figures while it has
    whole runs (compare.group_by_mode), else the only runs they rest on."""
    lines = []
    for mode, row in document["comparison"].items():
        short = [run for run in document["runs"] if run["mode"] == mode and cut_short(run)]
        if not short:
            continue
        listed = ", ".join(f"repeat {run.get('repeat') or 0} stopped by {run['stopped_by']} after {run['timed_steps']} "
                           f"of {max(run['steps'] - run['warmup'], 0)} timed steps" for run in short)
        if row.cut_short:
            lines.append(f"cut short: every run of {mode} was ({listed}): its figures rest on them alone and are "
                         "unsteady; measure it again.")
        else:
            lines.append(f"cut short: {len(short)} run{'s' if len(short) > 1 else ''} of {mode} ({listed}), left out "
                         "of its figures and kept in runs[].")
    return lines


def spread_notes(comparison: Dict[str, ComparisonRow], baseline: str) -> List[str]:
    """What the spread column holds, and a warning for a mode whose timings spread too widely:
    every figure is unsteady where the speedups are too (compare.unsteady_speedups), else the
    times and throughputs alone."""
    spread = {mode: row.spread_pct for mode, row in comparison.items() if row.spread_pct is not None}
    if not spread:
        return []
    lines = ["spread: between the runs' medians, or with one run its steps' p10 to p90, in % of the median."]
    wide = [f"{mode} {pct:.0f}%" for mode, pct in spread.items() if pct > SPREAD_WARNING_PCT]
    if not wide:
        return lines
    unsteady = unsteady_speedups(comparison, baseline)
    said = (f"warning: the timings spread over {SPREAD_WARNING_PCT:.0f}% ({', '.join(wide)}): something else ran, or "
            "the clocks changed; ")
    if unsteady:
        lines.append(said + "every figure above is unsteady, rerun on a quiet machine.")
    else:  # each repeat's runs drifted together: the ratios, which rest on those pairs, stayed within it
        lines.append(said + "the step times and throughputs above are unsteady, but each repeat's modes drifted "
                     f"together and the speedups, which rest on those pairs, stay within {SPREAD_WARNING_PCT:.0f}%.")
    return lines


def host_notes(document: Dict[str, Any]) -> List[str]:
    """One warning per mode whose runs the host distorted (host_load.warning), the first run's."""
    found = {}
    for run in document["runs"]:
        if (run.get("host") or {}).get("warning") and run["mode"] not in found:
            found[run["mode"]] = run["host"]["warning"]
    return [f"warning: {mode}: {text} (runs[].host)." for mode, text in found.items()]


def unmeasured_notes(document: Dict[str, Any], figure: str, unavailable: str, column: str) -> List[str]:
    """Why `column` shows no `figure` (a ComparisonRow's): where no mode has one, the reasons its
    GPU runs give in runs[].`unavailable` (a CPU run has none to say); else one line per mode
    without one."""
    comparison, runs = document["comparison"], document["runs"]
    if all(getattr(row, figure) is None for row in comparison.values()):
        reasons = sorted({run[unavailable] for run in runs
                          if run.get(unavailable) and run["device"].startswith("cuda")})
        return [f"{column} not shown: {'; '.join(reasons)}."] if reasons else []
    lines = []
    for mode, row in comparison.items():
        why = next((run[unavailable] for run in runs if run["mode"] == mode and run.get(unavailable)), None)
        if getattr(row, figure) is None and why:
            lines.append(f"{column} of {mode} not measured: {why}.")
    return lines


def busy_notes(document: Dict[str, Any]) -> List[str]:
    """What GPU busy rests on, --explain's busy share beside it, why a mode has none, and a line
    for each mode whose GPU waits for the host (busy under GPU_BOUND_SHARE of its step)."""
    comparison, lines = document["comparison"], unmeasured_notes(document, "gpu_busy_share", "gpu_busy_unavailable",
                                                                 "GPU busy")
    measured = {mode: row.gpu_busy_share for mode, row in comparison.items() if row.gpu_busy_share is not None}
    if not measured:
        return lines
    lines.insert(0, "GPU busy: the share of the timed steps in which the GPU ran kernels, any process's: the mean of "
                    f"the NVML utilization samples whose whole period lies in them ({MIN_BUSY_SAMPLES} or more), the "
                    "median over the runs (runs[].gpu_busy).")
    profiled = [f"{mode} {row.profiled_gpu_busy_share:.0%} (NVML {fmt(row.gpu_busy_share, '.0f', 100, '%')})"
                for mode, row in comparison.items() if row.profiled_gpu_busy_share is not None]
    if profiled:
        lines.insert(1, "GPU busy by the profiler (--explain: 1 - idle / profiled step), beside NVML's: "
                        + ", ".join(profiled) + ".")
    return lines + [host_bound_line(mode, share, measured) for mode, share in measured.items()
                    if share < GPU_BOUND_SHARE]


def host_bound_line(mode: str, share: float, measured: Dict[str, float]) -> str:
    """The one line of a mode whose GPU ran kernels `share` of its step, under GPU_BOUND_SHARE;
    `measured` is every mode's busy share."""
    bound = [other for other, busy in measured.items() if busy >= GPU_BOUND_SHARE]
    line = (f"host-bound: {mode}'s GPU ran kernels {share:.0%} of its step, under {GPU_BOUND_SHARE:.0%}: it waits for "
            "the host to launch them, so this row measures the host's launch rate rather than the number format; "
            "--compile, CUDA graphs (--compile --compile-mode reduce-overhead) or a larger -b lift it")
    if bound:
        names = " and ".join([", ".join(bound[:-1]), bound[-1]] if len(bound) > 1 else bound)
        line += (f". {names} {'is' if len(bound) == 1 else 'are'} GPU-bound, so the speedup between {mode} and "
                 f"{'it' if len(bound) == 1 else 'them'} is the host's, not the number format's")
    return line + "."


def energy_notes(document: Dict[str, Any]) -> List[str]:
    """What J/img rests on, which modes' windows are too short to give a ratio and which runs
    were left out for it, and why a mode has none; on a GPU where no run has one, why (a CPU
    run has none to say)."""
    comparison, runs = document["comparison"], document["runs"]
    lines = unmeasured_notes(document, "joules_per_image", "energy_unavailable", "J/img")
    if all(row.joules_per_image is None for row in comparison.values()):
        return lines
    sources = sorted({run["energy"]["source"] for run in runs if run.get("energy")})
    lines.insert(0, f"J/img: the GPU's energy over the timed steps per image trained, each process its own GPU "
                    f"({', '.join(sources)}; runs[].energy), the median over the runs whose timed steps lasted "
                    f"{MIN_ENERGY_WINDOW_S:g} s or more; energy vs base: J/img / the baseline's, with a 95% interval "
                    "over those runs when each mode has 3.")
    energies = {mode: [run["energy"] for run in runs if run["mode"] == mode and run.get("energy")]
                for mode in comparison}
    short = [mode for mode, row in comparison.items() if row.energy_window_too_short]
    if short:
        longest = max(energy["seconds"] for mode in short for energy in energies[mode])
        lines.append(f"{WINDOW_TOO_SHORT}: the energy of {', '.join(short)} was read over timed steps under "
                     f"{MIN_ENERGY_WINDOW_S:g} s (the longest {longest:.3g} s), and NVML's energy counter moves about "
                     f"every {COUNTER_UPDATE_S:g} s: such a J/img is shown, but no energy ratio rests on it; run more "
                     f"steps (-n) so that each run's timed steps last {MIN_ENERGY_WINDOW_S:g} s or more.")
    for mode, row in comparison.items():
        left_out = sum(energy["window_too_short"] for energy in energies[mode])
        if left_out and not row.energy_window_too_short:
            lines.append(f"J/img of {mode} leaves out {left_out} of its {len(energies[mode])} runs: their timed steps "
                         f"lasted under {MIN_ENERGY_WINDOW_S:g} s.")
    return lines


def feed_notes(document: Dict[str, Any]) -> List[str]:
    """Streamed data: one line per mode saying what bounds it, the loader or the step
    (measure/feed.py's sentence, from the row's medians), after what the figures are."""
    fed = {mode: row.feed for mode, row in document["comparison"].items() if row.feed}
    if not fed:
        return []
    ranks = document["env"].get("world_size") or 1
    first = next(iter(fed.values()))
    lines = [f"feed: after each run's timed steps, the loader alone ({first['loader_batches']} batches, nothing "
             f"trained) and the step alone ({first['step_steps']} steps on a batch held on the device), beside the "
             "rate training ran at (runs[].feed):"]
    return lines + [feed.sentence(mode, figures, ranks) for mode, figures in fed.items()]


def outlier_notes(document: Dict[str, Any]) -> List[str]:
    """One line per mode whose timed steps include pauses (timing.outliers)."""
    found: Dict[str, List[float]] = {}
    for run in document["runs"]:
        found.setdefault(run["mode"], []).extend(step["ms"] for step in run.get("outlier_steps") or [])
    return [f"outliers: {len(ms)} timed step{'s' if len(ms) > 1 else ''} of {mode} took over {OUTLIER_FACTOR}x the "
            f"median (longest {max(ms):,.0f} ms: a pause, e.g. SIGSTOP, swapping or a busy node); the medians above "
            "are robust to them, means are not (runs[].outlier_steps)." for mode, ms in found.items() if ms]


def summary(document: Dict[str, Any], wide: bool = False) -> str:
    """The text printed at the end of a run: setup line, the table, then its notes; without
    `wide`, every line within TABLE_WIDTH characters."""
    # a field of the file (a device's name, a warning) never forges or hides a line: console.one_line
    header = one_line(describe(setup_of(document), document["env"]))
    notes_ = [one_line(note) for note in notes(document)]
    explained = ["\n".join(one_line(part) for part in line.split("\n"))
                 for line in explanation(document, wide) + numerics_block(document, wide)]
    if not wide:
        if len(header) > TABLE_WIDTH:  # the device and torch on a line of their own
            header = "\n".join(textwrap.fill(part, TABLE_WIDTH, break_on_hyphens=False)
                               for part in [header.split(" | ", 1)[0], header.split(" | ", 1)[1]])
        notes_ = [textwrap.fill(note, TABLE_WIDTH, subsequent_indent="  ", break_on_hyphens=False) for note in notes_]
        explained = [line if "\n" in line else textwrap.fill(line, TABLE_WIDTH, break_on_hyphens=False,
                                                             subsequent_indent="   " if line[0].isdigit() else "  ")
                     for line in explained]
    return "\n".join([header, comparison_table(document["comparison"], wide)] + notes_
                     + ([""] + explained if explained else []))
