"""benchmarks/gpu_suite.py --quick: the GPU suite's plumbing keeps working while no GPU is around."""
import json
import os
import re
import subprocess
import sys

import pytest

from benchmarks.suite.render import BEGIN, END
from conftest import ROOT, SUBSET


def outside_section(text):
    return text[:text.index(BEGIN)] + text[text.index(END) + len(END):] if BEGIN in text else text


@pytest.mark.gpu_suite
def test_quick_suite_runs_every_step_and_renders_a_well_formed_readme_section(tmp_path):
    readme = tmp_path / "README.md"
    original = (ROOT / "README.md").read_text()
    readme.write_text(original)
    suite = [sys.executable, str(ROOT / "benchmarks" / "gpu_suite.py"), "--results-root", str(tmp_path / "results"),
             "--readme", str(readme), "--data-dir", str(SUBSET)]  # the convergence section evaluates
    result = subprocess.run([*suite, "--quick"], cwd=ROOT, capture_output=True, text=True, timeout=1200)
    assert result.returncode == 0, result.stdout + result.stderr

    (out,) = (tmp_path / "results").glob("CPU*/*")
    summary = json.loads((out / "suite.json").read_text())
    ran = {step["name"]: step for step in summary["steps_run"]}
    assert all(step.get("rc") in (None, 0, 143) for step in ran.values()), ran
    assert ran["resume-stopped"]["rc"] == 143 and "only applies to CUDA GPUs" in ran["mode tf32"]["skipped"]
    weights = json.loads((out / "resume-weights.json").read_text())
    assert weights["resumed_vs_uninterrupted"]["bitwise_equal"]  # on the CPU a resume is exact
    env = json.loads((out / "headline-resnet18.json").read_text())["env"]  # the suite's commit, whatever .git says
    assert (env["git_commit"], env["git_commit_source"], summary["passes"][-1]["software"]["torch"]) == (
        summary["commit"], "AMPBENCH_COMMIT", env["torch"])

    text = readme.read_text()
    assert text.count(BEGIN) == 1 and text.count(END) == 1 and text.index(BEGIN) < text.index(END)
    assert outside_section(text) == outside_section(original), "only the generated section may change"
    section = text[text.index(BEGIN):text.index(END)]
    assert "(CPU, --quick" in section  # clearly labelled: never mistaken for GPU figures
    assert "| resnet18 | 32 |" in section  # the headline's row
    (link,) = set(re.findall(r"\]\(([^)]+README\.md)\)", section))  # the full page, beside the results
    page = (readme.parent / link).read_text()
    assert (readme.parent / link).resolve() == (out / "README.md").resolve()
    assert "(CPU, --quick" in page and "`python main.py -n 3 --fp16 -s --model resnet50" in page
    assert "FAILED" not in page and "`mode tf32`: skipped" in page
    assert "#### Does accuracy hold?" in page
    images = re.findall(r"!\[[^]]*\]\(([^)]+)\)", page)
    # the headline, two comparisons, convergence
    assert len(images) == 4 and all((out / image).is_file() for image in images)

    rendered = subprocess.run([*suite, "--render", str(out)], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert rendered.returncode == 0, rendered.stderr
    assert readme.read_text() == text and (out / "README.md").read_text() == page  # a function of the results

    # one section again (the quickest), as a time-limited device command would: the others' steps are kept
    again = subprocess.run([*suite, "--quick", "--only", "scripts"], cwd=ROOT, capture_output=True, text=True,
                           timeout=600)
    assert again.returncode == 0, again.stdout + again.stderr
    rerun = json.loads((out / "suite.json").read_text())["steps_run"]
    assert sorted(step["name"] for step in rerun) == sorted(ran)
    def others(steps):
        return sorted((step for step in steps if step["section"] != "scripts"), key=lambda step: step["name"])

    assert others(rerun) == others(summary["steps_run"])


def test_the_recipe_table_names_the_fastest_recipe_whose_loss_stayed_finite(tmp_path, monkeypatch):
    from benchmarks.suite import history, tables
    from benchmarks.suite.tables import recipes

    # the runs' figures alone, read as they are: the reader's own checks are tested with whole files
    monkeypatch.setattr(tables, "upgraded", lambda folder, name: history.readable(folder / f"{name}.json"))

    def document(**medians):
        runs = [{"mode": mode, "step_time_ms": {"median": ms}, "final_loss": float("nan") if ms < 5 else 2.0,
                 "mfu_pct": 40.0} for mode, ms in medians.items()]
        return {"schema": "ampbench.result/2", "env": {"timestamp_utc": "2026-11-22T10:00:00+00:00"},
                "config": {"batch_size": 256, "optimizer_impl": "fused"}, "runs": runs}

    for name, doc in (("eager", document(fp32=20.0, tf32=12.0, amp_bf16=10.0)),
                      ("compile", document(fp32=16.0, amp_bf16=4.0)),
                      ("cudagraphs", document(fp32=18.0, amp_bf16=8.0))):
        doc["runs"] = [dict(run, mode=run["mode"].replace("_", "-")) for run in doc["runs"]]
        doc["runs"][-1]["gpu_busy"] = {"share": 0.62}  # the AMP mode's, as NVML read it
        (tmp_path / f"recipe-{name}.json").write_text(json.dumps(doc))
    table = "\n".join(recipes(tmp_path))
    # the fastest recipe against strict FP32 and against tf32, both eager; its busy share where read
    assert "| fp32 | 20.00 | 16.00 | 18.00 | compile | 1.25x | 0.75x | - | 40.0% |" in table
    assert "| amp-bf16 | 10.00 | 4.00 | 8.00 | cudagraphs | 2.50x | 1.50x | 62% | 40.0% |" in table  # compile: NaN


# an unofficial copy where main.py looks (no --data-dir): --data auto takes synthetic data, as on a
# machine without CIFAR-10, with no network to ask
WITHOUT_CIFAR10 = f"no usable CIFAR-10 in {SUBSET} (give --data-dir)"
NO_TEST_IMAGES = ("it measures test accuracy, and the runs get synthetic data, which has no test images: "
                  + WITHOUT_CIFAR10)


@pytest.mark.parametrize("quick, planned, skipped", [
    (True, ["transformers-eager"],
     {"convergence": NO_TEST_IMAGES, "loaders": f"benchmarks/loader.py times CIFAR-10's images: {WITHOUT_CIFAR10}"}),
    (False, ["transformers-compile", "transformers-eager"],
     {"convergence": NO_TEST_IMAGES, "loaders": f"benchmarks/loader.py times CIFAR-10's images: {WITHOUT_CIFAR10}",
      "transformers-accuracy": NO_TEST_IMAGES}),
])
def test_every_step_that_needs_cifar10_is_skipped_with_the_reason_where_the_runs_get_synthetic_data(
        quick, planned, skipped, tmp_path, monkeypatch):
    from benchmarks.suite.plan import Plan, Planner

    monkeypatch.setenv("CIFAR10_DIR", str(SUBSET))
    suite = Planner(tmp_path, None, Plan(quick), ["fp32"], {"--fp8-emulate", "--modes"}, ["fp32"])
    for section in ("convergence", "scripts", "transformers"):
        suite.plan_section(section)
    assert [step.name for step in suite.planned] == planned
    assert {step["name"]: step["skipped"] for step in suite.records if step["name"] in skipped} == skipped


@pytest.mark.gpu_suite
def test_the_quick_suite_without_cifar10_skips_the_convergence_section_and_succeeds(tmp_path):
    """`python benchmarks/gpu_suite.py --quick` as docs/benchmarks.md shows it, the convergence
    section alone: it is skipped with the reason, printed and kept in suite.json and the page."""
    readme = tmp_path / "README.md"
    readme.write_text((ROOT / "README.md").read_text())
    result = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "gpu_suite.py"), "--quick", "--only",
                             "convergence", "--results-root", str(tmp_path / "results"), "--readme", str(readme)],
                            cwd=ROOT, capture_output=True, text=True, timeout=600,
                            env={**os.environ, "CIFAR10_DIR": str(SUBSET)})
    assert result.returncode == 0, result.stdout + result.stderr
    assert f"convergence: skipped ({NO_TEST_IMAGES})" in result.stdout and "failed steps" not in result.stderr
    (out,) = (tmp_path / "results").glob("CPU*/*")
    steps = json.loads((out / "suite.json").read_text())["steps_run"]
    assert {"name": "convergence", "section": "convergence", "skipped": NO_TEST_IMAGES} in steps
    assert f"* `convergence`: skipped: {NO_TEST_IMAGES}" in (out / "README.md").read_text()


def test_readme_shows_every_device_of_the_results_root_the_most_recently_measured_first(tmp_path):
    """The committed H100 and H200 suites: rendering either device's run gives the same section,
    each device with its verdict table and its newest run's page, the H200 (measured last) first."""
    import shutil

    from benchmarks.suite.render import render_readme

    shutil.copytree(ROOT / "results", tmp_path / "results")
    readme = tmp_path / "README.md"
    readme.write_text("# ampbench\n\n## Results\n\nafter\n")
    sections = []
    for rendered in ("NVIDIA-H200", "NVIDIA-H100-80GB-HBM3"):
        render_readme(tmp_path / "results" / rendered / "2026-11-26", readme)
        sections.append(readme.read_text()[readme.read_text().index(BEGIN):])
    assert sections[0] == sections[1]
    devices = re.findall(r"^\*\*(NVIDIA [^*]+)\*\* \(GPU; ", sections[0], re.MULTILINE)
    assert devices == ["NVIDIA H200", "NVIDIA H100 80GB HBM3"]
    for part, folder in zip(sections[0].split("**NVIDIA ")[1:], ("NVIDIA-H200", "NVIDIA-H100-80GB-HBM3")):
        assert f"[its newest run](results/{folder}/2026-11-26/README.md)" in part
        assert "| resnet50 | 32 | amp-fp16 |" in part and f"(results/{folder}/2026-11-26/README.md) |" in part
    assert readme.read_text().endswith("after\n")


def test_the_native_table_prints_nvidias_published_figures_beside_ours_for_a_gpu_they_measured(tmp_path):
    """A native-section result of an A100 80GB (the H100's resnet50 headline file standing in) gets
    NVIDIA's single-GPU figures beside its own; a GPU they did not publish gets no such column."""
    import shutil

    from benchmarks.suite.history import SavedSuite, load
    from benchmarks.suite.tables import native_table

    shutil.copy(ROOT / "results" / "NVIDIA-H100-80GB-HBM3" / "2026-11-26" / "headline-resnet50.json",
                tmp_path / "native-synthetic.json")
    rates = {mode: row.images_per_sec for mode, row in load(tmp_path, "native-synthetic")["comparison"].items()}
    for device, published in (("NVIDIA A100-SXM4-80GB", True), ("NVIDIA H100 80GB HBM3", False)):
        lines = native_table([SavedSuite(tmp_path, {"device": device})], lambda saved_suite, figures, step: "label")
        (row,) = [line for line in lines if line.startswith("| synthetic |")]
        assert ("NVIDIA TF32 img/s" in lines[2]) == published and ("NVIDIA DeepLearningExamples" in "\n".join(lines)) \
            == published
        cells = dict(zip(lines[2].strip("| ").split(" | "), row.strip("| ").split(" | ")))
        assert cells["tf32 img/s"] == f"{rates['tf32']:.0f}"
        # the speedup over tf32: with two paired repeats, each one's ratio, as the headline gives it
        ratios = load(tmp_path, "native-synthetic")["comparison"]  # against fp32: its repeats' ratios, divided
        fp16, tf32 = ratios["amp-fp16"].repeat_speedups, ratios["tf32"].repeat_speedups
        assert cells["amp-fp16 vs tf32"] == "2 runs: " + ", ".join(f"{a / b:.2f}x" for a, b in zip(fp16, tf32))
        assert rates["amp-fp16"] > rates["tf32"]
        assert (cells.get("NVIDIA AMP / TF32"), cells.get("MLPerf img/s per GPU (ceiling)")) == (
            ("2.63x", None) if published else (None, "7009"))
        assert row.endswith("| label |")


@pytest.mark.gpu_suite
def test_the_fp8_sweep_refuses_without_a_usable_torchao_before_any_step(tmp_path):
    (tmp_path / "torchao").mkdir()
    (tmp_path / "torchao" / "__init__.py").write_text("raise ImportError('a stand-in that cannot load')\n")
    first = os.pathsep.join([str(tmp_path), os.environ["PYTHONPATH"]])  # the stand-in, then this checkout
    result = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "fp8_sweep.py"), "--fp8-emulate"], cwd=ROOT,
                            capture_output=True, text=True, timeout=120, env={**os.environ, "PYTHONPATH": first})
    assert result.returncode == 2 and result.stdout == "", result.stdout + result.stderr
    assert result.stderr.startswith("fp8_sweep.py: error: mode fp8 needs torchao's float8 training"), result.stderr
    assert "Traceback" not in result.stderr, result.stderr


def test_the_fp8_sweep_refuses_an_unwritable_json_path_before_any_step(tmp_path):
    result = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "fp8_sweep.py"), "--fp8-emulate", "--json",
                             str(tmp_path)], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert result.returncode == 2 and result.stdout == "", result.stdout + result.stderr
    assert result.stderr == f"fp8_sweep.py: error: --json {tmp_path} is a folder; give a file path.\n", result.stderr


@pytest.mark.gpu_suite
def test_the_fp8_sweep_runs_emulated_on_the_cpu_and_saves_measured_beside_predicted(tmp_path):
    pytest.importorskip("torchao")
    from benchmarks.suite.history import SavedSuite
    from benchmarks.suite.tables import sweep_table

    path = tmp_path / "transformers-sweep.json"
    result = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "fp8_sweep.py"), "--fp8-emulate", "--widths",
                             "64,128", "-b", "1", "--steps", "1", "--timing-warmup", "1", "--json", str(path)],
                            cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stdout + result.stderr

    def refuse(constant):
        raise AssertionError(f"{constant} in strict JSON")

    document = json.loads(path.read_text(), parse_constant=refuse)
    assert document["emulated"] and document["predicted_for"] == "emulated: an H100 SXM"
    assert [(row["width"], row["heads"]) for row in document["rows"]] == [(64, 1), (128, 2)]
    for row in document["rows"]:
        for mode in ("fp8", "fp8-rowwise"):
            assert row["measured_speedup"][mode] == pytest.approx(
                row["median_step_ms"]["amp-bf16"] / row["median_step_ms"][mode])
            assert 0 < row["predicted_speedup"][mode] < 1  # tiny matmuls: FP8 cannot pay
    assert "predicted for emulated: an H100 SXM" in result.stdout
    table = sweep_table([SavedSuite(tmp_path, {})], lambda saved_suite, figures, step: "label")
    rows = [line for line in table if line.startswith("| 64 |") or line.startswith("| 128 |")]
    assert len(rows) == 2 and rows[0].count("x |") == 4
    assert "predicted for emulated: an H100 SXM; FP8 emulated in software" in "\n".join(table)


@pytest.mark.gpu_suite
def test_the_fp8_sweep_records_the_commit_and_the_digest_of_the_files_that_ran(tmp_path):
    """Its JSON names the code that ran as a results file's env does, so a row of it is proven or claimed."""
    from utils import provenance

    result = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "fp8_sweep.py"), "--fp8-emulate", "--widths",
                             "64", "-b", "2", "--steps", "1", "--timing-warmup", "1", "--json",
                             str(tmp_path / "sweep.json")],
                            cwd=ROOT, capture_output=True, text=True, timeout=300,
                            env={**os.environ, provenance.COMMIT_VARIABLE: "e4b76bf"})
    assert result.returncode == 0, result.stderr
    document = json.loads((tmp_path / "sweep.json").read_text())
    assert document["schema"] == "ampbench.fp8_sweep/2" and document["commit"] == "e4b76bf"
    assert document["source_sha256"] == provenance.source_digest()
