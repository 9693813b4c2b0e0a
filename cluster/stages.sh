# The stage runner shared by run_thetagpu.sh (Cobalt), run_pbs.sh (PBS Pro) and run_slurm.sh:
# sourced by them once they have set what their scheduler knows. It runs ampbench in the
# site's container in three stages, 1 GPU, all GPUs of one node (torchrun) and all nodes (the
# scheduler's launcher), each precision mode as a process of its own with a checkpoint, so
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
#   across_nodes()  function that fills array `launch` to start $1 ranks, $2 per node, on $3 nodes
#   site_numbers    array (optional): names of the site's own whole-number variables, checked like STEPS
# and the defaults of the variables below that differ between sites.
#
# Variables a user can set (in the environment or when submitting; empty means the default):
#   CONTAINER        the NGC PyTorch image;  CONTAINER_RUNTIME: singularity or apptainer
#   BIND             paths bound into the container (comma list)
#   CIFAR10_DIR      the folder that holds cifar-10-batches-py (pre-staged: compute nodes are offline)
#   DATA DATA_DIR    your own images instead: DATA=imagefolder (a folder per class, streamed from disk
#                    where it does not fit in memory) or DATA=webdataset (tar shards, which ampbench-shards
#                    writes), and DATA_DIR the folder (or the shards' brace pattern) where the nodes read it
#   MODEL STEPS BATCH (per GPU) MODES EXTRA_ARGS (more main.py flags, split at white space)
#   CHECKPOINT_EVERY steps between checkpoints (what a preempted job loses at most)
#   RESULTS_ROOT     results go to RESULTS_ROOT/<date>-<job id>/ (a rerun job finds its own folder)
#   NODES            nodes for the last stage (default: all the job's nodes)
#   GPUS_PER_NODE    ranks per node; by default every GPU the container sees
#   USE_GPU=0        run the same stages as CPU processes (gloo), GPUS_PER_NODE of them per node:
#                    for testing the script without GPUs
#   DRY_RUN=1        print every command instead of running it
#   MASTER_ADDR MASTER_PORT  where the ranks of the multi-node stage meet
#   STUDY=1          run the scaling study instead of the stages: every mode in one launch with
#                    --explain on 1 GPU, one node and 2, 4, ... nodes up to NODES, for each GRAD_COMM,
#                    then benchmarks/scaling.py merges them (docs/scaling-out.md)
#   GRAD_COMM        the study's --grad-comm list (comma list from fp32, fp16, bf16; default fp32)
#   ADVISE=1         run main.py --advise instead of the stages: which precision and speed levers MODEL
#                    should train with at BATCH on one GPU of the first node (the adviser chooses the
#                    modes: MODES is not read), its advice in RESULTS_DIR/advice on the shared file system
#   BUDGET           --advise's minutes (default: the allocation's time left, as the scheduler script's
#                    time_left_s reads it, less a tenth and ADVICE_MARGIN_S for the container's start
#                    and the advice; 10 where the scheduler says nothing)
# Every one is checked before anything runs (validate below); no value is ever evaluated by the
# shell: numbers match a pattern before any arithmetic sees them.
# shellcheck shell=bash
# shellcheck disable=SC2153,SC2154  # NODES, on_one_node and launch come from the scheduler script

fail() {
    echo "ampbench: error: $*" >&2
    exit 2
}

# A word as a shell reads it back, on one line: bare when that is safe, else in single quotes
# (bash's $'...' for a newline or tab). Sets the variable named $1.
quote() {
    if [[ "$2" =~ ^[A-Za-z0-9_@%+=:,./-]+$ ]]; then
        printf -v "$1" '%s' "$2"
    elif [[ "$2" == *[[:cntrl:]]* ]]; then
        printf -v "$1" '%q' "$2"
    else
        printf -v "$1" "'%s'" "${2//\'/\'\\\'\'}"
    fi
}

# The command as one line that can be pasted into a shell, spaces in paths and all.
show() {
    local word quoted line="+"
    for word in "$@"; do
        quote quoted "${word}"
        line+=" ${quoted}"
    done
    printf '%s\n' "${line}"
}

run() {
    show "$@"
    if [[ "${DRY_RUN}" != 1 ]]; then
        "$@"
    fi
}

if [[ -z "${NODE_NAMES:-}" && -n "${NODE_FILE:-}" && -f "${NODE_FILE}" ]]; then
    NODE_NAMES=$(sort -u "${NODE_FILE}" | tr '\n' ' ')
fi
NODE_NAMES=${NODE_NAMES:-$(hostname)}
read -r -a node_list <<< "${NODE_NAMES}"
NODES=${NODES:-${#node_list[@]}}
CONTAINER_RUNTIME=${CONTAINER_RUNTIME:-singularity}
CONTAINER=${CONTAINER:-}
BIND=${BIND:-/lus}
CIFAR10_DIR=${CIFAR10_DIR:-}
DATA=${DATA:-cifar10}
DATA_DIR=${DATA_DIR:-}
RESULTS_ROOT=${RESULTS_ROOT:-${AMPBENCH_DIR}/results}
MODEL=${MODEL:-resnet50}
STEPS=${STEPS:-300}
BATCH=${BATCH:-128}
MODES=${MODES:-fp32,tf32,amp-fp16,amp-bf16}
EXTRA_ARGS=${EXTRA_ARGS:-}
CHECKPOINT_EVERY=${CHECKPOINT_EVERY:-50}
GPUS_PER_NODE=${GPUS_PER_NODE:-}
USE_GPU=${USE_GPU:-1}
DRY_RUN=${DRY_RUN:-0}
MASTER_ADDR=${MASTER_ADDR:-${node_list[0]:-}}
MASTER_PORT=${MASTER_PORT:-29500}
STUDY=${STUDY:-0}
GRAD_COMM=${GRAD_COMM:-fp32}
ADVISE=${ADVISE:-0}
BUDGET=${BUDGET:-}
ADVICE_MARGIN_S=120  # of the allocation: the container's start, the preflight's imports, the advice written
COUNT_MAX=2147483647  # main.py's largest count (2**31-1)

# The variable named $1 holds a whole number from 1 to $2 (no sign, no leading zero, no
# expression: bash arithmetic would run what an array index in a value asks for).
check_number() {
    local value=${!1}
    if [[ ! "${value}" =~ ^[1-9][0-9]{0,9}$ ]] || (( value > $2 )); then
        quote value "${value}"
        fail "$1=${value} is not a whole number from 1 to $2."
    fi
}

# The variable named $1 matches the pattern $2, which $3 describes.
check_format() {
    local value=${!1}
    if [[ ! "${value}" =~ $2 ]]; then
        quote value "${value}"
        fail "$1=${value} is not $3."
    fi
}

# Paths and host names are passed as they are, but a newline or tab in one is a mistake.
check_text() {
    local value=${!1}
    if [[ "${value}" == *[[:cntrl:]]* ]]; then
        quote value "${value}"
        fail "$1=${value} holds a control character (a newline or tab); write it on one line without tabs."
    fi
}

# A path handed to a command as a word of its own: one that begins with a dash would be read
# as an option (by dirname, mkdir, the container runtime or main.py).
check_path() {
    local value=${!1}
    check_text "$1"
    if [[ "${value}" == -* ]]; then
        quote value "${value}"
        fail "$1=${value} begins with a dash, which commands read as an option; write it as ./${value}."
    fi
}

# The variable named $1 holds a comma list of items matching $2 (described by $3), each item
# once; they go into the array named $4.
check_list() {
    local item seen=, items
    check_format "$1" "^$2(,$2)*\$" "$3"
    IFS=, read -r -a items <<< "${!1}"
    for item in "${items[@]}"; do
        [[ "${seen}" != *",${item},"* ]] || fail "$1=${!1} names ${item} twice; name each once."
        seen+="${item},"
    done
    local -n list=$4
    # shellcheck disable=SC2034  # a nameref: this sets the caller's array
    list=("${items[@]}")
}

# EXTRA_ARGS is split at white space (read -r -a): no quotes, no escapes, no expansion.
check_extra_args() {
    check_text EXTRA_ARGS
    if [[ "${EXTRA_ARGS}" == *[\'\"\\]* ]]; then
        fail "EXTRA_ARGS holds a quote or backslash, but it is split at spaces only;" \
             "give its flags and values without spaces or quotes."
    fi
    read -r -a extra <<< "${EXTRA_ARGS}"
    local word
    for word in "${extra[@]}"; do  # --grad is main.py's abbreviation of --grad-comm
        [[ "${STUDY}" != 1 || "${word}" != --grad* ]] \
            || fail "EXTRA_ARGS holds ${word%%=*}, which the study sets for each point from GRAD_COMM;" \
                    "set GRAD_COMM instead (a comma list from fp32, fp16, bf16)."
    done
}

check_container() {
    check_format CONTAINER_RUNTIME '^(singularity|apptainer)$' "singularity or apptainer"
    if [[ "${DRY_RUN}" == 1 ]]; then  # the headers' dry runs work before either is set: shown as placeholders
        placeholder CONTAINER
        placeholder "${data_variable}"
    fi
    [[ -n "${CONTAINER}" ]] \
        || fail "CONTAINER is not set: set it to an NGC PyTorch image, e.g. from" \
                "apptainer build pytorch_24.04-py3.sif docker://nvcr.io/nvidia/pytorch:24.04-py3."
    [[ -n "${!data_variable}" ]] || fail "${data_variable} is not set: ${data_wanted}."
    check_path CONTAINER
    check_path "${data_variable}"
    check_path BIND
    [[ "${DRY_RUN}" != 1 ]] || return 0
    command -v "${CONTAINER_RUNTIME}" >/dev/null \
        || fail "${CONTAINER_RUNTIME} is not on PATH: load it (module load ${CONTAINER_RUNTIME})" \
                "or set CONTAINER_RUNTIME."
    [[ -f "${CONTAINER}" || -d "${CONTAINER}" ]] || fail "no container image at CONTAINER=${CONTAINER}."
    # a brace pattern of shards names files that main.py --check-flags finds, or refuses, below
    [[ -d "${!data_variable}" || ( "${DATA}" == webdataset && "${!data_variable}" == *"{"* ) ]] \
        || fail "${data_variable}=${!data_variable} is not a folder; pre-stage the data there (see the script's" \
                "header)."
}

# Which variable names the data and what it must hold: CIFAR10_DIR for CIFAR-10, else DATA_DIR.
data_source() {
    check_format DATA '^(cifar10|imagefolder|webdataset)$' "cifar10, imagefolder or webdataset"
    if [[ "${DATA}" == cifar10 ]]; then
        data_variable=CIFAR10_DIR
        data_wanted="set it to the folder that holds cifar-10-batches-py"
    else
        data_variable=DATA_DIR
        data_wanted="set it to the $([[ "${DATA}" == imagefolder ]] && echo "image folder (a folder per class)" \
            || echo "shards' folder (ampbench-shards writes one) or their brace pattern") the nodes read"
    fi
}

# In a dry run, an unset variable $1 stands in the printed commands as <$1>, said once.
placeholder() {
    [[ -z "${!1}" ]] || return 0
    printf -v "$1" '<%s>' "$1"
    echo "ampbench: dry run: $1 is not set; the commands show <$1> in its place." >&2
}

# The last stage needs the nodes it asks for: refused now, not after the one-node stages ran.
check_nodes() {
    (( NODES > 1 )) && [[ "${DRY_RUN}" != 1 ]] || return 0
    [[ -n "${JOB_ID}" ]] \
        || fail "NODES=${NODES} outside a ${SCHEDULER} job: submit the script (see its header)," \
                "or add DRY_RUN=1 to see its commands."
    (( NODES <= ${#node_list[@]} )) \
        || fail "NODES=${NODES} but this ${SCHEDULER} job has ${#node_list[@]} node(s);" \
                "submit it with ${NODES} nodes or lower NODES."
}

# Made here (a dry run makes nothing), so that no stage starts without a place for its results.
check_results_root() {
    local existing=${RESULTS_ROOT}
    check_path RESULTS_ROOT
    while [[ ! -e "${existing}" && ! -L "${existing}" ]]; do
        existing=$(dirname "${existing}")
    done
    [[ -d "${existing}" && -w "${existing}" ]] \
        || fail "RESULTS_ROOT=${RESULTS_ROOT} cannot be made: ${existing} is not a folder you can write;" \
                "set RESULTS_ROOT to one."
    [[ "${DRY_RUN}" == 1 ]] || mkdir -p "${RESULTS_ROOT}" 2>/dev/null \
        || fail "RESULTS_ROOT=${RESULTS_ROOT} cannot be made; set RESULTS_ROOT to a folder you can write."
}

# Every user variable, before anything runs; sets the arrays `modes` and `extra`.
validate() {
    local name
    check_format USE_GPU '^[01]$' "0 or 1"
    check_format DRY_RUN '^[01]$' "0 or 1"
    check_format STUDY '^[01]$' "0 or 1"
    check_format ADVISE '^[01]$' "0 or 1"
    [[ "${STUDY}" != 1 || "${ADVISE}" != 1 ]] || fail "STUDY=1 and ADVISE=1 each run instead of the stages; set one."
    [[ -z "${BUDGET}" ]] || check_number BUDGET 100000
    data_source
    for name in NODES STEPS BATCH CHECKPOINT_EVERY "${site_numbers[@]}"; do
        check_number "${name}" "${COUNT_MAX}"
    done
    [[ -z "${GPUS_PER_NODE}" ]] || check_number GPUS_PER_NODE "${COUNT_MAX}"
    check_number MASTER_PORT 65535
    check_format MASTER_ADDR '^[A-Za-z0-9._:%-]+$' "a host name or address"
    check_format MODEL '^[A-Za-z0-9][A-Za-z0-9_.-]*$' \
        "a model name (letters, digits, _ . -; see python main.py --list-models)"
    check_list MODES "[A-Za-z0-9][A-Za-z0-9_-]*" \
        "a comma list of precision modes without spaces or empty items (e.g. fp32,amp-bf16)" modes
    check_list GRAD_COMM "(fp32|fp16|bf16)" "a comma list from fp32, fp16 and bf16 without spaces (e.g. fp32,bf16)" \
        grad_comms
    check_extra_args
    check_container
    check_nodes
    check_results_root
}

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

# What runs the benchmark: the container's Python, torch and GPUs, checked before any training.
preflight() {
    local report gpus
    if [[ "${DRY_RUN}" == 1 ]]; then
        run "${on_one_node[@]}" "${in_container[@]}" python -m utils.compat
        PER_NODE=${GPUS_PER_NODE:-${NOMINAL_GPUS}}
        return
    fi
    report=$(in_container_checked python -m utils.compat) \
        || fail "CONTAINER=${CONTAINER} cannot run ampbench (${report}); use an NGC PyTorch image."
    echo "container ${CONTAINER}: ${report%$'\n'*}"
    gpus=${report##*gpus=}
    [[ "${gpus}" =~ ^[0-9]+$ ]] \
        || fail "the container's python -m utils.compat printed no GPU count; use an image that runs ampbench."
    if [[ "${USE_GPU}" != 1 ]]; then
        PER_NODE=${GPUS_PER_NODE:-1}
    elif (( gpus == 0 )); then
        fail "no GPU is visible in the container; check the queue and that ${CONTAINER_RUNTIME} gets --nv."
    elif [[ -n "${GPUS_PER_NODE}" ]] && (( GPUS_PER_NODE > gpus )); then
        fail "GPUS_PER_NODE=${GPUS_PER_NODE} but this job's node shows ${gpus} GPU(s); lower it or unset it."
    else
        PER_NODE=${GPUS_PER_NODE:-${gpus}}
    fi
}

# Runs "$@" on the first node in the container, printing its stdout (and its stderr to stderr);
# when it fails, prints instead the last sentence it gave on stderr (its `error:` line without the prefix), so that
# the caller's own sentence is the only one the user reads.
in_container_checked() {
    local errors status=0 said
    errors=$(mktemp)
    "${on_one_node[@]}" "${in_container[@]}" "$@" 2>"${errors}" || status=$?
    if (( status )); then
        said=$(grep -v '^[[:space:]]*$' "${errors}" | tail -n 1 || true)
        said=${said#*error: }
        echo "${said%.}"
    else
        cat "${errors}" >&2  # a warning of a command that succeeded stays in the job's log
    fi
    rm -f "${errors}"
    return "${status}"
}

# main.py's flags every run of the job shares, with --modes and what follows it given: the array `flags`.
job_flags() {
    flags=(-n "${STEPS}" "${gpu_flags[@]}" --model "${MODEL}" -b "${BATCH}" --modes "$@" --data "${DATA}"
           --data-dir "${!data_variable}" "${extra[@]}")
}

# main.py's flags for one mode's run in stage $1: the array `flags`.
main_flags() {
    job_flags "$2"
    flags+=(--json "${RESULTS_DIR}/$1-$2.json" --checkpoint "${RESULTS_DIR}/$1-$2.pt"
            --checkpoint-every "${CHECKPOINT_EVERY}")
}

# main.py's flags for the study's point on $1 ranks with --grad-comm $2 (every mode in one run,
# with --explain; one process sends no gradients): the array `flags` and its results file `out`.
study_flags() {
    local comm_flags=(--grad-comm "$2")
    out="${RESULTS_DIR}/study/ranks$1-$2.json"
    if (( $1 == 1 )); then
        out="${RESULTS_DIR}/study/ranks1.json"
        comm_flags=()
    fi
    job_flags "${MODES}" --explain
    flags+=("${comm_flags[@]}" --json "${out}")
}

# main.py --advise's flags (-p on a GPU, never --allow-slow-fp16: the adviser times what runs at
# speed), writing into RESULTS_DIR/advice: the array `flags`.
advise_flags() {
    local device=()
    [[ "${USE_GPU}" != 1 ]] || device=(-p)
    flags=(--advise "${device[@]}" --model "${MODEL}" -b "${BATCH}" -n "${STEPS}" --data cifar10
           --data-dir "${CIFAR10_DIR}" "${extra[@]}" --budget "${BUDGET}" --advice-dir "${RESULTS_DIR}/advice")
}

# ADVISE=1's BUDGET where none is given: the allocation's time left (the scheduler script's
# time_left_s, in seconds), less a tenth and ADVICE_MARGIN_S; 10 minutes where it says nothing.
advice_budget() {
    local left=""
    [[ -z "${BUDGET}" ]] || return 0
    if [[ -n "${JOB_ID}" ]] && declare -F time_left_s >/dev/null; then
        left=$(time_left_s) || left=""
    fi
    if [[ ! "${left}" =~ ^[0-9]+$ ]]; then
        BUDGET=10
        echo "ampbench: ${SCHEDULER} gave no time left for this job: --advise gets BUDGET=${BUDGET} minutes (set BUDGET)."
        return 0
    fi
    BUDGET=$(( (left - left / 10 - ADVICE_MARGIN_S) / 60 ))
    (( BUDGET >= 1 )) \
        || fail "this ${SCHEDULER} job has $(( left / 60 )) minute(s) left, too few for --advise beside the" \
                "container's start; submit it with more time, or set BUDGET."
    echo "ampbench: --advise gets BUDGET=${BUDGET} of the $(( left / 60 )) minutes this ${SCHEDULER} job has left."
}

# ADVISE=1: main.py --advise on the first node; its exit status is the advice's status (docs/advice.md),
# so an advice.json written is the job done, whatever its status.
advise() {
    advise_flags
    run mkdir -p "${RESULTS_DIR}"
    local status=0
    run "${on_one_node[@]}" "${in_container[@]}" python main.py "${flags[@]}" || status=$?
    if [[ "${DRY_RUN}" == 1 || -f "${RESULTS_DIR}/advice/advice.json" ]]; then
        echo "ampbench: the advice (exit ${status}, its status) is in ${RESULTS_DIR}/advice: report.txt, advice.json."
        return 0
    fi
    failed "${status}" "--advise"
    report_failures "runs" "run it again"
}

# Whether the results file $1 holds a finished run (a stopped one says "incomplete": true).
finished() {
    [[ -f "$1" ]] && ! grep -q '"incomplete": true' "$1"
}

# main.py refuses MODES and EXTRA_ARGS it cannot run here, in the container, before any stage
# (a refusal inside a stage would reach the user through torchrun's traceback): the command
# each mode's stages run, or with STUDY=1 the study's (its --grad-comm values are checked above).
check_main_flags() {
    local mode flags out
    local comm
    if [[ "${ADVISE}" == 1 ]]; then  # --check-flags with --advise: its refusals, the plan and the budget
        advise_flags
        check_flags 1
        return
    fi
    if [[ "${STUDY}" == 1 ]]; then
        study_flags 1 fp32
        check_flags 1
        for comm in "${grad_comms[@]}"; do  # every point on more ranks runs these flags
            study_flags 2 "${comm}"
            check_flags 2
        done
        return
    fi
    for mode in "${modes[@]}"; do
        main_flags check "${mode}"
        check_flags 1
    done
}

# main.py --check-flags on the array `flags`, inside the container, as one rank of a launch of
# $1 ranks sees them (torchrun's variables: what a run refuses in one process, or in many, too).
check_flags() {
    local said as_rank=(env WORLD_SIZE="$1" RANK=0)
    if [[ "${DRY_RUN}" == 1 ]]; then
        run "${on_one_node[@]}" "${in_container[@]}" "${as_rank[@]}" python main.py "${flags[@]}" --check-flags
    else
        said=$(in_container_checked "${as_rank[@]}" python main.py "${flags[@]}" --check-flags) \
            || fail "main.py refuses the flags MODES and EXTRA_ARGS give it (${said}); change them."
    fi
}

FAILED=()
REFUSED=()  # of FAILED, those that ended with a refusal (exit 2): a resubmission would repeat it
# Records the failure of the run named $2, which exited with status $1.
failed() {
    FAILED+=("$2")
    (( $1 != 2 )) || REFUSED+=("$2")
}
# One stage: every mode as its own run with its own checkpoint, launched by "$@".
stage() {
    local name=$1 mode out checkpoint resume flags
    shift
    for mode in "${modes[@]}"; do
        main_flags "${name}" "${mode}"
        out="${RESULTS_DIR}/${name}-${mode}.json"
        checkpoint="${RESULTS_DIR}/${name}-${mode}.pt"
        if finished "${out}"; then
            echo "ampbench: ${name} ${mode} is done (${out}); skipping it."
            continue
        fi
        resume=()
        if [[ -f "${checkpoint}" ]]; then
            resume=(--resume)
            echo "ampbench: ${name} ${mode} resumes from ${checkpoint}."
        fi
        # Progress stays on: without a terminal main.py logs plain phase and progress lines.
        run "$@" main.py "${flags[@]}" "${resume[@]}" || failed $? "${name} ${mode}"
    done
}

# One point of the study on $1 ranks, launched by the rest: every mode in one run with --explain,
# once per GRAD_COMM where gradients travel; a point already done is skipped.
study_point() {
    local ranks=$1 comm out flags
    shift
    for comm in "${grad_comms[@]}"; do
        study_flags "${ranks}" "${comm}"
        if finished "${out}"; then
            echo "ampbench: study point ${out} is done; skipping it."
        else
            run "$@" main.py "${flags[@]}" || failed $? "study ${out##*/}"
        fi
        (( ranks > 1 )) || return 0
    done
}

# The scaling study: 1 GPU, one node, then 2, 4, ... nodes up to NODES, merged by benchmarks/scaling.py,
# run as a module from AMPBENCH_DIR (like utils.compat and utils.report): the container needs no install.
study() {
    local count=2
    run mkdir -p "${RESULTS_DIR}/study"
    study_point 1 "${on_one_node[@]}" "${in_container[@]}" python
    if (( PER_NODE > 1 )); then
        study_point "${PER_NODE}" "${on_one_node[@]}" "${in_container[@]}" python -m torch.distributed.run \
            --standalone --nproc_per_node="${PER_NODE}"
    fi
    while (( count < NODES * 2 )); do
        (( count < NODES )) || count=${NODES}
        across_nodes "$(( count * PER_NODE ))" "${PER_NODE}" "${count}"
        study_point "$(( count * PER_NODE ))" "${launch[@]}" "${in_container[@]}" python
        count=$(( count * 2 ))
    done
    run "${on_one_node[@]}" "${in_container[@]}" python -m benchmarks.scaling --from "${RESULTS_DIR}/study" \
        --out "${RESULTS_DIR}/study" || failed $? "the study's table"
}

# The job's last word on the $1 that failed, if any (exit 1): a refusal is fixed by changing the
# flags, anything else (a lost node, a time limit) by resubmitting, which would $2. Only a
# launch whose own status is main.py's is told apart: torchrun exits 1 whatever its ranks did.
report_failures() {
    (( ${#FAILED[@]} )) || return 0
    if (( ${#REFUSED[@]} )); then
        echo "ampbench: error: these $1 failed (their messages are above): ${FAILED[*]}; ${REFUSED[*]} refused" \
             "what it was asked (exit 2), which a resubmission repeats: change the flags or results it names," \
             "then resubmit the job." >&2
    else
        echo "ampbench: error: these $1 failed (their messages are above): ${FAILED[*]}; resubmit the job to" \
             "$2." >&2
    fi
    exit 1
}

# One table per stage (1 GPU, 1 node, N nodes), each with the speedups over FP32.
merge_results() {
    local prefix=("${on_one_node[@]}" "${in_container[@]}" python -m utils.report) results folder
    if [[ "${DRY_RUN}" == 1 ]]; then
        quote folder "${RESULTS_DIR}"
        echo "$(show "${prefix[@]}") ${folder}/*-*.json --json ${folder}/merged.json"
        return
    fi
    shopt -s nullglob
    results=("${RESULTS_DIR}"/*-*.json)
    (( ${#results[@]} )) || return 0
    show "${prefix[@]}" "${results[@]}" --json "${RESULTS_DIR}/merged.json"
    "${prefix[@]}" "${results[@]}" --json "${RESULTS_DIR}/merged.json" | tee "${RESULTS_DIR}/report.txt"
}

# Preemption and time limits send SIGTERM: the running rank saves its checkpoint and exits, and
# the job stops there instead of starting the next run.
trap 'echo "ampbench: stopped by a signal; checkpoints are in ${RESULTS_DIR:-RESULTS_ROOT}:" \
          "resubmit (or let the scheduler rerun) to resume." >&2; exit 143' TERM INT

# Relative paths in the variables are relative to the ampbench folder.
cd "${AMPBENCH_DIR}" || fail "AMPBENCH_DIR=${AMPBENCH_DIR} cannot be entered; set it to the ampbench folder."
validate
export CIFAR10_DIR MASTER_ADDR MASTER_PORT
in_container=("${CONTAINER_RUNTIME}" exec -B "${BIND}" "${CONTAINER}")
gpu_flags=(--allow-slow-fp16)  # the CPU stand-in runs float16 modes too, which main.py does only when asked
if [[ "${USE_GPU}" == 1 ]]; then
    in_container=("${CONTAINER_RUNTIME}" exec --nv -B "${BIND}" "${CONTAINER}")
    gpu_flags=(-p)
fi
RESULTS_DIR=$(results_dir)
preflight
if [[ "${STUDY}" == 1 ]] && (( NODES * PER_NODE < 2 )); then  # known once preflight counted the GPUs
    fail "STUDY=1 needs 2 or more ranks, and this job has 1 node x 1 rank; add nodes or GPUS_PER_NODE."
fi
[[ "${ADVISE}" != 1 ]] || advice_budget
check_main_flags
if [[ "${ADVISE}" == 1 ]]; then
    advise
    exit 0
fi
run mkdir -p "${RESULTS_DIR}"
echo "ampbench (${SCHEDULER} job ${JOB_ID:-none}): ${NODES} node(s) x ${PER_NODE} rank(s), ${MODEL}, ${STEPS} steps," \
     "modes ${MODES} -> ${RESULTS_DIR}"

if [[ "${STUDY}" == 1 ]]; then
    study
    report_failures "study points" "run them"
    exit 0
fi

# 1. One GPU.
stage 1gpu "${on_one_node[@]}" "${in_container[@]}" python

# 2. All GPUs of this node: one process per GPU, started by torchrun inside the container.
stage 1node "${on_one_node[@]}" "${in_container[@]}" python -m torch.distributed.run --standalone \
    --nproc_per_node="${PER_NODE}"

# 3. All nodes: one process per GPU, started by the scheduler's launcher; each rank reads its
#    place from the launcher's variables and meets the others at MASTER_ADDR:MASTER_PORT.
if (( NODES > 1 )); then
    across_nodes "$(( NODES * PER_NODE ))" "${PER_NODE}" "${NODES}"
    stage "${NODES}nodes" "${launch[@]}" "${in_container[@]}" python
fi

merge_results
report_failures "runs" "resume them"
