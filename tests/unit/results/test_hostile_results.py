"""utils.report against broken or forged result files: each is refused with exit 2 and one
sentence naming the file and the field, before anything is written; SIGINT exits 130 with one
line; the table needs neither torch nor matplotlib. The campaign that mutates genuine files
at random is in tests/campaigns/test_hostile_files.py (long)."""
import contextlib
import io
import json
import os
import signal
import subprocess
import sys
import time

import pytest

from conftest import ROOT
from utils import report as report_command

# a genuine --explain --numerics result file: squeezenet1_1, fp32 and amp-fp16, 4 steps of synthetic data
GENUINE = ROOT / "tests" / "unit" / "results" / "data" / "explained.json"


def genuine():
    return json.loads(GENUINE.read_text())


def report(*args):
    """utils.report's main in this process: (exit status, stdout, stderr)."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        status = report_command.main([str(arg) for arg in args])
    return status, out.getvalue(), err.getvalue()


def edited(edit):
    def apply(document):
        edit(document)
        return json.dumps(document)
    return apply


def replaced(text, old, new):
    """The genuine file's text with the first `old` replaced: for what json.dumps cannot write."""
    assert old in text
    return text.replace(old, new, 1)


def run0(d):
    return d["runs"][0]


GENUINE_HOST = {"cores": 2, "torch_threads": 1, "wall_s": 0.5, "process_cpu_cores": 0.9, "process_cpu_share": 0.45,
                "load_avg_1m_start": 1.0, "load_avg_1m_end": 1.1, "warning": None}


GENUINE_BUSY = {"share": 0.62, "source": "nvml-utilization-samples", "window_s": 12.5, "samples": 70,
                "sample_period_s": 0.1667}


def busy(**changed):
    """An edit giving the first run a GPU and a busy share with `changed` fields (a field None:
    no share, and `why` the reason)."""
    why = changed.pop("why", None)
    found = None if changed.pop("none", False) else dict(GENUINE_BUSY, **changed)
    return edited(lambda d: run0(d).update(device="cuda:0", gpu_busy=found, gpu_busy_unavailable=why))


def CURVE_POINT(**changed):
    """A genuine accuracy_curve point with `changed` fields."""
    return dict({"step": 4, "epoch": 0.5, "train_s": 1.25, "accuracy": 0.25}, **changed)

HOSTILE = [  # (what, the file's content from the genuine document, the field the sentence names)
    ("no env", edited(lambda d: d.pop("env")), "env is missing"),
    ("no config", edited(lambda d: d.pop("config")), "config is missing"),
    ("no data", edited(lambda d: d.pop("data")), "data is missing"),
    ("env a list", edited(lambda d: d.update(env=[1, 2])), "env is a list, not an object"),
    ("a run a list", edited(lambda d: d["runs"].__setitem__(0, [])), "runs[0] is an empty list, not an object"),
    ("no runs", edited(lambda d: d.update(runs=[])), "runs is an empty list, not a list of at least one"),
    ("step time a string", edited(lambda d: run0(d)["step_times_ms"].__setitem__(2, "abc")),
     'runs[0].step_times_ms[2] is "abc", not a number'),
    ("batch a string", edited(lambda d: run0(d).update(global_batch_size="16")),
     'runs[0].global_batch_size is "16", not a whole number'),
    ("median 0", edited(lambda d: run0(d)["step_time_ms"].update(median=0)),
     "runs[0].step_time_ms.median is 0, not a number above 0"),
    ("step time NaN", lambda d: replaced(json.dumps(d), '"step_times_ms": [', '"step_times_ms": [NaN, '),
     "runs[0].step_times_ms[0] is NaN, not a finite number"),
    ("negative memory", edited(lambda d: run0(d).update(peak_memory_bytes=-1)),
     "runs[0].peak_memory_bytes is -1, not a whole number of at least 0"),
    ("integer of 401 digits", edited(lambda d: run0(d).update(peak_memory_bytes=10 ** 400)),
     "runs[0].peak_memory_bytes is an integer of 401 digits"),
    ("integer of 5000 digits", lambda d: replaced(json.dumps(d), '"world_size": 1', '"world_size": ' + "9" * 5000),
     "holds an integer of 5000 digits"),
    ("float beyond 1e300", edited(lambda d: run0(d).update(tflops=1e308)), "runs[0].tflops is 1e+308"),
    ("deep nesting", lambda d: "[" * 100000 + "]" * 100000, "nests too deeply"),
    ("nesting past 64", lambda d: "[" * 70 + "]" * 70, "nests more than 64 levels"),
    ("mode a list", edited(lambda d: run0(d).update(mode=["fp32"])), "runs[0].mode is a list, not text"),
    ("seed an object", edited(lambda d: run0(d).update(seed={})), "runs[0].seed is an object, not a whole number"),
    ("tf32 a string", edited(lambda d: run0(d).update(tf32="off")), 'runs[0].tf32 is "off", not an object'),
    ("model a number", edited(lambda d: d["config"].update(model=7)), "config.model is 7, not text"),
    ("margin a string", edited(lambda d: d["config"].update(accuracy_margin="x")),
     'config.accuracy_margin is "x", not zero or a positive number'),
    ("no torch version", edited(lambda d: d["env"].pop("torch")), "env.torch is missing"),
    ("data name null", edited(lambda d: d["data"].update(name=None)), "data.name is null, not text"),
    ("timed without steps", edited(lambda d: run0(d).update(step_times_ms=[])),
     "runs[0] has a step_time_ms but no step_times_ms"),
    ("epochs to target 0", edited(lambda d: run0(d).update(epochs_to_target=0)),
     "runs[0].epochs_to_target is 0, not a number above 0"),
    ("profile without conv", edited(lambda d: run0(d)["profile"]["categories"].pop("conv")),
     "runs[0].profile.categories.conv is missing"),
    ("diagnosis a string", edited(lambda d: run0(d)["profile"].update(diagnosis="slow")),
     'runs[0].profile.diagnosis is "slow", not a list'),
    ("numerics passes a list", edited(lambda d: run0(d)["numerics"].update(passes=[])),
     "runs[0].numerics.passes is an empty list, not an object"),
    ("memory without activations", edited(lambda d: run0(d)["memory"].pop("activations_bytes")),
     "runs[0].memory.activations_bytes is missing"),
    ("sources of numbers", edited(lambda d: d.update(sources=[1])), "sources[0] is 1, not text"),
    ("second document of a list", lambda d: json.dumps([d, dict(d, env="x")]), '[1].env is "x", not an object'),
    ("accuracy 5.0 in the curve", edited(lambda d: run0(d).update(accuracy_curve=[CURVE_POINT(accuracy=5.0)])),
     "runs[0].accuracy_curve[0].accuracy is 5.0, not a number of at most 1"),
    ("accuracy a string in the curve", edited(lambda d: run0(d).update(accuracy_curve=[CURVE_POINT(accuracy="x")])),
     'runs[0].accuracy_curve[0].accuracy is "x", not a number'),
    ("curve step a string", edited(lambda d: run0(d).update(accuracy_curve=[CURVE_POINT(step="4")])),
     'runs[0].accuracy_curve[0].step is "4", not a whole number'),
    ("curve point without train_s", edited(lambda d: run0(d).update(accuracy_curve=[
        {key: value for key, value in CURVE_POINT().items() if key != "train_s"}])),
     "runs[0].accuracy_curve[0].train_s is missing"),
    ("test accuracy 5.0", edited(lambda d: run0(d).update(test_accuracy=5.0)),
     "runs[0].test_accuracy is 5.0, not a number of at most 1"),
    ("outlier without ms", edited(lambda d: run0(d).update(outlier_steps=[{"timed_step": 2}])),
     "runs[0].outlier_steps[0].ms is missing"),
    ("outlier ms a string", edited(lambda d: run0(d).update(outlier_steps=[{"timed_step": 2, "ms": "slow"}])),
     'runs[0].outlier_steps[0].ms is "slow", not a number'),
    ("outlier ms null", edited(lambda d: run0(d).update(outlier_steps=[{"timed_step": 2, "ms": None}])),
     "runs[0].outlier_steps[0].ms is null, not a number"),
    ("outlier a number", edited(lambda d: run0(d).update(outlier_steps=[3])),
     "runs[0].outlier_steps[0] is 3, not an object"),
    ("histogram counts a string", edited(lambda d: run0(d)["numerics"]["histogram"].update(counts="many")),
     'runs[0].numerics.histogram.counts is "many", not a list'),
    ("histogram negative count", edited(lambda d: run0(d)["numerics"]["histogram"]["counts"].__setitem__(3, -5)),
     "runs[0].numerics.histogram.counts[3] is -5, not a whole number of at least 0"),
    ("histogram without zeros", edited(lambda d: run0(d)["numerics"]["histogram"].pop("zeros")),
     "runs[0].numerics.histogram.zeros is missing"),
    ("histogram of nothing", edited(lambda d: run0(d)["numerics"].update(histogram={"log2_low": -80, "counts": [0],
                                                                                   "zeros": 0})),
     "runs[0].numerics.histogram counts no value"),
    ("memory parameters null", edited(lambda d: run0(d)["memory"].update(parameters_bytes=None)),
     "runs[0].memory.parameters_bytes is null, not a whole number"),
    ("memory gradients a string", edited(lambda d: run0(d)["memory"].update(gradients_bytes="1 MiB")),
     'runs[0].memory.gradients_bytes is "1 MiB", not a whole number'),
    ("a number and its nonfinite mark", edited(lambda d: run0(d).update(final_loss=2.0,
                                                                         final_loss_nonfinite={"": "nan"})),
     "runs[0].final_loss holds a number and a final_loss_nonfinite mark"),
    ("a list item and its nonfinite mark", edited(lambda d: run0(d).update(loss_curve_nonfinite={"1": "inf"})),
     "runs[0].loss_curve[1] holds a number and a loss_curve_nonfinite mark"),
    ("a nonfinite mark of a word", edited(lambda d: run0(d).update(final_loss=None, final_loss_nonfinite={"": "big"})),
     'runs[0].final_loss_nonfinite is "big", not "nan", "inf" or "-inf"'),
    ("host without cores", edited(lambda d: run0(d).update(host={"warning": None})), "runs[0].host.cores is missing"),
    ("host warning a number", edited(lambda d: run0(d).update(host=dict(GENUINE_HOST, warning=3))),
     "runs[0].host.warning is 3, not text"),
    ("busy share above 1", busy(share=1.5), "runs[0].gpu_busy.share is 1.5, not a number of at most 1"),
    ("busy share negative", busy(share=-0.1), "runs[0].gpu_busy.share is -0.1, not a number of at least 0"),
    ("busy window NaN", busy(window_s=float("nan")), "runs[0].gpu_busy.window_s is NaN, not a finite number"),
    ("busy of no sample", busy(samples=0), "runs[0].gpu_busy.samples is 0, not a whole number of at least 1"),
    ("busy period 0", busy(sample_period_s=0), "runs[0].gpu_busy.sample_period_s is 0, not a number above 0"),
    ("busy of a guess", busy(source="guess"),
     'runs[0].gpu_busy.source is "guess", not a source of the GPU\'s busy share (nvml-utilization-samples)'),
    ("busy without its share", edited(lambda d: run0(d).update(gpu_busy={"source": "nvml-utilization-samples"})),
     "runs[0].gpu_busy.share is missing"),
    ("busy reason a number", busy(none=True, why=3), "runs[0].gpu_busy_unavailable is 3, not text"),
    ("busy and its reason", busy(why="a CPU run"), "runs[0] has a gpu_busy and a gpu_busy_unavailable"),
    ("neither busy nor its reason", busy(none=True), "runs[0] has neither a gpu_busy nor a gpu_busy_unavailable"),
    ("busy of a CPU", edited(lambda d: run0(d).update(gpu_busy=GENUINE_BUSY, gpu_busy_unavailable=None)),
     'runs[0].gpu_busy is an object, but the run trained on "cpu", not a GPU'),
    ("wrong schema", edited(lambda d: d.update(schema="other/1")),
     'is not an ampbench result file (schema is "other/1"; ampbench writes ampbench.result/7)'),
    ("no schema", edited(lambda d: d.pop("schema")), "is not an ampbench result file (schema is missing"),
    ("a JSON number", lambda d: "3", "is not an ampbench result file (it is 3, not an object"),
    ("a list holding a number", lambda d: "[3]", "is not an ampbench result file ([0] is 3, not an object"),
    ("binary", lambda d: b"\x00\x01\xff", "cannot read result file"),
    ("cut short", lambda d: json.dumps(d)[:5000], "cannot read result file"),
]


@pytest.mark.parametrize("content, field", [case[1:] for case in HOSTILE], ids=[case[0] for case in HOSTILE])
def test_a_hostile_result_file_is_refused_with_one_sentence(content, field, tmp_path):
    path = tmp_path / "r.json"
    text = content(genuine())
    path.write_bytes(text if isinstance(text, bytes) else text.encode())
    status, out, err = report(path, "--json", tmp_path / "m.json", "--csv", tmp_path / "m.csv")
    assert status == 2, err
    assert err.startswith("utils.report: error: ") and str(path) in err and field in err, err
    assert err.count("\n") == 1 and "Traceback" not in err, err
    assert out == "" and sorted(p.name for p in tmp_path.iterdir()) == ["r.json"], "nothing was written"


# an H200's fp8 runs, with their roofline predictions: runs[4] is fp8's
FP8_RUNS = ROOT / "results" / "NVIDIA-H200" / "2026-11-26" / "transformers-eager.json"


@pytest.mark.parametrize("edit, field", [
    # --explain asks the roofline when FP8 pays at the prediction's GPU: a forged one is refused by name
    (lambda fp8: fp8["prediction"].update(gpu="a100", speedup=0.15), 'runs[4].fp8.prediction.gpu is "a100"'),
    (lambda fp8: fp8["matmul_shapes"][0].__setitem__(0, 2 ** 40), "runs[4].fp8.matmul_shapes[0][0] is 1099511627776"),
])
def test_a_forged_value_the_explanation_reads_again_is_refused_naming_file_and_field(edit, field, tmp_path):
    document = json.loads(FP8_RUNS.read_text())
    assert document["runs"][4]["mode"] == "fp8"
    edit(document["runs"][4]["fp8"])
    path = tmp_path / "r.json"
    path.write_text(json.dumps(document))
    status, out, err = report(path)
    assert status == 2 and err.startswith(f"utils.report: error: {path}: ") and field in err, err
    assert err.count("\n") == 1 and out == ""


@pytest.mark.parametrize("make, kind", [(os.mkfifo, "a FIFO"), (os.mkdir, "a folder"),
                                        (lambda path: os.symlink("/dev/zero", path), "a character device")])
def test_a_result_path_that_is_no_regular_file_is_refused_unread(make, kind, tmp_path):
    """A FIFO would block the read for ever, /dev/zero fill 256 MiB before the size refuses it."""
    path = tmp_path / "r.json"
    make(str(path))
    assert report(path) == (2, "", f"utils.report: error: {path} is not a result file but {kind}; give a file --json "
                                   "wrote.\n")


def test_the_genuine_file_is_read(tmp_path):
    status, out, err = report(GENUINE)
    assert status == 0 and "amp-fp16" in out and "Where the time goes" in out and "Gradient census" in out, err


@pytest.mark.parametrize("edit", [busy(), busy(sample_period_s=None, samples=1),
                                  busy(none=True, why="no step was timed")], ids=["a share", "one sample", "a reason"])
def test_a_genuine_busy_share_or_its_reason_is_read(edit, tmp_path):
    path = tmp_path / "r.json"
    path.write_text(edit(genuine()))
    status, _, err = report(path)
    assert status == 0, err


def test_a_file_over_256_mib_is_refused_unread(tmp_path):
    path = tmp_path / "big.json"
    with open(path, "wb") as f:
        f.truncate((256 << 20) + 1)  # sparse: no disk, no time
    status, _, err = report(path)
    assert status == 2 and "larger than 256 MiB" in err and "Traceback" not in err, err


@pytest.mark.parametrize("body", [b"\x00\x9f\x92\x96binary\n", b"a,b\n", "\u00e9,".encode("latin-1")],
                         ids=["binary", "other length", "not utf-8"])
def test_a_broken_csv_body_is_refused_before_anything_is_written(body, tmp_path):
    from utils.results.files import CSV_COLUMNS
    csv_path = tmp_path / "all.csv"
    csv_path.write_bytes(",".join(CSV_COLUMNS).encode() + b"\n" + body)
    before = csv_path.read_bytes()
    status, out, err = report(GENUINE, "--csv", csv_path, "--json", tmp_path / "m.json")
    assert status == 2 and f"--csv {csv_path}" in err and "give a new file name" in err, err
    assert err.count("\n") == 1 and out == ""
    assert csv_path.read_bytes() == before and not (tmp_path / "m.json").exists()


def without_torch_env(tmp_path):
    """An environment in which `import torch` (and torchvision) fails, as on a login node: a
    stand-in package that raises, first on the path."""
    for name in ("torch", "torchvision"):
        (tmp_path / "fake" / name).mkdir(parents=True)
        (tmp_path / "fake" / name / "__init__.py").write_text(f"raise ModuleNotFoundError('No module named {name}')\n")
    return {**os.environ, "PYTHONPATH": str(tmp_path / "fake")}


def test_the_report_runs_without_torch(tmp_path):
    env = without_torch_env(tmp_path)
    probe = subprocess.run([sys.executable, "-c", "import torch"], cwd=ROOT, env=env, capture_output=True, text=True)
    assert probe.returncode == 1 and "No module named torch" in probe.stderr, "the stand-in hides torch"
    result = subprocess.run([sys.executable, "-m", "utils.report", str(GENUINE), "--csv", str(tmp_path / "a.csv"),
                             "--json", str(tmp_path / "m.json"), "--plot", str(tmp_path / "p.png")], cwd=ROOT,
                            env=env, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    assert "median ms" in result.stdout and "amp-fp16" in result.stdout
    assert all((tmp_path / name).exists() for name in ("a.csv", "m.json", "p.png"))


def blocked(process, deadline):
    """Wait until `process` sleeps waiting for a file lock: a signal that arrives before the wait
    starts runs Python's handler only at the next bytecode check, which the blocking wait never
    reaches (a user's second Ctrl-C would end it; a test sends one)."""
    wchan, waited = f"/proc/{process.pid}/wchan", time.monotonic() + 5  # where the kernel shows it (Linux)
    while time.monotonic() < waited and not (os.path.exists(wchan) and "lock" in open(wchan).read()):
        assert process.poll() is None and time.monotonic() < deadline, process.communicate()
        time.sleep(0.05)


def test_sigint_while_waiting_to_append_exits_130_with_one_line_and_writes_nothing(tmp_path):
    """Another job holds the CSV's lock: the report, its file read, waits to append until SIGINT."""
    import fcntl

    from utils import fileio
    csv, merged = tmp_path / "all.csv", tmp_path / "m.json"
    holder = open(fileio.lock_path(str(csv)), "a")
    fcntl.flock(holder, fcntl.LOCK_EX)
    # SIGINT as a terminal's Ctrl-C gives it: a suite started in the background (`&` without job
    # control) hands its children SIGINT ignored, and Python then never raises KeyboardInterrupt
    process = subprocess.Popen([sys.executable, "-m", "utils.report", str(GENUINE), "--csv", str(csv), "--json",
                                str(merged)], cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                               preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    try:
        blocked(process, time.monotonic() + 120)
        process.send_signal(signal.SIGINT)
        out, err = process.communicate(timeout=60)
    finally:
        process.kill()
        holder.close()
    assert process.returncode == 130, err
    assert err == "utils.report: interrupted; nothing was written.\n", err
    assert not csv.exists() and not merged.exists()


def with_config(**changed):
    document = genuine()
    document["config"].update(changed)
    return document


@pytest.mark.parametrize("key, values", [("target_accuracy", (0.5, 0.9)), ("accuracy_margin", (0.5, 2.0)),
                                         ("eval_every", (0.25, 0.1))])
def test_files_asking_different_accuracy_questions_stay_apart(key, values, tmp_path):
    paths = []
    for index, value in enumerate(values):
        paths.append(tmp_path / f"r{index}.json")
        document = with_config(**{key: value})
        for run in document["runs"]:  # another job: other runs, which would otherwise pool
            run["finished_utc"] = f"2026-01-0{index + 1}T00:00:00Z"
        paths[-1].write_text(json.dumps(document))
    status, out, err = report(*paths, "--json", tmp_path / "m.json")
    assert status == 0, err
    merged = json.loads((tmp_path / "m.json").read_text())
    assert len(merged) == 2 and [document["config"][key] for document in merged] == list(values)
    assert all(f"setup: {key} {value}" in out for value in values), out


def test_csv_rows_carry_their_schema_and_accuracy_question(tmp_path):
    csv_path = tmp_path / "all.csv"
    status, _, err = report(GENUINE, "--csv", csv_path)
    assert status == 0, err
    import csv
    rows = list(csv.DictReader(csv_path.open()))
    assert rows and all(row["schema"] == genuine()["schema"] and row["accuracy_margin"] == "0.5" for row in rows)


@pytest.mark.parametrize("also_json", [False, True], ids=["plot only", "plot and json"])
def test_a_plot_that_fails_says_only_what_was_written(also_json, tmp_path, monkeypatch):
    pytest.importorskip("matplotlib")
    from utils.results import plot

    def broken(document):
        raise ValueError("a forged value")
    monkeypatch.setattr(plot, "figure_of", broken)
    merged = tmp_path / "m.json"
    status, _, err = report(GENUINE, "--plot", tmp_path / "p.png", *(["--json", merged] if also_json else []))
    assert status == 1 and err.count("\n") == 1 and "could not draw" in err, err
    assert "JSON and CSV" not in err and merged.exists() == also_json
    assert (f"{merged} written whole, nothing else." if also_json else "nothing was written.") in err, err


COMMITTED = sorted((ROOT / "results").glob("*/*/*.json"))


@pytest.mark.parametrize("path", COMMITTED, ids=lambda path: path.name)
def test_every_committed_results_file_is_reported_or_refused_in_one_sentence(path, tmp_path):
    """Files of earlier schemas lack fields added since (numerics, host, ...): read as absent."""
    is_result = json.loads(path.read_text()).get("schema", "").startswith("ampbench.result/")
    status, out, err = report(path, "--json", tmp_path / "m.json", "--csv", tmp_path / "m.csv")
    assert "Traceback" not in out + err
    if is_result:
        assert status == 0 and "median ms" in out, err
        assert json.loads((tmp_path / "m.json").read_text())[0]["comparison"]
    else:
        assert status == 2 and err.count("\n") == 1 and "is not an ampbench result file" in err
