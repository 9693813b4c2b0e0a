"""main.py as users run it: flags, exit codes, files written, and a run that really learns."""
import json
import re
import subprocess
import sys

import pytest
import torch

from conftest import FAST, ROOT, assert_user_error, run_cli, run_main
from main import build_parser
from utils import config
from utils.config import RunConfig
from utils.errors import UserError

SEED_FLAGS = ["--lr", "--steps", "-n", "--gpu", "-p", "--fp16", "--loss_scaling", "-s", "--model", "-m"]


def test_help_lists_every_seed_flag_and_imports_no_torch():
    """-h is instant because it never imports torch (-X importtime lists every module imported)."""
    result = subprocess.run([sys.executable, "-X", "importtime", "main.py", "-h"], cwd=ROOT, capture_output=True,
                            text=True)
    assert result.returncode == 0
    for flag in SEED_FLAGS + ["--bf16", "--data-dir", "--allow-unverified", "--json", "--tf32"]:
        assert flag in result.stdout
    imported = {line.rsplit("|", 1)[-1].strip() for line in result.stderr.splitlines()
                if line.startswith("import time:")}
    assert "utils.config" in imported and not {"torch", "numpy", "torchvision"} & imported


def test_help_does_not_import_torch():
    code = "import sys, main; main.build_parser().format_help(); print('torch' in sys.modules)"
    result = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True)
    assert result.stdout.strip() == "False"


def test_check_flags_refuses_a_flags_rule_before_importing_torch():
    code = ("import sys, main; status = main.main(['--modes', 'fp32,fp32', '--check-flags']); "
            "print(status, 'torch' in sys.modules)")
    result = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True)
    assert result.stdout.strip() == "2 False" and "lists a mode twice" in result.stderr


def test_classic_flags_parse_as_typed():
    """The tutorial's call reads as its current spelling, and the typed one is kept for messages."""
    args = build_parser().parse_args("-n 200 -p --fp16 -s --model resnet50".split())
    assert (args.steps, args.gpu, args.modes, args.model) == (200, True, "amp-fp16", "resnet50")
    assert args.spelled["modes"] == "--fp16 -s" and args.warnings == []
    assert args.command == "-n 200 -p --modes amp-fp16 --model resnet50".split()
    args = build_parser().parse_args("--steps 7 --gpu --loss_scaling -m resnet18 --lr 0.5".split())
    assert (args.steps, args.gpu, args.modes, args.model, args.lr) == (7, True, "fp32", "resnet18", 0.5)
    assert args.warnings == ["-s/--loss_scaling is ignored without --fp16: FP32 gradients need no loss scaling."]


def test_defaults():
    args = build_parser().parse_args([])
    assert (args.lr, args.steps, args.batch_size, args.model, args.warmup) == (None, None, 128, "resnet50", None)
    config = RunConfig.from_args(args)
    plan = config.plan(batch_norm=True, world_size=2)  # the default recipe: lr for the global batch
    assert (plan.steps, plan.timing_warmup) == (200, 10)  # applied by the config (--epochs needs the data's size)
    assert (args.lr_schedule, args.warmup_lr_steps, args.download) == ("cosine", None, True)
    assert (plan.recipe.lr, plan.recipe.lr_warmup_steps) == (0.2, 10)
    assert config.plan(batch_norm=False, world_size=1).recipe.lr == 0.04
    assert (args.gpu, args.modes, args.compare, args.stem, args.data) == (False, None, False, None, "auto")
    assert (config.training.stem, config.data.image_size) == ("cifar", 32)  # the stem the default size calls for


def test_the_flags_that_tune_a_measurement_ask_for_it():
    """--explain-steps and --trace-dir imply --explain, --numerics-every implies --numerics:
    none of them is silently ignored."""
    def parse(line):
        return RunConfig.from_args(build_parser().parse_args(line.split())).measurement
    plain = parse("")
    assert (plain.explain, plain.explain_steps, plain.numerics, plain.numerics_every) == (False, 5, False, 50)
    assert (parse("--explain-steps 3").explain, parse("--explain-steps 3").explain_steps) == (True, 3)
    assert parse("--trace-dir traces").explain and not parse("--trace-dir traces").numerics
    assert (parse("--numerics-every 7").numerics, parse("--numerics-every 7").numerics_every) == (True, 7)
    assert not parse("--numerics-every 7").explain and not parse("--explain").numerics


def test_data_dir_defaults_to_environment(monkeypatch):
    monkeypatch.setenv("CIFAR10_DIR", "/somewhere/cifar")
    assert build_parser().parse_args([]).data_dir == "/somewhere/cifar"
    monkeypatch.delenv("CIFAR10_DIR")
    assert build_parser().parse_args([]).data_dir == "./data"


@pytest.mark.parametrize("argv, phrase", [
    (["-n", "0"], "--steps/-n: must be a positive integer"),
    (["-b", "-4"], "--batch-size/-b: must be a positive integer"),
    (["--lr", "0"], "--lr: must be a positive number"),
    (["--lr", "nan"], "--lr: must be a positive number"),
    (["--warmup", "-1"], "--warmup: must be zero or a positive integer"),
    (["--data", "imagenet"], "invalid choice"),
    # numbers beyond what torch holds are refused with the limit
    (["--lr", "1e308"], "--lr: must be a positive number up to 3.403e+38"),
    (["--weight-decay", "1e300"], "--weight-decay: must be zero or a positive number up to 3.403e+38"),
    (["--momentum", "inf"], "--momentum: must be zero or a positive number up to"),
    (["--seed", str(2 ** 64)], "--seed: must be an integer from 0 to 2**63-1"),
    (["-n", str(2 ** 31)], "--steps/-n: must be a positive integer up to 2147483647"),
    (["--workers", "100000"], "--workers: must be from 0 to 256"),
])
def test_bad_flag_values_exit_2(argv, phrase):
    assert_user_error(run_cli(*argv), phrase)


@pytest.mark.parametrize("values, phrase", [
    ({"steps": 0}, "--steps must be a positive integer"),
    ({"lr": float("nan")}, "--lr must be a positive number"),
    ({"dropout": 1.0}, "--dropout must be at least 0 and below 1"),
    ({"seed": 2 ** 63}, "--seed must be an integer from 0 to 2**63-1"),
    ({"batch_size": 8.5}, "--batch-size must be a positive integer"),
    ({"repeats": True}, "--repeats must be a positive integer"),
])
def test_a_config_built_in_code_has_the_ranges_of_the_flags(values, phrase):
    """Benchmarks and tests build configs without the parser: the same ranges hold."""
    with pytest.raises(UserError, match=re.escape(phrase)):
        RunConfig.build(**values)
    assert RunConfig.build(lr=1, momentum=0).training.lr == 1  # an int will do for a float


def test_every_numeric_flag_is_checked_by_its_settings_range():
    numeric = {action.dest for action in build_parser()._actions if action.type is not None}
    assert numeric == set(config.RANGES)


@pytest.mark.parametrize("argv, phrase", [
    (["--fp16", "--bf16"], "--fp16 and --bf16 each choose a precision mode; choose one"),
    (["-n", "5", "--warmup", "5"], "--warmup (5) must be smaller than the 5 steps to run"),
    (["--model", "resnet5O"], "unknown model 'resnet5O': did you mean resnet50"),
    (["--model", "vit_b_16", "--data", "synthetic"], "and this run's are 32x32: run it with --image-size 224"),
    (["--data", "cifar10", "--data-dir", "/no/such/folder", "--no-download"], "CIFAR-10 not found in /no/such/folder"),
    (["--data", "cifar10", "--data-dir", "/no/such/folder"], "could not download CIFAR-10 from https://"),
    (["--json", "/proc/forbidden/result.json"], "cannot write --json"),
])
def test_user_errors_exit_2_with_one_sentence(argv, phrase):
    result = run_main(*argv)
    assert_user_error(result, phrase)
    progress = re.compile(r"\[\d\d:\d\d:\d\d\] ")  # a batch job's phase lines ("model resnet50 built")
    assert len([line for line in result.stderr.strip().splitlines() if not progress.match(line)]) == 1


@pytest.mark.skipif(torch.cuda.is_available(), reason="this machine has CUDA")
def test_gpu_flag_without_cuda_exits_2():
    """The classic call as typed, in a process of its own: exit status 2, no traceback."""
    assert_user_error(run_cli(*"-n 200 -p --fp16 -s --model resnet50".split()), "CUDA is not available")
    assert_user_error(run_main(*"-n 200 -p --model resnet50".split()), "CUDA is not available")


def test_a_short_run_warms_up_for_half_of_its_steps_and_says_so(tmp_path):
    """-n 5 with the default warm-up of 10: 2 warm-up steps, 3 timed, and a note."""
    out = tmp_path / "r.json"
    result = run_main("--model", "squeezenet1_1", "-b", "4", "--no-progress", "--data", "synthetic", "-n", "5",
                      "--json", out)
    assert result.returncode == 0, result.stderr
    assert "main.py: note: the warm-up is 2 of the 5 steps (the default is 10" in result.stderr
    run = json.loads(out.read_text())["runs"][0]
    assert (run["warmup"], run["timed_steps"]) == (2, 3)
    assert "note" not in run_main("--model", "squeezenet1_1", "-b", "4", "--no-progress", "--data", "synthetic",
                                  "-n", "20").stderr


def test_subset_refused_without_allow_unverified(subset):
    result = run_main("--data", "cifar10", "--data-dir", subset, *FAST, "-n", "3")
    assert_user_error(result, "data_batch_1 does not match the official CIFAR-10 md5 sum", "--allow-unverified")


def test_auto_falls_back_to_synthetic_loudly(subset, tmp_path):
    out = tmp_path / "r.json"
    result = run_main("--data-dir", subset, *FAST, "-n", "3", "--json", out)
    assert result.returncode == 0, result.stderr
    assert "USING SYNTHETIC DATA" in result.stderr and "--allow-unverified" in result.stderr
    document = json.loads(out.read_text())
    assert document["data"]["name"] == "synthetic"
    assert document["runs"][0]["data"] == "synthetic" and document["runs"][0]["test_accuracy"] is None


def test_cpu_run_writes_a_complete_json(tmp_path, subset):
    out = tmp_path / "deep" / "folder" / "result.json"
    result = run_cli("-n", "6", *FAST, "--data-dir", subset, "--allow-unverified", "--json", out)
    assert result.returncode == 0, result.stderr
    assert "fp32" in result.stdout and "median ms" in result.stdout
    document = json.loads(out.read_text())
    assert document["schema"] == "ampbench.result/7"
    for key in ["python", "torch", "torchvision", "cuda", "cudnn", "device", "tf32", "hostname", "command"]:
        assert key in document["env"]
    assert document["config"]["steps"] == 6 and document["config"]["model"] == "resnet18"
    (run,) = document["runs"]
    assert run["mode"] == "fp32" and run["device"] == "cpu" and run["data"] == "cifar10"
    assert (run["batch_size"], run["steps"], run["warmup"], run["timed_steps"]) == (16, 6, 2, 4)
    assert run["tf32"] == {"matmul": False, "cudnn_conv": False}
    step = run["step_time_ms"]
    assert set(step) == {"median", "mean", "p10", "p90", "min", "max"}
    assert 0 < step["min"] <= step["p10"] <= step["median"] <= step["p90"] <= step["max"]
    assert run["images_per_sec"] == pytest.approx(16 * 1000 / step["median"])
    assert 0 <= run["data_time_ms"]["median"] < step["median"]
    assert run["peak_memory_bytes"] > 0 and len(run["loss_curve"]) == 6
    assert run["warmup_peak_memory_bytes"] > 0 and run["peak_reserved_bytes"] is None  # CUDA only
    assert run["optimizer_impl"] == document["config"]["optimizer_impl"] == "fused"
    assert run["final_loss"] == run["loss_curve"][-1]
    assert run["skipped_steps"] == 0 and run["final_loss_scale"] is None
    assert 0 <= run["test_accuracy"] <= 1 and run["wall_time_s"] > 0
    assert not list(out.parent.glob(".*tmp")), "no temporary file may be left behind"


@pytest.mark.parametrize("flags, mode, scale", [
    (["--fp16", "-s"], "amp-fp16", True),
    (["--fp16"], "amp-fp16-noscale", False),
    (["--bf16"], "amp-bf16", False),
    ([], "fp32", False),
])
def test_precision_flags_pick_the_mode(tmp_path, flags, mode, scale):
    out = tmp_path / "r.json"
    # A gentle --lr: at 0.1, FP16 without loss scaling overflows at step 3 under torch 2.3.1. The
    # classic flags in a process of their own (a warning shows once per process); the others here.
    run = run_cli if flags == ["--fp16", "-s"] else run_main
    result = run("-n", "3", "--warmup", "1", "--model", "squeezenet1_1", "-b", "4", "--data", "synthetic",
                 "--lr", "0.01", "--no-progress", "--allow-slow-fp16", *flags, "--json", out)
    assert result.returncode == 0, result.stderr
    assert "DeprecationWarning" not in result.stderr and "FutureWarning" not in result.stderr
    (run,) = json.loads(out.read_text())["runs"]
    assert run["mode"] == mode
    assert (run["final_loss_scale"] is not None) == scale
    assert run["tf32"] == {"matmul": False, "cudnn_conv": False}


def test_loss_scaling_with_bf16_warns_and_is_ignored(tmp_path):
    out = tmp_path / "r.json"
    result = run_main("-n", "2", "--warmup", "1", "--model", "squeezenet1_1", "-b", "4", "--data", "synthetic",
                      "--bf16", "-s", "--json", out)
    assert result.returncode == 0
    assert "-s/--loss_scaling is ignored with --bf16" in result.stderr
    assert json.loads(out.read_text())["runs"][0]["final_loss_scale"] is None


def test_list_models():
    result = run_main("--list-models")
    assert result.returncode == 0
    names = result.stdout.split()
    assert "resnet50" in names and "mobilenet_v3_small" in names and len(names) > 50
    assert "alexnet" not in names and "vit_b_16" not in names  # they cannot take 32x32 images
    assert "vit_t4" in names and "vit_s4" in names  # the CIFAR ViTs can
    assert "more cannot take 32x32 images (--image-size):\nmodel 'alexnet' needs images of at least 63x63" in \
        result.stderr
    at_224 = run_main("--list-models", "--image-size", "224").stdout.split()
    assert "vit_b_16" in at_224 and "alexnet" in at_224 and "vit_t4" in at_224 and "inception_v3" in at_224


@pytest.mark.long  # 76 s on the 2-core CPU; tests/cli/test_learning.py covers the default recipe there too
def test_run_on_the_real_subset_learns(subset, tmp_path):
    """150 steps of resnet18 (about 1.8 epochs of the subset) must clearly beat chance (10%)."""
    out = tmp_path / "r.json"
    result = run_cli("-n", "150", "-b", "64", "--lr", "0.05", "--model", "resnet18", "--stem", "imagenet",
                     "--data-dir", subset, "--allow-unverified", "--no-progress", "--json", out)
    assert result.returncode == 0, result.stderr
    run = json.loads(out.read_text())["runs"][0]
    assert run["data"] == "cifar10"
    assert run["test_accuracy"] > 0.22, run["test_accuracy"]
    assert run["final_loss"] < run["loss_curve"][0]


def test_compare_on_a_cpu_defaults_to_fp32_and_bfloat16():
    """float16 autocast is tens of times slower than FP32 on most CPUs; bfloat16 is not."""
    assert [mode.name for mode in RunConfig.build(compare=True).modes] == ["fp32", "amp-bf16"]
    assert [mode.name for mode in RunConfig.build(compare=True, gpu=True).modes] == ["fp32", "amp-fp16"]


@pytest.mark.parametrize("flags, mode", [
    (["--amp"], "amp-fp16"),
    (["--amp", "--amp-dtype", "bfloat16"], "amp-bf16"),
])
def test_timms_amp_flags_pick_the_mode(flags, mode):
    config = RunConfig.from_args(build_parser().parse_args(flags))
    assert [found.name for found in config.modes] == [mode]


@pytest.mark.parametrize("typed, suggested", [
    ("--loss-scaling", "--loss_scaling"), ("--channels_last", "--channels-last"), ("--ampp", "--amp"),
])
def test_a_mistyped_flag_gets_a_suggestion_in_one_line(typed, suggested):
    result = run_main(typed)
    assert result.returncode == 2 and f"did you mean {suggested}?" in result.stderr
    assert len(result.stderr.splitlines()) == 1, result.stderr


def test_amp_excludes_the_other_precision_flags():
    assert_user_error(run_main("--amp", "--bf16"), "--amp and --bf16 each choose a precision mode")


def test_a_single_mode_table_has_no_comparison_columns():
    result = run_main("--model", "squeezenet1_1", "-b", "4", "-n", "3", "--warmup", "1", "--no-progress", "--data",
                      "synthetic")
    assert result.returncode == 0, result.stderr
    assert "median ms" in result.stdout and "speedup" not in result.stdout and "mem ratio" not in result.stdout


def test_check_flags_checks_and_exits_without_training():
    checked = run_main("--modes", "fp32,amp-bf16", "--data", "synthetic", "--check-flags")
    assert checked.returncode == 0 and checked.stdout == "" and checked.stderr == ""
    assert_user_error(run_main("--modes", "AMP-BF16", "--check-flags"), "unknown precision mode 'AMP-BF16'")


@pytest.mark.parametrize("argv, phrase", [
    (["-m", "resnet51"], "unknown model 'resnet51': did you mean"),
    (["-m", "resnet18", "--modes", "fp8", "--fp8-emulate"], "has no nn.Linear layer that FP8 can run"),
    (["--tf32"], "mode tf32 only applies to CUDA GPUs"),
    (["--fp16", "-s"], "this CPU has no fast float16 arithmetic"),
    (["-m", "resnet18", "--dropout", "0.1"], "model 'resnet18' has no dropout setting"),
    (["-m", "resnet18", "--stem", "imagenet", "-b", "1"], "so training needs a batch of at least 2"),
    (["--json", "OUT"], "is a folder; give a file path"),
    (["--json", "OUT/r.json", "--jsonl", "OUT/r.json"], "name the same file"),
])
def test_check_flags_refuses_what_a_run_refuses_before_its_first_step(argv, phrase, tmp_path, monkeypatch):
    """The run's own checks (utils/app.py's check_flags): the same sentence, and nothing written."""
    if "fp8" in argv:
        pytest.importorskip("torchao")
    from utils.training import cpu_arithmetic
    monkeypatch.setattr(cpu_arithmetic, "cpu_flags", lambda: [])  # a CPU without fast float16 or bfloat16
    argv = [str(tmp_path) if word == "OUT" else word.replace("OUT", str(tmp_path)) for word in argv]
    checked = run_main(*argv, "--data", "synthetic", "--check-flags")
    assert_user_error(checked, phrase)
    assert list(tmp_path.iterdir()) == []
    ran = run_main(*argv, "--data", "synthetic", "-n", "2", "--warmup", "1", "--no-progress")
    assert ran.returncode == 2 and ran.stderr.splitlines()[-1] == checked.stderr.splitlines()[-1]
