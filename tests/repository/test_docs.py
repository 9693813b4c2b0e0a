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
    """docs/flags.md's tables are written from the settings (utils/config.py's sections' fields),
    which -h shows too: when a flag changes, the page must be regenerated (python docs/generate_flags.py)."""
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
    """README's recipe for a site's container installs requirements-container.txt: this checkout,
    editable, whose dependencies (pyproject.toml) name no torch package; requirements.txt adds the
    pinned torch to it (one list of the rest). .ci/run's compat stage runs the same install on old
    torch releases and checks torch stays."""
    tomllib = pytest.importorskip("tomllib")  # Python 3.11 and later
    readme = (ROOT / "README.md").read_text()
    assert "singularity exec --nv pytorch_24.04-py3.sif python -m pip install --user -r requirements-container.txt" \
        in readme
    needs = [line.split("#")[0].strip() for line in (ROOT / "requirements-container.txt").read_text().splitlines()]
    assert [need for need in needs if need] == ["-e ."]
    with open(ROOT / "pyproject.toml", "rb") as f:
        assert tomllib.load(f)["project"]["dependencies"] == ["numpy", "tqdm"]
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
    advice = (ROOT / "docs" / "advice.md").read_text()
    assert advice.count("<!-- table: committed-advice -->") == 1  # what --from says of every committed file
    assert advice.count("refused (2)") >= 8 and "| `NVIDIA-H200/2026-11-26/headline-resnet18.json` | unsteady (5) |" \
        in advice


# What has or has not run on a GPU, and every figure a GPU measured, are rendered from results/ by
# the GPU suite into blocks between markers: README's Results (gpu-suite), docs/benchmarks.md's
# table of what has run where (gpu-coverage) and the figures the other pages cite (gpu-figures,
# benchmarks/suite/docblocks.py). Text outside them drifts the day a suite runs: these checks find
# a sentence there that says what has or has not run on a GPU, or that types a GPU's figure.
RAN_OR_NOT = re.compile(r"not yet|yet to|still to be measured|ha(s|ve) not (yet )?(been )?(run|measured)|next runs on a"
                        r"|(is|are) measured yet|ran once|unmeasured|not measured yet|ha(s|ve) run only",
                        re.IGNORECASE)
# a run on a GPU said to have happened or not: in a sentence that names a GPU
NEVER_OR_DONE = re.compile(r"\b(never|not|has|have|had|was|were)\b( \w+){0,3} (run|ran|measured|benchmarked)\b",
                           re.IGNORECASE)
GPU_WORD = re.compile(r"\b(GPUs?|[ABHLV]\d{2,3}|GH200|GB200)\b")
# a figure a GPU measured, typed: a named GPU, a verb of measuring and a figure in one clause
DEVICE = re.compile(r"\b([ABHLV]\d{2,3}|GH200|GB200|RTX ?\w+)\b")
MEASURED = re.compile(r"\b(measured|ran|took|reached|peaked|held|gave|timed|showed|moved|scored)\b")
FIGURE = re.compile(r"(?<![\w.])\d[\d,]*(\.\d+)?\s?(x|%|ms|s|img/s|GiB|MiB|GB|W|J|TFLOP/s)(?![\w/])"
                    r"|(?<![\w.])\d+\.\d+(?![\w.])")
GENERATED = re.compile(r"<!-- gpu-(suite|coverage|figures):begin.*?<!-- gpu-(suite|coverage|figures):end -->",
                       re.DOTALL)


TABLE = "(the table of what has run)"  # a link to it: the sentence defers to the generated table


def prose(text, boundaries):
    """The sentences (`boundaries` ".;") or clauses (".;:") of a page outside its generated blocks,
    code blocks and headings, each link as its text, a link to the table of what has run as TABLE."""
    text = re.sub(r"```.*?```", "", GENERATED.sub("", text), flags=re.DOTALL)
    text = "\n".join(line for line in text.splitlines() if not line.startswith("#"))
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", lambda link: TABLE if "what-has-run-on-a-gpu" in link[0] else link[1], text)
    for paragraph in text.split("\n\n"):
        yield from re.split(rf"(?<=[{boundaries}])\s+", " ".join(paragraph.split()))


def says_what_ran_on_a_gpu(text):
    """The sentences of a page's text, outside generated blocks, that say what has or has not run
    on a GPU, but those that send the reader to the generated table."""
    return [sentence for sentence in prose(text, ".;") if TABLE not in sentence
            and (RAN_OR_NOT.search(sentence) or (NEVER_OR_DONE.search(sentence) and GPU_WORD.search(sentence)))]


def types_a_gpu_figure(text):
    """The clauses of a page's text, outside generated blocks, that give a figure a named GPU measured."""
    return [clause for clause in prose(text, ".;:") if DEVICE.search(clause) and MEASURED.search(clause)
            and FIGURE.search(clause)]


def test_no_sentence_says_what_has_or_has_not_run_on_a_gpu_but_the_generated_blocks():
    found = [f"{page.relative_to(ROOT)}: {clause[:160]}" for page in PAGES
             for clause in says_what_ran_on_a_gpu(page.read_text())]
    assert not found, "say it in a block rendered from results/ (docs/benchmarks.md#what-has-run-on-a-gpu, " \
                      "benchmarks/suite/docblocks.py):\n" + "\n".join(found)


def test_no_page_types_a_figure_a_gpu_measured_outside_the_generated_blocks():
    found = [f"{page.relative_to(ROOT)}: {clause[:160]}" for page in PAGES
             for clause in types_a_gpu_figure(page.read_text())]
    assert not found, "render it from results/ into a block (benchmarks/suite/docblocks.py):\n" + "\n".join(found)


@pytest.mark.parametrize("page", PAGES, ids=lambda page: page.name)
def test_a_sentence_added_to_any_page_about_a_gpu_run_or_its_figure_is_found(page):
    """The checks above fail on a page with one more such sentence, wherever it is added."""
    text = page.read_text()
    assert says_what_ran_on_a_gpu(text + "\nThe transformers section was never run on a GPU.\n")
    assert types_a_gpu_figure(text + "\nOn the H200 the headline's resnet50 measured amp-bf16 at 24.91 ms a step.\n")


def readme_section():
    from benchmarks.suite.render import BEGIN, END

    text = (ROOT / "README.md").read_text()
    return text[text.index(BEGIN):text.index(END) + len(END)]


def test_readmes_results_are_what_the_suite_renders_from_results():
    """A figure changed by hand in README's generated section (3.94x to 4.94x, say) fails here."""
    from benchmarks.suite.render import render_summary

    assert readme_section() == render_summary(ROOT / "results", ROOT), \
        "regenerate it: python benchmarks/gpu_suite.py --render results/<device>/<date>"


def test_readmes_results_answer_first_in_under_700_words():
    """Per GPU, its verdict table comes first, right under the line that names the GPU; the full
    tables, the due list and the passes are on the run pages and in docs/benchmarks.md."""
    section = readme_section()
    assert len(section.split()) < 700, len(section.split())
    parts = re.split(r"^\*\*(?=NVIDIA )", section, flags=re.MULTILINE)[1:]
    assert len(parts) == len({path.parent.parent for path in (ROOT / "results").glob("*/*/suite.json")}) == 2
    for part in parts:
        assert part.split("\n\n")[1].startswith("| model | image | fastest | vs tf32 | vs fp32 |"), part[:300]
    assert "Due on this device" not in section and "This run's passes" not in section


@pytest.mark.parametrize("folder", sorted(path.parent for path in (ROOT / "results").glob("*/*/suite.json")),
                         ids=lambda folder: f"{folder.parent.name}/{folder.name}")
def test_each_run_page_is_what_the_suite_renders_from_its_results(folder):
    from benchmarks.suite.render import render

    assert (folder / "README.md").read_text() == render(folder), \
        f"regenerate it: python benchmarks/gpu_suite.py --render {folder.relative_to(ROOT)}"


def test_what_has_run_on_a_gpu_is_rendered_from_results():
    from benchmarks.suite.render import COVERAGE_BEGIN, COVERAGE_END, coverage

    text = (ROOT / "docs" / "benchmarks.md").read_text()
    block = text[text.index(COVERAGE_BEGIN):text.index(COVERAGE_END) + len(COVERAGE_END)]
    assert block == coverage(ROOT / "results", ROOT / "docs"), \
        "regenerate it: python benchmarks/gpu_suite.py --render results/<device>/<date>"


@pytest.mark.parametrize("page", PAGES, ids=lambda page: page.name)
def test_every_gpu_figure_a_page_cites_is_what_the_suite_renders_from_results(page):
    """Each gpu-figures block equals what benchmarks/suite/docblocks.py renders: a GPU figure
    changed by hand inside one (34.91 to 24.91, say) fails here."""
    from benchmarks.suite.docblocks import BLOCK, rendered_page

    text = page.read_text()
    rendered = rendered_page(text, ROOT / "results", page.parent)
    assert rendered is None or rendered == text, \
        "regenerate it: python benchmarks/gpu_suite.py --render results/<device>/<date>"
    for match in BLOCK.finditer(text):
        changed = re.sub(r"\d(?=[^\d]*$)", lambda digit: str((int(digit[0]) + 1) % 10), match[0], count=0)
        if changed != match[0]:
            assert rendered_page(text.replace(match[0], changed), ROOT / "results", page.parent) != \
                text.replace(match[0], changed)


def test_every_results_file_a_page_cites_exists():
    cited = {match for page in PAGES for match in re.findall(r"results/[\w.+-]+/[\w.-]+(?:/[\w.-]+)*",
                                                                GENERATED.sub("", page.read_text()))}
    missing = sorted(path for path in cited if "<" not in path and not (ROOT / path.rstrip(".")).exists())
    assert not missing


def test_the_lent_gpu_recipe_is_the_lease_script_with_both_extras_and_the_subset_in_a_folder_git_ignores():
    """docs/benchmarks.md's commands for a lent GPU: the wheels of torchao (the fp8 modes) and
    nvidia-ml-py (the energy and the busy share) fetched for the lent machine's Python, CIFAR-10
    carried, then one command, benchmarks/lease.py, with python3 (the lent machine's), which
    installs both offline and gives the suite the data; no separate --plan; .devdata/ git-ignored,
    so no dataset file is ever committed."""
    from benchmarks import lease

    page = (ROOT / "docs" / "benchmarks.md").read_text()
    recipe = page.split("## The GPU suite in short slices", 1)[1].split("```bash\n", 1)[1].split("```", 1)[0]
    download = next(line for line in recipe.splitlines() if "pip download" in line)
    assert all(f"-r {name}" in download for name in lease.EXTRAS) and "--python-version 3.12" in download
    assert "nvidia-ml-py" in (ROOT / "requirements-energy.txt").read_text()
    assert "torchao" in (ROOT / "requirements-fp8.txt").read_text()
    assert "cp -r ../shared/data/cifar10-subset/cifar-10-batches-py .devdata/" in recipe
    assert "python3 benchmarks/lease.py --commit" in recipe and "--plan" not in recipe
    assert lease.build_parser().parse_args([]).devdata == str(ROOT / ".devdata")
    ignored = subprocess.run(["git", "check-ignore", "-q", ".devdata/cifar-10-batches-py/data_batch_1"], cwd=ROOT)
    assert ignored.returncode == 0 or not (ROOT / ".git").exists()
