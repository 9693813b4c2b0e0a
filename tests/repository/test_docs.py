"""README is a front page a newcomer reads in minutes; docs/ holds the rest, complete and
linked: every flag of -h, every field of a run's record, every link resolving."""
import re
import subprocess
import sys
from dataclasses import fields

import pytest

from conftest import ROOT
from main import build_parser
from utils.results.record import RunRecord

PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
LINK = re.compile(r"\]\(([^)\s]+)\)")


def anchor(heading):
    """GitHub's anchor for a Markdown heading."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def anchors(page):
    return {anchor(line.lstrip("#")) for line in page.read_text().splitlines() if line.startswith("#")}


def test_the_readme_is_a_front_page():
    lines = (ROOT / "README.md").read_text().splitlines()
    assert len(lines) < 250
    assert lines[2] == "```bash" and lines[3].startswith("python3 -m venv .venv") and "pytest" in lines[4]


def test_every_flag_of_the_help_is_documented():
    documented = "\n".join(page.read_text() for page in (ROOT / "docs").glob("*.md"))
    flags = {flag for action in build_parser()._actions for flag in action.option_strings
             if flag.startswith("--") and flag != "--help"}
    missing = sorted(flag for flag in flags if not re.search(re.escape(flag) + r"(?![\w-])", documented))
    assert not missing


def test_the_flags_page_is_what_the_flag_table_says():
    """docs/flags.md's tables are written from utils/flags.py, which -h shows too: when a flag
    changes, the page must be regenerated (python docs/generate_flags.py)."""
    checked = subprocess.run([sys.executable, "docs/generate_flags.py", "--check"], cwd=ROOT,
                             capture_output=True, text=True)
    assert checked.returncode == 0, checked.stderr


def test_every_run_field_is_in_the_schema_page():
    page = (ROOT / "docs" / "results-schema.md").read_text()
    missing = [f.name for f in fields(RunRecord) if f"`{f.name}`" not in page]
    assert not missing


@pytest.mark.parametrize("page", PAGES, ids=lambda page: page.name)
def test_every_link_resolves(page):
    for target in LINK.findall(page.read_text()):
        if re.match(r"[a-z]+://", target):
            continue
        path, _, fragment = target.partition("#")
        linked = (page.parent / path).resolve() if path else page
        assert linked.exists(), f"{page.name}: {target}"
        if fragment:
            assert fragment in anchors(linked), f"{page.name}: {target}"


def test_the_container_recipe_installs_what_the_container_lacks_and_never_torch():
    """README's recipe for a site's container installs requirements-container.txt, which names
    no torch package; requirements.txt adds the pinned torch to it (one list of the rest).
    .ci/run's compat stage runs the same install on old torch releases and checks torch stays."""
    readme = (ROOT / "README.md").read_text()
    assert "singularity exec --nv pytorch_24.04-py3.sif python -m pip install --user -r requirements-container.txt" \
        in readme
    needs = [line.split("#")[0].strip() for line in (ROOT / "requirements-container.txt").read_text().splitlines()]
    assert [need for need in needs if need] == ["numpy", "tqdm"]
    assert "-r requirements-container.txt" in (ROOT / "requirements.txt").read_text().splitlines()
    assert "pip install -q -r requirements-container.txt" in (ROOT / ".ci" / "run").read_text()


def layout_block(heading):
    """The text diagram under `heading` in docs/layout.md."""
    page = (ROOT / "docs" / "layout.md").read_text()
    return page.split(heading, 1)[1].split("```text\n", 1)[1].split("```", 1)[0]


def defines(path, name):
    """Whether the file at `path` (from the repository root) defines a function or class `name`."""
    return re.search(rf"^\s*(?:def|class) {name}\b", (ROOT / path).read_text(), re.MULTILINE) is not None


def test_the_call_path_in_the_layout_page_names_where_each_function_is():
    steps = re.findall(r"^(\S+)\s+(\w+)\(\)", layout_block("## The call path of a run"), re.MULTILINE)
    assert len(steps) >= 10
    for path, name in steps:
        assert defines(path, name), f"{path} defines no {name}()"


def test_the_data_path_in_the_layout_page_names_where_each_type_is():
    """Each row of the path of a run's data (a line that is not indented) starts with a file and
    the type or function it defines: RunConfig to the files written and read back."""
    rows = [line for line in layout_block("## The path of a run's data").splitlines() if line and line[0] != " "]
    steps = [re.match(r"(\S+\.py)\s+(\w+)(?:\(\))?\s", row) for row in rows]
    assert len(steps) >= 15 and all(steps), rows
    for path, name in (step.groups() for step in steps):
        assert defines(path, name), f"{path} defines no {name}"
    names = [step.group(2) for step in steps]
    assert names[0] == "RunConfig" and names.index("RunRecord") < names.index("make_document") < names.index("upgrade")


def test_the_sample_outputs_in_docs_are_what_the_code_prints():
    """Each sample block is `python -m utils.report` of a committed result file: when the printed
    summary changes, the sample must be regenerated (python docs/samples/generate.py)."""
    checked = subprocess.run([sys.executable, "docs/samples/generate.py", "--check"], cwd=ROOT,
                             capture_output=True, text=True)
    assert checked.returncode == 0, checked.stderr
    pages = "\n".join(page.read_text() for page in PAGES)
    for sample in (ROOT / "docs" / "samples").glob("*.json"):
        assert pages.count(f"<!-- sample: {sample.stem} -->") == 1, sample.name
