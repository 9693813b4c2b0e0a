"""The generated campaign of hostile edges (families 5-8), run against any ampbench checkout:

    python tests/campaigns/around_runs_campaign.py [ROOT]     (default: this checkout)

It prints, per family, the cases and those broken, naming each broken case, and exits 1 if
any is. ROOT's own code answers every case (its utils.report, job scripts, main.py); the
inputs come from this file. Families:
  5  utils.report against forged result files (refused with exit 2 and one sentence naming the
     file and the field, nothing written) and files asking different accuracy questions (kept
     apart), CSV rows with their schema;
  6  the job scripts against dash paths (dry runs) and, with the stand-ins of
     tests/cluster/test_cluster_scripts.py, modes and flags main.py refuses and images without
     torch: exit 2, one `ampbench: error:` sentence, no traceback, no usage text, nothing run;
  7  runs timed while two busy loops compete for the cores: runs[].host and the warning;
  8  --explain of modes made slower than fp32 with random categories: always a why.
tests/campaigns/test_around_runs_campaign.py runs it on this checkout (long)."""
import contextlib
import copy
import csv
import io
import json
import os
import random
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from campaign_runs import main_py, runs_of

HERE = Path(__file__).resolve().parent
GENUINE = HERE.parent / "unit" / "results" / "data" / "explained.json"
SUBSET = Path(os.environ.get("AMPBENCH_SUBSET", HERE.parents[2] / "shared" / "data" / "cifar10-subset"
                             / "cifar-10-batches-py"))
POINT = {"step": 4, "epoch": 0.5, "train_s": 1.25, "accuracy": 0.25}
OUTLIER = {"timed_step": 2, "ms": 900.0}
PARTS = ("parameters_bytes", "gradients_bytes", "optimizer_bytes", "activations_bytes", "weight_copies_bytes")


def genuine():
    return json.loads(GENUINE.read_text())


def run0(document):
    return document["runs"][0]


def put(path, value):
    """An edit that sets the item at `path` (keys and indices from runs[0]) to `value`, or
    removes it when value is MISSING."""
    def edit(document):
        *parents, last = path
        target = run0(document)
        for key in parents:
            target = target[key]
        if value is MISSING:
            del target[last]
        else:
            target[last] = copy.deepcopy(value)
    return edit


MISSING = object()


def report_cases():
    """(name, edit of the genuine document, the field the sentence must name)."""
    cases = []

    def add(name, edits, field):
        cases.append((name, edits if isinstance(edits, list) else [edits], field))

    curve = put(("accuracy_curve",), [POINT])
    for key, values in {"accuracy": [5.0, -0.1, 1.0001, "x", None, True, [], {}], "step": ["4", -1, 1.5, None, True],
                        "epoch": ["x", -1.0, None], "train_s": ["x", -0.5, None]}.items():
        for value in values:
            add(f"curve {key} {value!r}", [curve, put(("accuracy_curve", 0, key), value)],
                f"accuracy_curve[0].{key}")
        add(f"curve without {key}", [curve, put(("accuracy_curve", 0, key), MISSING)], f"accuracy_curve[0].{key}")
    for value in [3, "x", []]:
        add(f"curve point {value!r}", put(("accuracy_curve",), [value]), "accuracy_curve[0]")
    outliers = put(("outlier_steps",), [OUTLIER])
    for key, values in {"ms": ["x", None, -1, True, []], "timed_step": ["2", 0, None, 1.5]}.items():
        for value in values:
            add(f"outlier {key} {value!r}", [outliers, put(("outlier_steps", 0, key), value)],
                f"outlier_steps[0].{key}")
        add(f"outlier without {key}", [outliers, put(("outlier_steps", 0, key), MISSING)], f"outlier_steps[0].{key}")
    for value in [3, "x", []]:
        add(f"outlier entry {value!r}", put(("outlier_steps",), [value]), "outlier_steps[0]")
    histogram = ("numerics", "histogram")
    for key, values in {"counts": ["many", [], ["x"], None, [-1]], "zeros": [-1, "x", None, 2.5],
                        "log2_low": ["x", None, 1.5, 10 ** 6]}.items():
        for value in values:
            add(f"histogram {key} {value!r}", put(histogram + (key,), value), f"numerics.histogram.{key}")
        add(f"histogram without {key}", put(histogram + (key,), MISSING), f"numerics.histogram.{key}")
    add("histogram of nothing", put(histogram, {"log2_low": -80, "counts": [0, 0], "zeros": 0}), "numerics.histogram")
    for part in PARTS:
        for value in [None, "x", -1, 1.5, MISSING]:
            add(f"memory {part} {'missing' if value is MISSING else repr(value)}", put(("memory", part), value),
                f"memory.{part}")
    for key, values in {"test_accuracy": [5.0, -0.5, 1.5], "target_accuracy": [2.0],
                        "best_accuracy": [1.5, -1.0]}.items():
        for value in values:
            add(f"{key} {value!r}", put((key,), value), key)
    for key, value in [("final_loss", 2.0), ("final_lr", 0.1), ("wall_time_s", 3.0)]:
        add(f"{key} and its nonfinite mark", [put((key,), value), put((key + "_nonfinite",), {"": "nan"})], key)
    for key in ("loss_curve", "step_times_ms", "lr_curve"):
        add(f"{key} item and its nonfinite mark", put((key + "_nonfinite",), {"0": "inf"}), f"{key}[0]")
    for word in ["big", 3, None]:
        add(f"nonfinite mark {word!r}", [put(("final_loss",), None), put(("final_loss_nonfinite",), {"": word})],
            "final_loss_nonfinite")
    add("nonfinite mark a word, not an object", put(("final_loss_nonfinite",), "nan"), "final_loss_nonfinite")
    for key, value in [("target_accuracy", 3.0), ("eval_every", 0), ("eval_every", -1), ("eval_every", "x")]:
        add(f"config {key} {value!r}", [lambda d, k=key, v=value: d["config"].update({k: v})], f"config.{key}")
    return cases


def in_process_report(args):
    """utils.report's main (ROOT's) in this process: (status, stdout, stderr)."""
    from utils import report
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            status = report.main([str(arg) for arg in args])
        except Exception as error:  # a traceback the user would see
            status, _ = 99, err.write(f"Traceback: {type(error).__name__}: {error}\n")
    return status, out.getvalue(), err.getvalue()


def family5(folder):
    broken, cases = [], report_cases()
    for index, (name, edits, field) in enumerate(cases):
        document = genuine()
        for edit in edits:
            edit(document)
        work = folder / f"c{index}"
        work.mkdir()
        path = work / "r.json"
        path.write_text(json.dumps(document))
        status, out, err = in_process_report([path, "--json", work / "m.json", "--csv", work / "m.csv"])
        if not (status == 2 and err.startswith("utils.report: error: ") and err.count("\n") == 1
                and str(path) in err and field in err and out == "" and os.listdir(work) == ["r.json"]):
            broken.append(f"{name}: exit {status}, {(err or out).strip()[:160]!r}")
    questions = [("target_accuracy", 0.5, 0.9), ("target_accuracy", None, 0.9), ("accuracy_margin", 0.5, 2.0),
                 ("accuracy_margin", 0.5, 0.25), ("eval_every", 0.25, 0.1), ("eval_every", None, 0.5)]
    for key, first, second in questions:
        name, work = f"pooling {key} {first} and {second}", folder / f"q{len(cases)}"
        cases.append(name)
        work.mkdir()
        paths = []
        for index, value in enumerate((first, second)):
            document = genuine()
            document["config"][key] = value
            for run in document["runs"]:
                run["finished_utc"] = f"2026-01-0{index + 1}T00:00:00Z"
            paths.append(work / f"r{index}.json")
            paths[-1].write_text(json.dumps(document))
        status, out, err = in_process_report(paths + ["--json", work / "m.json"])
        merged = json.loads((work / "m.json").read_text()) if (work / "m.json").exists() else []
        if status != 0 or len(merged) != 2:
            broken.append(f"{name}: exit {status}, {len(merged)} setups, {err.strip()[:120]!r}")
    for schema in ("ampbench.result/1", "ampbench.result/2"):
        name, work = f"CSV rows of {schema}", folder / f"s{schema[-1]}"
        cases.append(name)
        work.mkdir()
        document = genuine()
        document["schema"] = schema
        (work / "r.json").write_text(json.dumps(document))
        status, _, err = in_process_report([work / "r.json", "--csv", work / "all.csv"])
        rows = list(csv.DictReader((work / "all.csv").open())) if (work / "all.csv").exists() else []
        if status != 0 or not rows or any(row.get("schema") != schema for row in rows):
            broken.append(f"{name}: exit {status}, rows {[row.get('schema') for row in rows]}")
    return len(cases), broken


def slower_document(rng, mode, slowdown):
    """The genuine file with its second run renamed `mode`, its categories random against
    fp32's and its timed median `slowdown` times fp32's; no run-level finding."""
    document = genuine()
    base, other = document["runs"]
    other["mode"] = mode
    for name, entry in other["profile"]["categories"].items():
        factor = rng.uniform(0.55, 1.0) if name in ("conv", "matmul") else rng.uniform(0.8, 2.5)
        entry["ms"] = base["profile"]["categories"][name]["ms"] * factor
    median = base["step_time_ms"]["median"] * slowdown
    other["step_time_ms"] = dict.fromkeys(base["step_time_ms"], median)
    other["step_times_ms"] = [median] * 4
    for run in document["runs"]:
        run["profile"]["diagnosis"] = []
        run["outlier_steps"] = []
    return document


def family8(folder):
    rng, broken, cases = random.Random(32), [], []
    for index in range(45):
        mode = "amp-bf16" if index % 3 == 2 else "amp-fp16"
        slowdown = 1.0 if index % 9 == 0 else rng.uniform(1.0, 1.3)
        cases.append(f"{mode} at {slowdown:.3f}x fp32's step (case {index})")
        path = folder / f"e{index}.json"
        path.write_text(json.dumps(slower_document(rng, mode, slowdown)))
        status, out, err = in_process_report([path])
        lines = out.splitlines()
        said = [line for line in lines if line[:1].isdigit() and f". {mode}:" in line]
        if status != 0 or "no rule fired" in out or not said:
            broken.append(f"{cases[-1]}: exit {status}, "
                          f"{'no rule fired' if 'no rule fired' in out else 'no diagnosis'} {err.strip()[:80]!r}")
    return len(cases), broken


def worker(family):
    """In ROOT (the current directory, first on PYTHONPATH: in_root): one in-process family,
    answered as one JSON line."""
    with tempfile.TemporaryDirectory() as folder:
        count, broken = {"5": family5, "8": family8}[family](Path(folder))
    print(json.dumps({"cases": count, "broken": broken}))


def in_root(root, family):
    result = subprocess.run([sys.executable, str(Path(__file__).resolve()), "--worker", family], cwd=root,
                            capture_output=True, text=True, env={**os.environ, "PYTHONPATH": str(root)}, timeout=900)
    if result.returncode:
        return 1, [f"the campaign worker failed: {result.stderr[-400:]}"]
    answer = json.loads(result.stdout.strip().splitlines()[-1])
    return answer["cases"], answer["broken"]


def script_env(root, folder, dry, **values):
    """The variables of a Slurm job (or, dry, of no job) whose tools are the test stand-ins."""
    env = {key: value for key, value in os.environ.items() if not key.startswith(("COBALT_", "PBS_", "SLURM_"))}
    env.update({"DRY_RUN": "1" if dry else "0", "MODES": "fp32", "NODES": "1", "RESULTS_ROOT": str(folder / "results"),
                "CONTAINER": str(folder / "pytorch.sif"), "CIFAR10_DIR": str(SUBSET), "OMP_NUM_THREADS": "1",
                "MODEL": "squeezenet1_1", "STEPS": "4", "BATCH": "8", "CHECKPOINT_EVERY": "2", "USE_GPU": "0",
                "GPUS_PER_NODE": "1", "EXTRA_ARGS": "--allow-unverified --warmup 1 --no-eval"})
    (folder / "pytorch.sif").touch()
    if not dry:
        bin_folder = folder / "bin"
        bin_folder.mkdir(exist_ok=True)
        for name, target in [("singularity", "container"), ("apptainer", "container"), ("srun", "launcher"),
                             ("scontrol", "scontrol")]:
            if not (bin_folder / name).exists():
                (bin_folder / name).symlink_to(HERE.parent / "cluster" / "standins" / target)
        (bin_folder / "python").write_text(f'#!/bin/sh\nexec "{sys.executable}" "$@"\n')
        (bin_folder / "python").chmod(0o755)
        env.update({"PATH": f"{bin_folder}:{os.environ['PATH']}", "SLURM_JOB_ID": "4242",
                    "SLURM_JOB_NODELIST": "localhost", "SLURM_SUBMIT_DIR": str(root), "MASTER_PORT": "29731"})
    env.update(values)
    return env


def fake_torch(folder, body):
    (folder / "fake" / "torch").mkdir(parents=True, exist_ok=True)
    (folder / "fake" / "torch" / "__init__.py").write_text(body)
    return str(folder / "fake")


def script_problems(root, script, env, canary):
    try:
        result = subprocess.run(["bash", str(root / script)], cwd=root, env=env, capture_output=True, text=True,
                                timeout=300)
    except subprocess.TimeoutExpired:
        return ["hangs"]
    text = result.stdout + result.stderr
    problems = [] if result.returncode == 2 else [f"exit {result.returncode}"]
    if not (result.stderr.startswith("ampbench: error: ") and result.stderr.count("\n") == 1):
        problems.append(f"stderr {result.stderr.strip()[-160:]!r}")
    problems += [word for word in ("Traceback", "usage:") if word in text]
    problems += ["the injected command ran"] if canary.exists() else []
    problems += ["a stage ran"] if any(line.startswith("+ ") and "main.py" in line and "--check-flags" not in line
                                       for line in result.stdout.splitlines()) else []
    return problems


def family6(root, folder):
    cases, broken = [], []
    canary = folder / "pwned"
    dry = [(f"{script} {name}={value}", script, True, {name: value})
           for script in ("run_thetagpu.sh", "run_pbs.sh", "run_slurm.sh")
           for name in ("RESULTS_ROOT", "CIFAR10_DIR", "CONTAINER", "BIND") for value in ("-x", "--help", "-", "-rf")]
    real = [(f"MODES={value}", "run_slurm.sh", False, {"MODES": value})
            for value in ("AMP-BF16", "FP32", "amp_bf16", "fp64", "fp32,AMP-FP16", "bf16")]
    real += [(f"EXTRA_ARGS={value}", "run_slurm.sh", False, {"EXTRA_ARGS": f"--allow-unverified {value}"})
             for value in (f"--tag $(touch {canary})", f"$(touch {canary})", "--bogus", "--seeds 2", "--lr abc",
                           "--epochs -1")]
    real += [("an image without torch", "run_slurm.sh", False,
              {"PYTHONPATH": fake_torch(folder / "a", "raise ModuleNotFoundError('No module named torch')\n")}),
             ("an image with torch 1.0", "run_slurm.sh", False,
              {"PYTHONPATH": fake_torch(folder / "b", "__version__ = '1.0.0'\n")})]
    for index, (name, script, is_dry, values) in enumerate(dry + real):
        work = folder / f"j{index}"
        work.mkdir()
        cases.append(name)
        problems = script_problems(root, script, script_env(root, work, is_dry, **values), canary)
        if problems:
            broken.append(f"{name}: {'; '.join(problems)}")
    return len(cases), broken


def family7(root, folder):
    """Two busy loops on the cores while a mode is timed: its record says so, and the table warns."""
    cases, broken = [], []
    burners = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(2)]
    try:
        # the runs last a second, the load average follows over a minute: let it show the loops first
        deadline = time.monotonic() + 300
        while os.getloadavg()[0] < 1.8 and time.monotonic() < deadline:
            time.sleep(2)
        for mode, model in [("fp32", "squeezenet1_1"), ("amp-bf16", "squeezenet1_1"), ("fp32", "resnet18"),
                            ("fp32,amp-bf16", "squeezenet1_1")]:
            name, out = f"{mode} {model} beside two busy loops", folder / f"{len(cases)}.json"
            cases.append(name)
            result = main_py(root, ["--data", "synthetic", "-n", "8", "--warmup", "2", "--model", model, "-b", "8",
                                    "--modes", mode, "--no-progress", "--json", out], timeout=600,
                             env={**os.environ, "OMP_NUM_THREADS": "2"})
            runs = runs_of(out)
            hosts = [run.get("host") for run in runs]
            if result.returncode or not runs or not all(host and host.get("warning") for host in hosts) \
                    or "the host was busy" not in result.stdout.replace("\n  ", " "):
                broken.append(f"{name}: exit {result.returncode}, runs[].host {hosts[:1]!r}")
    finally:
        for burner in burners:
            burner.kill()
            burner.wait()
    return len(cases), broken


def campaign(root):
    """{family: (cases, broken)} of ROOT's code."""
    with tempfile.TemporaryDirectory() as folder:
        folder = Path(folder)
        (folder / "6").mkdir()
        (folder / "7").mkdir()
        return {"5": in_root(root, "5"), "6": family6(root, folder / "6"), "7": family7(root, folder / "7"),
                "8": in_root(root, "8")}


def main(argv):
    if argv[:1] == ["--worker"]:
        worker(argv[1])
        return 0
    root = Path(argv[0]).resolve() if argv else HERE.parents[1]
    found = campaign(root)
    for family, (count, broken) in found.items():
        print(f"family {family}: {count} cases, {len(broken)} broken")
        for item in broken:
            print(f"  broken: {item}")
    total = sum(count for count, _ in found.values())
    print(f"total: {total} cases, {sum(len(broken) for _, broken in found.values())} broken ({root})")
    return 1 if any(broken for _, broken in found.values()) else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
