# The stage runner shared by run_thetagpu.sh (Cobalt), run_pbs.sh (PBS Pro) and run_slurm.sh:
# sourced by them once they have set what their scheduler knows. It runs ampbench in the
# site's container in three stages, 1 GPU, all GPUs of one node (torchrun) and all nodes (the
# scheduler's MPI launcher), each precision mode as a process of its own with a checkpoint, so
# that a job rerun after preemption skips what is done and resumes what was cut short; then it
# merges every result into one table per stage.
#
# The scheduler script sets, before sourcing this file:
#   SCHEDULER       its name, for messages
#   JOB_ID          the scheduler's job id (empty outside a job)
#   NODE_FILE       the scheduler's node file, or NODE_NAMES: the job's nodes (default: this host);
#                   NODES counts them unless set, and the first is MASTER_ADDR's default
#   NOMINAL_GPUS    GPUs per node to show in a dry run, where nothing is started
#   on_one_node     array: what starts a command on this job's first node (often nothing)
#   across_nodes()  function that fills array `launch` to start $1 ranks, $2 per node, on every node
# and the defaults of the variables below that differ between sites.
#
# Variables a user can set (in the environment or when submitting):
#   CONTAINER        the NGC PyTorch image;  CONTAINER_RUNTIME: singularity or apptainer
#   BIND             paths bound into the container (comma list)
#   CIFAR10_DIR      the folder that holds cifar-10-batches-py (pre-staged: compute nodes are offline)
#   MODEL STEPS BATCH (per GPU) MODES EXTRA_ARGS (more main.py flags)
#   CHECKPOINT_EVERY steps between checkpoints (what a preempted job loses at most)
#   RESULTS_ROOT     results go to RESULTS_ROOT/<date>-<job id>/ (a rerun job finds its own folder)
#   GPUS_PER_NODE    ranks per node; by default every GPU the container sees
#   USE_GPU=0        run the same stages as CPU processes (gloo), GPUS_PER_NODE of them per node:
#                    for testing the script without GPUs
#   DRY_RUN=1        print every command instead of running it
#   MASTER_ADDR MASTER_PORT  where the ranks of the multi-node stage meet
# shellcheck shell=bash
# shellcheck disable=SC2153,SC2154  # NODES, on_one_node and launch come from the scheduler script

if [[ -z "${NODE_NAMES:-}" && -n "${NODE_FILE:-}" && -f "${NODE_FILE}" ]]; then
    NODE_NAMES=$(sort -u "${NODE_FILE}" | tr '\n' ' ')
fi
NODE_NAMES=${NODE_NAMES:-$(hostname)}
read -r -a node_list <<< "${NODE_NAMES}"
NODES=${NODES:-${#node_list[@]}}
CONTAINER_RUNTIME=${CONTAINER_RUNTIME:-singularity}
CONTAINER=${CONTAINER:?set CONTAINER to an NGC PyTorch image, e.g. from apptainer build pytorch_24.04-py3.sif docker://nvcr.io/nvidia/pytorch:24.04-py3}
BIND=${BIND:-/lus}
CIFAR10_DIR=${CIFAR10_DIR:?set CIFAR10_DIR to the folder that holds cifar-10-batches-py}
RESULTS_ROOT=${RESULTS_ROOT:-${AMPBENCH_DIR}/results}
MODEL=${MODEL:-resnet50}
STEPS=${STEPS:-300}
BATCH=${BATCH:-128}
MODES=${MODES:-fp32,tf32,amp-fp16,amp-bf16}
EXTRA_ARGS=${EXTRA_ARGS:-}
CHECKPOINT_EVERY=${CHECKPOINT_EVERY:-50}
USE_GPU=${USE_GPU:-1}
DRY_RUN=${DRY_RUN:-0}
MASTER_ADDR=${MASTER_ADDR:-${NODE_NAMES%% *}}
MASTER_PORT=${MASTER_PORT:-29500}
export CIFAR10_DIR MASTER_ADDR MASTER_PORT

fail() {
    echo "ampbench: error: $*" >&2
    exit 2
}

run() {
    if [[ "${DRY_RUN}" == 1 ]]; then
        echo "+ $*"
    else
        "$@"
    fi
}

in_container=("${CONTAINER_RUNTIME}" exec -B "${BIND}" "${CONTAINER}")
gpu_flags=()
if [[ "${USE_GPU}" == 1 ]]; then
    in_container=("${CONTAINER_RUNTIME}" exec --nv -B "${BIND}" "${CONTAINER}")
    gpu_flags=(-p)
fi

# A rerun of a job (after preemption) finds the folder its first run made.
results_dir() {
    local found
    if [[ -n "${JOB_ID}" ]]; then
        found=$(find "${RESULTS_ROOT}" -maxdepth 1 -type d -name "*-${JOB_ID}" 2>/dev/null | sort | head -n 1)
        echo "${found:-${RESULTS_ROOT}/$(date +%Y-%m-%d)-${JOB_ID}}"
    else
        echo "${RESULTS_ROOT}/$(date +%Y-%m-%d-%H%M%S)-local"
    fi
}
RESULTS_DIR=${RESULTS_DIR:-$(results_dir)}

# What runs the benchmark: the container's Python, torch and GPUs, checked before any training.
preflight() {
    local report gpus
    if [[ "${DRY_RUN}" == 1 ]]; then
        run "${on_one_node[@]}" "${in_container[@]}" python -m utils.compat
        PER_NODE=${GPUS_PER_NODE:-${NOMINAL_GPUS}}
        return
    fi
    command -v "${CONTAINER_RUNTIME}" >/dev/null \
        || fail "${CONTAINER_RUNTIME} is not on PATH: load it (module load ${CONTAINER_RUNTIME}) or set CONTAINER_RUNTIME."
    [[ -f "${CONTAINER}" || -d "${CONTAINER}" ]] || fail "no container image at CONTAINER=${CONTAINER}."
    report=$("${on_one_node[@]}" "${in_container[@]}" python -m utils.compat) \
        || fail "the container's Python cannot run ampbench (see above); use a newer image (CONTAINER=...)."
    echo "container ${CONTAINER}: ${report%$'\n'*}"
    gpus=${report##*gpus=}
    if [[ "${USE_GPU}" != 1 ]]; then
        PER_NODE=${GPUS_PER_NODE:-1}
    elif (( gpus == 0 )); then
        fail "no GPU is visible in the container; check the queue and that ${CONTAINER_RUNTIME} gets --nv."
    elif (( ${GPUS_PER_NODE:-gpus} > gpus )); then
        fail "GPUS_PER_NODE=${GPUS_PER_NODE} but this job's node shows ${gpus} GPU(s); lower it or unset it."
    else
        PER_NODE=${GPUS_PER_NODE:-${gpus}}
    fi
}

FAILED=()
# One stage: every mode as its own run with its own checkpoint, launched by "$@".
stage() {
    local name=$1 mode out checkpoint resume
    shift
    local modes
    IFS=, read -r -a modes <<< "${MODES}"
    for mode in "${modes[@]}"; do
        out="${RESULTS_DIR}/${name}-${mode}.json"
        checkpoint="${RESULTS_DIR}/${name}-${mode}.pt"
        if [[ -f "${out}" ]] && ! grep -q '"incomplete": true' "${out}"; then
            echo "ampbench: ${name} ${mode} is done (${out}); skipping it."
            continue
        fi
        resume=()
        if [[ -f "${checkpoint}" ]]; then
            resume=(--resume)
            echo "ampbench: ${name} ${mode} resumes from ${checkpoint}."
        fi
        run "$@" main.py -n "${STEPS}" "${gpu_flags[@]}" --model "${MODEL}" -b "${BATCH}" --modes "${mode}" \
            --data cifar10 --data-dir "${CIFAR10_DIR}" --no-progress "${extra[@]}" --json "${out}" \
            --checkpoint "${checkpoint}" --checkpoint-every "${CHECKPOINT_EVERY}" "${resume[@]}" \
            || FAILED+=("${name} ${mode}")
    done
}

# Preemption and time limits send SIGTERM: the running rank saves its checkpoint and exits, and
# the job stops there instead of starting the next run.
trap 'echo "ampbench: stopped by a signal; checkpoints are in ${RESULTS_DIR}: resubmit (or let the scheduler rerun) to resume." >&2; exit 143' TERM INT

read -r -a extra <<< "${EXTRA_ARGS}"
cd "${AMPBENCH_DIR}" || fail "AMPBENCH_DIR=${AMPBENCH_DIR} is not a folder."
run mkdir -p "${RESULTS_DIR}"
preflight
echo "ampbench (${SCHEDULER} job ${JOB_ID:-none}): ${NODES} node(s) x ${PER_NODE} rank(s), ${MODEL}, ${STEPS} steps," \
     "modes ${MODES} -> ${RESULTS_DIR}"

# 1. One GPU.
stage 1gpu "${on_one_node[@]}" "${in_container[@]}" python

# 2. All GPUs of this node: one process per GPU, started by torchrun inside the container.
stage 1node "${on_one_node[@]}" "${in_container[@]}" python -m torch.distributed.run --standalone \
    --nproc_per_node="${PER_NODE}"

# 3. All nodes: one process per GPU, started by the scheduler's launcher; each rank reads its
#    place from the launcher's variables and meets the others at MASTER_ADDR:MASTER_PORT.
if (( NODES > 1 )); then
    across_nodes "$(( NODES * PER_NODE ))" "${PER_NODE}"
    stage "${NODES}nodes" "${launch[@]}" "${in_container[@]}" python
fi

# One table per stage (1 GPU, 1 node, N nodes), each with the speedups over FP32.
if [[ "${DRY_RUN}" == 1 ]]; then
    run "${on_one_node[@]}" "${in_container[@]}" python -m utils.report "${RESULTS_DIR}"/*-*.json \
        --json "${RESULTS_DIR}/merged.json"
else
    shopt -s nullglob
    results=("${RESULTS_DIR}"/*-*.json)
    if (( ${#results[@]} )); then
        "${on_one_node[@]}" "${in_container[@]}" python -m utils.report "${results[@]}" \
            --json "${RESULTS_DIR}/merged.json" | tee "${RESULTS_DIR}/report.txt"
    fi
fi
if (( ${#FAILED[@]} )); then
    echo "ampbench: error: these runs failed (their messages are above): ${FAILED[*]}; resubmit the job" \
         "to resume them." >&2
    exit 1
fi
