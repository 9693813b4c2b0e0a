"""README's answer before its books: per GPU one short verdict table, a line per model and image
size (the newest measurement of each), saying which mode trains fastest, by how much against
TF32 and against strict FP32, its memory, what bounds its step and where the figures come from;
under it the legend of what that table shows, and no more, and one sentence on what "claimed"
means for its rows and what the next lease does about it. The full tables, the due list, the
changes that make rows older and the passes live on the run pages and in docs/benchmarks.md."""
from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

from benchmarks.suite.history import CodeThatRan, SavedSuite, code_of, code_that_ran, load, short_commit
from benchmarks.suite.plan import HEADLINE_FP8_MODES
from benchmarks.suite.tables import (
    Shown,
    busy_share,
    comparison_against,
    data_cell,
    ratio_or_dash,
    runs_legend,
    steps_cell,
)
from models.families import DEFAULT_IMAGE_SIZE
from utils import modes
from utils.explain.diagnose import GPU_BOUND_SHARE

FP8 = tuple(HEADLINE_FP8_MODES[1:])  # the modes a row gives as ratios to amp-bf16
WHY_CLAIMED = {  # history.code_of's reasons, in plain words
    "no digest of the files that ran": "it recorded no digest of the files that ran",
    "the files that ran are not its tree": "the files that ran are not that commit's",
    "a commit this checkout's git does not have": "this checkout's git lacks that commit",
}


@dataclass(frozen=True)
class Row:
    """One line of a verdict table: the results document of `step` in `suite` (in its by-hand/
    folder where `by_hand`), which stands for its model at its image size."""
    suite: SavedSuite
    step: str
    document: Dict[str, Any]
    by_hand: bool = False
    group: Tuple[str, ...] = ()  # the steps that measure its model and size, most wanted first

    @property
    def key(self) -> Tuple[str, int]:
        config = self.document["config"]
        return config["model"], config.get("image_size") or DEFAULT_IMAGE_SIZE

    @property
    def page(self) -> Path:
        """The page that shows the row's figures in full: its run's, or the by-hand folder's notes."""
        return self.suite.folder / ("by-hand" if self.by_hand else "") / "README.md"

    @property
    def day(self) -> str:
        return self.document["env"]["timestamp_utc"][:10] if self.by_hand else self.suite.date_of(self.step)

    @property
    def code(self) -> CodeThatRan:
        if self.by_hand:
            env = self.document["env"]
            return code_of(None, env.get("git_commit"), env.get("source_sha256"))
        return code_that_ran(self.suite, self.step)


def saved_row(suite: SavedSuite, step: str, by_hand: bool, group: Tuple[str, ...]) -> Optional[Row]:
    """The row of `step`'s results in `suite` (its by-hand/ folder's where `by_hand`), None where
    there are none or they compare fewer than two modes: a row of one mode answers nothing."""
    document = load(suite.folder / "by-hand" if by_hand else suite.folder, step)
    return Row(suite, step, document, by_hand, group) if document and len(document["comparison"]) > 1 else None


def rows_of(suites: Sequence[SavedSuite]) -> List[Row]:
    """The newest row of each model and image size in `suites` (newest first): the headline's
    convnets (or an older suite's channels_last comparison), resnet50 at 224 (the native
    section, or a run by hand standing in), the FP8 row (the headline's ViT, or the transformers'
    eager run where that one alone ran the fp8 modes or compared more than one mode) and vit_b_16."""
    found: Dict[Tuple[str, int], Row] = {}
    for suite in suites:
        candidates: List[List[Tuple[str, bool]]] = [
            [(f"headline-{model}", False), (f"{model}-cl", False)] for model in suite.record.get("models", [])]
        candidates += [[("native-synthetic", False), ("native-cifar10", False), ("native-synthetic", True)],
                       [("headline-vit", False), ("transformers-eager", False)], [("transformers-vit_b_16", False)]]
        for group in candidates:
            steps = tuple(dict.fromkeys(step for step, _ in group))
            usable = [row for row in (saved_row(suite, step, by_hand, steps) for step, by_hand in group) if row]
            with_fp8 = [row for row in usable if set(FP8) & set(row.document["comparison"])]
            for row in (with_fp8 or usable)[:1]:
                found.setdefault(row.key, row)
    return sorted(found.values(), key=lambda row: (row.key[1], "vit" in row.key[0], row.key[0] != "resnet50"))


def fastest_mode(document: Dict[str, Any]) -> str:
    comparison = document["comparison"]
    return min(comparison, key=lambda mode: comparison[mode].median_step_ms)


def speedup(document: Dict[str, Any], mode: str, baseline: str, shown: Shown) -> str:
    """`mode`'s speedup over `baseline` in `document` (tables.ratio_cell), `-` where the row ran
    no `baseline` or `mode` is it."""
    return ratio_or_dash(comparison_against(document, baseline) or document["comparison"], mode, baseline, shown)


def bound_by(document: Dict[str, Any], mode: str, shown: Shown) -> str:
    """What bounds the fastest mode's step: the GPU where it kept it busy, else the host; `-`
    with the runs' own reason where they recorded no busy share."""
    share, profiled = busy_share(document["comparison"][mode])
    if share is None:
        shown.no_busy |= {run.get("gpu_busy_unavailable") or "no reason recorded" for run in document["runs"]
                          if run["mode"] == mode}
        return "-"
    shown.busy, shown.profiled = True, shown.profiled or profiled
    return f"{'GPU' if share >= GPU_BOUND_SHARE else 'host'} ({100 * share:.0f}% busy" + (
        ", profiled)" if profiled else ")")


def steps_of(document: Dict[str, Any]) -> str:
    """`R x N steps`: the repeats and each mode's steps (a range where each mode was timed for its own)."""
    return f"{document['config'].get('repeats') or 1} x {steps_cell(document)} steps"


def verdict_table(suites: Sequence[SavedSuite], link: Callable[[Path, str], str],
                  due: Optional[Dict[str, List[str]]]) -> List[str]:
    """One device's verdict table, its legend and what "claimed" means for its rows; `due` is what
    is due on a GPU (None for a CPU's --quick suite)."""
    shown, lines = Shown(), []
    # why a row's commit is only claimed: the step that would measure each such row anew (None: none is due)
    claimed: Dict[str, List[Optional[str]]] = {}
    for row in rows_of(suites):
        document, (model, size) = row.document, row.key
        mode = fastest_mode(document)
        fp8 = [f"{name} {comparison_against(document, 'amp-bf16')[name].speedup_vs_baseline:.2f}x"
               for name in FP8 if name in document["comparison"] and "amp-bf16" in document["comparison"]]
        shown.eager |= bool(fp8)
        unsteady = unsteady_modes(document, mode)
        shown.unsteady |= bool(unsteady)
        fastest = mode + (" (unsteady)" if unsteady else "") + (
            f"; {', '.join(fp8)} of amp-bf16, eager" if fp8 else "")
        memory = document["comparison"][mode].memory_ratio_vs_baseline if "fp32" in document["comparison"] else None
        code = row.code
        if not code.proven:
            claimed.setdefault(code.why, []).append(next((step for step in row.group if step in (due or {})), None))
        older = [change for change in row.suite.older_than(shown_figures(document, mode), row.step)
                 if not row.by_hand]
        shown.older += [change for change in older if change not in shown.older]
        made = (f"{steps_of(document)}, {data_cell(document)}, " + ("by hand, " if row.by_hand else "")
                + f"`{short_commit(code.commit)[:7]}`" + ("" if code.proven else " claimed")
                + "".join(f", older than `{commit}`" for commit in dict.fromkeys(change.commit[:7] for change in older))
                + f", {link(row.page, row.day)}")
        lines.append(f"| {model} | {size} | {fastest} | {speedup(document, mode, 'tf32', shown)} | "
                     f"{speedup(document, mode, 'fp32', shown)} | "
                     f"{'-' if memory is None or mode == 'fp32' else f'{memory:.2f}x'} | "
                     f"{bound_by(document, mode, shown)} | {made} |")
    if not lines:
        return []
    header = ["| model | image | fastest | vs tf32 | vs fp32 | memory vs fp32 | step bound by | measured |",
              "| --- | ---: | --- | ---: | ---: | ---: | --- | --- |"]
    return header + lines + [""] + legend(shown) + claimed_note(claimed, due) + [""]


def unsteady_modes(document: Dict[str, Any], mode: str) -> List[str]:
    """Whether `mode`'s speedups rest on timings that moved (compare.unsteady_speedups)."""
    from utils.results.compare import unsteady_speedups

    found = [unsteady_speedups(comparison_against(document, base), base) for base in modes.fp32_modes()
             if base in document["comparison"] and base != mode]
    return [name for spread in found for name in spread if name == mode]


def shown_figures(document: Dict[str, Any], mode: str) -> Tuple[str, ...]:
    """The kinds of figure (history.Change's words) a verdict row shows: its memory (of large
    synthetic images too), amp-fp16's speedups where that mode is the fastest, and NVML's busy
    share where it has one."""
    from benchmarks.suite.due import large_synthetic

    row = document["comparison"][mode]
    synthetic = document["data"].get("name") == "synthetic" and large_synthetic(
        int(document["config"].get("image_size") or DEFAULT_IMAGE_SIZE))
    return tuple(["memory"] + (["amp-fp16"] if mode == "amp-fp16" else []) + (
        ["busy"] if row.gpu_busy_share is not None else []) + (["synthetic-memory"] if synthetic else []))


def legend(shown: Shown) -> List[str]:
    """What the table's cells mean, each only where some cell shows it."""
    from utils.results.compare import SPREAD_WARNING_PCT

    lines = ["* `vs tf32`: the fastest mode's speedup over TF32, PyTorch's default FP32 for convolutions; `vs fp32`: "
             "over strict FP32."]
    lines += runs_legend(shown)
    bound = ([f"`step bound by`: by the fastest mode's GPU busy share, under {100 * GPU_BOUND_SHARE:.0f}% the host"
              + ("; `profiled`: from `--explain`'s steps" if shown.profiled else "")] if shown.busy else []) + (
        [f"`-` under step bound by: no busy share ({'; '.join(sorted(shown.no_busy))})"] if shown.no_busy else [])
    lines += ["* " + "; ".join(bound) + "."] if bound else []
    other = ([f"`unsteady`: its repeats' ratios spread over {SPREAD_WARNING_PCT:.0f}%, no verdict yet"]
             if shown.unsteady else []) + (["`eager`: without `--compile`"] if shown.eager else []) + (
        ["`older than`: measured before a change that moves a figure shown"] if shown.older else [])
    return lines + (["* " + "; ".join(other) + "."] if other else [])


def claimed_note(claimed: Dict[str, List[Optional[str]]], due: Optional[Dict[str, List[str]]]) -> List[str]:
    """What "claimed" means for these rows, in plain words (`claimed`: each reason, with the due
    step that would measure each of its rows anew, or None), and what the next lease does about
    it; `due` is None for a CPU's --quick suite, which no lease measures."""
    if not claimed:
        return []
    reasons = list(dict.fromkeys(plain for reason in claimed for plain in plain_why(reason)))
    note = f"*Claimed*: nothing checks a row's commit: {' and '.join(reasons)}."
    if due is None:
        return ["", note]
    steps = [step for found in claimed.values() for step in found]
    order = list(due)
    ranks = sorted({order.index(step) for step in steps if step is not None})
    if not ranks:
        return ["", f"{note} No step of theirs is due, so no lease re-measures them."]
    when = (f"the first {len(ranks)} due, so the next lease (`benchmarks/lease.py`) runs them first"
            if ranks == list(range(len(ranks))) else
            f"due ({', '.join(f'`{order[rank]}`' for rank in ranks)}), and a lease runs due steps in priority order")
    rest = "; the others stay claimed until due again" if None in steps else ""
    return ["", f"{note} Their steps are {when}, each new result recording that digest{rest}."]


def plain_why(reason: str) -> List[str]:
    """history.code_of's reason, as a reader of README needs it, a clause per part."""
    return [WHY_CLAIMED.get(part.strip(), part.strip()).replace("its files record", "its files name")
            for part in reason.split(";")]


def page_link(readme_dir: Path) -> Callable[[Path, str], str]:
    """A row's day, linked to the page that shows it in full (from README's folder)."""
    def link(page: Path, day: str) -> str:
        return f"[{day}]({os.path.relpath(page, readme_dir)})" if page.exists() else day

    return link
