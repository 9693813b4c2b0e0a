#!/bin/bash -l
#SBATCH --job-name=ampbench
#SBATCH --nodes=1
#SBATCH --ntasks-per-node=4
#SBATCH --gpus-per-node=4
#SBATCH --cpus-per-task=8
#SBATCH --time=01:00:00
#SBATCH --requeue
#SBATCH --output=ampbench-%j.out
#
# ampbench on a Slurm cluster: FP32 vs mixed precision on 1 GPU, on all GPUs of a node
# (torchrun) and across nodes (srun, one task per GPU), inside an NVIDIA NGC PyTorch container
# run with `apptainer exec --nv` (or singularity). The stages live in cluster/stages.sh.
#
# Submit from the ampbench folder (add your site's --account/--partition):
#   sbatch --export=ALL,CIFAR10_DIR=$HOME/data/cifar10,CONTAINER=$HOME/pytorch_24.04-py3.sif run_slurm.sh
#   # two nodes:  sbatch --nodes=2 ... run_slurm.sh
#   # other GPUs per node: match --ntasks-per-node and --gpus-per-node (and --cpus-per-task)
# With --requeue, a preempted job that Slurm requeues finds its results folder, skips the runs
# that finished and resumes the cut one from its checkpoint.
# Print every command instead of running it:  NODES=2 DRY_RUN=1 CIFAR10_DIR=... ./run_slurm.sh
# The scaling study (docs/scaling-out.md) over 1, 2, 4, ... nodes: STUDY=1, and GRAD_COMM=fp32,bf16
#   for 16-bit gradients too; STUDY=1 NODES=4 DRY_RUN=1 shows its commands.
# Which precision should MODEL train with (docs/advice.md): ADVISE=1 runs main.py --advise on one GPU
#   within the job's time left (or BUDGET minutes), e.g.
#   sbatch --nodes=1 --time=00:30:00 --export=ALL,ADVISE=1,MODEL=resnet50,BATCH=128,CIFAR10_DIR=...,CONTAINER=... run_slurm.sh
set -euo pipefail

SCHEDULER=Slurm
JOB_ID=${SLURM_JOB_ID:-}
# Slurm runs a copy of this script: ampbench is the folder the job was submitted from.
AMPBENCH_DIR=${AMPBENCH_DIR:-${SLURM_SUBMIT_DIR:-$(cd "$(dirname "$(readlink -f "${BASH_SOURCE[0]}")")" && pwd)}}
CONTAINER_RUNTIME=${CONTAINER_RUNTIME:-$(command -v apptainer >/dev/null && echo apptainer || echo singularity)}
CONTAINER=${CONTAINER:-}  # e.g. apptainer build pytorch_24.04-py3.sif docker://nvcr.io/nvidia/pytorch:24.04-py3
BIND=${BIND:-${HOME}}
NOMINAL_GPUS=${SLURM_GPUS_ON_NODE:-4}
if [[ -n "${SLURM_JOB_NODELIST:-}" ]]; then
    NODE_NAMES=$(scontrol show hostnames "${SLURM_JOB_NODELIST}" | tr '\n' ' ')
fi
# The job has one task per GPU (the multi-node stage's layout). The one-node stages run as one
# task given the whole first node (its CPUs; a step gets all the job's GPUs there by default).
on_one_node=()
if [[ -n "${SLURM_JOB_ID:-}" ]]; then
    on_one_node=(srun --nodes=1 --ntasks=1 --cpus-per-task="${SLURM_CPUS_ON_NODE:-1}")
fi

across_nodes() {
    launch=(srun --nodes="$3" --ntasks="$1" --ntasks-per-node="$2" --export=ALL)
}

# The job's time left in seconds, as squeue gives it ([D-][HH:]MM:SS); nothing when unlimited.
time_left_s() {
    local left
    left=$(squeue -h -j "${JOB_ID}" -o %L 2>/dev/null) || return 1
    [[ "${left}" =~ ^(([0-9]+)-)?(([0-9]+):)?([0-9]+):([0-9]+)$ ]] || return 1
    echo $(( ((10#${BASH_REMATCH[2]:-0} * 24 + 10#${BASH_REMATCH[4]:-0}) * 60 + 10#${BASH_REMATCH[5]}) * 60 \
             + 10#${BASH_REMATCH[6]} ))
}

if [[ ! -f "${AMPBENCH_DIR}/cluster/stages.sh" ]]; then
    echo "ampbench: error: AMPBENCH_DIR=${AMPBENCH_DIR} is not the ampbench folder; submit from there or set it." >&2
    exit 2
fi
# shellcheck source=cluster/stages.sh
source "${AMPBENCH_DIR}/cluster/stages.sh"
