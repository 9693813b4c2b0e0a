"""Every program of the project refuses alike: a bad flag value ends in `name: error: one
sentence` and exit 2, never a traceback (utils/console.py's Parser, refused() and run()); and
README's set-up installs them: each program of pyproject.toml's [project.scripts] is a command,
and the scripts run by their path, from any folder, with no PYTHONPATH."""
import os
import signal
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

from conftest import ROOT

# program: (how it is run, a bad flag value, the name its refusals start with)
PROGRAMS = {
    "main.py": (["main.py"], ["--steps", "0"], "main.py"),
    "utils/report.py": (["-m", "utils.report"], ["docs/samples/why.json", "--plot", "table.txt"], "utils.report"),
    "utils/compat.py": (["-m", "utils.compat"], ["--gpus", "1"], "utils.compat"),
    "utils/explain/fp8_predict.py": (["-m", "utils.explain.fp8_predict"], ["--gpu", "a100-40gb"], "fp8_predict"),
    "benchmarks/fp8_sweep.py": (["benchmarks/fp8_sweep.py"], ["--widths", "65"], "fp8_sweep.py"),
    "cluster/bundle.py": (["cluster/bundle.py"], ["DIR", "--budget", "0"], "bundle.py"),
    "utils/data/shard_writer.py": (["-m", "utils.data.shard_writer"], ["DIR", "OUT", "--shard-images", "0"],
                                   "shard_writer"),
    "benchmarks/scaling.py": (["benchmarks/scaling.py"], ["--out", "study", "--rounds", "many"], "scaling.py"),
    "benchmarks/overhead.py": (["benchmarks/overhead.py"], ["--modes", "fp64"], "overhead.py"),
    "benchmarks/loader.py": (["benchmarks/loader.py"], ["--batches", "0"], "loader.py"),
    "benchmarks/streaming.py": (["benchmarks/streaming.py"], ["--images", "0"], "streaming.py"),
    "benchmarks/lease.py": (["benchmarks/lease.py"], ["--minutes", "many"], "lease.py"),
    "benchmarks/diagnostics_overhead.py": (["benchmarks/diagnostics_overhead.py"], ["--rounds", "-1"],
                                           "diagnostics_overhead.py"),
    "docs/generate_flags.py": (["docs/generate_flags.py"], ["--check=yes"], "generate_flags.py"),
    "docs/samples/generate.py": (["docs/samples/generate.py"], ["--check=yes"], "generate.py"),
    "benchmarks/suite/generate_flops.py": (["-m", "benchmarks.suite.generate_flops"], ["--check=yes"],
                                           "generate_flops.py"),
}
# The GPU suite's refusals are driven by tests/benchmarks/test_gpu_suite_budget.py and its neighbours.
ELSEWHERE = {"benchmarks/gpu_suite.py"}
SUITE_REFUSAL = (["--budget", "0"], "gpu_suite.py")


def test_every_program_of_the_project_is_here():
    programs = {path.relative_to(ROOT).as_posix() for folder in ("", "utils", "benchmarks", "cluster", "docs")
                for path in (ROOT / folder).glob("**/*.py" if folder else "*.py")
                if 'if __name__ == "__main__":' in path.read_text()}
    assert programs == set(PROGRAMS) | ELSEWHERE


@pytest.mark.parametrize("program", sorted(PROGRAMS))
def test_a_bad_flag_value_is_one_sentence_and_exit_2(program, tmp_path):
    run, bad, name = PROGRAMS[program]
    result = subprocess.run([sys.executable, *run, *[str(tmp_path / word) if word in ("DIR", "study") else word
                                                      for word in bad]],
                            cwd=ROOT, capture_output=True, text=True, timeout=120)
    lines = result.stderr.strip().splitlines()
    assert result.returncode == 2 and "Traceback" not in result.stderr, result.stderr
    assert len(lines) == 1 and lines[0].startswith(f"{name}: error: ") and lines[0].endswith("."), result.stderr
    assert result.stdout == ""


WITHOUT_TORCH = ("import runpy, sys; sys.modules['torch'] = sys.modules['torchvision'] = None; "
                 "sys.argv = sys.argv[1:]; runpy.{how}(sys.argv[0], run_name='__main__')")


@pytest.mark.parametrize("program", sorted(set(PROGRAMS) | ELSEWHERE))
def test_each_program_and_command_prints_its_help_without_torch(program):
    """Where `import torch` fails (a login node's Python): -h needs none, so each installed command
    (one of these programs) says what it does before torch is installed."""
    run = PROGRAMS[program][0] if program in PROGRAMS else [program]
    how, target = ("run_module", run[1:]) if run[0] == "-m" else ("run_path", run)
    result = subprocess.run([sys.executable, "-c", WITHOUT_TORCH.format(how=how), *target, "-h"], cwd=ROOT,
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 0 and result.stdout.startswith("usage: ") and result.stderr == "", result.stderr


@pytest.mark.parametrize("program", sorted(PROGRAMS))
def test_help_that_cannot_be_printed_is_said_with_exit_1(program):
    """A standard output on a full disk (`> file`) loses what a program prints: it says so."""
    run, _, name = PROGRAMS[program]
    with open("/dev/full", "w") as full:  # Linux's device that is always full
        result = subprocess.run([sys.executable, *run, "-h"], cwd=ROOT, stdout=full, stderr=subprocess.PIPE, text=True,
                                timeout=120)
    assert result.returncode == 1 and result.stderr == (
        f"{name}: error: could not write the standard output (No space left on device), so what it printed there "
        "is cut short.\n"), result.stderr


@pytest.mark.parametrize("number", [signal.SIGINT, signal.SIGTERM])
def test_a_stop_signal_unwinds_the_program_and_ends_in_one_line(number):
    """Ctrl-C or a scheduler's SIGTERM that a program does not catch itself runs its clean-ups
    (a bundle's hidden folder goes) and ends with 128 + the signal's number."""
    program = ("import os, sys, time\nfrom utils import console\n"
               "def main():\n"
               "    try:\n"
               f"        os.kill(os.getpid(), {int(number)})\n"
               "        time.sleep(60)\n"
               "    finally:\n"
               "        print('cleaned up')\n"
               "sys.exit(console.run('program.py', main))\n")
    result = subprocess.run([sys.executable, "-c", program], cwd=ROOT, capture_output=True, text=True, timeout=60,
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    assert (result.returncode, result.stdout, result.stderr) == (
        128 + number, "cleaned up\n", f"program.py: stopped by {signal.Signals(number).name}.\n")


def installed_commands():
    """pyproject.toml's [project.scripts]: {command: the file of the program it runs}."""
    tomllib = pytest.importorskip("tomllib")  # Python 3.11 and later
    with open(ROOT / "pyproject.toml", "rb") as f:
        scripts = tomllib.load(f)["project"]["scripts"]
    return {command: target.split(":")[0].replace(".", "/") + ".py" for command, target in scripts.items()}


def without_pythonpath():
    """The environment without the PYTHONPATH tests/conftest.py sets: what the install alone finds."""
    return {name: value for name, value in os.environ.items() if name != "PYTHONPATH"}


def installed_checkout(tmp_path):
    """This checkout, as the running Python's install finds it from another folder; a test of the
    install skips where the install is another checkout's (a venv that several share)."""
    found = subprocess.run([sys.executable, "-c", "import utils; print(utils.__file__)"], cwd=tmp_path,
                           env=without_pythonpath(), capture_output=True, text=True, timeout=60)
    assert found.returncode == 0, (f"ampbench is not installed in {sys.prefix}: README's set-up installs it "
                                   f"(python -m pip install -e . in the checkout); {found.stderr.strip()[-200:]}")
    installed = Path(found.stdout.strip()).parents[1]
    if installed != ROOT:
        pytest.skip(f"{sys.prefix} has the checkout {installed} installed, not this one ({ROOT})")


def test_the_commands_are_the_run_the_report_the_predictor_the_suite_the_bundle_and_the_shard_writer():
    """The adviser is the run's --advise, not a command of its own."""
    commands = installed_commands()
    assert set(commands.values()) == {"main.py", "utils/report.py", "utils/explain/fp8_predict.py",
                                      "benchmarks/gpu_suite.py", "cluster/bundle.py", "utils/data/shard_writer.py"}
    assert set(commands.values()) <= set(PROGRAMS) | ELSEWHERE and "ampbench" in commands


@pytest.mark.whole_runs
def test_each_installed_command_is_its_program_from_any_folder(tmp_path):
    """README's set-up puts each command on PATH: from a folder that is not the checkout and with
    no PYTHONPATH, a bad flag value is refused as its program refuses it."""
    installed_checkout(tmp_path)
    scripts = Path(sysconfig.get_path("scripts"))
    for command, program in installed_commands().items():
        bad, name = SUITE_REFUSAL if program in ELSEWHERE else PROGRAMS[program][1:]
        assert (scripts / command).is_file(), f"{command} is not in {scripts}: install the checkout again"
        result = subprocess.run([str(scripts / command), *[str(tmp_path / word) if word == "DIR" else word
                                                           for word in bad]],
                                cwd=tmp_path, env=without_pythonpath(), capture_output=True, text=True, timeout=120)
        assert result.returncode == 2 and result.stderr.startswith(f"{name}: error: "), (command, result.stderr)
        assert "Traceback" not in result.stderr and len(result.stderr.splitlines()) == 1, (command, result.stderr)
        usage = subprocess.run([str(scripts / command), "-h"], cwd=tmp_path, env=without_pythonpath(),
                               capture_output=True, text=True, timeout=120)
        assert usage.returncode == 0 and usage.stdout.startswith(f"usage: {command} "), (command, usage.stdout[:200])


@pytest.mark.parametrize("program", sorted(set(PROGRAMS) | ELSEWHERE))
def test_each_program_runs_as_the_docs_type_it_once_installed(program, tmp_path):
    """`python benchmarks/gpu_suite.py`, `python -m utils.report`, ... from the checkout, with no
    PYTHONPATH and no path set up by the program itself: the install finds the checkout's packages."""
    installed_checkout(tmp_path)
    run = PROGRAMS[program][0] if program in PROGRAMS else [program]
    result = subprocess.run([sys.executable, *run, "-h"], cwd=ROOT, env=without_pythonpath(), capture_output=True,
                            text=True, timeout=120)
    assert result.returncode == 0 and result.stdout.startswith("usage: "), result.stderr


@pytest.mark.parametrize("program", ["benchmarks/gpu_suite.py", "benchmarks/scaling.py", "cluster/bundle.py"])
def test_a_program_run_from_a_checkout_whose_code_this_python_does_not_import_is_refused(tmp_path, program):
    """Another checkout's script (as a second clone beside the installed one holds it) would import
    the installed checkout's packages: refused before it measures anything, naming both."""
    other = tmp_path / "other"
    for name in (program, "utils/provenance.py"):
        (other / name).parent.mkdir(parents=True, exist_ok=True)
        (other / name).write_bytes((ROOT / name).read_bytes())
    result = subprocess.run([sys.executable, str(other / program), "-h"], cwd=tmp_path, capture_output=True,
                            text=True, timeout=120)
    name = Path(program).name
    assert result.returncode == 2 and result.stdout == "", result.stderr
    assert result.stderr.startswith(f"{name}: error: {other / program} is in the checkout {other}, but this Python "
                                    f"imports ampbench's code from {ROOT}"), result.stderr
    assert f"run `pip install -e .` in {other} to use its code" in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1 and "Traceback" not in result.stderr
