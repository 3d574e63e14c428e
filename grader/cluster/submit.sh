#!/usr/bin/env bash
# Submit a class to Slurm: the grading array (grade_array.sbatch) and the merge that follows it.
#
#   grader/cluster/submit.sh [--gpu] SUBMISSIONS OUT [SHARDS] [-- SBATCH_OPTION...]
#
# --gpu: each shard holds one GPU (--gres=gpu:1) and requires it (the official grade); without it
# the shards run on CPUs with GPU tests off (grades provisional). SHARDS: the array's size (4).
# Options after `--` go to both sbatch calls: partition, account, resources (they override the
# scripts' #SBATCH lines), e.g. -- --partition=gpu --cpus-per-task=2 --mem=8G.
set -euo pipefail

USAGE="usage: grader/cluster/submit.sh [--gpu] SUBMISSIONS OUT [SHARDS] [-- SBATCH_OPTION...]"
fail() { printf 'submit.sh: %s\n%s\n' "$1" "$USAGE" >&2; exit 2; }

gpu=false
positional=()
sbatch_options=()
while (($#)); do
    case "$1" in
        --gpu) gpu=true ;;
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
[[ -e "$SUBMISSIONS" ]] || fail "no such folder or archive: $SUBMISSIONS"
[[ "$SHARDS" =~ ^[1-9][0-9]*$ ]] || fail "SHARDS must be a positive whole number, not '$SHARDS'"
command -v sbatch > /dev/null || fail "sbatch not found: run this on a Slurm login node"

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
export KIT_DIR="${KIT_DIR:-$(dirname "$(dirname "$HERE")")}"
if $gpu; then
    export KIT_GPU=require
    array_options=(--gres=gpu:1)
    where=GPUs
else
    export KIT_GPU=off
    array_options=()
    where=CPUs
fi

job=$(sbatch --parsable --array="1-$SHARDS" "${array_options[@]}" "${sbatch_options[@]}" \
    "$HERE/grade_array.sbatch" "$SUBMISSIONS" "$OUT")
merge=$(sbatch --parsable --dependency="afterany:${job%%;*}" "${sbatch_options[@]}" "$HERE/merge.sbatch" "$OUT")
echo "grading: job ${job%%;*} ($SHARDS shards on $where); gradebook: job ${merge%%;*} -> $OUT/gradebook.csv"
