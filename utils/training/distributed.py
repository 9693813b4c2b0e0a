"""Data-parallel training with PyTorch's own engine: one process per GPU (or CPU process),
DistributedDataParallel over NCCL on CUDA and gloo on the CPU.

The process's place in the job comes from the launcher's variables (utils/launch.py). With the
MPI launchers and srun, MASTER_ADDR/PORT come from the environment, else 127.0.0.1:29500 when
all ranks share a node.

What a launch gets wrong is refused with one sentence rather than a traceback or a hang: the
launcher's variables (utils/launch.py), the rendezvous (init, within --dist-timeout), ranks
started with different flags (agree_on_settings), and a rank that dies mid-run (session).
"""
from __future__ import annotations

import contextlib
import datetime
import hashlib
import json
import os
import re
import socket
import sys
import threading
import time
from typing import TYPE_CHECKING, Any, Callable, Dict, Iterator, List

import torch
import torch.distributed as dist

from utils import compat, config
from utils.errors import RankLost, UserError
from utils.launch import World, printable

if TYPE_CHECKING:
    from typing import TypedDict

    from utils.config import Distributed

    class Binding(TypedDict, total=False):
        """init_process_group's device_id, passed only where this torch has it."""
        device_id: torch.device

DEFAULT_PORT = "29500"
RENDEZVOUS_GRACE_S = 5  # the watchdog waits this long past --dist-timeout, so that torch's own timeout answers first

# Settings that may differ between ranks: where each node finds its data and how many loader
# workers its CPUs allow, and what only rank 0 writes or prints. Everything else must match.
PER_RANK_SETTINGS = frozenset({"data_dir", "workers", "json", "csv", "plot", "tensorboard", "jsonl", "trace_dir",
                               "wide", "no_progress", "log_every", "dist_timeout"})
# What a gloo or NCCL collective says when another rank ended or stopped answering.
PEER_LOST = re.compile(r"connection closed by peer|connection reset by peer|broken pipe|remote process exited"
                       r"|communicator was aborted|timed out|timeout", re.IGNORECASE)
PORT_TAKEN = re.compile(r"address already in use|EADDRINUSE", re.IGNORECASE)


def init(world: World, gpu: bool, settings: Distributed, record: Dict[str, Any]) -> torch.device:
    """Join the process group (on CUDA with `gpu`) and check that every rank runs the same
    settings, `record` (RunConfig.record's); returns this rank's device. Joining gives up after
    --dist-timeout seconds, and from then on a collective that waits longer raises instead of
    hanging, so a failing rank brings the job down."""
    address = rendezvous_address(world)
    device = bind_device(world, gpu)
    with watchdog(address, world, settings.dist_timeout):
        join(world, device, address, settings.dist_timeout)
        try:
            agree_on_settings(world, record)
            check_grad_comm(settings.grad_comm, device)
        except UserError:
            # every rank refuses alike, from the same gathered facts: leaving the group together
            # brings their exits close, so a launcher seldom ends one that lags behind another
            shutdown(world)
            raise
    return device


# --grad-comm's dtypes and DDP's hooks that send gradients in them (torch 1.10 has both)
COMM_DTYPES = {"fp16": torch.float16, "bf16": torch.bfloat16}


def comm_hook(name: str) -> Callable[[Any, dist.GradBucket], torch.futures.Future[torch.Tensor]]:
    """The DDP communication hook that all-reduces gradients in --grad-comm's dtype."""
    from torch.distributed.algorithms.ddp_comm_hooks import default_hooks

    return {"fp16": default_hooks.fp16_compress_hook, "bf16": default_hooks.bf16_compress_hook}[name]


def check_grad_comm(name: str, device: torch.device) -> None:
    """Refuse --grad-comm where this backend cannot all-reduce its dtype (gloo before it knew
    bfloat16, NCCL before 2.10), tried on one element by every rank: each refuses alike."""
    if name not in COMM_DTYPES:
        return
    try:
        dist.all_reduce(torch.zeros(1, dtype=COMM_DTYPES[name], device=device))
    except RuntimeError as error:
        if PEER_LOST.search(str(error)):
            raise
        raise UserError(f"the {dist.get_backend()} backend of torch {torch.__version__} cannot all-reduce "
                        f"{COMM_DTYPES[name]} tensors, so --grad-comm {name} cannot run here; use --grad-comm "
                        "fp32 or another --grad-comm.") from None


def rendezvous_address(world: World) -> str:
    """MASTER_ADDR:MASTER_PORT, checked. The MPI launchers and srun do not set them: one node's
    ranks meet on 127.0.0.1:29500 unless told otherwise."""
    env = os.environ
    if not env.get("MASTER_ADDR"):
        if world.local_size != world.size:
            raise UserError(f"{world.launcher} across nodes needs MASTER_ADDR (the first node's hostname) and "
                            "MASTER_PORT in the environment; the run_*.sh scripts export them.")
        env["MASTER_ADDR"] = "127.0.0.1"
    port = env.setdefault("MASTER_PORT", DEFAULT_PORT)
    if not (re.fullmatch(r"[0-9]{1,5}", port) and 1 <= int(port) <= 65535):
        raise UserError(f"MASTER_PORT={printable(port)} must be a TCP port from 1 to 65535, the same on every rank.")
    try:
        socket.getaddrinfo(env["MASTER_ADDR"], int(port))
    except (socket.gaierror, UnicodeError):
        raise UserError(f"MASTER_ADDR={printable(env['MASTER_ADDR'])} is not a host name this node can resolve; set it "
                        "to the first node's hostname or address.") from None
    return f"{env['MASTER_ADDR']}:{port}"


def bind_device(world: World, use_gpu: bool) -> torch.device:
    """This rank's GPU (cuda:LOCAL_RANK), or the CPU with its share of the node's cores."""
    if not use_gpu:
        torch.set_num_threads(max(1, (os.cpu_count() or 1) // world.local_size))  # no oversubscription
        return torch.device("cpu")
    if torch.cuda.device_count() <= world.local_rank:
        raise UserError(f"rank {world.rank} has local rank {world.local_rank} but this node shows "
                        f"{torch.cuda.device_count()} GPUs; start at most one process per GPU.")
    torch.cuda.set_device(world.local_rank)
    return torch.device("cuda", world.local_rank)


def join(world: World, device: torch.device, address: str, timeout_s: float) -> None:
    """init_process_group, its rendezvous failures as one sentence."""
    bound: Binding = {}  # binding the process group to the GPU (torch 2.3) lets NCCL connect eagerly
    if device.type == "cuda" and compat.has_ddp_device_id():
        bound = {"device_id": device}
    elif device.type == "cuda":
        compat.degrade("ddp", "process group not bound to its GPU (init_process_group has no device_id "
                              "before torch 2.3): NCCL connects lazily, at the first collective")
    if world.rank != 0:
        wait_for_rank0(address, world, timeout_s)
    try:
        dist.init_process_group("nccl" if device.type == "cuda" else "gloo", init_method="env://", rank=world.rank,
                                world_size=world.size, timeout=datetime.timedelta(seconds=timeout_s), **bound)
    except RuntimeError as error:  # torch's DistError is a RuntimeError; torch 1.x raises RuntimeError itself
        text = str(error)
        if PORT_TAKEN.search(text):
            raise UserError(f"MASTER_PORT {os.environ['MASTER_PORT']} is already in use on this host, so rank 0 cannot "
                            "listen on it; pick a free port (MASTER_PORT=..., or torchrun --master-port).") from None
        if PEER_LOST.search(text) or "refused" in text.lower():
            raise UserError(unreachable(address, world, timeout_s)) from None
        raise


def wait_for_rank0(address: str, world: World, timeout_s: float) -> None:
    """Wait until rank 0 (or torchrun) listens at `address`: torch's own client would log a
    retry with a C++ stack for every attempt while it is not up yet."""
    host, port = address.rsplit(":", 1)
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            socket.create_connection((host, int(port)), timeout=min(5, timeout_s)).close()
            return
        except OSError:
            if time.monotonic() > deadline:
                raise UserError(unreachable(address, world, timeout_s)) from None
            time.sleep(0.5)


def unreachable(address: str, world: World, timeout_s: float) -> str:
    return (f"rank {world.rank} could not reach the other ranks at {address} within --dist-timeout {timeout_s} s; "
            f"check that all {world.size} ranks were started with the same MASTER_ADDR and MASTER_PORT and that "
            "nothing else listens on that port, or raise --dist-timeout if the ranks start slowly.")


@contextlib.contextmanager
def watchdog(address: str, world: World, timeout_s: float) -> Iterator[None]:
    """A bound on the rendezvous that torch's timeout does not give: a client whose MASTER_PORT
    is held by another program waits for a reply that never comes. Nothing is written yet, so
    the process ends there, with the sentence main.py would print."""
    def give_up():
        print(f"main.py: error: {unreachable(address, world, timeout_s)}", file=sys.stderr, flush=True)
        os._exit(2)

    timer = threading.Timer(timeout_s + RENDEZVOUS_GRACE_S, give_up)
    timer.daemon = True
    timer.start()
    try:
        yield
    finally:
        timer.cancel()


def agree_on_settings(world: World, record: Dict[str, Any]) -> None:
    """Refuse before any data is loaded when the ranks were started with different flags (their
    `record`s differ beyond PER_RANK_SETTINGS): a different -n ends in mismatched collectives (an
    abort), a different -b in a wrong run."""
    settings = {name: value for name, value in record.items() if name not in PER_RANK_SETTINGS}
    digest = hashlib.sha256(json.dumps(settings, sort_keys=True, default=str).encode()).hexdigest()[:16]
    if len(set(gathered(world, digest))) > 1:  # the settings themselves only when they differ
        raise UserError(settings_differ(gathered(world, settings)))


def settings_differ(per_rank: List[Dict[str, Any]]) -> str:
    """The sentence naming every flag whose value differs from rank 0's, and on which rank."""
    first, differences = per_rank[0], []
    for name in sorted(set().union(*per_rank)):
        ranks = [rank for rank, settings in enumerate(per_rank) if settings.get(name) != first.get(name)]
        if ranks:
            more = f" (and {len(ranks) - 1} more ranks)" if len(ranks) > 1 else ""
            differences.append(f"{config.flag_names(name)} is "
                               f"{value_shown(first.get(name))} on rank 0 but "
                               f"{value_shown(per_rank[ranks[0]].get(name))} on rank {ranks[0]}{more}")
    return (f"the ranks were started with different flags: {', '.join(differences)}; start every rank with the "
            "same command line.")


def value_shown(value: object) -> str:
    if value is None:
        return "unset"
    if isinstance(value, bool):
        return "on" if value else "off"
    return str(value)


def gathered(world: World, value: Any) -> List[Any]:
    """`value` of every rank, in rank order, on every rank."""
    values = [None] * world.size
    dist.all_gather_object(values, value)
    return values


@contextlib.contextmanager
def session(world: World) -> Iterator[None]:
    """Around the run: every rank leaves the process group together once all are done. When a
    collective fails because another rank ended or stopped answering, one sentence (exit 1)
    instead of gloo's or NCCL's traceback. After any error the group is left as it is: a
    barrier would wait for ranks that are gone or busy elsewhere."""
    try:
        yield
        shutdown(world)
    except RuntimeError as error:
        lost = PEER_LOST.search(str(error)) if world.distributed and collective_error(error) else None
        if lost is None:
            raise
        raise RankLost(f"rank {world.rank} lost another rank of the job mid-run ({lost.group().lower()}): it ended or "
                       "did not answer within --dist-timeout, and its own output says why; rerun with --resume "
                       "to continue from the last checkpoint, if --checkpoint was given.") from None


def collective_error(error: RuntimeError) -> bool:
    """Whether `error` comes from gloo or NCCL (torch 2 has DistError; torch 1 names the backend)."""
    return isinstance(error, getattr(dist, "DistError", ())) or bool(re.search(r"gloo|nccl", str(error), re.IGNORECASE))


def shutdown(world: World) -> None:
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


def all_reduce(tensor: torch.Tensor, op: str = "sum") -> torch.Tensor:
    """In place across ranks (a no-op in a single process)."""
    if dist.is_initialized():
        dist.all_reduce(tensor, op={"sum": dist.ReduceOp.SUM, "max": dist.ReduceOp.MAX}[op])
    return tensor


def hostnames(world: World) -> List[str]:
    """Every rank's hostname, gathered to all ranks."""
    if dist.is_initialized():
        return gathered(world, socket.gethostname())
    return [socket.gethostname()]


def launch_prefix(world: World) -> List[str]:
    """What starts main.py again the way `world` was started, e.g. for the resume line:
    ["python"], ["torchrun", "--nproc_per_node=4"], ["mpirun", "-n", "8", "python"]. A
    multi-node torchrun job also needs its rendezvous options, which torchrun does not pass on."""
    if not world.distributed:
        return ["python"]
    assert world.launcher is not None  # a job of several ranks has a launcher (launch.detect)
    if world.launcher == "torchrun":
        nodes = max(1, world.size // world.local_size)
        return ["torchrun"] + ([f"--nnodes={nodes}"] if nodes > 1 else []) + [f"--nproc_per_node={world.local_size}"]
    return [world.launcher, "-n", str(world.size), "python"]
