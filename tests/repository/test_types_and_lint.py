"""The annotations are claims and the code has one style: mypy and ruff, pinned in
requirements-test.txt and set in pyproject.toml, report nothing over the whole checkout."""
import subprocess
import sys

from conftest import ROOT


def checker(*command):
    """Run `python -m <command>` from the checkout's root, where pyproject.toml's settings apply."""
    return subprocess.run([sys.executable, "-m", *command], cwd=ROOT, capture_output=True, text=True, timeout=600)


def test_mypy_finds_no_error_in_the_programs():
    result = checker("mypy")  # the files pyproject.toml names: main.py, models, utils, benchmarks, cluster
    report = result.stdout + result.stderr
    assert result.returncode == 0 and result.stdout.startswith("Success: no issues found"), report


def test_ruff_finds_nothing_in_the_checkout():
    result = checker("ruff", "check", "--no-cache", ".")
    assert result.returncode == 0 and "All checks passed!" in result.stdout, result.stdout + result.stderr
