"""The scaling study's figures (benchmarks/scaling.py): how each precision mode's throughput
grows with the ranks at a fixed per-process batch (weak scaling), from the study's result files.

Per mode, world size N and --grad-comm: images/s, the global batch over the median of the runs'
median step times (compare.median_step_ms, as the comparison computes it); the scaling efficiency,
images/s at N over N x the 1-process images/s (at a fixed per-process batch: the 1-process step
time over the N-process one), with the 95% interval of compare.speedup for runs that do not pair
(each size is a launch of its own), which resamples that same statistic, between the two groups
of runs; the AMP speedup against fp32 at that size,
from the comparison of its own runs; and the communication share of a step, the median exposed
all-reduce time of --explain's profile over the median profiled step (compare.communication_share,
as the summary's communication line).
"""
from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any, Dict, List, Optional, Tuple

from models.families import OPTIMIZER_DEFAULTS
from utils.errors import UserError
from utils.grad_comm import GRAD_COMM
from utils.modes import BASELINES
from utils.results.accuracy import accuracy_figures
from utils.results.compare import (
    communication_share,
    group_by_mode,
    profiled_communication,
    run_learned,
    speedup,
)
from utils.results.merge import merge
from utils.results.record import setup_of
from utils.results.summary import format_table, points, with_interval

if TYPE_CHECKING:  # matplotlib is optional: imported only where a figure is drawn
    from matplotlib.figure import Figure

SCHEMA = "ampbench.scaling/1"


@dataclass(frozen=True)
class StudyRow:
    """One mode at one world size and --grad-comm; the field order is scaling.json's."""
    mode: str
    world_size: int
    grad_comm: Optional[str]  # None in one process, where nothing travels
    bucket_mb: Optional[float]
    batch_size: int  # per process
    runs: int
    median_step_ms: float
    images_per_sec: float
    scaling: float  # images/s over the 1-process images/s
    efficiency: float  # that over the ranks
    efficiency_ci95: Optional[List[float]]
    efficiency_interval: str  # what the interval rests on
    amp_speedup: Optional[float]  # against the baseline mode at this size and --grad-comm
    amp_speedup_ci95: Optional[List[float]]
    comm_exposed_ms: Optional[float]
    comm_share: Optional[float]
    accuracy_vs_fp32_comm: Optional[Dict]  # accuracy_against_fp32_comm()

    def to_dict(self) -> Dict[str, Any]:
        """The row as scaling.json holds it."""
        return asdict(self)


def efficiency(base_runs: List[Dict[str, Any]], runs: List[Dict[str, Any]],
               ranks: int) -> Tuple[float, Optional[List[float]], str]:
    """(efficiency, its 95% interval or None, what the interval rests on) of `runs` on `ranks`
    ranks against `base_runs` on one. At a fixed per-process batch, images/s at N over N x the
    1-process images/s is the 1-process step time over the N-process one: each compare.median_step_ms,
    the statistic whose ratio compare.speedup resamples for runs that do not pair, so that the
    figure is its interval's own (a median of per-run images/s would not be, with an even number of runs)."""
    if ranks == 1:
        return 1.0, None, "the baseline"
    found = speedup(base_runs, runs, pair=False)
    return found.value, found.interval, found.rests_on


def comm_share(runs: List[Dict[str, Any]]) -> Tuple[Optional[float], Optional[float]]:
    """(exposed all-reduce ms, its share of the profiled step) over the runs that --explain
    profiled: communication_share()'s; (None, None) without a profile."""
    profiled = [run for run in runs if profiled_communication(run)]
    if not profiled:
        return None, None
    exposed_ms, _, share = communication_share(profiled)
    return exposed_ms, share


def study(documents: List[Dict[str, Any]]) -> List[StudyRow]:
    """The study's rows, from every result file it wrote (as merge.load_result reads them): one
    group per (world size, --grad-comm) after merging, runs of one mode pooled over rounds and
    repeats."""
    groups = merge(documents)
    bases = [group for group in groups if group["env"]["world_size"] == 1]
    if len(bases) != 1 or len(groups) < 2:
        raise UserError(f"the study needs the runs of one process in one setup and runs on more ranks, and these "
                        f"files hold {len(bases)} setups of one process and {len(groups) - len(bases)} of more; "
                        "run the study on 2 or more ranks with the same flags.")
    check_one_study(groups, bases[0])
    base = group_by_mode(bases[0]["runs"])
    rows = []
    for group in groups:
        ranks = group["env"]["world_size"]
        for mode, runs in group_by_mode(group["runs"]).items():
            if mode in base:
                rows.append(row_of(mode, ranks, group, runs, base[mode],
                                   accuracy_against_fp32_comm(groups, group, mode, runs)))
    return sorted(rows, key=lambda row: (list(base).index(row.mode), GRAD_COMM.index(row.grad_comm or "fp32"),
                                         row.world_size))


# What may differ between the study's points: the ranks and how gradients travel (the mode is
# per run). Everything else of setup_of must match, or efficiency would compare two setups.
POINT_KEYS = ("world_size", "grad_comm", "bucket_mb")


def check_one_study(groups: List[Dict[str, Any]], base: Dict[str, Any]) -> None:
    """Refuse groups that differ from the 1-process one in anything but POINT_KEYS (another
    model, batch, data, ...), and multi-rank groups of two --bucket-mb, which the table could
    not tell apart."""
    reference = {key: value for key, value in setup_of(base).items() if key not in POINT_KEYS}
    for group in groups:
        setup = setup_of(group)
        differing = [key for key, value in reference.items() if setup.get(key) != value
                     and not (key == "lr" and recipe_scaled(reference, setup))]
        if differing:
            key = differing[0]
            raise UserError(f"these result files are not one study: the {setup['world_size']}-rank runs have "
                            f"{key} {setup.get(key)} and the 1-process runs {reference[key]}; give the study a "
                            "folder of one study's launches.")
    buckets = sorted({setup_of(group)["bucket_mb"] for group in groups} - {None})
    if len(buckets) > 1:
        raise UserError(f"these result files hold runs of --bucket-mb {' and '.join(f'{b:g}' for b in buckets)}, "
                        "which the study's table cannot tell apart; study one bucket size per folder.")


def recipe_scaled(base: Dict[str, Any], setup: Dict[str, Any]) -> bool:
    """Whether `setup`'s lr is `base`'s (one process) as the default recipe scales it with the
    global batch: the same flags give each world size its own lr unless --lr is given."""
    rule = OPTIMIZER_DEFAULTS.get(base["optimizer"])
    if rule is None or not base["lr"]:
        return False
    per_process = base["batch_size"] * (base.get("accum_steps") or 1)
    scale = rule.lr(per_process * setup["world_size"], True) / rule.lr(per_process, True)
    return math.isclose(setup["lr"], base["lr"] * scale, rel_tol=1e-9)


def rounds_of(documents: List[Dict[str, Any]]) -> int:
    """How many launches the study made of each point (world size, --grad-comm): the most of any."""
    counts: Dict[Tuple[int, Optional[str]], int] = {}
    for document in documents:
        key = (document["env"]["world_size"], document["config"]["grad_comm"])
        counts[key] = counts.get(key, 0) + 1
    return max(counts.values(), default=0)


def accuracy_against_fp32_comm(groups: List[Dict[str, Any]], group: Dict[str, Any], mode: str,
                               runs: List[Dict[str, Any]]) -> Optional[Dict[str, Any]]:
    """Does accuracy hold with 16-bit gradients? The paired verdict (utils/results/accuracy.py)
    of a --grad-comm fp16 or bf16 group's runs of `mode` against the fp32-communication runs of
    the same mode, size and seeds; None for fp32 communication and one process."""
    ranks, comm = group["env"]["world_size"], group["config"]["grad_comm"]
    twins = [other for other in groups
             if other["env"]["world_size"] == ranks and other["config"]["grad_comm"] == "fp32"]
    if ranks == 1 or comm == "fp32" or not twins or mode not in group_by_mode(twins[0]["runs"]):
        return None
    margin = group["config"]["accuracy_margin"] / 100.0
    figures = accuracy_figures([run for run in runs if run_learned(run) is not False],
                               [run for run in group_by_mode(twins[0]["runs"])[mode] if run_learned(run) is not False],
                               margin)
    return {key: figures[key] for key in ("seeds", "accuracy_mean", "accuracy_mean_delta", "accuracy_delta_ci95",
                                          "accuracy_verdict", "accuracy_verdict_why")}


def row_of(mode: str, ranks: int, group: Dict[str, Any], runs: List[Dict[str, Any]], base_runs: List[Dict[str, Any]],
           accuracy_vs_fp32_comm: Optional[Dict[str, Any]]) -> StudyRow:
    value, interval, rests_on = efficiency(base_runs, runs, ranks)
    compared = group["comparison"][mode]  # group_by_mode keeps the runs with timed steps, as the comparison does
    baseline = group["config"]["baseline"]  # the AMP speedup's reference
    exposed_ms, share = comm_share(runs)
    return StudyRow(mode=mode, world_size=ranks, grad_comm=runs[0].get("grad_comm") if ranks > 1 else None,
                    bucket_mb=runs[0].get("bucket_mb"), batch_size=runs[0]["batch_size"], runs=len(runs),
                    median_step_ms=compared.median_step_ms, images_per_sec=compared.images_per_sec,
                    scaling=value * ranks, efficiency=value, efficiency_ci95=interval, efficiency_interval=rests_on,
                    amp_speedup=compared.speedup_vs_baseline if mode != baseline else None,
                    amp_speedup_ci95=compared.speedup_ci95 if mode != baseline else None,
                    comm_exposed_ms=exposed_ms, comm_share=share, accuracy_vs_fp32_comm=accuracy_vs_fp32_comm)


def speedup_name(baseline: str) -> str:
    """What the speedup column measures against: "AMP speedup" is against fp32 alone."""
    return "AMP speedup" if baseline == BASELINES["default"] else f"speedup vs {baseline}"


def table(rows: List[StudyRow], baseline: str) -> str:
    """The study as text: one line per mode, --grad-comm and world size; speedups against
    `baseline` (the launches' --baseline)."""
    header = ["mode", "ranks", "grad comm", "step ms", "img/s", "scaling", "efficiency [95% CI]",
              f"{speedup_name(baseline)} [95% CI]", "exposed comm"]
    lines = [[row.mode, str(row.world_size), row.grad_comm or "-", f"{row.median_step_ms:.1f}",
              f"{row.images_per_sec:.1f}", f"{row.scaling:.2f}x",
              with_interval(100 * row.efficiency, points(row.efficiency_ci95), ".0f", "%"),
              with_interval(row.amp_speedup, row.amp_speedup_ci95, ".2f", "x"),
              "-" if row.comm_share is None else f"{row.comm_exposed_ms:.1f} ms {100 * row.comm_share:.0f}%"]
             for row in rows]
    return format_table(header, lines)


def accuracy_table(rows: List[StudyRow]) -> List[str]:
    """Accuracy under 16-bit gradients against fp32 communication, paired by seed; [] without
    --grad-comm fp16 or bf16."""
    compared = [(row, row.accuracy_vs_fp32_comm) for row in rows if row.accuracy_vs_fp32_comm]
    if not compared:
        return []
    header = ["mode", "ranks", "grad comm", "seeds", "vs fp32 comm [95% CI]", "verdict"]
    lines = []
    for row, figures in compared:
        delta = figures["accuracy_mean_delta"]
        # str() as format_table would: a row compared with fp32 communication has a grad_comm
        lines.append([row.mode, str(row.world_size), str(row.grad_comm), str(figures["seeds"]),
                      with_interval(None if delta is None else 100 * delta, points(figures["accuracy_delta_ci95"]),
                                    "+.2f", " pt"),
                      figures["accuracy_verdict"] or "-"])
    whys = sorted({figures["accuracy_verdict_why"] for _, figures in compared} - {None})
    return ["Accuracy with 16-bit gradients: test accuracy against --grad-comm fp32 at the same size, paired by seed",
            format_table(header, lines)] + [f"inconclusive: {why}." for why in whys]


def notes(rows: List[StudyRow], baseline: str) -> List[str]:
    """What the table's figures mean and rest on, once each."""
    batch = rows[0].batch_size
    resting = sorted({row.efficiency_interval for row in rows if row.world_size > 1})
    return [f"weak scaling: batch {batch} per process; scaling is images/s over the 1-process images/s, efficiency "
            "that over the ranks (100% is perfect).",
            "efficiency 95% CI: " + "; ".join(resting) + ". Each world size is a launch of its own: --rounds 3 "
            "rests the interval on the launches' medians, so that it holds their variation.",
            f"{speedup_name(baseline)}: against {baseline} at the same size and --grad-comm, from the same launches.",
            "exposed comm: all-reduce time per profiled step that no compute overlapped (--explain's profile), and "
            "its share of the profiled step."]


def draw(path: str, rows: List[StudyRow], title: str) -> None:
    """The study's figure, all or nothing."""
    from utils.results.plot import save_figure

    save_figure(path, lambda: study_figure(rows, title))


def study_figure(rows: List[StudyRow], title: str) -> Figure:
    """Images/s against ranks beside the ideal N x the 1-process rate, and the efficiency with
    its 95% interval, per mode and --grad-comm."""
    import matplotlib.pyplot as plt

    from utils.results.plot import colour_of

    figure, (rates, efficiencies) = plt.subplots(1, 2, figsize=(12, 4.5))
    for (mode, grad_comm), line in lines_of(rows).items():
        style = {"color": colour_of(mode), "marker": "o", "linestyle": LINE_STYLES.get(grad_comm, "-"),
                 "label": f"{mode}, grad comm {grad_comm}"}
        sizes = [row.world_size for row in line]
        rates.plot(sizes, [row.images_per_sec for row in line], **style)
        rates.plot(sizes, [size * line[0].images_per_sec for size in sizes], color=style["color"],
                   linestyle=":", linewidth=0.8)
        below = [100 * (row.efficiency - (row.efficiency_ci95 or [row.efficiency] * 2)[0]) for row in line]
        above = [100 * ((row.efficiency_ci95 or [row.efficiency] * 2)[1] - row.efficiency) for row in line]
        efficiencies.errorbar(sizes, [100 * row.efficiency for row in line], yerr=[below, above], capsize=3,
                              **style)
    rates.set(xlabel="ranks", ylabel="images/s (dotted: N x the 1-process rate)", title="throughput")
    efficiencies.set(xlabel="ranks", ylabel="scaling efficiency (%)", title="efficiency, 95% interval")
    efficiencies.axhline(100, color="grey", linewidth=0.8)
    for axis in (rates, efficiencies):
        axis.set_xticks(sorted({row.world_size for row in rows}))
        axis.legend(fontsize=8)
    figure.suptitle(title, fontsize=10)
    figure.tight_layout()
    return figure


LINE_STYLES: Dict[Optional[str], str] = {"fp32": "-", "fp16": "--", "bf16": "-."}  # by grad_comm; None: the default


def lines_of(rows: List[StudyRow]) -> Dict[Tuple[str, Optional[str]], List[StudyRow]]:
    """{(mode, grad_comm): its rows by world size}, each line starting from the 1-process row."""
    lines: Dict[Tuple[str, Optional[str]], List[StudyRow]] = {}
    for row in rows:
        if row.world_size > 1:
            lines.setdefault((row.mode, row.grad_comm), []).append(row)
    base = {row.mode: row for row in rows if row.world_size == 1}
    return {key: [base[key[0]]] + sorted(line, key=lambda row: row.world_size) for key, line in lines.items()}
