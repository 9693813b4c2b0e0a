"""Data-parallel training with PyTorch's own engine: one process per GPU (or CPU process),
DistributedDataParallel over NCCL on CUDA and gloo on the CPU.

Launchers, detected from the environment:
  torchrun --nproc_per_node=N main.py ...        RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR/PORT
  mpirun -n N python main.py ...                 OMPI_COMM_WORLD_RANK / _SIZE / _LOCAL_RANK;
                                                 MASTER_ADDR/PORT taken from the environment,
                                                 else 127.0.0.1:29500 when all ranks share a node
"""
import datetime
import os
import socket
from dataclasses import dataclass

import torch
import torch.distributed as dist

from utils.errors import UserError

DEFAULT_PORT = "29500"


@dataclass
class World:
    rank: int = 0
    size: int = 1
    local_rank: int = 0
    local_size: int = 1
    launcher: str = None  # "torchrun", "mpirun" or None

    @property
    def distributed(self):
        return self.size > 1

    @property
    def is_main(self):
        return self.rank == 0


def detect():
    """The process's place in the job, from the launcher's environment variables."""
    env = os.environ
    if "OMPI_COMM_WORLD_SIZE" in env and "RANK" not in env:
        return World(int(env["OMPI_COMM_WORLD_RANK"]), int(env["OMPI_COMM_WORLD_SIZE"]),
                     int(env.get("OMPI_COMM_WORLD_LOCAL_RANK", 0)), int(env.get("OMPI_COMM_WORLD_LOCAL_SIZE", 1)),
                     "mpirun")
    if "WORLD_SIZE" in env and "RANK" in env:
        return World(int(env["RANK"]), int(env["WORLD_SIZE"]), int(env.get("LOCAL_RANK", 0)),
                     int(env.get("LOCAL_WORLD_SIZE", 1)), "torchrun")
    return World()


def init(world, use_gpu, timeout_s):
    """Join the process group; returns this rank's device. A collective that waits longer than
    `timeout_s` raises instead of hanging, so a failing rank brings the job down."""
    if world.launcher == "mpirun":
        if "MASTER_ADDR" not in os.environ:
            if world.local_size != world.size:
                raise UserError("mpirun across nodes needs MASTER_ADDR (the first node's hostname) and "
                                "MASTER_PORT in the environment; run_thetagpu.sh exports them.")
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
    dist.init_process_group("nccl" if use_gpu else "gloo", init_method="env://", rank=world.rank,
                            world_size=world.size, timeout=datetime.timedelta(seconds=timeout_s),
                            device_id=device if use_gpu else None)
    return device


def shutdown(world):
    if world.distributed and dist.is_initialized():
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
