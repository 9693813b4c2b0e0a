"""What the job scripts make of hostile variables: every one is checked before anything runs,
refused with exit 2 and one `ampbench: error:` sentence, and never evaluated by bash (a value
such as NODES='PATH[$(touch f)]' once ran its command through bash arithmetic). Most cases
are dry runs: a fraction of a second each."""
import os
import re
import shlex
import subprocess

import pytest
from test_cluster_scripts import SCRIPTS, job_env, start

from conftest import ROOT

# What the scripts read, cleared so that the caller's environment cannot change a case.
USER_VARIABLES = ["NODES", "GPUS_PER_NODE", "STEPS", "BATCH", "CHECKPOINT_EVERY", "MODES", "MODEL", "EXTRA_ARGS",
                  "CONTAINER", "CONTAINER_RUNTIME", "CIFAR10_DIR", "RESULTS_ROOT", "BIND", "USE_GPU", "DRY_RUN",
                  "MASTER_ADDR", "MASTER_PORT", "DEPTH", "AMPBENCH_DIR", "STUDY", "GRAD_COMM", "DATA", "DATA_DIR"]
# What bash itself says about a script that went wrong.
BASH_ERRORS = re.compile(r"line \d+:|syntax error|unbound variable|command not found|No such file|bad substitution")


def dry_env(tmp_path, **values):
    """A dry run outside any job, with the variables a user must set."""
    env = {key: value for key, value in os.environ.items()
           if not key.startswith(("COBALT_", "PBS_", "SLURM_")) and key not in USER_VARIABLES}
    env.update({"DRY_RUN": "1", "CONTAINER": "/lus/images/pytorch.sif", "CIFAR10_DIR": "/data",
                "RESULTS_ROOT": str(tmp_path / "results"), "MODES": "fp32,amp-bf16"})
    env.update(values)
    return env


def run_script(script, env, root=ROOT):
    return subprocess.run(["bash", str(root / script)], cwd=root, env=env, capture_output=True, text=True,
                          timeout=60)


def assert_refused(result, variable):
    assert result.returncode == 2, result.stdout + result.stderr
    assert result.stderr.startswith("ampbench: error: ") and result.stderr.count("\n") == 1, result.stderr
    assert variable in result.stderr, result.stderr
    assert not any(line.startswith("+ ") for line in result.stdout.splitlines()), "refused before any command"


# (variable, value): one row per kind of bad input.
BAD_INPUTS = [
    ("NODES", "0"), ("NODES", "-2"), ("NODES", "1.5"), ("NODES", "abc"), ("NODES", "08"),
    ("NODES", "99999999999"),
    ("GPUS_PER_NODE", "0"), ("GPUS_PER_NODE", "2 "),
    ("STEPS", "abc"), ("BATCH", "2147483648"), ("CHECKPOINT_EVERY", "-1"), ("DEPTH", "0"),
    ("MODES", "fp32,,amp-bf16"), ("MODES", "fp32,"), ("MODES", "fp32 amp-bf16"),
    ("MODES", "fp32,fp32"), ("MODES", "../fp32"), ("MODES", "--help"),
    ("MODEL", "--help"), ("MODEL", "resnet50/../x"),
    ("CONTAINER_RUNTIME", "docker"), ("CIFAR10_DIR", "/data\t2"),
    ("RESULTS_ROOT", "{file}/results"), ("RESULTS_ROOT", "results\nelsewhere"),
    ("USE_GPU", "yes"), ("DRY_RUN", "2"),
    ("MASTER_PORT", "0"), ("MASTER_PORT", "65536"), ("MASTER_ADDR", "node 1"),
    ("EXTRA_ARGS", '--tag "a b"'), ("EXTRA_ARGS", "--warmup 1\n--no-eval"),
    ("AMPBENCH_DIR", "{tmp}"),
    ("STUDY", "yes"), ("GRAD_COMM", "fp8"), ("GRAD_COMM", "fp32,,bf16"), ("GRAD_COMM", "fp32 bf16"),
    ("GRAD_COMM", "fp32,fp32"), ("GRAD_COMM", "$(touch x)"),
    ("RESULTS_ROOT", "-x"), ("RESULTS_ROOT", "--help"), ("CIFAR10_DIR", "-data"), ("CONTAINER", "-v"),
    ("BIND", "--bind"), ("DATA", "imagenet"), ("DATA", "imagefolder "),
]


@pytest.mark.parametrize("variable, value", BAD_INPUTS)
def test_a_bad_value_is_refused_before_anything_runs(variable, value, tmp_path):
    (tmp_path / "file").touch()
    value = value.format(file=tmp_path / "file", tmp=tmp_path)
    result = run_script("run_pbs.sh", dry_env(tmp_path, **{variable: value}))  # the one with DEPTH
    assert_refused(result, variable)
    assert not (tmp_path / "results").exists()


@pytest.mark.parametrize("script", SCRIPTS)
@pytest.mark.parametrize("variable", ["NODES", "GPUS_PER_NODE", "MASTER_PORT"])
def test_a_crafted_number_is_never_run_as_a_command(script, variable, tmp_path):
    canary = tmp_path / "pwned"
    env = dry_env(tmp_path, **{"NODES": "2", variable: f"PATH[$(touch {canary})]"})
    assert_refused(run_script(script, env), variable)
    assert not canary.exists()


def test_printed_commands_quote_paths_with_spaces(tmp_path):
    """Each printed command, pasted into a shell, gives every path back whole."""
    image, data, results = "/lus/my images/it's.sif", "/lus/cifar 10", tmp_path / "my results"
    env = dry_env(tmp_path, NODES="2", CONTAINER=image, CIFAR10_DIR=data, RESULTS_ROOT=str(results))
    result = run_script("run_slurm.sh", env)
    assert result.returncode == 0, result.stderr
    commands = [shlex.split(line[2:]) for line in result.stdout.splitlines() if line.startswith("+ ")]
    runs = [words for words in commands if "main.py" in words and "--check-flags" not in words]
    checks = [words for words in commands if "--check-flags" in words]
    assert len(runs) == 6 and all(image in words and data in words for words in runs + checks) and len(checks) == 2
    assert all(words[words.index("--json") + 1].startswith(f"{results}/") for words in runs)
    assert commands[-1][-1].startswith(f"{results}/") and commands[-1][-1].endswith("/merged.json")
    assert image in commands[1], "the container check too"


def test_a_study_of_one_rank_is_refused_before_any_run(tmp_path):
    result = run_script("run_pbs.sh", dry_env(tmp_path, STUDY="1", NODES="1", GPUS_PER_NODE="1"))
    assert result.returncode == 2 and result.stderr == (
        "ampbench: error: STUDY=1 needs 2 or more ranks, and this job has 1 node x 1 rank; add nodes or "
        "GPUS_PER_NODE.\n")
    assert " main.py " not in result.stdout


@pytest.mark.parametrize("script", SCRIPTS)
def test_more_nodes_than_the_job_has_are_refused_before_any_stage(script, tmp_path):
    """Outside a job (no node file), and in a 2-node job asked for 3."""
    in_job = job_env(script, tmp_path)
    outside = {key: value for key, value in in_job.items() if not key.startswith(("COBALT_", "PBS_", "SLURM_"))}
    for env, words in [({**outside, "NODES": "2"}, "outside a"), ({**in_job, "NODES": "3"}, "has 2 node")]:
        job = start(script, env)
        _, err = job.communicate(timeout=60)
        assert job.returncode == 2 and err.startswith("ampbench: error: NODES=") and words in err, err
        assert not (tmp_path / "calls.log").exists(), "no container or launcher was started"
        assert not (tmp_path / "results").exists()


@pytest.mark.parametrize("script", SCRIPTS)
@pytest.mark.parametrize("variable", ["CONTAINER", "CIFAR10_DIR"])
def test_a_missing_image_or_data_folder_is_refused(script, variable, tmp_path):
    """What a dry run does not check: what exists on the machine."""
    env = job_env(script, tmp_path, **{"NODES": "1", variable: str(tmp_path / "missing")})
    job = start(script, env)
    _, err = job.communicate(timeout=60)
    assert job.returncode == 2 and err.startswith("ampbench: error: ") and err.count("\n") == 1, err
    assert f"{variable}={tmp_path / 'missing'}" in err
    assert not (tmp_path / "calls.log").exists() and not (tmp_path / "results").exists()


@pytest.mark.parametrize("data, given, said", [
    ("imagefolder", None, "DATA_DIR is not set: set it to the image folder (a folder per class) the nodes read."),
    ("webdataset", None, "DATA_DIR is not set: set it to the shards' folder (ampbench-shards writes one) or their "
                         "brace pattern the nodes read."),
    ("imagefolder", "{tmp}/missing", "DATA_DIR={tmp}/missing is not a folder; pre-stage the data there"),
    ("webdataset", "-shards", "DATA_DIR=-shards begins with a dash, which commands read as an option"),
])
def test_your_own_data_needs_its_folder_and_cifar10_dir_is_then_not_asked_for(data, given, said, tmp_path):
    values = {"NODES": "1", "DATA": data, "CIFAR10_DIR": ""}
    if given:
        values["DATA_DIR"] = given.format(tmp=tmp_path)
    job = start("run_slurm.sh", job_env("run_slurm.sh", tmp_path, **values))
    _, err = job.communicate(timeout=60)
    assert job.returncode == 2 and err.startswith("ampbench: error: ") and err.count("\n") == 1, err
    assert said.format(tmp=tmp_path) in err
    assert not (tmp_path / "results").exists()


def test_a_dry_run_on_your_own_data_shows_it_in_every_command(tmp_path):
    result = run_script("run_slurm.sh", dry_env(tmp_path, DATA="webdataset", DATA_DIR="/lus/shards/train-{0..9}.tar",
                                                CIFAR10_DIR=""))
    assert result.returncode == 0, result.stderr
    runs = [line for line in result.stdout.splitlines() if " main.py " in line]
    assert runs and all("--data webdataset --data-dir '/lus/shards/train-{0..9}.tar'" in line for line in runs)
    assert not any("cifar10" in line for line in runs)


def without_torch(tmp_path):
    """A PYTHONPATH on which `import torch` fails: the container's Python of an image without torch."""
    (tmp_path / "fake" / "torch").mkdir(parents=True, exist_ok=True)
    (tmp_path / "fake" / "torch" / "__init__.py").write_text("raise ModuleNotFoundError('No module named torch')\n")
    return str(tmp_path / "fake")


# (case, variables, what the one sentence says): what only the container's main.py can refuse
IN_CONTAINER = [
    ("mode in capitals", {"MODES": "AMP-BF16"}, "unknown precision mode 'AMP-BF16'"),
    ("a command in EXTRA_ARGS", {"EXTRA_ARGS": "--tag $(touch {canary})"}, "unrecognized arguments: --tag"),
    ("flags main.py refuses together", {"EXTRA_ARGS": "--allow-unverified --seeds 2"}, "--checkpoint works with"),
    ("an image without torch", {"PYTHONPATH": "{fake}"}, "torch is not installed"),
    ("fp8 on the CPU stand-in without --fp8-emulate", {"MODES": "fp8", "MODEL": "vit_t4"},
     "mode fp8 needs a GPU with FP8 tensor cores (-p); on the CPU add --fp8-emulate"),
    ("a study whose one-process point would refuse", {"STUDY": "1", "EXTRA_ARGS": "--bucket-mb 50"},
     "--bucket-mb 50 sets how DDP sends gradients between processes, and this run is a single process"),
    ("a study in fp8 on the CPU stand-in", {"STUDY": "1", "MODES": "fp32,fp8", "MODEL": "vit_t4"},
     "mode fp8 needs a GPU with FP8 tensor cores"),
]


@pytest.mark.parametrize("variables, said", [case[1:] for case in IN_CONTAINER], ids=[case[0] for case in IN_CONTAINER])
def test_what_the_container_refuses_is_one_sentence_before_any_stage(variables, said, tmp_path):
    canary = tmp_path / "pwned"
    values = {key: value.format(canary=canary, fake=without_torch(tmp_path)) for key, value in variables.items()}
    job = start("run_slurm.sh", job_env("run_slurm.sh", tmp_path, NODES="1", **values))
    out, err = job.communicate(timeout=120)
    assert job.returncode == 2 and err.startswith("ampbench: error: ") and err.count("\n") == 1, err
    assert said in err and "Traceback" not in err + out and "usage:" not in err + out, err
    assert not canary.exists() and not list((tmp_path / "results").glob("*")), "no stage started"


def test_a_dry_run_shows_the_flag_check_of_every_mode(tmp_path):
    result = run_script("run_slurm.sh", dry_env(tmp_path))
    checks = [line for line in result.stdout.splitlines() if line.endswith(" --check-flags")]
    assert result.returncode == 0 and len(checks) == 2 and all("main.py" in line for line in checks), result.stdout


def test_the_study_checks_the_command_of_every_point_it_runs(tmp_path):
    """Every mode in one run with --explain and no checkpoint, so that --seeds (which the study's
    accuracy verdict pairs on) passes the check that a stage's one-mode command would refuse;
    checked as a rank of each point sees it: one process, and more ranks with each GRAD_COMM."""
    result = run_script("run_slurm.sh", dry_env(tmp_path, STUDY="1", NODES="2", EXTRA_ARGS="--seeds 3",
                                                GRAD_COMM="fp32,bf16"))
    checks = [line for line in result.stdout.splitlines() if line.endswith(" --check-flags")]
    assert result.returncode == 0 and len(checks) == 3, result.stdout + result.stderr
    assert all("--explain" in line and "--seeds 3" in line and "--checkpoint" not in line for line in checks)
    assert "env WORLD_SIZE=1 RANK=0 python main.py" in checks[0] and "--grad-comm" not in checks[0]
    assert ["WORLD_SIZE=2" in line and f"--grad-comm {comm}" in line for line, comm in
            zip(checks[1:], ["fp32", "bf16"])] == [True, True]


@pytest.mark.parametrize("words", ["--grad-comm bf16", "--grad bf16", "--grad-comm=fp16"])
def test_a_study_refuses_extra_args_that_set_the_gradient_communication(words, tmp_path):
    result = run_script("run_pbs.sh", dry_env(tmp_path, STUDY="1", NODES="2", EXTRA_ARGS=words))
    assert_refused(result, "EXTRA_ARGS holds")
    assert "set GRAD_COMM instead" in result.stderr


HEADER_DRY_RUN = re.compile(r"(?:[A-Z_0-9]+=\S+ )*DRY_RUN=1(?: [A-Z_0-9]+=\S+)*")


def test_every_dry_run_a_header_shows_runs_as_written(tmp_path):
    """A header's `STUDY=1 NODES=4 DRY_RUN=1 ./run_pbs.sh` works before CONTAINER (and, for
    Slurm, CIFAR10_DIR) is set: what is unset is shown as a placeholder."""
    shown = [(script, assignments) for script in SCRIPTS for line in (ROOT / script).read_text().splitlines()
             if line.startswith("#") for assignments in HEADER_DRY_RUN.findall(line)]
    assert len(shown) >= len(SCRIPTS) * 2, shown
    for script, assignments in shown:
        env = {key: value for key, value in os.environ.items()
               if not key.startswith(("COBALT_", "PBS_", "SLURM_")) and key not in USER_VARIABLES}
        env.update(RESULTS_ROOT=str(tmp_path / "results"))
        env.update(word.split("=", 1) for word in assignments.split() if not word.endswith("=..."))
        result = run_script(script, env)
        assert result.returncode == 0, (script, assignments, result.stderr)
        assert "<CONTAINER>" in result.stdout or "CONTAINER" not in result.stderr, result.stderr


def test_a_run_that_is_not_dry_still_needs_its_container(tmp_path):
    result = run_script("run_pbs.sh", dry_env(tmp_path, DRY_RUN="0", CONTAINER=""))
    assert_refused(result, "CONTAINER is not set")


# The campaign: hostile values for every variable, each through the three scripts.
BAD_NUMBERS = ["0", "-2", "1.5", "abc", "08", " 2", "1e3", "0x10", "99999999999999999999", "2**3",
               "PATH[$(touch {canary})]", "x[$(touch {canary})]", "$(touch {canary})", "1;touch {canary}",
               "`touch {canary}`", "1\n2"]
CAMPAIGN = (
    [(name, value, True) for name in ["NODES", "GPUS_PER_NODE", "STEPS", "BATCH", "CHECKPOINT_EVERY", "MASTER_PORT"]
     for value in BAD_NUMBERS]
    + [("MODES", value, True) for value in ["fp32,,amp-bf16", ",fp32", "fp32,", "fp32 amp-bf16", "../x", "--help",
                                             "fp32,fp32", "$(touch {canary})", "fp32;touch {canary}", "fp32\n", "a/b"]]
    + [("MODEL", value, True) for value in ["--help", "a b", "../x", "$(touch {canary})", "resnet;touch {canary}"]]
    + [("GRAD_COMM", value, True) for value in ["fp8", "fp32,,bf16", "fp32 bf16", "fp32,fp32", "$(touch {canary})",
                                                 "fp32;touch {canary}", "bf16\n"]]
    + [(name, value, True) for name in ["USE_GPU", "DRY_RUN", "STUDY"]
       for value in ["yes", "2", "true", " 1", "-1", "$(touch {canary})"]]
    + [("CONTAINER_RUNTIME", value, True) for value in ["docker", "singularity;touch {canary}", "$(touch {canary})",
                                                         "apptainer "]]
    + [("RESULTS_ROOT", value, True) for value in ["{file}/sub", "{tmp}/a\nb"]]
    + [("EXTRA_ARGS", value, True) for value in ['--tag "a b"', "--warmup 1\n--no-eval", "--x\\ y", "--tag 'x'"]]
    + [("MASTER_ADDR", value, True) for value in ["a b", "$(touch {canary})", "host;touch {canary}"]]
    + [("CIFAR10_DIR", "a\nb", True), ("CONTAINER", "a\tb", True), ("BIND", "/lus\n/x", True)]
    + [("DATA", value, True) for value in ["imagenet", "imagefolder;touch {canary}", "$(touch {canary})", "--help"]]
    + [(name, value, True) for name in ["RESULTS_ROOT", "CIFAR10_DIR", "CONTAINER", "BIND"]
       for value in ["-x", "--help"]]
    # Accepted: never evaluated, so printed as they are.
    + [("EXTRA_ARGS", "$(touch {canary})", False), ("EXTRA_ARGS", "--warmup 1 *", False),
       ("DATA_DIR", "$(touch {canary})", False),
       ("CIFAR10_DIR", "$(touch {canary})", False), ("CONTAINER", "`touch {canary}`", False),
       ("BIND", "/lus,$(touch {canary})", False)]
)


def campaign_problems(root, script, variable, value, refused, tmp_path):
    """What is wrong with one hostile run of a script in folder `root` (empty: nothing)."""
    canary = tmp_path / "pwned"
    (tmp_path / "file").touch()
    value = value.format(canary=canary, file=tmp_path / "file", tmp=tmp_path)
    env = dry_env(tmp_path, **{"NODES": "2", variable: value})
    try:
        result = run_script(script, env, root)
    except subprocess.TimeoutExpired:
        return ["hangs"]
    problems = [f"exit {result.returncode}, expected {2 if refused else 0}"] \
        if result.returncode != (2 if refused else 0) else []
    if result.returncode == 2 and not result.stderr.startswith("ampbench: error: "):
        problems.append("no ampbench: error: sentence")
    problems += [f"bash says {text!r}" for text in BASH_ERRORS.findall(result.stderr)]
    problems += ["the injected command ran"] if canary.exists() else []
    return problems


@pytest.mark.long
@pytest.mark.parametrize("script", SCRIPTS)
@pytest.mark.parametrize("variable, value, refused", CAMPAIGN)
def test_hostile_values_campaign(script, variable, value, refused, tmp_path):
    assert campaign_problems(ROOT, script, variable, value, refused, tmp_path) == []


def test_the_campaign_covers_every_variable():
    assert len(CAMPAIGN) * len(SCRIPTS) >= 50
    assert {variable for variable, _, _ in CAMPAIGN} >= set(USER_VARIABLES) - {"DEPTH", "AMPBENCH_DIR"}
