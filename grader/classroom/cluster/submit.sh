#!/usr/bin/env bash
# Submit a class to Slurm: the grading arrays (grade_array.sbatch) and the merge that follows them.
#
#   grader/classroom/cluster/submit.sh [--gpu | --cpu-only] [--gpu-shards N] [--gpu-sbatch OPTION]...
#                            SUBMISSIONS OUT [SHARDS] [-- SBATCH_OPTION...]
#
# By default a class is graded in two passes, each GPU used only for the GPU tests: a CPU array of
# SHARDS tasks grades every test but the GPU tests (--gpu off, into OUT/shard-I) and a GPU array of
# --gpu-shards tasks (default SHARDS), one GPU each (--gres=gpu:1), grades the GPU tests alone
# (--gpu only, into OUT/gpu-shard-I); the merge combines both into one official grade per student.
# --gpu: one array grades everything on GPUs (--gpu require); --cpu-only: the CPU array alone
# (grades provisional). SHARDS: the CPU array's size (4). Options after `--` go to every sbatch
# call (partition, account, resources; they override the scripts' #SBATCH lines), e.g.
# -- --partition=cpu --mem=8G; --gpu-sbatch OPTION (repeatable) goes to the GPU array alone and
# after them, e.g. --gpu-sbatch --partition=gpu.
set -euo pipefail

USAGE="usage: grader/classroom/cluster/submit.sh [--gpu | --cpu-only] [--gpu-shards N] [--gpu-sbatch OPTION]... SUBMISSIONS OUT [SHARDS] [-- SBATCH_OPTION...]"
fail() { printf 'submit.sh: %s\n%s\n' "$1" "$USAGE" >&2; exit 2; }
count() { [[ "$2" =~ ^[1-9][0-9]*$ ]] || fail "$1 must be a positive whole number, not '$2'"; }

mode=two-pass
gpu_shards=""
positional=()
sbatch_options=()
gpu_sbatch_options=()
while (($#)); do
    case "$1" in
        --gpu) [[ $mode == cpu-only ]] && fail "--gpu and --cpu-only exclude each other"; mode=gpu ;;
        --cpu-only) [[ $mode == gpu ]] && fail "--gpu and --cpu-only exclude each other"; mode="cpu-only" ;;
        --gpu-shards) (($# >= 2)) || fail "--gpu-shards needs a number"; gpu_shards="$2"; shift ;;
        --gpu-sbatch) (($# >= 2)) || fail "--gpu-sbatch needs an sbatch option"; gpu_sbatch_options+=("$2"); shift ;;
        -h|--help) echo "$USAGE"; exit 0 ;;
        --) shift; sbatch_options=("$@"); break ;;
        -*) fail "unknown option $1" ;;
        *) positional+=("$1") ;;
    esac
    shift
done
((${#positional[@]} >= 2 && ${#positional[@]} <= 3)) || fail "expected SUBMISSIONS OUT [SHARDS]"
SUBMISSIONS="${positional[0]}"
OUT="${positional[1]}"
SHARDS="${positional[2]:-4}"
GPU_SHARDS="${gpu_shards:-$SHARDS}"
[[ -e "$SUBMISSIONS" ]] || fail "no such folder or archive: $SUBMISSIONS"
count SHARDS "$SHARDS"
count --gpu-shards "$GPU_SHARDS"
command -v sbatch > /dev/null || fail "sbatch not found: run this on a Slurm login node"

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
export KIT_DIR="${KIT_DIR:-$(dirname "$(dirname "$HERE")")}"

case $mode in
    gpu) arrays=(all); what="$SHARDS shards on GPUs, every test" ;;
    cpu-only) arrays=(cpu); what="$SHARDS shards on CPUs, GPU tests not run: grades provisional" ;;
    *) arrays=(cpu gpu); what="CPU pass: $SHARDS shards; GPU tests: $GPU_SHARDS shards on GPUs" ;;
esac

# request NAME: the grading array NAME's KIT_GPU value and sbatch options, into REQUEST
request() {
    case $1 in
        cpu) REQUEST=(off --array="1-$SHARDS" "${sbatch_options[@]}") ;;
        gpu) REQUEST=(only --array="1-$GPU_SHARDS" "${sbatch_options[@]}" --gres=gpu:1 "${gpu_sbatch_options[@]}") ;;
        all) REQUEST=(require --array="1-$SHARDS" "${sbatch_options[@]}" --gres=gpu:1 "${gpu_sbatch_options[@]}") ;;
    esac
}

# preflight NAME GPU_MODE SBATCH_OPTION...: sbatch --test-only's verdict on one array; a refusal (a GPU
# asked for where the cluster declares none, an unknown partition) stops everything before any job is queued
preflight() {
    local name="$1" gpu_mode="$2" said
    shift 2
    said=$(KIT_GPU="$gpu_mode" sbatch --test-only "$@" "$HERE/grade_array.sbatch" "$SUBMISSIONS" "$OUT" 2>&1 >/dev/null) \
        && return 0
    printf 'submit.sh: sbatch refuses the %s array, so nothing was submitted: %s\n' "$name" "${said//$'\n'/ }" >&2
    if [[ $gpu_mode != off ]]; then
        printf '%s\n' "no GPU in this cluster, or not in the default partition? name the GPU partition with" \
            "--gpu-sbatch --partition=NAME, or grade the CPU pass alone with --cpu-only (grades provisional)" >&2
    fi
    exit 2
}

# submit GPU_MODE SBATCH_OPTION...: queue one grading array, print its job id
submit() {
    local gpu_mode="$1"
    shift
    KIT_GPU="$gpu_mode" sbatch --parsable "$@" "$HERE/grade_array.sbatch" "$SUBMISSIONS" "$OUT" | cut -d';' -f1
}

for name in "${arrays[@]}"; do
    request "$name"
    preflight "$name" "${REQUEST[@]}"
done
ids=()
for name in "${arrays[@]}"; do
    request "$name"
    ids+=("$(submit "${REQUEST[@]}")")
done
jobs=$(IFS=:; echo "${ids[*]}")
merge=$(sbatch --parsable --dependency="afterany:$jobs" "${sbatch_options[@]}" "$HERE/merge.sbatch" "$OUT")
echo "grading: job $jobs ($what); gradebook: job ${merge%%;*} -> $OUT/gradebook.csv"
