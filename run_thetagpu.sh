#!/bin/bash -l
#COBALT -n 1
#COBALT -t 60
#COBALT -q full-node
#COBALT -A MYPROJECT
#COBALT --attrs filesystems=home,theta-fs0,grand
#COBALT -O ampbench
#
# ampbench on ALCF ThetaGPU (Cobalt; 8 x A100 per node): FP32 vs mixed precision on 1 GPU, on
# all GPUs of a node (torchrun) and across nodes (the host's OpenMPI), inside an NVIDIA NGC
# PyTorch container run with `singularity exec --nv`. The stages live in cluster/stages.sh.
#
# Submit from a ThetaGPU login node (edit -A above, or pass it):
#   qsub-gpu -A MYPROJECT --env CIFAR10_DIR=/lus/grand/projects/MYPROJECT/cifar10 run_thetagpu.sh
#   # two nodes:  qsub-gpu -A MYPROJECT -n 2 run_thetagpu.sh
#   # one GPU:    qsub-gpu -A MYPROJECT -q single-gpu run_thetagpu.sh   (the stages use the GPUs the job has)
# Change model, steps and modes with variables, e.g.
#   qsub-gpu -A MYPROJECT --env MODEL=resnet18:STEPS=500:MODES=fp32,amp-bf16 run_thetagpu.sh
# Pre-stage CIFAR-10 once on a login node (compute nodes have no internet):
#   mkdir -p /lus/grand/projects/MYPROJECT/cifar10 && cd /lus/grand/projects/MYPROJECT/cifar10
#   wget https://www.cs.toronto.edu/~kriz/cifar-10-python.tar.gz   # md5 c58f30108f718f92721af3b95e74349a
#   tar xzf cifar-10-python.tar.gz                                  # makes cifar-10-batches-py/
# Print every command instead of running it:
#   DRY_RUN=1 ./run_thetagpu.sh        (NODES=2 DRY_RUN=1 ./run_thetagpu.sh shows the multi-node stage)
# The scaling study (docs/scaling-out.md) over 1, 2, 4, ... nodes: STUDY=1, and GRAD_COMM=fp32,bf16
#   for 16-bit gradients too; STUDY=1 NODES=4 DRY_RUN=1 shows its commands.
set -euo pipefail

SCHEDULER=Cobalt
JOB_ID=${COBALT_JOBID:-}
AMPBENCH_DIR=${AMPBENCH_DIR:-$(cd "$(dirname "$(readlink -f "${BASH_SOURCE[0]}")")" && pwd)}
PROJECT=${PROJECT:-MYPROJECT}
# NGC PyTorch images converted for Singularity; ALCF keeps them under this folder.
CONTAINER=${CONTAINER:-/lus/theta-fs0/software/thetagpu/nvidia-containers/pytorch/pytorch_22.01-py3.simg}
CIFAR10_DIR=${CIFAR10_DIR:-/lus/grand/projects/${PROJECT}/cifar10}
# Cross-node MPI uses the host's OpenMPI, bound into the container (ALCF's pattern).
MPI_BASE=${MPI_BASE:-/lus/theta-fs0/software/thetagpu/openmpi-4.0.5}
BIND=${BIND:-/lus,${MPI_BASE}}
NOMINAL_GPUS=8
NODE_FILE=${COBALT_NODEFILE:-}
on_one_node=()

across_nodes() {
    if [[ -d "${MPI_BASE}" ]]; then
        export PATH="${MPI_BASE}/bin:${PATH}" LD_LIBRARY_PATH="${MPI_BASE}/lib:${LD_LIBRARY_PATH:-}"
        export SINGULARITYENV_LD_LIBRARY_PATH="${LD_LIBRARY_PATH}"
    fi
    launch=(mpirun -n "$1" -npernode "$2" -hostfile "${COBALT_NODEFILE:-<COBALT_NODEFILE>}"
            -x MASTER_ADDR -x MASTER_PORT -x CIFAR10_DIR -x PATH -x LD_LIBRARY_PATH)
}

if [[ ! -f "${AMPBENCH_DIR}/cluster/stages.sh" ]]; then
    echo "ampbench: error: AMPBENCH_DIR=${AMPBENCH_DIR} is not the ampbench folder; submit from there or set it." >&2
    exit 2
fi
# shellcheck source=cluster/stages.sh
source "${AMPBENCH_DIR}/cluster/stages.sh"
