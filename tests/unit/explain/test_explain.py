"""--explain: where each precision's step time goes, and why a mode is (not) faster."""
import dataclasses
import json
import time
import types

import pytest
import torch

from conftest import ROOT, run_cli, run_main
from models import factory
from utils import launch
from utils.config import RunConfig
from utils.data import dataset as dataset_module
from utils.data.dataset import synthetic
from utils.explain import diagnose
from utils.explain.categories import CATEGORIES, KINDS, NAMES, WHAT, category_of, core_name
from utils.explain.profiler import Profile, profile_steps
from utils.measure import gpus
from utils.modes import MODES
from utils.training import cpu_arithmetic
from utils.training.trainer import build_trainer

CPU = torch.device("cpu")


@pytest.mark.parametrize("chain, category", [
    (["ProfilerStep#3", "aten::conv2d", "aten::convolution", "aten::mkldnn_convolution"], "conv"),
    (["ProfilerStep#3", "aten::conv2d", "aten::empty"], "conv"),  # a convolution's helpers are its time
    (["ProfilerStep#3", "aten::conv2d", "aten::_to_copy", "aten::copy_"], "cast"),  # autocast's cast of the weight
    (["ProfilerStep#3", "aten::copy_"], "elementwise"),
    (["autograd::engine::evaluate_function: ConvolutionBackward0", "ConvolutionBackward0",
      "aten::convolution_backward"], "conv"),
    (["autograd::engine::evaluate_function: ToCopyBackward0", "ToCopyBackward0", "aten::_to_copy"], "cast"),
    (["autograd::engine::evaluate_function: NativeBatchNormBackward0"], "norm"),
    (["autograd::engine::evaluate_function: AddmmBackward0", "AddmmBackward0", "aten::mm"], "matmul"),
    (["ProfilerStep#3", "aten::linear", "aten::t"], "matmul"),
    (["ProfilerStep#3", "aten::cross_entropy_loss", "aten::log_softmax", "aten::_to_copy"], "loss"),
    (["ProfilerStep#3", "ampbench.scaler", "Optimizer.step#SGD.step", "aten::add_"], "optimizer"),
    (["ProfilerStep#3", "ampbench.scaler", "aten::_amp_foreach_non_finite_check_and_unscale_"], "scaler"),
    (["ProfilerStep#3", "ampbench.data", "aten::_to_copy"], "data"),  # the loader's own conversions
    (["ProfilerStep#3", "nccl:all_reduce"], "comm"),
    (["ProfilerStep#3", "aten::max_pool2d", "aten::max_pool2d_with_indices"], "elementwise"),
    (["ProfilerStep#3", "aten::abs"], "other"),  # a model's own abs or max is no float8 work
    (["ProfilerStep#3", "aten::linear", "aten::max"], "matmul"),
    (["ProfilerStep#3"], "other"),
    (["ProfilerStep#3", "aten::view"], "other"),
])
def test_each_op_is_attributed_by_its_chain_of_enclosing_ops(chain, category):
    assert category_of(chain) == category


def test_the_docs_list_every_category():
    page = (ROOT / "docs" / "explain.md").read_text()
    for name, what in WHAT.items():
        assert f"| {name} | {what} |" in page, name


def test_core_names_and_one_table():
    assert core_name("autograd::engine::evaluate_function: ConvolutionBackward0") == "convolution"
    assert core_name("aten::_to_copy") == "to_copy"
    assert NAMES == [name for name, _, _ in CATEGORIES] + ["idle", "other"]


def trainer_for(model_name, mode, stem="cifar", batch=16):
    torch.manual_seed(0)
    model = factory.build_model(model_name, stem, None, batch)
    config = RunConfig.build(steps=10, warmup=1, batch_size=batch, no_progress=True)
    return build_trainer(model, MODES[mode], synthetic(CPU, seed=0), config.plan(True, 1),
                         config.training, config.precision, config.data, config.speed, config.distributed,
                         CPU, launch.World()), config.training


@pytest.mark.compat  # the profiler's event names and tree under the oldest torch too
@pytest.mark.parametrize("model_name, stem", [("resnet18", "imagenet"), ("squeezenet1_1", "cifar")])
def test_categories_add_up_to_the_measured_step_time(model_name, stem):
    trainer, training = trainer_for(model_name, "fp32", stem)
    profile_steps(trainer, training, CPU, 1)  # the first steps allocate
    profile, trace_failed = profile_steps(trainer, training, CPU, 3)
    total = sum(entry["ms"] for entry in profile.categories.values())
    assert total == pytest.approx(profile.total_ms)
    # the step's ops run in this thread, one after another, inside the profiler's step spans: their own
    # times add up to the step's wall time, counted once. The spans and perf_counter's window differ by
    # the profiler's bookkeeping between steps (measured: -0.3% to +0.08%), so "once" is within 5%.
    assert 0.5 * profile.wall_ms < total < 1.05 * profile.wall_ms, (total, profile.wall_ms)
    assert profile.idle_ms is None and profile.activities == ["cpu"] and trace_failed is None
    assert len(profile.top_ops) == 15 and not profile.gpu_kernels_missing and profile.diagnosis == []


@pytest.mark.compat
def test_resnet18_fp32_is_mostly_convolution_and_bf16_adds_casts():
    profiles = {}
    for mode in ("fp32", "amp-bf16"):
        trainer, training = trainer_for("resnet18", mode, "imagenet")
        profile_steps(trainer, training, CPU, 1)
        profiles[mode] = profile_steps(trainer, training, CPU, 2)[0]
    fp32 = {name: entry["ms"] for name, entry in profiles["fp32"].categories.items()}
    assert max(fp32, key=fp32.get) == "conv"
    # of the model's own compute: the optimizer's share depends on the torch release's CPU
    # implementation (torch 2.3's foreach steps take about as long as the convolutions)
    assert fp32["conv"] + fp32["matmul"] > 0.5 * sum(fp32[kind] for kind in KINDS)
    bf16_cast = profiles["amp-bf16"].categories["cast"]["ms"]
    assert bf16_cast > 1.0 and fp32["cast"] < 0.1 * bf16_cast, (fp32["cast"], bf16_cast)
    top = profiles["amp-bf16"].top_ops
    assert any(op["category"] == "cast" for op in top) and all(op["calls"] > 0 for op in top)


def profile_of(unaligned_layers=(), **ms):
    """A Profile with these ms per step (the others 0)."""
    values = {name: ms.get(name, 0.0) for name in NAMES}
    total = sum(values.values())
    return Profile(steps=5, activities=["cpu"], wall_ms=total, total_ms=total,
                   categories={name: {"ms": value, "share": value / total} for name, value in values.items()},
                   idle_ms=values["idle"], host_ms={}, host_syncs_per_step=0.0, host_syncs=[], top_ops=[],
                   comm_exposed_ms=0.0, gpu_kernels_missing=False, unaligned_layers=list(unaligned_layers),
                   cpu_fast_half_flags=None)


def run_of(mode="fp32", device="cpu", loader="device", channels_last=False, optimizer_impl="fused", world_size=1,
           grad_comm=None, bucket_mb=None, feed=None):
    """What diagnose_run reads of a RunRecord."""
    return types.SimpleNamespace(mode=mode, device=device, loader=loader, channels_last=channels_last,
                                 optimizer_impl=optimizer_impl, world_size=world_size, grad_comm=grad_comm,
                                 bucket_mb=bucket_mb, feed=feed, effective_batch_size=128)


def test_a_streamed_run_is_diagnosed_by_its_loaders_and_steps_rates_not_by_the_profiles_share():
    fed = {"loader_images_per_sec": 1150.0, "step_images_per_sec": 6000.0, "train_images_per_sec": 1140.0,
           "workers": 8, "bound": "input", "levers": [{"lever": "GPU decode", "flags": "--decode gpu", "why": "w"}]}
    (found,) = diagnose.diagnose_run(run_of(loader="stream", feed=fed), profile_of(data=5, conv=95), 8, 8)
    assert (found["rule"], found["remedy"]) == ("input-bound", "--decode gpu")
    assert found["at_stake_ms"] == pytest.approx(1000 * 128 * (1 / 1140 - 1 / 6000))
    assert "the loader alone delivers 1,150 img/s with 8 workers, the step alone could take 6,000" in found["text"]
    stepped = dict(fed, bound="step")
    assert rules(diagnose.diagnose_run(run_of(loader="stream", feed=stepped), profile_of(data=40, conv=60), 8, 8)) \
        == []


def test_exposed_all_reduce_of_a_fifth_of_the_step_names_the_communication_remedies():
    profile = dataclasses.replace(profile_of(conv=80, comm=20), comm_exposed_ms=25.0, wall_ms=100.0)
    found = diagnose.diagnose_run(run_of(world_size=4, grad_comm="fp32", bucket_mb=25.0), profile, 8, 8)
    assert [item["text"] for item in found] == [
        "fp32: communication-bound: the all-reduce of the gradients waits 25.0 ms that no compute overlaps, 25% of "
        "the profiled step on 4 ranks; try --grad-comm bf16 (half the bytes; fp16 where the backend lacks bfloat16), "
        "a larger --bucket-mb than 25 or a larger -b per process (more compute per all-reduce)."]
    found = diagnose.diagnose_run(run_of(world_size=4, grad_comm="bf16", bucket_mb=5.0), profile, 8, 8)
    assert found[0]["remedy"] == "a larger --bucket-mb than 5 or a larger -b per process (more compute per all-reduce)"
    quiet = dataclasses.replace(profile, comm_exposed_ms=15.0)
    assert rules(diagnose.diagnose_run(run_of(world_size=4, grad_comm="fp32", bucket_mb=25.0), quiet, 8, 8)) == []


def rules(found):
    return [item["rule"] for item in found]


def test_the_rules_fire_at_their_thresholds_and_not_below():
    assert rules(diagnose.diagnose_run(run_of(loader="torchvision"), profile_of(data=25, conv=75), 0, 8)) == \
        ["input-bound"]
    assert rules(diagnose.diagnose_run(run_of(loader="torchvision"), profile_of(data=15, conv=85), 0, 8)) == []
    found = diagnose.diagnose_run(run_of(device="cuda:0"), profile_of(idle=40, conv=60), 8, 8)
    assert rules(found) == ["host-bound"] and "reduce-overhead" in found[0]["remedy"]
    assert rules(diagnose.diagnose_run(run_of(), profile_of(idle=40, conv=60), 8, 8)) == []  # no idle on a CPU
    found = diagnose.diagnose_run(run_of(channels_last=True), profile_of(norm=20, elementwise=20, conv=60), 8, 8)
    assert rules(found) == ["memory-bound"] and "--channels-last" not in found[0]["remedy"]
    assert rules(diagnose.diagnose_run(run_of("amp-bf16"), profile_of(cast=12, conv=88), 8, 8)) == ["cast overhead"]
    unaligned = profile_of(["conv1 (3->64)", "fc (512->10)"], conv=100)
    found = diagnose.diagnose_run(run_of("amp-fp16", device="cuda:0"), unaligned, 8, 8)
    assert rules(found) == ["tensor-core shapes"] and "conv1 (3->64), fc (512->10)" in found[0]["text"]
    assert rules(diagnose.diagnose_run(run_of("fp32", device="cuda:0"), unaligned, 8, 8)) == []


def test_tensor_core_shapes_are_named_from_the_model():
    model = factory.build_model("resnet18", "cifar", None, 12)
    assert gpus.unaligned_layers(model, 12) == ["the batch (12)", "conv1 (3->64)", "fc (512->10)"]
    assert gpus.unaligned_layers(model, 16) == ["conv1 (3->64)", "fc (512->10)"]


def test_amdahl_line_from_the_shares_and_the_measured_speedup():
    base = dict.fromkeys(NAMES, 0.0)
    base.update(conv=62.0, elementwise=38.0)
    mode = dict(base, conv=15.5)  # conv+matmul 4x faster, the rest unchanged
    figures = diagnose.amdahl(base, mode, 1.71)
    assert figures["share"] == pytest.approx(0.62) and figures["speedup"] == pytest.approx(4.0)
    assert figures["predicted"] == pytest.approx(1 / (0.38 + 0.62 / 4)) and figures["limit"] == pytest.approx(1 / 0.38)
    assert diagnose.amdahl_line("amp-fp16", figures) == (
        "amp-fp16: conv+matmul are 62% of the fp32 step and ran 4.00x as fast; with the rest unchanged the step "
        "would be 1.87x as fast (2.63x were they free); measured 1.71x.")


def test_slower_half_arithmetic_is_diagnosed_with_the_cpu_flags_as_evidence():
    base = dict.fromkeys(NAMES, 0.0)
    base.update(conv=80.0, elementwise=20.0)
    found = diagnose.diagnose_comparison("amp-fp16", base, dict(base, conv=1600.0), "cpu", ["avx512_bf16"], 0.06, None)
    assert rules(found) == ["no fast float16 arithmetic on this device"]
    assert "20.0x as long" in found[0]["evidence"] and "neither avx512_fp16 nor amx_fp16" in found[0]["evidence"]
    assert diagnose.diagnose_comparison("amp-fp16", base, dict(base, conv=20.0), "cuda", None, 2.5, None) == []
    assert diagnose.diagnose_comparison("fp32", base, base, "cpu", [], 1.0, None) == []
    tf32 = diagnose.diagnose_comparison("amp-bf16", base, dict(base, conv=20.0), "cuda", None, 2.4, 1.6)
    assert rules(tf32) == ["TF32 already uses tensor cores"] and "1.50x over it" in tf32[0]["text"]


def test_a_cpu_that_lists_the_instructions_is_never_said_to_lack_them():
    """A run whose cpu_fast_half_flags record avx512_bf16 and whose bfloat16 convs ran slower:
    the finding names the flag it has, and never says "no fast bfloat16 arithmetic"."""
    base = dict.fromkeys(NAMES, 0.0)
    base.update(conv=80.0, elementwise=20.0)
    found = diagnose.diagnose_comparison("amp-bf16", base, dict(base, conv=160.0), "cpu", ["avx512_bf16"], 0.5, None)
    assert rules(found) == ["bfloat16 kernels slower than fp32's despite avx512_bf16"]
    assert "no fast" not in found[0]["text"] and "pays off only with" not in found[0]["text"]
    assert "although this CPU lists avx512_bf16" in found[0]["evidence"]
    both = diagnose.diagnose_comparison("amp-bf16", base, dict(base, conv=160.0), "cpu", ["avx512_bf16", "amx_bf16"],
                                        0.5, None)
    assert rules(both) == ["bfloat16 kernels slower than fp32's despite avx512_bf16 and amx_bf16"]
    unknown = diagnose.diagnose_comparison("amp-bf16", base, dict(base, conv=160.0), "cpu", None, 0.5, None)
    assert rules(unknown) == ["no fast bfloat16 arithmetic on this device"] and "neither" not in unknown[0]["evidence"]


def test_a_diagnosis_from_a_busy_host_says_its_evidence_is_unsteady():
    from utils.results.compare import UNSTEADY, compare_modes
    from utils.results.upgrade import upgrade

    document = upgrade(json.loads((ROOT / "tests" / "unit" / "results" / "data" / "explained.json").read_text()))
    quiet = compare_modes(document["runs"], baseline="fp32")["amp-fp16"].diagnosis
    assert quiet and not any(UNSTEADY in found["evidence"] for found in quiet)
    busy = [dict(run, host=dict(run.get("host") or {}, warning="the host was busy: load average 5.0 on 2 cores"))
            if run["mode"] == "fp32" else run for run in document["runs"]]
    flagged = compare_modes(busy, baseline="fp32")["amp-fp16"].diagnosis
    assert [found["rule"] for found in flagged] == [found["rule"] for found in quiet]
    assert all(found["evidence"].endswith(UNSTEADY) for found in flagged)
    assert "this evidence is unsteady: rerun alone" in UNSTEADY


def categories(**values):
    """{category: ms}, every category 0 but `values`."""
    found = dict.fromkeys(NAMES, 0.0)
    found.update(values)
    return found


def test_a_slower_mode_without_a_rule_is_explained_by_its_own_categories():
    """The reported case: amp-bf16 at 127 ms against fp32's 122 ms on an avx512_bf16 CPU."""
    base = categories(conv=80.0, matmul=10.0, elementwise=20.0, norm=12.0)
    slower = categories(conv=79.0, matmul=9.5, elementwise=24.0, norm=13.5, cast=1.0)
    found = diagnose.fallback("amp-bf16", base, slower, 122 / 127)
    assert found["rule"] == "no faster, no rule matched" and found["at_stake_ms"] == pytest.approx(5.0)
    assert "0.96x as fast as fp32" in found["text"] and "elementwise +4.0 ms, norm +1.5 ms, cast +1.0 ms grew" \
        in found["text"]
    assert "conv+matmul failed to shrink (1.02x as fast as in fp32)" in found["text"]
    assert "casts are 1% of its step" in found["text"] and "--compile" in found["remedy"]


def test_the_fallback_names_arithmetic_that_did_not_speed_up():
    base = categories(conv=80.0, elementwise=20.0)
    found = diagnose.fallback("amp-bf16", base, categories(conv=80.0, elementwise=19.0, other=3.0), None)
    assert "conv+matmul failed to shrink (1.00x" in found["text"] and "other +3.0 ms grew" in found["text"]
    assert "fast bfloat16 arithmetic" in found["remedy"] and "0.98x as fast" in found["text"]  # from the profile


@pytest.mark.parametrize("mode, speedup", [("amp-bf16", 1.3), ("fp32", 0.9)])
def test_no_fallback_for_a_faster_mode_or_the_baseline(mode, speedup):
    base = categories(conv=80.0, elementwise=20.0)
    assert diagnose.fallback(mode, base, categories(conv=90.0, elementwise=20.0), speedup) is None


def test_the_comparison_falls_back_only_when_no_rule_fired():
    from utils.results import compare
    base = categories(conv=80.0, elementwise=20.0)
    profile = {"steps": 2, "categories": {name: {"ms": 0.0, "share": 0.0} for name in NAMES}, "cpu_fast_half_flags": []}
    runs = {"fp32": {"device": "cpu", "profile": dict(profile, diagnosis=[])},
            "amp-bf16": {"device": "cpu", "profile": dict(profile, diagnosis=[])}}
    row = {"profile_ms": categories(conv=79.0, elementwise=24.0)}
    found = compare.comparison_findings("amp-bf16", row, {"profile_ms": base}, [runs["amp-bf16"]], 0.96, None)
    assert rules(found) == ["no faster, no rule matched"]
    ruled = dict(runs["amp-bf16"], profile=dict(profile, diagnosis=[{"rule": "cast overhead"}]))
    assert compare.comparison_findings("amp-bf16", row, {"profile_ms": base}, [ruled], 0.96, None) == []


@pytest.mark.whole_runs
def test_explain_from_the_command_line(subset, tmp_path):
    """Three modes: the table, the Amdahl lines, the float16 diagnosis, the JSON, the traces
    (--trace-dir implies --explain) and the figure; the timed steps are the same steps as
    without --explain (the profile comes after them)."""
    out, traces, picture = tmp_path / "r.json", tmp_path / "traces", tmp_path / "r.png"
    result = run_cli("-m", "squeezenet1_1", "-b", "16", "-n", "4", "--warmup", "1", "--no-progress",
                     "--modes", "fp32,amp-bf16,amp-fp16", "--allow-slow-fp16", "--explain-steps", "2",
                     "--data-dir", subset,
                     "--allow-unverified", "--json", out, "--trace-dir", traces, "--plot", picture)
    assert result.returncode == 0, result.stderr
    assert "USDT" not in result.stderr and "gpuGetDeviceCount" not in result.stderr  # kineto's own log, quiet
    text = " ".join(result.stdout.split())  # the lines are wrapped at 80 columns
    assert "Where the time goes" in text and "timed median" in text
    assert "amp-fp16: conv+matmul are" in text and "were they free); measured" in text
    # the rule names what this CPU lists: the instructions it has, or that it has none
    present = [flag for flag in cpu_arithmetic.FAST_CPU_FLAGS["float16"] if flag in (cpu_arithmetic.cpu_flags() or [])]
    rule = (f"float16 kernels slower than fp32's despite {' and '.join(present)}" if present
            else "no fast float16 arithmetic on this device")
    assert f"amp-fp16: {rule}" in text
    printed = result.stdout.split("results written to")[0]  # the lines after it hold tmp_path
    assert max(len(line) for line in printed.splitlines()) <= 80
    document = json.loads(out.read_text())
    for run in document["runs"]:
        profile = run["profile"]
        assert profile["steps"] == 2 and set(profile["categories"]) == set(NAMES)
        assert len(profile["top_ops"]) == 15 and isinstance(profile["diagnosis"], list)
        assert run["timed_steps"] == 3  # 4 steps, 1 warm-up: the profiled steps are not among them
    comparison = document["comparison"]
    assert comparison["amp-fp16"]["profile_speedup"]["conv"] < 0.5
    assert comparison["fp32"]["profile_speedup"]["total"] == pytest.approx(1.0)
    assert [item["rule"] for item in comparison["amp-fp16"]["diagnosis"]] == \
        [rule]
    assert sorted(str(path.relative_to(traces)) for path in traces.rglob("*.json")) == [
        f"squeezenet1_1-{mode}/rank0.pt.trace.json"
                                                              for mode in ("amp-bf16", "amp-fp16", "fp32")]
    trace = json.loads((traces / "squeezenet1_1-fp32" / "rank0.pt.trace.json").read_text())
    assert any(event.get("name") == "ampbench.data" for event in trace["traceEvents"])
    from matplotlib import image
    assert image.imread(str(picture)).shape[0] == 1980  # four rows: the explain panels and the loss scale


class SlowLoader:
    """A trainer's loader that takes SLOW_BATCH_S to hand over each batch: an input pipeline
    that dominates the step on any machine, however fast or busy."""

    def __init__(self, loader):
        self.loader = loader

    def __iter__(self):
        return self

    def __next__(self):
        time.sleep(SLOW_BATCH_S)
        return next(self.loader)

    def __getattr__(self, name):  # state_dict and the rest: the real loader's
        return getattr(self.loader, name)


SLOW_BATCH_S = 0.5  # squeezenet at batch 8 trains a step in some 20 ms here: a share of 0.36 even on a busy machine


@pytest.mark.parametrize("loader, remedy", [
    pytest.param("torchvision", "--loader device", marks=pytest.mark.whole_runs),  # 25 s of DataLoader workers
    ("device", "a larger -b"),
])
def test_a_slow_input_pipeline_is_diagnosed_input_bound_with_the_loaders_remedy(loader, remedy, subset, tmp_path,
                                                                                monkeypatch):
    """The data share is measured inside the profiled step (the wait for the batch), so a
    pipeline slower than the model is named input-bound, with the remedy for the loader that ran;
    how fast each real loader is lies in benchmarks/loader.py."""
    real = dataset_module.make_train_loader
    monkeypatch.setattr(dataset_module, "make_train_loader", lambda *args, **kwargs: SlowLoader(real(*args, **kwargs)))
    out = tmp_path / f"{loader}.json"
    result = run_main("-m", "squeezenet1_1", "-b", "8", "-n", "2", "--warmup", "1", "--no-progress", "--no-eval",
                      "--explain", "--explain-steps", "2", "--loader", loader, "--workers", "0",
                      "--data-dir", subset, "--allow-unverified", "--json", out)
    assert result.returncode == 0, result.stderr
    profile = json.loads(out.read_text())["runs"][0]["profile"]
    data = profile["categories"]["data"]
    assert data["ms"] >= 1000 * SLOW_BATCH_S and data["share"] > diagnose.INPUT_BOUND_SHARE, data
    assert [item["rule"] for item in profile["diagnosis"]][:1] == ["input-bound"], profile["diagnosis"]
    assert remedy in profile["diagnosis"][0]["remedy"]
    assert remedy in " ".join(result.stdout.split())


@pytest.mark.parametrize("impl, syncs", [("foreach", 1.0), ("fused", 0.0)])
def test_explain_counts_host_syncs_and_names_the_fused_optimizer_as_the_remedy(impl, syncs, tmp_path):
    """GradScaler.step with the foreach SGD reads its inf check on the host once per step."""
    out = tmp_path / "r.json"
    result = run_main("-m", "squeezenet1_1", "-b", "4", "-n", "2", "--warmup", "1", "--no-progress", "--no-eval",
                      "--data", "synthetic", "--modes", "amp-fp16", "--allow-slow-fp16", "--explain-steps", "2",
                      "--optimizer-impl", impl,
                      "--json", out)
    assert result.returncode == 0, result.stderr
    (run,) = json.loads(out.read_text())["runs"]
    if impl == "fused" and run["optimizer_impl"] != "fused":
        pytest.skip("this torch has no fused SGD on the CPU")
    assert run["profile"]["host_syncs_per_step"] == syncs
    found = [item for item in run["profile"]["diagnosis"] if item["rule"] == "host sync"]
    if syncs:
        assert "in the loss scaler's step" in found[0]["evidence"] and "--optimizer-impl fused" in found[0]["remedy"]
        assert "--optimizer-impl fused" in " ".join(result.stdout.split())
    else:
        assert found == []


def profiled_run(mode, timed_ms, profiled):
    """A run whose --explain profile has `profiled` ({category: ms}) and whose timed median is `timed_ms`."""
    categories = {name: {"ms": profiled.get(name, 0.0), "share": 0.0} for name in NAMES}
    return {"mode": mode, "data": "synthetic", "repeat": 0, "device": "cpu", "global_batch_size": 32,
            "step_time_ms": {"median": timed_ms, "p10": timed_ms, "p90": timed_ms}, "step_times_ms": [timed_ms] * 9,
            "data_time_ms": {"median": 0.5}, "peak_memory_bytes": 1, "final_loss": 2.0, "loss_curve": [2.0],
            "test_accuracy": None, "skipped_steps": 0, "final_loss_scale": None, "max_batch": None,
            "profile": {"steps": 5, "total_ms": sum(profiled.values()), "categories": categories}}


def test_explain_scales_its_categories_to_the_timed_median_and_warns_when_they_disagree():
    """fp32 profiled at 3,126 ms against a timed 1,376 ms gave "total 4.19x" beside a measured
    2.18x; scaled, the total is the measured speedup and the table says why."""
    from utils.results import compare, summary
    name = NAMES[0]
    runs = [profiled_run("fp32", 1376.0, {name: 2126.0, NAMES[1]: 1000.0}),
            profiled_run("amp-bf16", 631.2, {name: 500.0, NAMES[1]: 246.0})]
    comparison = compare.compare_modes(runs)
    bf16 = comparison["amp-bf16"]
    assert sum(comparison["fp32"].profile_ms.values()) == pytest.approx(1376.0)
    assert bf16.profile_speedup["total"] == pytest.approx(bf16.speedup_vs_baseline) == pytest.approx(2.18, abs=0.01)
    assert comparison["fp32"].profiled_vs_timed == pytest.approx(3126.0 / 1376.0)
    document = {"env": {"torch": "x", "device_type": "cpu"}, "runs": runs, "comparison": comparison}
    text = " ".join(" ".join(summary.explanation(document, wide=True)).split())
    assert "warning: the profiled step differs from the timed median by over 20% (fp32 2.27x, amp-bf16 1.18x)" \
        not in text  # amp-bf16 is within 20%
    assert "warning: the profiled step differs from the timed median by over 20% (fp32 2.27x)" in text
