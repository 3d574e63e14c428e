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

# array GPU_MODE SIZE [SBATCH_OPTION...]: submit one grading array, print its job id
array() {
    local mode="$1" size="$2"
    shift 2
    KIT_GPU="$mode" sbatch --parsable --array="1-$size" "${sbatch_options[@]}" "$@" \
        "$HERE/grade_array.sbatch" "$SUBMISSIONS" "$OUT" | cut -d';' -f1
}

case $mode in
    gpu) jobs=$(array require "$SHARDS" --gres=gpu:1 "${gpu_sbatch_options[@]}")
         what="$SHARDS shards on GPUs, every test" ;;
    cpu-only) jobs=$(array off "$SHARDS")
              what="$SHARDS shards on CPUs, GPU tests not run: grades provisional" ;;
    *) cpu=$(array off "$SHARDS")
       gpu=$(array only "$GPU_SHARDS" --gres=gpu:1 "${gpu_sbatch_options[@]}")
       jobs="$cpu:$gpu"
       what="CPU pass: $SHARDS shards, job $cpu; GPU tests: $GPU_SHARDS shards on GPUs, job $gpu" ;;
esac
merge=$(sbatch --parsable --dependency="afterany:$jobs" "${sbatch_options[@]}" "$HERE/merge.sbatch" "$OUT")
echo "grading: job $jobs ($what); gradebook: job ${merge%%;*} -> $OUT/gradebook.csv"
