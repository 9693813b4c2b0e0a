"""The tables README's Results and the run pages show, each a function of saved documents alone
(history.py loads them): the headline, its FP8 row, the FP8 width sweep, resnet50 at its native
size, the classic commands, the recipes, the transformers, the accuracy verdicts and the other
scripts' lines. A table of several suites takes a `Label` that names where each row comes from."""
from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Dict, List, Optional, Set, Tuple

from benchmarks import fp8_sweep
from benchmarks.suite.history import (
    Change,
    CodeThatRan,
    SavedSuite,
    code_of,
    last_line,
    load,
    saved,
    saved_steps,
    short_commit,
    upgraded,
)
from benchmarks.suite.plan import HEADLINE_FP8_MODES, HEADLINE_MODES, MODES, RECIPES
from benchmarks.suite.published import MLPERF_RESNET50, RESNET50
from utils.explain.diagnose import GPU_BOUND_SHARE
from utils.measure.nvml_meter import MIN_BUSY_SAMPLES


def fmt_ms(value: Optional[float]) -> str:
    return "-" if value is None else f"{value:.2f}"


def code_label(code: CodeThatRan) -> str:
    """A commit as a row names it: bare where proven, else claimed, and why (history.code_of)."""
    return f"`{short_commit(code.commit)}`" + ("" if code.proven else f" claimed ({code.why})")


def verdicts(out: Path, measured: str) -> List[str]:
    """Does accuracy hold? One line per mode from the convergence section in `out`."""
    document = load(out, "convergence")
    if document is None:
        return []
    config, lines = document["config"], []
    for mode, row in document["comparison"].items():
        if mode == "fp32" or not row.accuracy_verdict:
            continue
        delta = row.accuracy_delta_ci95
        interval = f" [{100 * delta[0]:+.2f}, {100 * delta[1]:+.2f}] points" if delta else ""
        speedup = row.time_to_target_speedup_vs_baseline
        lines.append(f"* {mode}: accuracy **{row.accuracy_verdict}** against fp32 ({row.seeds} seeds, "
                     f"{100 * row.accuracy_mean_delta:+.2f}{interval})"
                     + (f"; time to {100 * row.target_accuracy:g}%: {speedup:.2f}x fp32's" if speedup else "") + ".")
    if not lines:
        return []
    return [f"Does accuracy hold? resnet18, {config.get('seeds')} seeds paired across modes, "
            f"{document['runs'][0]['steps']} steps, within +-{config.get('accuracy_margin')} points ({measured}):",
            ""] + lines + [""]


def describe_data(data: Dict[str, Any]) -> str:
    if data.get("name") != "cifar10":
        return "synthetic images (step times valid, loss and accuracy meaningless)"
    copy = "the official copy" if data.get("verified") else "a copy with non-official checksums (the subset)"
    return f"CIFAR-10, {data['train_images']:,} training and {data['test_images']:,} test images, {copy}"


Label = Callable[[SavedSuite, Tuple[str, ...], str], str]  # (suite, figures shown, step that measured them)


@dataclass
class Shown:
    """What a table's cells showed, so that its legend says that and nothing it does not show."""
    brackets: bool = False
    not_significant: bool = False
    two_runs: bool = False
    one_run: bool = False
    missing: Set[str] = field(default_factory=set)  # modes a row ran without, where a cell needed them
    itself: bool = False  # a ratio of a mode to itself, shown as `-`
    busy: bool = False
    profiled: bool = False
    too_few: bool = False
    no_busy: Set[str] = field(default_factory=set)  # why runs recorded no busy share
    host_bound: bool = False
    energy: bool = False
    energy_no_interval: bool = False
    window_too_short: bool = False
    no_energy: Set[str] = field(default_factory=set)  # why runs recorded no energy
    unsteady: bool = False
    eager: bool = False
    older: List[Change] = field(default_factory=list)


def ratio_cell(row: Any, shown: Shown) -> str:
    """A mode's speedup (its ComparisonRow's): with its interval over 3 or more runs, each
    repeat's ratio where two paired repeats give none, or the one run's ratio alone (a block
    bootstrap over one run's steps is no interval over repeats: it would read far narrower than
    the spread between a GPU's repeats)."""
    from utils.results.summary import speedup_cell

    ratios = row.repeat_speedups or []
    if row.runs >= 3 and row.speedup_ci95:
        shown.brackets, shown.not_significant = True, shown.not_significant or row.speedup_significant is False
        return speedup_cell(row)
    if len(ratios) == 2:
        shown.two_runs = True
        return "2 runs: " + ", ".join(f"{ratio:.2f}x" for ratio in ratios)
    shown.one_run |= row.runs == 1
    return f"{'1 run: ' if row.runs == 1 else ''}{row.speedup_vs_baseline:.2f}x"


def ratio_or_dash(comparison: Dict[str, Any], mode: str, baseline: str, shown: Shown) -> str:
    """`mode`'s ratio_cell in a comparison against `baseline`, or `-` where either did not run."""
    missing = [name for name in (mode, baseline) if name not in comparison]
    if missing:
        shown.missing.update(missing)
        return "-"
    if mode == baseline:
        shown.itself = True
        return "-"
    return ratio_cell(comparison[mode], shown)


def runs_legend(shown: Shown) -> List[str]:
    """The legend of a table's ratio cells: what its brackets rest on, its `2 runs:`, `1 run:` and `-`."""
    parts = (["Brackets: the 95% interval over the repeats (3 or more)" + (
        "; `n.s.`: it holds 1" if shown.not_significant else "")] if shown.brackets else []) + (
        ["`2 runs:` each paired repeat's ratio, as two give no interval"] if shown.two_runs else []) + (
        ["`1 run:` one run a mode, so no interval over repeats"] if shown.one_run else [])
    if shown.missing or shown.itself:
        parts.append("`-`: " + ", or ".join(([f"the row ran no {' or '.join(sorted(shown.missing))}"]
                                             if shown.missing else []) + (
            ["a mode against itself"] if shown.itself else [])))
    return ["* " + "; ".join(parts) + "."] if parts else []


def headline(suites: List[SavedSuite], label: Label) -> List[str]:
    """The headline's table: per model, its headline measurement in each of `suites` (newest
    first), or in a suite older than the headline section, its comparison with channels_last (the
    same setting): its data, repeats and steps, each mode's speedup over strict FP32 and, for AMP,
    over tf32 (the FP32 a current torch runs by default); how busy each mode kept the GPU; the
    memory and energy of amp-fp16 against fp32; and whether the timings spread too widely to
    trust; then the legend of what its cells show."""
    rows: Dict[str, List[str]] = {}
    shown = Shown()
    for saved_suite in suites:
        for model in saved_suite.record.get("models", []):
            found = next(saved_steps(saved_suite.folder, (f"headline-{model}", f"{model}-cl")), None)
            if found is None:
                continue
            step, document = found
            comparison, against_tf32 = document["comparison"], comparison_against(document, "tf32")
            fp32, fp16 = comparison.get("fp32"), comparison.get("amp-fp16")
            cells = [ratio_or_dash(comparison, mode, "fp32", shown) for mode in HEADLINE_MODES[1:]]
            cells += [ratio_or_dash(against_tf32 or comparison, mode, "tf32", shown) for mode in AMP_MODES]
            memory = fp16 and fp16.memory_ratio_vs_baseline
            shown.host_bound |= any(host_bound(comparison.get(mode)) for mode in HEADLINE_MODES)
            rows.setdefault(model, []).append(
                f"| {model} | {data_cell(document)} | {document['config']['batch_size']} | "
                f"{document['config'].get('repeats', 1)} | {steps_cell(document)} | "
                f"{fmt_ms(fp32 and fp32.median_step_ms)} | " + " | ".join(cells)
                + f" | {busy_cell(document, HEADLINE_MODES, shown)}"
                + f" | {'-' if memory is None else f'{memory:.2f}'} | {energy_cell(document, 'amp-fp16', shown)}"
                + f" | {steadiness_cell(comparison)} | {label(saved_suite, ('memory', 'amp-fp16', 'busy'), step)} |")
    if not rows:
        return []
    columns = ([f"{mode} vs fp32" for mode in HEADLINE_MODES[1:]] + [f"{mode} vs tf32" for mode in AMP_MODES]
               + [f"GPU busy {' / '.join(HEADLINE_MODES)}", "amp-fp16 memory / fp32", "amp-fp16 energy / fp32",
                  "timings"])
    return (["| model | data | batch | repeats | steps | fp32 median ms | " + " | ".join(columns) + " | measured |",
             "| --- | --- | ---: | ---: | ---: | ---: | " + " | ".join("---:" for _ in columns[:-1]) + " | --- | --- |",
             *[row for model_rows in rows.values() for row in model_rows], ""] + headline_notes(shown))


AMP_MODES = [mode for mode in HEADLINE_MODES if mode.startswith("amp-")]


def data_cell(document: Dict[str, Any]) -> str:
    """What a row trained on, in a word or two."""
    data = document["data"]
    if data.get("name") != "cifar10":
        return str(data.get("name"))
    return "CIFAR-10" if data.get("verified") else "CIFAR-10 subset"


def steps_cell(document: Dict[str, Any]) -> str:
    """Each run's steps: one count, or the range where each mode was timed for its own window."""
    steps = sorted({run["steps"] for run in document["runs"]})
    return str(steps[0]) + (f"-{steps[-1]}" if len(steps) > 1 else "")


def headline_notes(shown: Shown) -> List[str]:
    """How to read the headline table: which FP32 each column is against, and of its ratios,
    busy shares and energies only what its cells show."""
    lines = ["* `vs fp32` is against strict FP32 (TF32 off), ampbench's baseline, the same on every GPU; `vs tf32` "
             "against FP32 with TF32 tensor cores, which is what the ThetaGPU tutorial's FP32 run measures on a "
             "current torch: PyTorch runs convolutions in TF32 by default (`torch.backends.cudnn.allow_tf32`). "
             "`steps`: each mode's, a range where each was timed for its own energy window."]
    lines += runs_legend(shown) + busy_legend(shown) + energy_legend(shown)
    if shown.host_bound:
        lines.append(f"* A mode busy under {100 * GPU_BOUND_SHARE:.0f}% is host-bound: its row measures how fast "
                     "the host launches kernels, not the number format; `--compile`, CUDA graphs (`--compile "
                     "--compile-mode reduce-overhead`) or a larger batch lift it, and where fp32 stays GPU-bound "
                     "the speedup between them is the host's.")
    return lines + [""]


def busy_legend(shown: Shown) -> List[str]:
    parts = (["GPU busy: the share of the timed steps in which the GPU ran kernels (NVML's utilization samples whose "
              f"whole period lies in them, {MIN_BUSY_SAMPLES} or more; `runs[].gpu_busy`)"] if shown.busy else []) + (
        ["`(profiler)`: from `--explain`'s profiled steps, where NVML read none"] if shown.profiled else []) + (
        [f"`too few samples`: fewer than {MIN_BUSY_SAMPLES} samples, the most a run had"] if shown.too_few else []) + (
        [f"`-` under GPU busy: no busy share ({'; '.join(sorted(shown.no_busy))})"] if shown.no_busy else [])
    return ["* " + "; ".join(parts) + "."] if parts else []


def energy_legend(shown: Shown) -> List[str]:
    from utils.measure.nvml_meter import MIN_ENERGY_WINDOW_S

    parts = (["Energy: joules per image over fp32's, with its interval over 3 runs or more"]
             if shown.energy else []) + (
        ["`- (no interval)`: fewer runs, so no ratio is shown"] if shown.energy_no_interval else []) + (
        [f"`window too short`: its runs' timed steps lasted under {MIN_ENERGY_WINDOW_S:g} s, too few of NVML's "
         "counter updates to resolve it"] if shown.window_too_short else []) + (
        [f"`-` under energy: no energy ratio ({'; '.join(sorted(shown.no_energy))})"] if shown.no_energy else [])
    return ["* " + "; ".join(parts) + "."] if parts else []


def comparison_against(document: Dict[str, Any], baseline: str) -> Dict[str, Any]:
    """The document's comparison recomputed against `baseline` ({} where that mode did not run)."""
    from utils.results.compare import compare_modes

    if baseline not in document["comparison"]:
        return {}
    return compare_modes(document["runs"], baseline=baseline)


def busy_share(row: Any) -> Tuple[Optional[float], bool]:
    """(a mode's GPU busy share, whether it is the profiler's): NVML's where it read one, else
    --explain's profiled steps'."""
    if row is None:
        return None, False
    if row.gpu_busy_share is not None:
        return row.gpu_busy_share, False
    return row.profiled_gpu_busy_share, row.profiled_gpu_busy_share is not None


def host_bound(row: Any) -> bool:
    share, _ = busy_share(row)
    return share is not None and share < GPU_BOUND_SHARE


def busy_cell(document: Dict[str, Any], modes: List[str], shown: Shown) -> str:
    """Each of `modes`' busy share, or, where its runs had fewer utilization samples than a share
    needs (nvml_meter.MIN_BUSY_SAMPLES), `too few samples` with the most any of them had; `-`
    where none has either, its runs' reason kept for the legend."""
    from utils.measure.nvml_meter import too_few_count

    comparison = document["comparison"]
    shares = [busy_share(comparison.get(mode)) for mode in modes]
    counts = [[count for count in (too_few_count(run.get("gpu_busy_unavailable")) for run in document["runs"]
                                   if run["mode"] == mode) if count is not None] for mode in modes]
    if all(share is None for share, _ in shares) and not any(counts):
        shown.no_busy |= {run.get("gpu_busy_unavailable") or "no reason recorded" for run in document["runs"]}
        return "-"
    shown.busy, shown.too_few = True, shown.too_few or any(counts)
    shown.profiled |= any(profiled for _, profiled in shares)
    cells = [f"{100 * share:.0f}%" if share is not None else f"too few samples ({max(found)})" if found else "-"
             for (share, _), found in zip(shares, counts)]
    return " / ".join(cells) + (" (profiler)" if any(profiled for _, profiled in shares) else "")


def energy_cell(document: Dict[str, Any], mode: str, shown: Shown) -> str:
    """`mode`'s energy per image over the baseline's: only with its interval (3 runs or more of
    each), and never from windows too short for NVML's counter to resolve; `-` where its runs
    measured none, their reason kept for the legend."""
    from utils.results.summary import with_interval

    row = document["comparison"].get(mode)
    if row is None:
        shown.missing.add(mode)
        return "-"
    if row.energy_window_too_short:
        shown.window_too_short = True
        return "window too short"
    if row.energy_ratio_vs_baseline is None:
        shown.no_energy |= {run.get("energy_unavailable") or "no reason recorded" for run in document["runs"]
                            if run["mode"] == mode and not run.get("energy")} or {"the baseline's runs measured none"}
        return "-"
    if row.energy_ratio_ci95 is None:
        shown.energy_no_interval = True
        return "- (no interval)"
    shown.energy = True
    return with_interval(row.energy_ratio_vs_baseline, row.energy_ratio_ci95, ".2f")


def steadiness_cell(comparison: Dict[str, Any]) -> str:
    """"steady", or the modes whose timings spread over compare.SPREAD_WARNING_PCT: such a row's
    figures rest on timings that moved while they were taken."""
    from utils.results.compare import SPREAD_WARNING_PCT

    spreads = {mode: row.spread_pct for mode, row in comparison.items() if row.spread_pct is not None}
    wide = [f"{mode} {pct:.0f}%" for mode, pct in spreads.items() if pct > SPREAD_WARNING_PCT]
    if not spreads:
        return "-"
    return f"unsteady: spread over {SPREAD_WARNING_PCT:.0f}% ({', '.join(wide)})" if wide else "steady"


def fp8_headline(suites: List[SavedSuite], label: Label) -> List[str]:
    """The headline's FP8 row per suite (newest first): the ViT's amp-bf16 step and each fp8 mode's
    speedup over it with its interval, and whether the three modes' timings spread too widely to
    trust, from the headline section or, in an older suite, the transformers section."""
    rows, shown = [], Shown()
    for saved_suite in suites:
        # the headline's ViT, or the transformers section's where only that one measured fp8 (torchao came later)
        vits = list(saved_steps(saved_suite.folder, ("headline-vit", "transformers-eager")))
        with_fp8 = [found for found in vits if set(HEADLINE_FP8_MODES[1:]) & set(found[1]["comparison"])]
        vit_b_16 = list(saved_steps(saved_suite.folder, ("transformers-vit_b_16",)))
        for step, document in (with_fp8 or vits)[:1] + vit_b_16:
            if "amp-bf16" not in document["comparison"]:
                continue
            comparison, config = document["comparison"], document["config"]
            against = comparison_against(document, "amp-bf16")
            cells = [ratio_or_dash(against, mode, "amp-bf16", shown) for mode in HEADLINE_FP8_MODES[1:]]
            modes = {mode: comparison[mode] for mode in HEADLINE_FP8_MODES if mode in comparison}
            rows.append(f"| {config['model']} | {config.get('image_size', 32)} | {data_cell(document)} | "
                        f"{config['batch_size']} | {config.get('repeats', 1)} | {steps_cell(document)} | "
                        f"{fmt_ms(comparison['amp-bf16'].median_step_ms)} | " + " | ".join(cells)
                        + f" | {busy_cell(document, HEADLINE_FP8_MODES, shown)} | {steadiness_cell(modes)} | "
                        f"{label(saved_suite, (), step)} |")
    if not rows:
        return []
    return (["| model | image | data | batch | repeats | steps | amp-bf16 median ms | "
            + " | ".join(f"{m} vs amp-bf16" for m in HEADLINE_FP8_MODES[1:])
            + f" | GPU busy {' / '.join(HEADLINE_FP8_MODES)} | timings | measured |",
            "| --- | ---: | --- | ---: | ---: | ---: | ---: | " + " | ".join("---:" for _ in HEADLINE_FP8_MODES)
            + " | --- | --- |", *rows, "",
            "* Eager: without `--compile`, FP8's weakest case ([Transformers and FP8](../../../docs/"
            "transformers-and-fp8.md)); the ratios are to amp-bf16, FP8's fair baseline."]
            + runs_legend(shown) + busy_legend(shown) + [""])


def sweep_table(suites: List[SavedSuite], label: Label) -> List[str]:
    """Where FP8 starts to pay (fp8_sweep.py), per suite (newest first) and width: each fp8
    recipe's measured speedup over amp-bf16 beside the roofline's prediction."""
    rows, notes = [], []
    for saved_suite in suites:
        document = saved(saved_suite.folder, "transformers-sweep")
        if document is None:
            continue
        for row in document["rows"]:
            cells = [f"{row['measured_speedup'][mode]:.2f}x | " + ("-" if row["predicted_speedup"][mode] is None
                                                                  else f"{row['predicted_speedup'][mode]:.2f}x")
                     for mode in fp8_sweep.FP8_MODES]
            rows.append(f"| {row['width']} | {fmt_ms(row['median_step_ms'][fp8_sweep.BASELINE])} | "
                        + " | ".join(cells) + f" | {label(saved_suite, (), 'transformers-sweep')} |")
        notes.append(f"{label(saved_suite, (), 'transformers-sweep')}: {document['layers']} blocks, "
                     f"{document['tokens']} tokens, batch {document['batch']}, eager; "
                     + (f"predicted for {document['predicted_for']}" if document["predicted_for"]
                        else f"no prediction: {document['no_prediction']}")
                     + ("; FP8 emulated in software: the measured speedups are not FP8's" if document["emulated"]
                        else ""))
    if not rows:
        return []
    return (["Where FP8 starts to pay (`benchmarks/fp8_sweep.py`: ViT blocks by width, heads of 64; each fp8 "
             "recipe's speedup over amp-bf16, measured beside predicted by `utils/explain/fp8_predict.py`):", "",
             "| width | amp-bf16 median ms | " + " | ".join(f"{mode} measured | {mode} predicted"
                                                        for mode in fp8_sweep.FP8_MODES) + " | measured |",
             "| ---: | ---: | " + " | ".join("---: | ---:" for _ in fp8_sweep.FP8_MODES) + " | --- |", *rows, ""]
            + [f"* {note}." for note in notes] + [""])


def native_table(suites: List[SavedSuite], label: Label) -> List[str]:
    """resnet50 at its native size (the native section) per suite (newest first) and data: each
    mode's images per second, AMP's speedup over tf32 and over fp32 with their intervals, how busy
    each mode kept the GPU and whether the timings spread too widely to trust, beside NVIDIA's
    published single-GPU figures and MLPerf's per-GPU rate (a ceiling) where the device is one
    they measured (published.py). A run made by hand in a suite's by-hand/ folder stands in,
    labelled so, until the suite's own step replaces it."""
    rows, shown = [], Shown()
    devices = {saved_suite.record["device"] for saved_suite in suites}
    published = next((RESNET50[device] for device in devices if device in RESNET50), None)
    ceiling = next((MLPERF_RESNET50[device] for device in devices if device in MLPERF_RESNET50), None)
    for saved_suite in suites:
        for data in ("synthetic", "cifar10"):
            step = f"native-{data}"
            by_hand = saved_suite.folder / "by-hand"
            document, made = load(saved_suite.folder, step), label(saved_suite, (), step)
            if document is None and data == "synthetic" and by_hand.is_dir():
                document = load(by_hand, step)
                made = by_hand_label(document) if document else made
            if document is None:
                continue
            comparison, config = document["comparison"], document["config"]
            against_tf32, against_fp32 = comparison_against(document, "tf32"), comparison_against(document, "fp32")
            rates = [f"{comparison[mode].images_per_sec:.0f}" if mode in comparison else "-" for mode in HEADLINE_MODES]
            speedups = [ratio_or_dash(against or comparison, mode, base, shown)
                        for base, against in (("tf32", against_tf32), ("fp32", against_fp32)) for mode in AMP_MODES]
            theirs = ([f"{published.tf32_images_per_sec:.0f}", f"{published.amp_images_per_sec:.0f}",
                       f"{published.amp_speedup:.2f}x"] if published else []) + \
                ([f"{ceiling.images_per_sec_per_gpu:.0f}"] if ceiling else [])
            rows.append(f"| {'CIFAR-10 upsampled' if data == 'cifar10' else 'synthetic'} | "
                        f"{config.get('image_size', 32)} | {config['batch_size']} | {config.get('repeats', 1)} | "
                        f"{steps_cell(document)} | " + " | ".join(rates + speedups)
                        + f" | {busy_cell(document, HEADLINE_MODES, shown)} | "
                        + "".join(f"{cell} | " for cell in theirs) + f"{steadiness_cell(comparison)} | {made} |")
    if not rows:
        return []
    columns = ([f"{mode} img/s" for mode in HEADLINE_MODES] + [f"{mode} vs tf32" for mode in AMP_MODES]
               + [f"{mode} vs fp32" for mode in AMP_MODES] + [f"GPU busy {' / '.join(HEADLINE_MODES)}"]
               + (["NVIDIA TF32 img/s", "NVIDIA AMP img/s", "NVIDIA AMP / TF32"] if published else [])
               + (["MLPerf img/s per GPU (ceiling)"] if ceiling else []) + ["timings"])
    notes = ([f"* NVIDIA's figures: {published.source} (their input pipeline is DALI on ImageNet; ours feeds "
              "synthetic images or CIFAR-10 upsampled on the GPU, so these compare training steps)."]
             if published else [])
    notes += [f"* MLPerf's: {ceiling.source}: a ceiling, what a tuned closed-division submission reaches per GPU "
              "(DALI, fused kernels, CUDA graphs), not a setting ampbench reproduces."] if ceiling else []
    notes += runs_legend(shown) + busy_legend(shown)
    return (["resnet50 at its native size (channels_last, `--stem imagenet`), images per second:", "",
             "| data | image | batch | repeats | steps | " + " | ".join(columns) + " | measured |",
             "| --- | ---: | ---: | ---: | ---: | " + " | ".join("---:" for _ in columns[:-1]) + " | --- | --- |",
             *rows, ""] + notes + ([""] if notes else []))


def by_hand_label(document: Dict[str, Any]) -> str:
    """The label of a native run made by hand: its commit, which its own file records (no pass of
    the suite ran it), proven as any row's is, and its day."""
    env = document["env"]
    return (f"by hand, {code_label(code_of(None, env.get('git_commit'), env.get('source_sha256')))}, "
            f"{env['timestamp_utc'][:10]}")


def classics(out):
    rows = []
    for name in ("classic-fp16", "classic-fp32", "classic-cpu"):
        document = load(out, name)
        if document is None:
            continue
        run = document["runs"][0]
        command = document["env"]["command"].split("main.py", 1)[-1]
        command = re.sub(r" --(data-dir|json) \S+| --allow-unverified| --no-progress", "", command)
        rate = run["images_per_sec"]
        rows.append(f"| `python main.py{command}` | {run['mode']} | {run['device']} | "
                    f"{fmt_ms(median_ms(run)) if run['step_time_ms'] else untimed(run)} | "
                    f"{'-' if rate is None else f'{rate:.0f}'} |")
    if not rows:
        return []
    return ["#### The classic commands", "", "| command | mode | device | median ms | img/s |",
            "| --- | --- | --- | ---: | ---: |", *rows, ""]


def recipes(out: Path) -> List[str]:
    """Per mode, the median step of each recipe, the fastest whose loss stayed finite, its
    speedup over fp32 and over tf32 in eager mode (strict FP32, and what a current torch runs by
    default), its GPU busy share and its MFU: whether compiling lifts a host-bound mode."""
    documents = {recipe: upgraded(out, f"recipe-{recipe}") for recipe, _ in RECIPES}
    if not any(documents.values()):
        return []
    runs = {recipe: {run["mode"]: run for run in document["runs"] if run["step_time_ms"]} if document else {}
            for recipe, document in documents.items()}
    rows = []
    for mode in MODES:
        timed = {recipe: by_mode[mode] for recipe, by_mode in runs.items() if mode in by_mode}
        if not timed:
            continue
        honest = {recipe: run for recipe, run in timed.items()
                  if run["final_loss"] is not None and math.isfinite(run["final_loss"])}
        best = min(honest, key=lambda recipe: honest[recipe]["step_time_ms"]["median"]) if honest else None
        cells = [fmt_ms(timed[recipe]["step_time_ms"]["median"]) if recipe in timed else "-" for recipe, _ in RECIPES]
        fastest = honest[best] if best else None
        for base in (runs["eager"].get("fp32"), runs["eager"].get("tf32")):
            cells.append(f"{base['step_time_ms']['median'] / fastest['step_time_ms']['median']:.2f}x"
                         if base and fastest else "-")
        busy = (fastest.get("gpu_busy") or {}).get("share") if fastest else None
        cells.append("-" if busy is None else f"{100 * busy:.0f}%")
        cells.append(f"{fastest['mfu_pct']:.1f}%" if fastest and fastest.get("mfu_pct") is not None else "-")
        rows.append(f"| {mode} | " + " | ".join(cells[:3]) + f" | {best or '-'} | " + " | ".join(cells[3:]) + " |")
    config = next(document for document in documents.values() if document)["config"]
    return ["#### The fastest honest recipe per mode", "",
            f"resnet18, batch {config['batch_size']}, channels_last, {config['optimizer_impl']} SGD; "
            "median ms per step; the fastest recipe whose loss stayed finite, its speedup over fp32 and over tf32 "
            "in eager mode, its GPU busy share and its MFU.", "",
            "| mode | eager ms | compile ms | compile + CUDA graphs ms | fastest | speedup vs fp32 eager "
            "| speedup vs tf32 eager | GPU busy | MFU |",
            "| --- | ---: | ---: | ---: | --- | ---: | ---: | ---: | ---: |", *rows, ""]


def transformers(out):
    """The transformers section: per mode its eager and compiled median step, the speedup of each
    over amp-bf16 (FP8's fair baseline) in the same recipe, MFU, steady-state memory and the
    accuracy after a few epochs; then what ran in FP8 and why an fp8 mode was slower."""
    documents = {name: load(out, f"transformers-{name}") for name in ("eager", "compile", "accuracy")}
    if documents["eager"] is None:
        return []
    rows, config = [], documents["eager"]["config"]
    for mode, row in documents["eager"]["comparison"].items():
        compiled = (documents["compile"] or {}).get("comparison", {}).get(mode)
        evaluated = (documents["accuracy"] or {}).get("comparison", {}).get(mode)
        accuracy = evaluated and evaluated.test_accuracy
        cells = [fmt_ms(row.median_step_ms), fmt_ms(compiled and compiled.median_step_ms),
                 versus_bf16(documents["eager"], mode), versus_bf16(documents["compile"], mode),
                 percent_or_dash(row.mfu_pct), percent_or_dash(compiled and compiled.mfu_pct),
                 f"{row.peak_memory_bytes / 2 ** 30:.2f}", percent_or_dash(accuracy and 100 * accuracy)]
        rows.append(f"| {mode} | " + " | ".join(cells) + " |")
    notes = [f"* {line}" for line in fp8_lines(documents["eager"])]
    epochs = documents["accuracy"]["runs"][0]["epochs_seen"] if documents["accuracy"] else None
    return ["#### Transformers and FP8", "",
            f"{config['model']}, batch {config['batch_size']}; median ms per step eager and compiled, the speedup "
            "of each over amp-bf16 in the same recipe (FP8's fair baseline: the same autocast without the float8 "
            "layers), MFU, steady-state peak memory (eager) and the test accuracy after "
            f"{'-' if epochs is None else f'{epochs:.1f}'} epochs ([Transformers and FP8]"
            "(../../../docs/transformers-and-fp8.md)).", "",
            "| mode | eager ms | compiled ms | eager vs amp-bf16 | compiled vs amp-bf16 | MFU eager | MFU compiled "
            "| peak GiB | test acc |",
            "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |", *rows, "", *notes, ""]


def versus_bf16(document, mode):
    comparison = (document or {}).get("comparison", {})
    if mode not in comparison or "amp-bf16" not in comparison:
        return "-"
    return f"{comparison['amp-bf16'].median_step_ms / comparison[mode].median_step_ms:.2f}x"


def percent_or_dash(value):
    return "-" if value is None else f"{value:.1f}%"


def fp8_lines(document):
    """What ran in FP8 per fp8 mode (the summary's line) and the rule for an fp8 slower than bf16."""
    from utils.results.summary import fp8_notes

    found = [finding["text"] for row in document["comparison"].values() for finding in row.diagnosis or []
             if finding["rule"] == "fp8 slower than bf16"]
    return fp8_notes(document) + found


def median_ms(run: Dict[str, Any]) -> Optional[float]:
    return run["step_time_ms"]["median"] if run["step_time_ms"] else None


def untimed(run: Dict[str, Any]) -> str:
    """Why a run has no step time, in words: a step's main.py stopped by a signal before its first
    timed step saves its run without one."""
    return f"no timed step ({ended_early(run)})" if run["incomplete"] else "no timed step"


def ended_early(run: Dict[str, Any]) -> str:
    by = f" by {run['stopped_by']}" if run.get("stopped_by") else ""
    return f"stopped{by} after {run['completed_steps']} of {run['steps']} steps"


def extras(out):
    """The lines of the other steps and scripts: `--compile`, the overhead and loader benchmarks,
    one process against torchrun, and the checkpoint resume; a run without step times says why."""
    lines = []
    compiled = load(out, "compile")
    if compiled:
        run = compiled["runs"][0]
        lines.append("* `--compile` (resnet50, amp-bf16): " + (
            f"median step {fmt_ms(median_ms(run))} ms, compile (first step) {run['compile_time_s']:.1f} s, "
            "reported apart from the step times." if run["step_time_ms"] else f"{untimed(run)}."))
    overhead = last_line(out, "overhead", "throughput ratio")
    if overhead:
        lines.append(f"* `benchmarks/overhead.py` (ampbench's loop against a bare AMP-recipe loop): {overhead}.")
    loaders = [line for line in (last_line(out, "loaders", prefix) for prefix in
                                 ("torchvision DataLoader", "device loader:", "resnet50 amp", "resnet18 amp",
                                  "throughput ratio")) if line]
    if loaders:
        lines.append("* `benchmarks/loader.py`: " + "; ".join(re.sub(r"\s+", " ", line) for line in loaders) + ".")
    plain, torchrun = load(out, "plain-1"), load(out, "torchrun-1")
    if plain and torchrun:
        a, b = plain["runs"][0], torchrun["runs"][0]
        lines.append(f"* One process against `torchrun --nproc_per_node=1` ({a['mode']}, resnet18): median "
                     + " against ".join(f"{fmt_ms(median_ms(run))} ms" if run["step_time_ms"] else untimed(run)
                                        for run in (a, b))
                     + f" (launcher {torchrun['env']['launcher']}, world size {torchrun['env']['world_size']}).")
    weights = load(out, "resume-weights")
    resume = load(out, "resume")
    if weights and resume and resume["runs"][0]["incomplete"]:
        run = resume["runs"][0]
        lines.append(f"* Checkpoint, SIGTERM and resume ({run['mode']}): the resumed run {ended_early(run)}, so its "
                     "weights are not final and are not compared.")
    elif weights and resume:
        run = resume["runs"][0]
        resumed, itself = weights["resumed_vs_uninterrupted"], weights["uninterrupted_vs_itself"]
        lines.append(f"* Checkpoint, SIGTERM and resume ({run['mode']}, resumed from step {run['resumed_from_step']} "
                     f"of {run['steps']}): final weights against an uninterrupted run "
                     f"{'bitwise equal' if resumed['bitwise_equal'] else 'not bitwise equal'}, largest difference "
                     f"{resumed['max_abs_diff']:.3g} (largest weight {resumed['max_abs_weight']:.3g}); two "
                     f"uninterrupted runs differ by {itself['max_abs_diff']:.3g} "
                     f"({'bitwise equal' if itself['bitwise_equal'] else 'not bitwise equal'})" +
                     (": the resume stays within the run-to-run difference of this device's arithmetic."
                      if resumed["max_abs_diff"] <= itself["max_abs_diff"] and not itself["bitwise_equal"] else "."))
    return lines + [""] if lines else []
