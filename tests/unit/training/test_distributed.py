"""The launcher's variables, checked before a process joins a job; the sentences for ranks
that disagree on flags or lose a peer. No process group here: see tests/cluster/test_cluster.py."""
import os
import socket
import subprocess
import sys

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from conftest import ROOT, assert_user_error, run_main
from utils import launch
from utils.config import SETTINGS, RunConfig
from utils.errors import RankLost, UserError
from utils.launch import World
from utils.training import distributed

REFUSED = [
    ({"WORLD_SIZE": "abc", "RANK": "0"}, "WORLD_SIZE=abc must be an integer from 1 to"),
    ({"WORLD_SIZE": "0", "RANK": "0"}, "WORLD_SIZE=0 must be an integer from 1 to"),
    ({"WORLD_SIZE": "2", "RANK": "2"}, "RANK=2 must be an integer from 0 to 1 (below WORLD_SIZE=2), as torchrun"),
    ({"WORLD_SIZE": "2", "RANK": "-1"}, "RANK=-1 must be an integer from 0 to 1"),
    ({"WORLD_SIZE": "2", "RANK": " 1"}, "RANK=' 1'"),
    ({"WORLD_SIZE": "9" * 5000, "RANK": "0"}, "WORLD_SIZE='9999"),
    ({"WORLD_SIZE": "2", "RANK": "0", "LOCAL_RANK": "x"}, "LOCAL_RANK=x must be an integer from 0 to 1"),
    ({"WORLD_SIZE": "4", "RANK": "0", "LOCAL_RANK": "2", "LOCAL_WORLD_SIZE": "2"},
     "LOCAL_RANK=2 must be an integer from 0 to 1 (below LOCAL_WORLD_SIZE=2)"),
    ({"WORLD_SIZE": "2", "RANK": "0", "LOCAL_WORLD_SIZE": "3"}, "LOCAL_WORLD_SIZE=3 must be an integer from 1 to 2"),
    ({"WORLD_SIZE": "2"}, "WORLD_SIZE=2 is set but RANK is not"),
    ({"RANK": "1"}, "RANK=1 is set but WORLD_SIZE is not"),
    ({"OMPI_COMM_WORLD_SIZE": "2"}, "OMPI_COMM_WORLD_SIZE=2 is set but OMPI_COMM_WORLD_RANK is not, so this "
                                    "process cannot tell its place in the job; start it with mpirun"),
    ({"OMPI_COMM_WORLD_SIZE": "2", "OMPI_COMM_WORLD_RANK": "5"}, "OMPI_COMM_WORLD_RANK=5 must be an integer from 0 "
                                                                 "to 1 (below OMPI_COMM_WORLD_SIZE=2), as mpirun"),
    ({"PMI_SIZE": "2", "PMI_RANK": "0", "MPI_LOCALRANKID": "7"}, "MPI_LOCALRANKID=7 must be an integer from 0 to 1"),
    ({"PMI_RANK": "0"}, "PMI_RANK=0 is set but PMI_SIZE is not"),
    ({"SLURM_PROCID": "0", "SLURM_STEP_NUM_TASKS": "two"}, "SLURM_STEP_NUM_TASKS=two must be an integer"),
    ({"SLURM_PROCID": "0", "SLURM_STEP_NUM_TASKS": "2", "SLURM_STEP_TASKS_PER_NODE": "2(x"},
     "SLURM_STEP_TASKS_PER_NODE=2(x must list the tasks per node"),
    ({"SLURM_PROCID": "0", "SLURM_STEP_NUM_TASKS": "2", "SLURM_STEP_TASKS_PER_NODE": "4"},
     "each from 1 to SLURM_STEP_NUM_TASKS=2"),
    ({"WORLD_SIZE": "2", "RANK": "0\n"}, r"RANK='0\n' must be"),
]


@pytest.mark.parametrize("env, phrase", REFUSED, ids=[str(case[0])[:60] for case in REFUSED])
def test_a_garbled_launcher_environment_is_refused_naming_the_variable(env, phrase):
    with pytest.raises(UserError) as refusal:
        launch.detect(env)
    assert phrase in str(refusal.value)


ACCEPTED = [
    ({}, World()),
    ({"PATH": "/bin", "LOCAL_RANK": "3"}, World()),  # LOCAL_RANK alone starts no job
    ({"WORLD_SIZE": "1", "RANK": "0"}, World(0, 1, 0, 1, "torchrun")),
    ({"WORLD_SIZE": "4", "RANK": "3", "LOCAL_RANK": "1", "LOCAL_WORLD_SIZE": "2"}, World(3, 4, 1, 2, "torchrun")),
    ({"OMPI_COMM_WORLD_SIZE": "2", "OMPI_COMM_WORLD_RANK": "1"}, World(1, 2, 0, 1, "mpirun")),
    ({"PMI_SIZE": "8", "PMI_RANK": "5", "MPI_LOCALRANKID": "1", "MPI_LOCALNRANKS": "4"}, World(5, 8, 1, 4, "mpiexec")),
    ({"SLURM_PROCID": "4", "SLURM_STEP_NUM_TASKS": "7", "SLURM_LOCALID": "2", "SLURM_STEP_TASKS_PER_NODE": "1,3(x2)"},
     World(4, 7, 2, 3, "srun")),
    ({"SLURM_PROCID": "0", "SLURM_LOCALID": "0"}, World()),  # a Slurm batch script, not a task of srun
]


@pytest.mark.parametrize("env, world", ACCEPTED, ids=[str(case[0])[:60] for case in ACCEPTED])
def test_a_launcher_environment_gives_the_process_its_place(env, world):
    assert launch.detect(env) == world


def test_main_refuses_a_garbled_launcher_environment_before_loading_data(monkeypatch):
    monkeypatch.setenv("WORLD_SIZE", "abc")
    monkeypatch.setenv("RANK", "0")
    result = run_main("--data", "synthetic", "-n", "2", "--warmup", "1", "--model", "squeezenet1_1", "-b", "4")
    assert_user_error(result, "main.py: error: WORLD_SIZE=abc must be an integer")
    assert "data loaded" not in result.stderr


def test_rank_0_refuses_a_master_port_another_program_holds():
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        env = {**os.environ, "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(port), "WORLD_SIZE": "2", "RANK": "0"}
        result = subprocess.run([sys.executable, "main.py", "--data", "synthetic", "-n", "2", "--warmup", "1",
                                 "--model", "squeezenet1_1", "-b", "4", "--dist-timeout", "60"],
                                cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)
    assert_user_error(result, f"MASTER_PORT {port} is already in use on this host")


def test_the_flags_that_differ_between_ranks_are_named():
    rank0 = RunConfig.build().record()
    others = [dict(rank0, batch_size=16, channels_last=True), dict(rank0), dict(rank0, batch_size=32)]
    assert distributed.settings_differ([rank0] + others) == (
        "the ranks were started with different flags: --batch-size is 128 on rank 0 but 16 on rank 1 (and 1 more "
        "ranks), --channels-last is off on rank 0 but on on rank 1; start every rank with the same command line.")


def test_a_renamed_flag_that_differs_between_ranks_is_named_by_both_its_spellings():
    rank0 = RunConfig.build().record()
    assert distributed.settings_differ([rank0, dict(rank0, warmup=3, warmup_lr_steps=2)]) == (
        "the ranks were started with different flags: --timing-warmup/--warmup is 10 on rank 0 but 3 on rank 1, "
        "--lr-warmup-steps/--warmup-lr-steps is unset on rank 0 but 2 on rank 1; start every rank with the same "
        "command line.")


def test_the_settings_allowed_to_differ_between_ranks_are_flags():
    assert distributed.PER_RANK_SETTINGS <= set(SETTINGS)


GLOO_PEER_GONE = ("[/pytorch/third_party/gloo/gloo/transport/tcp/pair.cc:561] Connection closed by peer "
                  "[127.0.0.1]:27563. This is typically caused by a remote worker crashing.")


def test_a_collective_failing_for_a_lost_rank_is_one_sentence():
    with pytest.raises(RankLost, match=r"^rank 1 lost another rank of the job mid-run \(connection closed by peer\)"):
        with distributed.session(World(1, 2, launcher="torchrun")):
            raise RuntimeError(GLOO_PEER_GONE)


@pytest.mark.parametrize("world, error", [
    (World(1, 2, launcher="torchrun"), RuntimeError("injected failure on rank 1")),
    (World(1, 2, launcher="torchrun"), RuntimeError("CUDA out of memory. Tried to allocate 2 GiB")),
    (World(), RuntimeError(GLOO_PEER_GONE)),
])
def test_other_errors_pass_through_the_session_unchanged(world, error):
    with pytest.raises(RuntimeError) as raised:
        with distributed.session(world):
            raise error
    assert raised.value is error


# The launchers' variables, each unset, a plausible value or garbage.
VARIABLES = ["RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE",
             "OMPI_COMM_WORLD_LOCAL_RANK", "OMPI_COMM_WORLD_LOCAL_SIZE", "PMI_RANK", "PMI_SIZE", "PMI_LOCAL_RANK",
             "PMI_LOCAL_SIZE", "MPI_LOCALRANKID", "MPI_LOCALNRANKS", "SLURM_PROCID", "SLURM_STEP_NUM_TASKS",
             "SLURM_LOCALID", "SLURM_STEP_TASKS_PER_NODE"]
values = st.one_of(st.integers(-3, 9).map(str), st.integers(-2 ** 70, 2 ** 70).map(str),
                   st.sampled_from(["", " 1", "1 ", "0x1", "1e3", "+1", "٣", "2(x3),1", "1,3(x2)", "nan", "4(x"]),
                   st.text(max_size=12))
launches = st.dictionaries(st.sampled_from(VARIABLES), values, max_size=8)


@pytest.mark.long
# the same examples on every run, as in the hostile campaigns, so that CI never fails on a fresh draw;
# HOSTILE_RANDOM=1 draws new ones
@settings(deadline=None, derandomize=not os.environ.get("HOSTILE_RANDOM"),
          max_examples=int(os.environ.get("HOSTILE_EXAMPLES", 0)) or 500)
@given(launches)
def test_any_launcher_environment_gives_a_valid_place_or_one_sentence(env):
    try:
        world = launch.detect(env)
    except UserError as refusal:
        assert "\n" not in str(refusal) and str(refusal).endswith(".")
        return
    assert 0 <= world.rank < world.size and 1 <= world.local_size <= world.size
    assert 0 <= world.local_rank < world.size


def test_every_rank_takes_part_in_the_collective_that_names_the_nodes(monkeypatch):
    """finish() gathers the hostnames for rank 0's results file: a rank that returned before
    joining would leave rank 0 waiting in the gather, and the job hanging, for ever."""
    from types import SimpleNamespace

    import torch

    from utils import app
    from utils.training.context import RunContext

    joined = []
    monkeypatch.setattr(distributed, "hostnames", lambda world: joined.append(world.rank) or ["node0"])
    run = SimpleNamespace(record=SimpleNamespace(incomplete=False), outcome=SimpleNamespace(diverged_at=None),
                          failures=[], checkpoint_step=None)
    context = RunContext(torch.device("cpu"), World(1, 2, 1, 2, "torchrun"))
    config = RunConfig.build()
    data = SimpleNamespace(failure=None)  # no file that is no whole image met
    assert app.finish(config, config.plan(True, 2), context, data, [run], None) == 0
    assert joined == [1]
