"""The command lines of --advise: every flag of main.py that --advise does not own reaches each
phase as main.py parses it back (so a setting added to a section passes through unnamed), the
advised command switches the levers, and the batch-job lines carry the user's flags."""
import pytest

from conftest import ROOT
from main import build_parser
from utils import config
from utils.advice import commands


def other_value(setting, default):
    """A value of `setting` other than its default, that main.py's parser takes."""
    if isinstance(default, bool):
        return not default
    if setting.flag.choices:
        return next(choice for choice in setting.flag.choices if choice != default)
    allowed = setting.flag.range
    if allowed is not None:
        return next(allowed.kind(value) for value in (3, 0.25, 64) if allowed.holds(value) and value != default)
    return "some-value"


PASSED = [setting for key, setting in config.SETTINGS.items() if key not in config.NOT_PASSED]


@pytest.mark.parametrize("setting", PASSED, ids=lambda setting: setting.name)
def test_every_flag_the_adviser_does_not_own_reaches_the_phases_as_main_py_reads_it(setting):
    defaults = config.defaults()
    value = other_value(setting, defaults[setting.key])
    options = commands.user_options(config.command_line(**{setting.key: value}))
    parsed = vars(build_parser().parse_args(options))
    assert parsed[setting.key] == value, options
    assert {name for name, found in parsed.items() if name in defaults and found != defaults[name]} == {setting.key}
    # always named, so that a command says what it trains: a --model-factory in -m's place
    assert ("--model" in options) == (setting.key != "model_factory") and "--batch-size" in options


def test_the_length_reaches_the_accuracy_check_alone():
    arguments = config.command_line(steps=300, model="resnet18")
    speed = commands.phase_command(arguments, ["--modes", "fp32"], False, "a.json")
    check = commands.phase_command(arguments, ["--modes", "fp32,amp-bf16", "--seeds", "3"], True, "b.json")
    assert "--steps" not in speed and check[:2] == ["--steps", "300"]
    assert speed[-2:] == ["--json", "a.json"] and check[-2:] == ["--json", "b.json"]


def test_the_advised_command_switches_a_lever_off_as_well_as_on():
    arguments = config.command_line(model="resnet50", batch_size=256, gpu=True, channels_last=True)
    assert commands.advised_command(arguments, "amp-bf16", {"channels_last": False}) == [
        "python", "main.py", "--batch-size", "256", "--model", "resnet50", "--gpu", "--modes", "amp-bf16"]  # no layout
    assert commands.advised_command(arguments, "fp8", {"optimizer_impl": "foreach"})[-6:] == [
        "--optimizer-impl", "foreach", "--gpu", "--channels-last", "--modes", "fp8"]


def test_the_batch_job_lines_run_a_job_per_seed_with_the_users_flags():
    arguments = config.command_line(model="vit_s4", batch_size=128, image_size=64, seed=5)
    lines = commands.job_lines(arguments, ("fp32", "amp-bf16"), 3, 500)
    assert lines == {scheduler: f"for seed in 5 6 7; do MODEL=vit_s4 BATCH=128 STEPS=500 MODES=fp32,amp-bf16 NODES=1 "
                                f"GPUS_PER_NODE=1 EXTRA_ARGS=\"--seed $seed --image-size 64\" {submit}; done"
                     for scheduler, submit in commands.JOB_SUBMIT.items()}
    elsewhere = commands.job_lines(commands.with_settings(arguments, {"data_dir": "my data"}), ("fp32",), 3, 10)
    assert "CIFAR10_DIR='my data' NODES=1" in elsewhere["pbs"]  # where the job scripts read the data from
    recipe = {"stem": "imagenet", "dropout": 0.1, "lr": 0.1, "optimizer": "sgd", "clip_grad": 1.0}
    assert commands.job_lines(commands.with_settings(arguments, recipe), ("fp32",), 3, 10) is not None
    quoted = commands.with_settings(arguments, {"label_smoothing": 0.1, "lr_schedule": "constant"})
    assert "--lr-schedule constant" in commands.job_lines(quoted, ("fp32",), 3, 10)["slurm"]


def test_your_model_and_images_reach_every_phase_and_the_advised_command_but_no_batch_job(tmp_path):
    """--model-factory and --data imagefolder are plain run options: each phase and the command
    advised carry them (the factory in -m's place, from a results file too); the job scripts train
    a torchvision MODEL on CIFAR-10, so no batch-job line is offered for them."""
    arguments = config.command_line(model_factory="mymodels:net", data="imagefolder", data_dir="flowers", num_classes=5,
                          batch_size=64)
    phase = commands.phase_command(arguments, ["--modes", "fp32,amp-bf16"], False, "a.json")
    assert phase[:10] == ["--batch-size", "64", "--model-factory", "mymodels:net", "--data", "imagefolder",
                          "--data-dir", "flowers", "--num-classes", "5"] and "--model" not in phase
    assert commands.advised_command(arguments, "amp-bf16", {})[-2:] == ["--modes", "amp-bf16"]
    assert commands.job_lines(arguments, ("fp32", "amp-bf16"), 3, 100) is None
    assert commands.job_lines(commands.with_settings(arguments, {"model_factory": None}), ("fp32",), 3, 100) is None
    record = {"model": "mymodels:net", "model_factory": "mymodels:net", "batch_size": 64, "data": "imagefolder",
              "data_dir": "flowers"}
    saved = commands.from_results_command(record, True, "amp-bf16", {})
    assert saved == ["python", "main.py", "--batch-size", "64", "--model-factory", "mymodels:net", "--gpu",
                     "--data", "imagefolder", "--data-dir", "flowers", "--modes", "amp-bf16"]


def test_the_advised_command_carries_the_pythonpath_your_factorys_module_needs(tmp_path, monkeypatch):
    """A --model-factory module found in the working directory or on PYTHONPATH: the lines that
    train or measure again name its folder, absolute, as a batch job changes its directory."""
    (tmp_path / "mine").mkdir()
    (tmp_path / "mine" / "nets.py").write_text("def build(num_classes):\n    pass\n")
    (tmp_path / "pkg" / "sub").mkdir(parents=True)
    (tmp_path / "pkg" / "__init__.py").write_text("")
    (tmp_path / "pkg" / "sub" / "__init__.py").write_text("")
    (tmp_path / "pkg" / "sub" / "nets.py").write_text("def build(num_classes):\n    pass\n")
    monkeypatch.chdir(tmp_path / "mine")
    monkeypatch.delenv("PYTHONPATH", raising=False)
    arguments = config.command_line(model_factory="nets:build", batch_size=8)
    assert commands.import_environment(arguments) == {"PYTHONPATH": str((tmp_path / "mine").resolve())}
    line = commands.shell_line(commands.advised_command(arguments, "amp-bf16", {}),
                               commands.import_environment(arguments))
    assert line.startswith(f"PYTHONPATH={tmp_path / 'mine'} python main.py --batch-size 8 --model-factory nets:build")
    assert commands.accuracy_lines(arguments, "amp-bf16", 3, 200)["here"].startswith(f"PYTHONPATH={tmp_path / 'mine'} ")
    monkeypatch.chdir(ROOT)
    monkeypatch.setenv("PYTHONPATH", str(tmp_path))
    assert commands.import_environment(config.command_line(model_factory="pkg.sub.nets:build")) == \
        {"PYTHONPATH": str(tmp_path.resolve())}
    assert commands.import_environment(config.command_line(model_factory="tests.cli.user_models:TinyNet")) == {}
    assert commands.import_environment(config.command_line(model="resnet18")) == {}


def test_the_settings_left_out_of_extra_args_are_those_the_job_scripts_type_themselves():
    """cluster/stages.sh's job_flags types -n, -p (or --allow-slow-fp16 on the CPU), --model, -b,
    --modes, --data and --data-dir; a job line types each seed, and STEPS replaces --epochs."""
    import re

    text = (ROOT / "cluster" / "stages.sh").read_text()
    start = text.index("job_flags() {")
    typed = set(re.findall(r"(?<![\w$])(--?[a-z][a-z-]*)", text[start:text.index("\n}", start)]))
    typed |= set(re.findall(r"gpu_flags=\((-[^)]*)\)", text))
    keys = {key for key, setting in config.SETTINGS.items() if typed & set(setting.flag.names)}
    assert keys - set(config.NOT_PASSED) - {"allow_slow_fp16"} == set(config.JOB_KEYS) - {"seed", "epochs"}
