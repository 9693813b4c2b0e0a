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


# What has or has not run on a GPU is one generated table (docs/benchmarks.md); a sentence elsewhere
# that says so drifts the day a suite runs. These phrases say it; CLAIMS lists the few sentences
# that may, each with the check against results/ that keeps it true.
RAN_OR_NOT = re.compile(r"not yet|yet to|still to be measured|ha(s|ve) not (yet )?(been )?(run|measured)|next runs on a"
                        r"|(is|are) measured yet|ran once|unmeasured|not measured yet|ha(s|ve) run only",
                        re.IGNORECASE)
GENERATED = re.compile(r"<!-- gpu-(suite|coverage):begin.*?<!-- gpu-(suite|coverage):end -->", re.DOTALL)


def result_documents():
    """Every results document under results/ (runs and env), with its path."""
    import json

    for path in sorted((ROOT / "results").rglob("*.json")):
        document = json.loads(path.read_text())
        if isinstance(document, dict) and isinstance(document.get("runs"), list) and "env" in document:
            yield path, document


def no_multi_gpu_result():
    return not any(document["env"].get("world_size", 1) > 1 for _, document in result_documents())


def no_busy_share_beside_a_profile():
    return not any(run.get("gpu_busy") and run.get("profile") for _, document in result_documents()
                   for run in document["runs"])


CLAIMS = {
    "Multi-GPU figures are unmeasured: no machine with several GPUs has run the study yet.": no_multi_gpu_result,
    "How far the two agree on a GPU is not measured yet": no_busy_share_beside_a_profile,
}


def test_what_has_run_on_a_gpu_is_rendered_from_results():
    sys.path.insert(0, str(ROOT))
    from benchmarks.suite.render import COVERAGE_BEGIN, COVERAGE_END, coverage

    text = (ROOT / "docs" / "benchmarks.md").read_text()
    block = text[text.index(COVERAGE_BEGIN):text.index(COVERAGE_END) + len(COVERAGE_END)]
    assert block == coverage(ROOT / "results", ROOT / "docs"), \
        "regenerate it: python benchmarks/gpu_suite.py --render results/<device>/<date>"


def test_no_sentence_says_what_has_or_has_not_run_on_a_gpu_but_the_generated_table():
    found = []
    for page in PAGES:
        text = GENERATED.sub("", page.read_text())
        for paragraph in text.split("\n\n"):
            sentence = " ".join(paragraph.split())
            if RAN_OR_NOT.search(sentence) and not any(claim in sentence for claim in CLAIMS):
                found.append(f"{page.relative_to(ROOT)}: {sentence[:160]}")
    assert not found, "say it in the generated table (docs/benchmarks.md#what-has-run-on-a-gpu), or add a " \
                      "checked claim:\n" + "\n".join(found)


@pytest.mark.parametrize("claim", sorted(CLAIMS))
def test_each_sentence_about_what_has_not_run_holds_against_results(claim):
    assert any(claim in " ".join(page.read_text().split()) for page in PAGES), "the claim left the docs: drop it here"
    assert CLAIMS[claim](), f"results/ now contradicts: {claim}"


def test_every_results_file_a_page_cites_exists():
    cited = {match for page in PAGES for match in re.findall(r"results/[\w.+-]+/[\w.-]+(?:/[\w.-]+)*",
                                                                GENERATED.sub("", page.read_text()))}
    missing = sorted(path for path in cited if "<" not in path and not (ROOT / path.rstrip(".")).exists())
    assert not missing
