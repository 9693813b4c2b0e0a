#!/bin/bash
#COBALT -n 1
#COBALT -t 60
#COBALT -q full-node
#COBALT -A MYPROJECT
#COBALT --attrs filesystems=home,theta-fs0,grand
#COBALT -O ampbench
#
# ampbench on ALCF ThetaGPU (8 x A100 per node): FP32 vs mixed precision, on 1 GPU, on all
# GPUs of the node (torchrun), and across nodes (mpirun) when more than one is allocated,
# inside an NVIDIA NGC PyTorch container run with `singularity exec --nv`.
#
# Submit (from a ThetaGPU login node, after editing -A above or passing it):
#   qsub-gpu -A MYPROJECT run_thetagpu.sh
#   # or: module load cobalt/cobalt-gpu; qsub -A MYPROJECT run_thetagpu.sh
#   # two nodes:  qsub-gpu -A MYPROJECT -n 2 run_thetagpu.sh
#   # one GPU:    qsub-gpu -A MYPROJECT -q single-gpu run_thetagpu.sh
#
# Pre-stage CIFAR-10 (compute nodes have no internet), once, on a login node:
#   mkdir -p /lus/grand/projects/MYPROJECT/cifar10 && cd /lus/grand/projects/MYPROJECT/cifar10
#   wget https://www.cs.toronto.edu/~kriz/cifar-10-python.tar.gz   # md5 c58f30108f718f92721af3b95e74349a
#   tar xzf cifar-10-python.tar.gz                                  # makes cifar-10-batches-py/
# and set CIFAR10_DIR to that folder (below or in the environment: qsub-gpu --env CIFAR10_DIR=...).
#
# Change model, steps and modes with the variables below, e.g.
#   qsub-gpu -A MYPROJECT --env MODEL=resnet18:STEPS=500:MODES=fp32,amp-bf16 run_thetagpu.sh
# Print every command instead of running it:
#   DRY_RUN=1 ./run_thetagpu.sh        (NODES=2 DRY_RUN=1 ./run_thetagpu.sh shows the multi-node step)
set -euo pipefail

PROJECT=${PROJECT:-MYPROJECT}
AMPBENCH_DIR=${AMPBENCH_DIR:-$(cd "$(dirname "$(readlink -f "${BASH_SOURCE[0]}")")" && pwd)}
# NGC PyTorch images converted for Singularity; ALCF keeps them under this folder.
CONTAINER=${CONTAINER:-/lus/theta-fs0/software/thetagpu/nvidia-containers/pytorch/pytorch-24.04-py3.sif}
BIND=${BIND:-/lus}
CIFAR10_DIR=${CIFAR10_DIR:-/lus/grand/projects/${PROJECT}/cifar10}
RESULTS_ROOT=${RESULTS_ROOT:-${AMPBENCH_DIR}/results}
MODEL=${MODEL:-resnet50}
STEPS=${STEPS:-300}
BATCH=${BATCH:-128}                 # per GPU
MODES=${MODES:-fp32,tf32,amp-fp16,amp-bf16}
EXTRA_ARGS=${EXTRA_ARGS:-}          # more main.py flags, e.g. "--channels-last --repeats 3"
GPUS_PER_NODE=${GPUS_PER_NODE:-8}
MASTER_PORT=${MASTER_PORT:-29500}
DRY_RUN=${DRY_RUN:-0}

if [[ -n "${COBALT_NODEFILE:-}" && -f "${COBALT_NODEFILE}" ]]; then
    NODES=${NODES:-$(sort -u "${COBALT_NODEFILE}" | wc -l)}
    MASTER_ADDR=${MASTER_ADDR:-$(head -n 1 "${COBALT_NODEFILE}")}
else
    NODES=${NODES:-1}
    MASTER_ADDR=${MASTER_ADDR:-$(hostname)}
fi
export CIFAR10_DIR MASTER_ADDR MASTER_PORT
RESULTS_DIR=${RESULTS_DIR:-${RESULTS_ROOT}/$(date +%Y%m%d-%H%M%S)-${COBALT_JOBID:-local}}

run() {
    if [[ "${DRY_RUN}" == 1 ]]; then
        echo "+ $*"
    else
        "$@"
    fi
}

in_container=(singularity exec --nv -B "${BIND}" "${CONTAINER}")
bench_args=(-n "${STEPS}" -p --model "${MODEL}" -b "${BATCH}" --modes "${MODES}" --data cifar10
            --data-dir "${CIFAR10_DIR}" --no-progress --csv "${RESULTS_DIR}/all.csv")
read -r -a extra <<< "${EXTRA_ARGS}"

cd "${AMPBENCH_DIR}"
run mkdir -p "${RESULTS_DIR}"
echo "ampbench: ${NODES} node(s) x ${GPUS_PER_NODE} GPUs, ${MODEL}, ${STEPS} steps, modes ${MODES} -> ${RESULTS_DIR}"

# 1. One GPU.
run "${in_container[@]}" python main.py "${bench_args[@]}" "${extra[@]}" --json "${RESULTS_DIR}/1gpu.json"

# 2. All GPUs of this node: one process per GPU, launched by torchrun inside the container.
run "${in_container[@]}" python -m torch.distributed.run --standalone --nproc_per_node="${GPUS_PER_NODE}" \
    main.py "${bench_args[@]}" "${extra[@]}" --json "${RESULTS_DIR}/1node.json"

# 3. All nodes: one process per GPU, launched by the host's OpenMPI across the Cobalt node file
#    (on ThetaGPU, `module load openmpi` first if mpirun is not on PATH). Each rank reads its
#    place from OMPI_COMM_WORLD_* and meets the others at MASTER_ADDR:MASTER_PORT.
if (( NODES > 1 )); then
    run mpirun -n "$(( NODES * GPUS_PER_NODE ))" -npernode "${GPUS_PER_NODE}" -hostfile "${COBALT_NODEFILE}" \
        -x MASTER_ADDR -x MASTER_PORT -x CIFAR10_DIR -x PATH -x LD_LIBRARY_PATH \
        "${in_container[@]}" python main.py "${bench_args[@]}" "${extra[@]}" --json "${RESULTS_DIR}/${NODES}nodes.json"
fi

# One table per setup (1 GPU, 1 node, N nodes), each with the speedups over FP32.
results=("${RESULTS_DIR}/1gpu.json" "${RESULTS_DIR}/1node.json")
if (( NODES > 1 )); then
    results+=("${RESULTS_DIR}/${NODES}nodes.json")
fi
run "${in_container[@]}" python -m utils.report "${results[@]}" --json "${RESULTS_DIR}/merged.json"
