"""The scheduler scripts (run_thetagpu.sh, run_pbs.sh, run_slurm.sh) run end to end on the CPU:
stand-ins for the container runtime and the launchers (tests/cluster/standins) run the commands here
with the rank variables the real ones set, the scheduler's variables are faked (a node file
with two names for this machine), and USE_GPU=0 drops -p, so each stage runs 2 gloo processes."""
import json
import os
import re
import shlex
import signal
import subprocess
import sys
import time

import pytest
from test_cluster import free_port, needs

from conftest import ROOT, SUBSET, image_tree

SCRIPTS = ["run_thetagpu.sh", "run_pbs.sh", "run_slurm.sh"]
STANDINS = ROOT / "tests" / "cluster" / "standins"
# Tiny runs: what is tested is the script, not the benchmark.
SMALL = {"MODEL": "squeezenet1_1", "STEPS": "4", "BATCH": "8", "CHECKPOINT_EVERY": "2",
         "EXTRA_ARGS": "--allow-unverified --warmup 1 --no-eval --dropout 0"}


def standin_bin(tmp_path, python):
    """A folder for PATH holding the stand-ins under their real names, and `python`."""
    folder = tmp_path / "bin"
    folder.mkdir()
    for name, target in [("singularity", "container"), ("apptainer", "container"), ("mpirun", "launcher"),
                         ("mpiexec", "launcher"), ("srun", "launcher"), ("scontrol", "scontrol"),
                         ("squeue", "squeue"), ("qstat", "qstat")]:
        (folder / name).symlink_to(STANDINS / target)
    (folder / "python").write_text(f'#!/bin/sh\nexec "{python}" "$@"\n')  # the venv's, as the container's
    (folder / "python").chmod(0o755)
    return folder


def job_env(script, tmp_path, job_id="4242", **extra):
    """What the scheduler would give a 2-node job, two ranks per node."""
    image = tmp_path / "pytorch.sif"
    image.touch()
    nodes = tmp_path / "nodes"
    nodes.write_text("localhost\n127.0.0.1\n")
    env = {**os.environ, **SMALL, "USE_GPU": "0", "GPUS_PER_NODE": "2", "CONTAINER": str(image),
           "CIFAR10_DIR": str(SUBSET), "RESULTS_ROOT": str(tmp_path / "results"), "MASTER_PORT": free_port(),
           "OMP_NUM_THREADS": "1", "STANDIN_LOG": str(tmp_path / "calls.log"),
           "PATH": f"{standin_bin(tmp_path, sys.executable)}:{os.environ['PATH']}"}
    env.update({"run_thetagpu.sh": {"COBALT_NODEFILE": str(nodes), "COBALT_JOBID": job_id},
                "run_pbs.sh": {"PBS_NODEFILE": str(nodes), "PBS_JOBID": f"{job_id}.polaris-pbs-01",
                               "PBS_O_WORKDIR": str(ROOT)},
                "run_slurm.sh": {"SLURM_JOB_ID": job_id, "SLURM_JOB_NODELIST": "localhost,127.0.0.1",
                                 "SLURM_SUBMIT_DIR": str(ROOT)}}[script])
    env.update(extra)
    return env


def start(script, env):
    return subprocess.Popen(["bash", script], cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, start_new_session=True)


@pytest.mark.job_scripts
@pytest.mark.parametrize("script", SCRIPTS)
def test_a_two_node_job_runs_every_stage_and_merges_them(script, tmp_path, subset):
    env = job_env(script, tmp_path, MODES="fp32,amp-bf16" if script == "run_thetagpu.sh" else "fp32")
    started_on = time.strftime("%Y-%m-%d")
    out, err = start(script, env).communicate(timeout=600)
    assert "Traceback" not in err, err
    folders = list((tmp_path / "results").iterdir())
    # the folder bears the day the job started, which is today's or, past midnight, the day before
    days = {started_on, time.strftime("%Y-%m-%d")}
    assert len(folders) == 1 and folders[0].name in {f"{day}-4242" for day in days}, "one dated folder per job"
    modes = env["MODES"].split(",")
    expected = {f"{stage}-{mode}.json" for stage in ("1gpu", "1node", "2nodes") for mode in modes}
    written = {path.name for path in folders[0].glob("*-*.json")}
    assert written == expected, err
    for name in expected:
        document = json.loads((folders[0] / name).read_text())
        stage = name.split("-")[0]
        launcher = {"run_thetagpu.sh": "mpirun", "run_pbs.sh": "mpiexec", "run_slurm.sh": "srun"}[script]
        assert (document["env"]["world_size"], document["env"]["launcher"]) == \
            {"1gpu": (1, "srun" if script == "run_slurm.sh" else None),  # Slurm starts even one task with srun
             "1node": (2, "torchrun"), "2nodes": (4, launcher)}[stage], name
        assert not document["incomplete"], name
    merged = json.loads((folders[0] / "merged.json").read_text())
    assert len(merged) == 3, "one comparison per stage"
    assert (folders[0] / "report.txt").read_text().count("median ms") == 3
    assert "Python " in out and "no GPU visible" in out, "the container's versions are printed first"
    calls = (tmp_path / "calls.log").read_text()
    assert "--nv" not in calls and " -p " not in calls


@pytest.mark.job_scripts
@pytest.mark.parametrize("data", ["imagefolder", "webdataset"])
def test_a_job_streams_your_images_or_their_shards_through_every_stage(data, tmp_path):
    from utils.data import shard_writer

    folder = image_tree(tmp_path / "tree", per_class=8, size=(40, 30))
    if data == "webdataset":  # 21 training images in 7 shards: enough for 4 ranks' one reader each
        assert shard_writer.main([str(folder), str(tmp_path / "shards"), "--workers", "0", "--shard-images", "3"]) == 0
        folder = tmp_path / "shards"
    env = job_env("run_slurm.sh", tmp_path, MODES="fp32", DATA=data, DATA_DIR=str(folder), CIFAR10_DIR="", BATCH="4",
                  EXTRA_ARGS="--warmup 1 --no-eval --dropout 0 --loader stream --workers 0")
    out, err = start("run_slurm.sh", env).communicate(timeout=600)
    assert "Traceback" not in err, err
    (results,) = (tmp_path / "results").iterdir()
    for stage, ranks in (("1gpu", 1), ("1node", 2), ("2nodes", 4)):
        assert (results / f"{stage}-fp32.json").exists(), err[-3000:]
        document = json.loads((results / f"{stage}-fp32.json").read_text())
        (run,) = document["runs"]
        assert (document["data"]["name"], document["env"]["world_size"], run["loader"]) == (data, ranks, "stream")
        assert not document["incomplete"] and run["feed"]["bound"] in ("input", "step", "balanced"), stage
    assert (results / "report.txt").read_text().count("median ms") == 3
    assert f"--data {data} --data-dir {folder}" in (tmp_path / "calls.log").read_text()


@pytest.mark.job_scripts
def test_a_job_log_holds_the_commands_and_the_phase_lines(tmp_path, subset):
    """A batch log is not a terminal: main.py writes plain timestamped phase and progress lines
    there, which the scripts keep (no --no-progress), after each command they run."""
    env = job_env("run_pbs.sh", tmp_path, NODES="1", MODES="fp32")
    job = start("run_pbs.sh", env)
    out, err = job.communicate(timeout=600)
    assert job.returncode == 0, err
    commands = [shlex.split(line[2:]) for line in out.splitlines() if line.startswith("+ ")]
    assert sum("main.py" in words for words in commands) == 2, out
    for line in ["model squeezenet1_1 built", "data loaded", "fp32: training steps 1 to 4", "fp32 step 4/4  loss "]:
        stamped = re.findall(rf"^\[\d\d:\d\d:\d\d\] {line}", err, re.MULTILINE)
        assert len(stamped) == 2, (line, err)  # from rank 0 of each stage


@pytest.mark.job_scripts
@pytest.mark.parametrize("script", ["run_pbs.sh"])
def test_a_rerun_job_resumes_from_its_checkpoint(script, tmp_path, subset):
    """A preempted job (SIGTERM) that the scheduler reruns skips what finished and resumes the cut run."""
    env = job_env(script, tmp_path, NODES="1", MODES="fp32", STEPS="400", CHECKPOINT_EVERY="2")
    job = start(script, env)
    checkpoint = None
    deadline = time.time() + 240
    while checkpoint is None and time.time() < deadline:
        found = list((tmp_path / "results").glob("*/1gpu-fp32.pt"))
        checkpoint = found[0] if found else None
        time.sleep(0.5)
    assert checkpoint is not None, job.communicate()
    os.killpg(job.pid, signal.SIGTERM)
    _, err = job.communicate(timeout=120)
    assert job.returncode == 143 and "resubmit" in err, err
    cut = json.loads(checkpoint.with_suffix(".json").read_text())
    assert cut["incomplete"]
    steps = cut["runs"][0]["completed_steps"] + 10  # how far the cut run got depends on the machine's speed

    rerun = start(script, {**env, "STEPS": str(steps)})  # the rerun finds the same folder through the job id
    out, err = rerun.communicate(timeout=600)
    assert rerun.returncode == 0, err
    assert "resumes from" in out
    run = json.loads(checkpoint.with_suffix(".json").read_text())["runs"][0]
    assert run["resumed_from_step"] and run["completed_steps"] == steps
    assert len(list((tmp_path / "results").iterdir())) == 1


@pytest.mark.job_scripts
def test_a_two_node_study_runs_every_point_and_writes_the_scaling_table(tmp_path, subset):
    """STUDY=1 with one rank per node: 1 rank, then 2 nodes for each GRAD_COMM, then the table."""
    env = job_env("run_slurm.sh", tmp_path, STUDY="1", GPUS_PER_NODE="1", MODES="fp32,amp-bf16",
                  GRAD_COMM="fp32,bf16")
    job = start("run_slurm.sh", env)
    out, err = job.communicate(timeout=600)
    assert job.returncode == 0, err
    study = next((tmp_path / "results").iterdir()) / "study"
    assert sorted(path.name for path in study.glob("ranks*.json")) == ["ranks1.json", "ranks2-bf16.json",
                                                                       "ranks2-fp32.json"]
    rows = json.loads((study / "scaling.json").read_text())["rows"]
    assert [(row["mode"], row["world_size"], row["grad_comm"]) for row in rows] == [
        ("fp32", 1, None), ("fp32", 2, "fp32"), ("fp32", 2, "bf16"), ("amp-bf16", 1, None), ("amp-bf16", 2, "fp32"),
        ("amp-bf16", 2, "bf16")]
    assert "efficiency [95% CI]" in out and (study / "scaling.png").exists()


@pytest.mark.parametrize("script, per_node, launchers", [
    ("run_thetagpu.sh", 8, ["mpirun -n 16 -npernode 8", "mpirun -n 32 -npernode 8"]),
    ("run_pbs.sh", 4, ["mpiexec -n 8 --ppn 4", "mpiexec -n 16 --ppn 4"]),
    ("run_slurm.sh", 4, ["srun --nodes=2 --ntasks=8", "srun --nodes=4 --ntasks=16"])])
def test_a_dry_run_of_the_study_launches_each_node_count_and_each_grad_comm(script, per_node, launchers, tmp_path):
    env = {key: value for key, value in os.environ.items() if not key.startswith(("COBALT_", "PBS_", "SLURM_"))}
    env.update({"DRY_RUN": "1", "STUDY": "1", "NODES": "4", "GRAD_COMM": "fp32,bf16", "CONTAINER": "/lus/pytorch.sif",
                "CIFAR10_DIR": "/data", "RESULTS_ROOT": str(tmp_path / "results"), "MODES": "fp32,amp-bf16"})
    result = subprocess.run(["bash", script], cwd=ROOT, capture_output=True, text=True, env=env)
    assert result.returncode == 0, result.stderr
    runs = [line[2:] for line in result.stdout.splitlines() if line.startswith("+ ") and " main.py " in line
            and not line.endswith("--check-flags")]  # the flag checks come first, one per mode
    names = [shlex.split(run)[-1].rsplit("/", 1)[-1] for run in runs]
    sizes = [per_node, 2 * per_node, 4 * per_node]
    assert names == ["ranks1.json"] + [f"ranks{size}-{comm}.json" for size in sizes for comm in ("fp32", "bf16")]
    assert all("--modes fp32,amp-bf16 --explain" in run and "--checkpoint" not in run for run in runs)
    assert "--grad-comm" not in runs[0] and all(f"--grad-comm {comm} " in run for run, comm in
                                                zip(runs[1:], ["fp32", "bf16"] * 3))
    assert f"--nproc_per_node={per_node} main.py" in runs[1]
    assert runs[3].startswith(launchers[0]) and runs[5].startswith(launchers[1])
    last = shlex.split(result.stdout.splitlines()[-1][2:])
    assert last[-7:-4] == ["python", "-m", "benchmarks.scaling"] and last[-4] == "--from"
    assert last[-3].endswith("/study") and last[-1] == last[-3]
    assert not (tmp_path / "results").exists(), "a dry run creates nothing"


@pytest.mark.parametrize("script", SCRIPTS)
def test_shellcheck_clean(script):
    assert subprocess.run(["bash", "-n", script], cwd=ROOT).returncode == 0
    result = subprocess.run([needs("shellcheck"), "-x", script, "cluster/stages.sh", "tests/cluster/standins/container",
                             "tests/cluster/standins/launcher", "tests/cluster/standins/squeue",
                             "tests/cluster/standins/qstat"], cwd=ROOT, capture_output=True, text=True)
    assert result.returncode == 0, result.stdout


@pytest.mark.parametrize("script, directive", [("run_thetagpu.sh", "#COBALT -q full-node"),
                                               ("run_pbs.sh", "#PBS -r y"), ("run_slurm.sh", "#SBATCH --requeue")])
def test_scripts_start_as_their_site_expects(script, directive):
    lines = (ROOT / script).read_text().splitlines()
    assert lines[0] == "#!/bin/bash -l", "a login shell, so that `module` works"
    assert directive in lines[:12]


@pytest.mark.parametrize("script, nodes, per_node, launcher", [
    ("run_thetagpu.sh", 1, 8, None), ("run_thetagpu.sh", 2, 8, "mpirun -n 16 -npernode 8"),
    ("run_pbs.sh", 2, 4, "mpiexec -n 8 --ppn 4"), ("run_slurm.sh", 2, 4, "srun --nodes=2 --ntasks=8"),
    ("run_thetagpu.sh", 1, 1, None)])
def test_dry_runs_print_every_stage_and_create_nothing(script, nodes, per_node, launcher, tmp_path):
    env = {key: value for key, value in os.environ.items()
           if not key.startswith(("COBALT_", "PBS_", "SLURM_"))}
    env.update({"DRY_RUN": "1", "NODES": str(nodes), "CONTAINER": "/lus/images/pytorch.sif", "CIFAR10_DIR": "/data",
                "RESULTS_ROOT": str(tmp_path / "results"), "MODES": "fp32,amp-bf16"})
    if per_node == 1:
        env["GPUS_PER_NODE"] = "1"  # what a single-gpu queue's job has
    result = subprocess.run(["bash", script], cwd=ROOT, capture_output=True, text=True, env=env)
    assert result.returncode == 0, result.stderr
    commands = [line[2:] for line in result.stdout.splitlines() if line.startswith("+ ")]
    assert commands[0].endswith("python -m utils.compat"), "the container is checked first"
    assert [c.split(" main.py ")[1].split()[8] for c in commands[1:3]] == ["fp32", "amp-bf16"], "then each mode's flags"
    assert all(c.endswith(" --check-flags") for c in commands[1:3]) and commands[3].startswith("mkdir -p ")
    runs = [c for c in commands if " main.py " in c and "--check-flags" not in c]
    assert len(runs) == 2 * (3 if nodes > 1 else 2)
    assert all(" -p " in c and "--nv" in c and "--checkpoint " in c for c in runs)
    assert f"--nproc_per_node={per_node} main.py" in runs[2]
    if launcher:
        assert runs[4].startswith(launcher) and "2nodes-fp32.json" in runs[4]
    assert "python -m utils.report" in commands[-1] and commands[-1].endswith("/merged.json")
    assert not (tmp_path / "results").exists(), "a dry run creates nothing"


@pytest.mark.job_scripts
def test_a_job_whose_runs_are_refused_says_to_change_them_not_to_resubmit(tmp_path):
    """Runs that main.py refuses (exit 2: here CIFAR-10 files that are not CIFAR-10, which only
    reading them shows) would be refused again: the last line says so instead of "resubmit"."""
    data = tmp_path / "cifar10"
    (data / "cifar-10-batches-py").mkdir(parents=True)
    for name in ["data_batch_1", "data_batch_2", "data_batch_3", "data_batch_4", "data_batch_5", "test_batch",
                 "batches.meta"]:
        (data / "cifar-10-batches-py" / name).write_bytes(b"not a pickle")
    env = job_env("run_slurm.sh", tmp_path, NODES="1", MODES="fp32", CIFAR10_DIR=str(data))
    job = start("run_slurm.sh", env)
    _, err = job.communicate(timeout=300)
    assert job.returncode == 1, err
    last = err.strip().splitlines()[-1]
    assert last.startswith("ampbench: error: these runs failed (their messages are above): 1gpu fp32"), last
    assert "1gpu fp32 refused what it was asked (exit 2), which a resubmission repeats" in last, last


@pytest.mark.job_scripts
@pytest.mark.parametrize("script, time_left", [("run_slurm.sh", {"STANDIN_TIME_LEFT": "3:40"}),
                                               ("run_pbs.sh", {"STANDIN_WALLTIME": "00:05:00",
                                                               "STANDIN_USED": "00:01:20"})])
def test_an_advise_job_runs_the_adviser_within_the_time_the_job_has_left(script, time_left, tmp_path, subset):
    """ADVISE=1: --advise on the first node, its budget the job's 220 s left less a tenth and the
    margin (one minute), its flags checked in the container first, its advice in the results folder."""
    env = job_env(script, tmp_path, NODES="1", ADVISE="1", MODEL="squeezenet1_1", BATCH="8", STEPS="4",
                  EXTRA_ARGS="--allow-unverified --dropout 0", **time_left)
    job = start(script, env)
    out, err = job.communicate(timeout=400)
    assert job.returncode == 0, err
    assert "--advise gets BUDGET=1 of the 3 minutes" in out
    (run,) = [shlex.split(line[2:]) for line in out.splitlines() if line.startswith("+ ") and "main.py" in line]
    calls = [line for line in (tmp_path / "calls.log").read_text().splitlines()
             if line.startswith(("apptainer ", "singularity ")) and "main.py" in line]
    assert len(calls) == 2 and calls[0].endswith("--check-flags") and " --advise " in calls[0]  # checked first
    assert run[run.index("--budget") + 1] == "1" and "--allow-slow-fp16" not in run and "-p" not in run
    folder = next((tmp_path / "results").iterdir()) / "advice"
    assert run[run.index("--advice-dir") + 1] == str(folder)
    advice = json.loads((folder / "advice.json").read_text())
    assert advice["budget"]["minutes"] == 1 and advice["budget"]["spent_s"] <= 60 + 30
    assert (folder / "report.txt").is_file() and f"the advice (exit {advice['exit_code']}, its status)" in out


@pytest.mark.job_scripts
def test_an_advise_job_whose_flags_the_adviser_refuses_stops_before_it_measures(tmp_path):
    env = job_env("run_slurm.sh", tmp_path, NODES="1", ADVISE="1", BUDGET="5", EXTRA_ARGS="--modes fp32")
    job = start("run_slurm.sh", env)
    _, err = job.communicate(timeout=300)
    assert job.returncode == 2, err
    assert "main.py refuses the flags MODES and EXTRA_ARGS give it (--advise chooses the precision modes" in err
    assert not list((tmp_path / "results").glob("*/advice"))


@pytest.mark.parametrize("script", ["run_slurm.sh", "run_pbs.sh"])
def test_a_dry_run_of_an_advise_job_prints_its_check_and_its_run(script, tmp_path):
    env = {key: value for key, value in os.environ.items() if not key.startswith(("COBALT_", "PBS_", "SLURM_"))}
    env.update({"DRY_RUN": "1", "ADVISE": "1", "CONTAINER": "/lus/pytorch.sif", "CIFAR10_DIR": "/data",
                "RESULTS_ROOT": str(tmp_path / "results"), "MODEL": "resnet50", "BATCH": "128"})
    result = subprocess.run(["bash", script], cwd=ROOT, capture_output=True, text=True, env=env)
    assert result.returncode == 0, result.stderr
    assert "gave no time left for this job: --advise gets BUDGET=10 minutes (set BUDGET)" in result.stdout
    runs = [shlex.split(line[2:]) for line in result.stdout.splitlines() if line.startswith("+ ") and "main.py" in line]
    assert len(runs) == 2 and runs[0][-1] == "--check-flags"
    assert runs[0][runs[0].index("main.py"):-1] == runs[1][runs[1].index("main.py"):]
    assert runs[1][runs[1].index("main.py") + 1:][:8] == ["--advise", "-p", "--model", "resnet50", "-b", "128", "-n",
                                                        "300"]
    assert "--nv" in runs[1] and runs[1][-4:-2] == ["--budget", "10"] and runs[1][-1].endswith("/advice")
    assert not (tmp_path / "results").exists(), "a dry run creates nothing"


def test_advise_and_study_are_one_or_the_other(tmp_path):
    env = {key: value for key, value in os.environ.items() if not key.startswith(("COBALT_", "PBS_", "SLURM_"))}
    env.update({"DRY_RUN": "1", "ADVISE": "1", "STUDY": "1", "CONTAINER": "/lus/pytorch.sif", "CIFAR10_DIR": "/data",
                "RESULTS_ROOT": str(tmp_path / "results")})
    result = subprocess.run(["bash", "run_slurm.sh"], cwd=ROOT, capture_output=True, text=True, env=env)
    assert result.returncode == 2 and "STUDY=1 and ADVISE=1 each run instead of the stages; set one." in result.stderr
