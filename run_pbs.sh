#!/bin/bash -l
#PBS -l select=1:system=polaris
#PBS -l place=scatter
#PBS -l walltime=01:00:00
#PBS -l filesystems=home:grand
#PBS -q debug
#PBS -A MYPROJECT
#PBS -r y
#PBS -N ampbench
#
# ampbench on ALCF Polaris (PBS Professional; 4 x A100 per node) or another PBS cluster: FP32
# vs mixed precision on 1 GPU, on all GPUs of a node (torchrun) and across nodes (mpiexec, HPE
# PALS), inside an NVIDIA NGC PyTorch container run with `apptainer exec --nv`. The stages live
# in cluster/stages.sh.
#
# Build the image once (on Polaris: module use /soft/modulefiles; module load spack-pe-base apptainer):
#   apptainer build pytorch_24.04-py3.sif docker://nvcr.io/nvidia/pytorch:24.04-py3
# Submit from the ampbench folder on a Polaris login node (edit -A above, or pass it):
#   qsub -A MYPROJECT -v CONTAINER=$PWD/pytorch_24.04-py3.sif,CIFAR10_DIR=/lus/grand/projects/MYPROJECT/cifar10 run_pbs.sh
#   # two nodes:          qsub -A MYPROJECT -l select=2:system=polaris -q debug run_pbs.sh
#   # preemptable queue:  qsub -A MYPROJECT -q preemptable run_pbs.sh
# `#PBS -r y` makes a job killed in the preemptable queue rerun: it finds its results folder,
# skips the runs that finished and resumes the cut one from its checkpoint.
# Change model, steps and modes with variables, e.g.
#   qsub -A MYPROJECT -v MODEL=resnet18,STEPS=500 run_pbs.sh      (MODES has commas: set it in the script)
# Print every command instead of running it:  NODES=2 DRY_RUN=1 ./run_pbs.sh
# The scaling study (docs/scaling-out.md) over 1, 2, 4, ... nodes: STUDY=1, and GRAD_COMM=fp32,bf16
#   for 16-bit gradients too; STUDY=1 NODES=4 DRY_RUN=1 shows its commands.
# Which precision should MODEL train with (docs/advice.md): ADVISE=1 runs main.py --advise on one GPU
#   within the job's walltime left (or BUDGET minutes), e.g.
#   qsub -A MYPROJECT -l walltime=00:30:00 -v ADVISE=1,MODEL=resnet50,BATCH=128,CONTAINER=... run_pbs.sh
set -euo pipefail

SCHEDULER=PBS
JOB_ID=${PBS_JOBID:-}
JOB_ID=${JOB_ID%%.*}  # 1234567.polaris-pbs-01... -> 1234567
# PBS runs a copy of this script: ampbench is the folder the job was submitted from.
AMPBENCH_DIR=${AMPBENCH_DIR:-${PBS_O_WORKDIR:-$(cd "$(dirname "$(readlink -f "${BASH_SOURCE[0]}")")" && pwd)}}
PROJECT=${PROJECT:-MYPROJECT}
CONTAINER_RUNTIME=${CONTAINER_RUNTIME:-apptainer}
CONTAINER=${CONTAINER:-}  # e.g. apptainer build pytorch_24.04-py3.sif docker://nvcr.io/nvidia/pytorch:24.04-py3
CIFAR10_DIR=${CIFAR10_DIR:-/lus/grand/projects/${PROJECT}/cifar10}
BIND=${BIND:-/lus}
DEPTH=${DEPTH:-8}  # CPU cores per rank (Polaris: 32 cores, 4 GPUs)
NOMINAL_GPUS=4
NODE_FILE=${PBS_NODEFILE:-}
on_one_node=()
site_numbers=(DEPTH)

across_nodes() {
    launch=(mpiexec -n "$1" --ppn "$2" --depth="${DEPTH}" --cpu-bind depth
            --env MASTER_ADDR="${MASTER_ADDR}" --env MASTER_PORT="${MASTER_PORT}")
}

# The job's time left in seconds: its walltime less what it used, as qstat -f gives both (HH:MM:SS).
time_left_s() {
    local status limit="" used="" line
    status=$(qstat -f "${PBS_JOBID}" 2>/dev/null) || return 1
    while IFS= read -r line; do
        [[ "${line}" =~ Resource_List\.walltime\ =\ ([0-9]+):([0-9]+):([0-9]+) ]] \
            && limit=$(( (10#${BASH_REMATCH[1]} * 60 + 10#${BASH_REMATCH[2]}) * 60 + 10#${BASH_REMATCH[3]} ))
        [[ "${line}" =~ resources_used\.walltime\ =\ ([0-9]+):([0-9]+):([0-9]+) ]] \
            && used=$(( (10#${BASH_REMATCH[1]} * 60 + 10#${BASH_REMATCH[2]}) * 60 + 10#${BASH_REMATCH[3]} ))
    done <<< "${status}"
    [[ -n "${limit}" ]] || return 1
    echo $(( limit - ${used:-0} ))
}

if [[ ! -f "${AMPBENCH_DIR}/cluster/stages.sh" ]]; then
    echo "ampbench: error: AMPBENCH_DIR=${AMPBENCH_DIR} is not the ampbench folder; submit from there or set it." >&2
    exit 2
fi
# shellcheck source=cluster/stages.sh
source "${AMPBENCH_DIR}/cluster/stages.sh"
