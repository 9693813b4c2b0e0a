"""Data-parallel training with PyTorch's own engine: one process per GPU (or CPU process),
DistributedDataParallel over NCCL on CUDA and gloo on the CPU.

Launchers, detected from the environment:
  torchrun --nproc_per_node=N main.py ...        RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR/PORT
  mpirun -n N python main.py ...                 OMPI_COMM_WORLD_RANK / _SIZE / _LOCAL_RANK (Open MPI)
  mpiexec -n N python main.py ...                PMI_RANK / _SIZE / _LOCAL_RANK (MPICH, HPE PALS)
  srun -n N python main.py ...                   SLURM_PROCID / _STEP_NUM_TASKS / _LOCALID
With the MPI launchers and srun, MASTER_ADDR/PORT come from the environment, else
127.0.0.1:29500 when all ranks share a node.
"""
import datetime
import os
import re
import socket
import time
from dataclasses import dataclass

import torch
import torch.distributed as dist

from utils import compat
from utils.errors import UserError

DEFAULT_PORT = "29500"


@dataclass
class World:
    rank: int = 0
    size: int = 1
    local_rank: int = 0
    local_size: int = 1
    launcher: str = None  # "torchrun", "mpirun", "mpiexec", "srun" or None

    @property
    def distributed(self):
        return self.size > 1

    @property
    def is_main(self):
        return self.rank == 0


def detect():
    """The process's place in the job, from the launcher's environment variables."""
    env = os.environ
    if "WORLD_SIZE" in env and "RANK" in env:
        return World(int(env["RANK"]), int(env["WORLD_SIZE"]), int(env.get("LOCAL_RANK", 0)),
                     int(env.get("LOCAL_WORLD_SIZE", 1)), "torchrun")
    if "OMPI_COMM_WORLD_SIZE" in env:
        return World(int(env["OMPI_COMM_WORLD_RANK"]), int(env["OMPI_COMM_WORLD_SIZE"]),
                     int(env.get("OMPI_COMM_WORLD_LOCAL_RANK", 0)), int(env.get("OMPI_COMM_WORLD_LOCAL_SIZE", 1)),
                     "mpirun")
    if "PMI_SIZE" in env and "PMI_RANK" in env:  # MPICH's Hydra, and HPE PALS (Polaris's mpiexec)
        local_rank = env.get("PMI_LOCAL_RANK", env.get("MPI_LOCALRANKID", 0))
        local_size = env.get("PMI_LOCAL_SIZE", env.get("MPI_LOCALNRANKS", 1))
        return World(int(env["PMI_RANK"]), int(env["PMI_SIZE"]), int(local_rank), int(local_size), "mpiexec")
    if "SLURM_STEP_NUM_TASKS" in env and "SLURM_PROCID" in env:  # a task of srun (not the batch script itself)
        per_node = re.match(r"\d+", env.get("SLURM_STEP_TASKS_PER_NODE", "1"))
        return World(int(env["SLURM_PROCID"]), int(env["SLURM_STEP_NUM_TASKS"]), int(env.get("SLURM_LOCALID", 0)),
                     int(per_node.group()) if per_node else 1, "srun")
    return World()


def init(world, use_gpu, timeout_s):
    """Join the process group; returns this rank's device. A collective that waits longer than
    `timeout_s` raises instead of hanging, so a failing rank brings the job down."""
    if world.launcher in ("mpirun", "mpiexec", "srun"):
        if "MASTER_ADDR" not in os.environ:
            if world.local_size != world.size:
                raise UserError(f"{world.launcher} across nodes needs MASTER_ADDR (the first node's hostname) and "
                                "MASTER_PORT in the environment; the run_*.sh scripts export them.")
            os.environ["MASTER_ADDR"] = "127.0.0.1"
        os.environ.setdefault("MASTER_PORT", DEFAULT_PORT)
    if use_gpu:
        if torch.cuda.device_count() <= world.local_rank:
            raise UserError(f"rank {world.rank} has local rank {world.local_rank} but this node shows "
                            f"{torch.cuda.device_count()} GPUs; start at most one process per GPU.")
        torch.cuda.set_device(world.local_rank)
        device = torch.device("cuda", world.local_rank)
    else:
        device = torch.device("cpu")
        torch.set_num_threads(max(1, (os.cpu_count() or 1) // world.local_size))  # no oversubscription
    bound = {}  # binding the process group to the GPU (torch 2.3) lets NCCL connect eagerly
    if use_gpu and compat.has_ddp_device_id():
        bound = {"device_id": device}
    elif use_gpu:
        compat.degrade("ddp", "process group not bound to its GPU (init_process_group has no device_id "
                              "before torch 2.3): NCCL connects lazily, at the first collective")
    dist.init_process_group("nccl" if use_gpu else "gloo", init_method="env://", rank=world.rank,
                            world_size=world.size, timeout=datetime.timedelta(seconds=timeout_s), **bound)
    return device


def shutdown(world):
    """Leave the process group once every rank is done with it.

    Before torch 2.8 (pytorch/pytorch#154976) a gloo group's destructor holds the GIL while it
    joins its worker threads, and a worker that drops the last reference to a finished
    collective's Python tensors needs the GIL: a deadlock, seen here with torch 2.3.1 in one
    run of three. A short sleep after the barrier (the GIL released) lets the workers finish."""
    if world.distributed and dist.is_initialized():
        dist.barrier()
        if dist.get_backend() == "gloo" and compat.torch_release() < (2, 8):
            time.sleep(0.2)
        dist.destroy_process_group()


def all_reduce(tensor, op="sum"):
    """In place across ranks (a no-op in a single process)."""
    if dist.is_initialized():
        dist.all_reduce(tensor, op={"sum": dist.ReduceOp.SUM, "max": dist.ReduceOp.MAX}[op])
    return tensor


def hostnames(world):
    """Every rank's hostname, gathered to all ranks."""
    names = [None] * world.size
    if dist.is_initialized():
        dist.all_gather_object(names, socket.gethostname())
        return names
    return [socket.gethostname()]


def launch_prefix(world):
    """What starts main.py again the way `world` was started, e.g. for the resume line:
    ["python"], ["torchrun", "--nproc_per_node=4"], ["mpirun", "-n", "8", "python"]. A
    multi-node torchrun job also needs its rendezvous options, which torchrun does not pass on."""
    if not world.distributed:
        return ["python"]
    if world.launcher == "torchrun":
        nodes = max(1, world.size // world.local_size)
        return ["torchrun"] + ([f"--nnodes={nodes}"] if nodes > 1 else []) + [f"--nproc_per_node={world.local_size}"]
    return [world.launcher, "-n", str(world.size), "python"]
