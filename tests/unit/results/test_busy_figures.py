"""The GPU's busy share in the comparison, the table and its notes, from made-up runs
(runs[].gpu_busy as utils/measure/nvml_meter.py writes it): the median per mode, --explain's
share beside it, and the one line of a mode whose GPU waits for the host."""
import json

import pytest

from conftest import ROOT, fake_run, read_results
from utils.explain.categories import NAMES as CATEGORIES
from utils.explain.diagnose import GPU_BOUND_SHARE
from utils.results import compare, summary, validate

LEARNING = [2.3 - 0.03 * i for i in range(30)]
UNREAD = "NVML failed to initialise: Driver Not Loaded"


def with_busy(run, share, device="cuda:0"):
    """`run` on a GPU, with runs[].gpu_busy at `share` (None: the reason instead)."""
    found = None if share is None else {"share": share, "source": "nvml-utilization-samples", "window_s": 12.0,
                                        "samples": 72, "sample_period_s": 0.1667}
    return dict(run, device=device, steps=30, gpu_busy=found, gpu_busy_unavailable=None if found else UNREAD)


def runs_of(shares, ms=None):
    """{mode: [busy share of each repeat]} as runs; `ms` {mode: median step}, 100 ms unless given."""
    return [with_busy(fake_run(mode, (ms or {}).get(mode, 100.0), LEARNING, 0.4, repeat), share)
            for mode, values in shares.items() for repeat, share in enumerate(values)]


def printed(runs):
    """The table and the busy share's notes under it that `runs` give."""
    document = {"config": {"baseline": "fp32"}, "runs": runs, "comparison": compare.compare_modes(runs)}
    return summary.comparison_table(document["comparison"]) + "\n" + "\n".join(summary.busy_notes(document))


def host_bound_lines(text):
    return [line for line in text.splitlines() if line.startswith("host-bound: ")]


def test_a_modes_busy_share_is_the_median_of_its_runs():
    comparison = compare.compare_modes(runs_of({"fp32": [0.9, 0.95, 0.92], "amp-bf16": [0.5, None, 0.4]}))
    assert comparison["fp32"].gpu_busy_share == 0.92 and comparison["amp-bf16"].gpu_busy_share == 0.45
    assert compare.compare_modes(runs_of({"fp32": [None]}))["fp32"].gpu_busy_share is None


def test_the_table_shows_the_busy_share_beside_the_energy_and_says_what_it_is():
    text = printed(runs_of({"fp32": [0.93], "amp-bf16": [0.88]}))
    table = text.split("\n\n")[2].splitlines()
    assert table[0].split() == ["mode", "GPU", "busy"] and table[2].split() == ["fp32", "93%"]
    assert "GPU busy: the share of the timed steps in which the GPU ran kernels" in text
    assert not host_bound_lines(text)


def test_one_host_bound_mode_among_gpu_bound_ones_gets_one_line_saying_whose_speedup_it_is():
    text = printed(runs_of({"fp32": [0.97], "tf32": [0.9], "amp-fp16": [0.41]}, ms={"amp-fp16": 40.0}))
    (line,) = host_bound_lines(text)
    assert line.startswith("host-bound: amp-fp16's GPU ran kernels 41% of its step, under 70%: it waits for the host")
    assert "this row measures the host's launch rate rather than the number format" in line
    assert "--compile, CUDA graphs (--compile --compile-mode reduce-overhead) or a larger -b lift it" in line
    assert line.endswith("fp32 and tf32 are GPU-bound, so the speedup between amp-fp16 and them is the host's, not "
                         "the number format's.")


def test_every_mode_host_bound_gets_a_line_each_and_no_speedup_blamed_on_the_host():
    lines = host_bound_lines(printed(runs_of({"fp32": [0.6], "amp-bf16": [0.3]})))
    assert [line.split("'s GPU")[0] for line in lines] == ["host-bound: fp32", "host-bound: amp-bf16"]
    assert not any("GPU-bound" in line for line in lines)


def test_the_line_is_drawn_at_the_named_share():
    below, at = GPU_BOUND_SHARE - 0.001, GPU_BOUND_SHARE
    lines = host_bound_lines(printed(runs_of({"fp32": [at], "amp-bf16": [below]})))
    assert len(lines) == 1 and lines[0].startswith("host-bound: amp-bf16") and "fp32 is GPU-bound" in lines[0]


def test_a_gpu_run_without_a_busy_share_says_why_and_shows_no_column():
    runs = runs_of({"fp32": [None], "amp-bf16": [None]})
    text = printed(runs)
    assert f"GPU busy not shown: {UNREAD}." in text and "GPU busy:" not in text
    assert "GPU busy" not in summary.comparison_table(compare.compare_modes(runs))


def test_a_mode_without_a_busy_share_beside_others_is_named():
    text = printed(runs_of({"fp32": [0.9], "amp-bf16": [None]}))
    assert f"GPU busy of amp-bf16 not measured: {UNREAD}." in text


def test_cpu_runs_say_nothing_of_the_gpus_busy_share():
    runs = [with_busy(fake_run(mode, 100.0, LEARNING, 0.4), None, device="cpu") for mode in ("fp32", "amp-bf16")]
    runs = [dict(run, gpu_busy_unavailable="a CPU run: no GPU to read") for run in runs]
    assert "GPU busy" not in printed(runs) and "host-bound" not in printed(runs)


def profiled(run, idle_ms, wall_ms=10.0):
    """`run` with --explain's CUDA profile: `idle_ms` of a `wall_ms` profiled step."""
    categories = {name: {"ms": 1.0, "share": 1 / len(CATEGORIES)} for name in CATEGORIES}
    return dict(run, profile={"steps": 5, "categories": categories, "wall_ms": wall_ms, "idle_ms": idle_ms})


def test_the_profilers_busy_share_is_printed_beside_nvmls():
    runs = runs_of({"fp32": [0.91, 0.93], "amp-bf16": [0.45, 0.47]})
    runs = [profiled(run, idle_ms) for run, idle_ms in zip(runs, [1.0, 2.0, 6.0, 5.0])]
    comparison = compare.compare_modes(runs)
    assert comparison["fp32"].profiled_gpu_busy_share == pytest.approx(0.85)
    assert comparison["amp-bf16"].profiled_gpu_busy_share == pytest.approx(0.45)
    assert "GPU busy by the profiler (--explain: 1 - idle / profiled step), beside NVML's: fp32 85% (NVML 92%), " \
           "amp-bf16 45% (NVML 46%)." in printed(runs)


def test_a_cpu_profile_has_no_busy_share():
    runs = [dict(profiled(run, None), device="cpu") for run in runs_of({"fp32": [None]})]
    assert compare.compare_modes(runs)["fp32"].profiled_gpu_busy_share is None


def gpu_document(**profile):
    """The genuine result file of tests/unit/results/data on a GPU: busy shares and energy in every
    run (the second host-bound), `profile` fields changed in its first."""
    document = json.loads((ROOT / "tests" / "unit" / "results" / "data" / "explained.json").read_text())
    document["env"]["device_type"] = "cuda"
    for run, share in zip(document["runs"], (0.94, 0.38)):
        run.update(with_busy({}, share), energy={
            "joules_per_image": 56.25, "mean_watts": 300.0, "joules": 3600.0, "seconds": 12.0, "images": 64,
            "source": "nvml-energy-counter", "power_samples": None, "nvml_index": 0, "window_too_short": False})
    document["runs"][0]["profile"].update(profile)
    return document


def test_the_summary_keeps_to_80_columns_with_the_gpus_readings_and_wide_puts_them_in_one_table(tmp_path):
    (tmp_path / "r.json").write_text(json.dumps(gpu_document()))
    document = read_results(tmp_path / "r.json")
    narrow = summary.summary(document)
    assert "GPU busy" in narrow and "J/img" in narrow and len(host_bound_lines(narrow.replace("\n  ", " "))) == 1
    assert max(len(line) for line in narrow.splitlines()) <= summary.TABLE_WIDTH
    header = next(line for line in summary.summary(document, wide=True).splitlines() if "median ms" in line)
    assert "GPU busy" in header and "J/img" in header


def test_a_profile_whose_idle_time_exceeds_its_step_is_refused():
    validate.check(gpu_document(idle_ms=2.5, wall_ms=10))
    with pytest.raises(validate.Invalid, match=r"runs\[0\].profile.idle_ms is 12.5, more than its wall_ms \(10\)"):
        validate.check(gpu_document(idle_ms=12.5, wall_ms=10))
    with pytest.raises(validate.Invalid, match=r"runs\[0\].profile has no wall_ms beside its idle_ms"):
        validate.check(gpu_document(idle_ms=1.0, wall_ms=None))
    with pytest.raises(validate.Invalid, match=r"runs\[0\].profile.idle_ms is -1, not a number of at least 0"):
        validate.check(gpu_document(idle_ms=-1, wall_ms=10))
