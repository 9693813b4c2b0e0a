"""The spellings kept for old scripts (utils/spellings.py): each runs exactly as its current
spelling, every refusal names the spelling typed, and -h lists them all."""
import pytest

from conftest import assert_user_error, run_main
from main import build_parser
from utils import spellings
from utils.config import RunConfig


def config_of(line):
    return RunConfig.from_args(build_parser().parse_args(line.split()))


@pytest.mark.parametrize("earlier", spellings.EARLIER, ids=[earlier.typed for earlier in spellings.EARLIER])
def test_an_earlier_spelling_runs_as_its_current_one(earlier):
    """The same record, modes and warnings as the current spelling (an -s alone adds a warning)."""
    typed, current = (line.replace(" N", " 3") + " -n 8" for line in (earlier.typed, earlier.current))
    if current.startswith("-s"):  # --loss_scaling is -s, which has no meaning alone
        typed, current = "--fp16 " + typed, "--fp16 " + current
    old, new = config_of(typed), config_of(current)
    assert old.record() == new.record()
    assert (old.modes, old.warnings, old.command) == (new.modes, new.warnings, new.command)


def test_the_tutorials_call_is_amp_fp16_and_keeps_its_spelling_for_messages():
    config = config_of("-n 200 -p --fp16 -s --model resnet50")
    assert [mode.name for mode in config.modes] == ["amp-fp16"] and config.precision.gpu
    assert config.flag("modes", "--modes") == "--fp16 -s"
    assert config.command == ("-n", "200", "-p", "--modes", "amp-fp16", "--model", "resnet50")


def test_the_command_in_current_spellings_keeps_the_order_typed():
    """The resume line's words: renamed flags renamed in their own form, a default's switch
    dropped, --modes where the first precision spelling stood, the words after -- as typed."""
    config = config_of("-n 5 --download -b 3 --warmup=2 --fp16 --lr 0.1 -s")
    assert config.command == ("-n", "5", "-b", "3", "--timing-warmup=2", "--modes", "amp-fp16", "--lr", "0.1")


@pytest.mark.parametrize("typed, mode, warned", [
    ("--bf16 -s", "amp-bf16", "-s/--loss_scaling is ignored with --bf16"),
    ("--amp --amp-dtype bfloat16 --loss_scaling", "amp-bf16", "ignored with --amp --amp-dtype bfloat16"),
    ("--amp -s", "amp-fp16", "-s/--loss_scaling adds nothing to --amp"),
    ("--amp --amp-dtype=float16", "amp-fp16", None),
    ("-s", "fp32", "-s/--loss_scaling is ignored without --fp16"),
    ("--tf32 -s", "tf32", "-s/--loss_scaling is ignored without --fp16"),
])
def test_an_s_that_scales_nothing_more_is_said_once(typed, mode, warned):
    config = config_of(typed)
    assert [found.name for found in config.modes] == [mode]
    assert list(config.warnings) == ([] if warned is None else [pytest.approx(config.warnings[0])])
    assert warned is None or warned in config.warnings[0]


@pytest.mark.parametrize("argv, said", [
    (["--fp16", "-s", "--compare"], "--compare runs the modes listed in --modes; drop --fp16 -s and name the modes"),
    (["--bf16", "--modes=fp32,amp-fp16"], "--bf16 and --modes fp32,amp-fp16 both name the precision mode (--bf16 is "
     "--modes amp-bf16 in its earlier spelling); give the modes once, with --modes."),
    (["--fp16", "-s", "--modes", "fp32"], "--fp16 -s and --modes fp32 both name the precision mode"),
    (["--tf32", "--compa"], "unrecognized arguments: --compa; did you mean --compare?"),  # no prefix is taken
    (["--timing", "3"], "unrecognized arguments: --timing 3; did you mean --timing-warmup?"),
    (["--warmup", "2", "--timing-warmup", "3"], "--warmup and --timing-warmup are one setting (--warmup is its earlier "
     "spelling), given twice; give it once, as --timing-warmup."),
    (["--lr-warmup-steps=3", "--warmup-lr-steps", "2"], "--warmup-lr-steps and --lr-warmup-steps are one setting"),
    (["--fp16", "--bf16"], "--fp16 and --bf16 each choose a precision mode; choose one"),
    (["--tf32", "--fp16", "-s"], "--tf32 is the FP32 mode with TF32 tensor cores, and --fp16 chooses"),
    (["--amp-dtype", "bfloat16"], "--amp-dtype sets the dtype of --amp, which is not given"),
    (["--advise", "--loss_scaling"], "drop --loss_scaling (the advice"),
    (["--advise", "--amp", "--amp-dtype", "bfloat16"], "drop --amp --amp-dtype bfloat16 (the advice"),
    (["--advise", "--warmup", "3"], "drop --warmup (the advice"),
    (["--warmup", "x"], "argument --warmup: must be zero or a positive integer"),
    (["--warmup-lr-steps=-1"], "argument --warmup-lr-steps: must be zero or a positive integer"),
    (["--amp", "--amp-dtype", "half"], "argument --amp-dtype: invalid choice: 'half' (choose from 'float16'"),
    (["--amp", "--amp-dtype"], "argument --amp-dtype: expected one argument"),
    (["--bf16=yes"], "argument --bf16: ignored explicit argument 'yes'"),
    (["--bf"], "did you mean --bf16?"),
    (["-ps"], "-s is read only on its own, not joined to other short flags (-ps); give it apart: -p -s."),
])
def test_a_refusal_names_the_earlier_spelling_as_typed(argv, said):
    result = run_main(*argv)
    assert_user_error(result, said)
    assert len(result.stderr.splitlines()) == 1, result.stderr


def test_help_lists_every_earlier_spelling_with_its_current_one():
    text = " ".join(build_parser().format_help().split())  # argparse wraps the lines
    assert spellings.TITLE in text
    for earlier in spellings.EARLIER:
        assert f"{earlier.typed} {earlier.current or '(nothing)'}: {earlier.origin}" in text
