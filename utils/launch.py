"""Where this process stands in a job, from its launcher's variables: no torch, so that
`main.py --check-flags` checks a rank's flags as the rank itself would.

  torchrun --nproc_per_node=N main.py ...        RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR/PORT
  mpirun -n N python main.py ...                 OMPI_COMM_WORLD_RANK / _SIZE / _LOCAL_RANK (Open MPI)
  mpiexec -n N python main.py ...                PMI_RANK / _SIZE / _LOCAL_RANK (MPICH, HPE PALS)
  srun -n N python main.py ...                   SLURM_PROCID / _STEP_NUM_TASKS / _LOCALID

A garbled or half-set launch is refused with one sentence instead of guessed at.
"""
from __future__ import annotations

import os
import re
from dataclasses import dataclass
from typing import Mapping, Optional, Sequence

from utils.errors import UserError

MOST_RANKS = 2 ** 31 - 1  # c10d holds ranks in a C int
MOST_QUOTED = 40  # characters of a launcher variable's value that an error quotes

# Each launcher's variables: name, rank, size, local rank (first found), local size (first found).
LAUNCHERS = (
    ("torchrun", "RANK", "WORLD_SIZE", ("LOCAL_RANK",), ("LOCAL_WORLD_SIZE",)),
    ("mpirun", "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", ("OMPI_COMM_WORLD_LOCAL_RANK",),
     ("OMPI_COMM_WORLD_LOCAL_SIZE",)),
    ("mpiexec", "PMI_RANK", "PMI_SIZE", ("PMI_LOCAL_RANK", "MPI_LOCALRANKID"), ("PMI_LOCAL_SIZE", "MPI_LOCALNRANKS")),
    ("srun", "SLURM_PROCID", "SLURM_STEP_NUM_TASKS", ("SLURM_LOCALID",), ("SLURM_STEP_TASKS_PER_NODE",)),
)
# Slurm's batch script carries SLURM_PROCID without being a task of srun: only both variables
# together mean srun started this process. The other launchers always set both.
HALF_SET_IS_SINGLE = ("srun",)


@dataclass
class World:
    rank: int = 0
    size: int = 1
    local_rank: int = 0
    local_size: int = 1
    launcher: Optional[str] = None  # "torchrun", "mpirun", "mpiexec", "srun" or None

    @property
    def distributed(self) -> bool:
        return self.size > 1

    @property
    def is_main(self) -> bool:
        return self.rank == 0


def detect(env: Optional[Mapping[str, str]] = None) -> World:
    """The process's place in the job, from the launcher's variables in `env` (os.environ),
    checked: a garbled or half-set launch is refused instead of guessed at."""
    env = os.environ if env is None else env
    for launcher, rank_name, size_name, local_rank_names, local_size_names in LAUNCHERS:
        if rank_name in env and size_name in env:
            return checked_world(env, launcher, rank_name, size_name, local_rank_names, local_size_names)
        if (rank_name in env or size_name in env) and launcher not in HALF_SET_IS_SINGLE:
            given, missing = (rank_name, size_name) if rank_name in env else (size_name, rank_name)
            raise UserError(f"{given}={printable(env[given])} is set but {missing} is not, so this process cannot tell "
                            f"its place in the job; start it with {launcher}, which sets both, or unset {given}.")
    return World()


def checked_world(env: Mapping[str, str], launcher: str, rank_name: str, size_name: str,
                  local_rank_names: Sequence[str], local_size_names: Sequence[str]) -> World:
    """The World of a launcher's variables, each an integer in its range."""
    size = number(env, size_name, launcher, 1, MOST_RANKS)
    rank = number(env, rank_name, launcher, 0, size - 1, f" (below {size_name}={size})")
    local_size_name = next((name for name in local_size_names if name in env), None)
    if local_size_name is None:
        local_size = 1
    elif launcher == "srun":
        local_size = slurm_tasks_per_node(env[local_size_name], size)
    else:
        local_size = number(env, local_size_name, launcher, 1, size, f" (at most {size_name}={size})")
    local_rank_name = next((name for name in local_rank_names if name in env), None)
    local_rank = 0
    if local_rank_name is not None:
        below = (local_size_name, local_size) if local_size_name else (size_name, size)
        local_rank = number(env, local_rank_name, launcher, 0, below[1] - 1, f" (below {below[0]}={below[1]})")
    return World(rank, size, local_rank, local_size, launcher)


def number(env: Mapping[str, str], name: str, launcher: str, low: int, high: int, bound: str = "") -> int:
    """The integer in env[name], refused with the variable and the launcher named unless in [low, high]."""
    text = env[name]
    if re.fullmatch(r"[0-9]{1,10}", text) and low <= int(text) <= high:
        return int(text)
    raise UserError(f"{name}={printable(text)} must be an integer from {low} to {high}{bound}, as {launcher} sets it; "
                    f"start the job with {launcher} or correct {name}.")


def slurm_tasks_per_node(text: str, size: int) -> int:
    """The most tasks srun put on one node ('2(x3),1' -> 2); this node's own count is not given."""
    count = r"[0-9]{1,10}(\(x[0-9]{1,10}\))?"
    if re.fullmatch(f"{count}(,{count})*", text):
        most = max(int(n) for n in re.findall(r"(?<![x0-9])[0-9]+", text))  # the counts, not their repeats
        if 1 <= most <= size:
            return most
    raise UserError(f"SLURM_STEP_TASKS_PER_NODE={printable(text)} must list the tasks per node as srun does (4, or "
                    f"2(x3),1), each from 1 to SLURM_STEP_NUM_TASKS={size}; start the job with srun.")


def printable(text: str) -> str:
    """A variable's value as it can be printed in one line, quoted where spaces or control characters would hide."""
    if text and text.isprintable() and text == text.strip() and len(text) <= MOST_QUOTED:
        return text
    return ascii(text[:MOST_QUOTED]) + ("..." if len(text) > MOST_QUOTED else "")
