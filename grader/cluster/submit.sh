#!/usr/bin/env bash
# Submit a class to Slurm: the grading array (one GPU per shard) and the merge that follows it.
#   grader/cluster/submit.sh SUBMISSIONS OUT [SHARDS]     (run from the kit's folder)
set -euo pipefail

SUBMISSIONS="${1:?usage: submit.sh SUBMISSIONS OUT [SHARDS]}"
OUT="${2:?usage: submit.sh SUBMISSIONS OUT [SHARDS]}"
SHARDS="${3:-4}"
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"

job=$(sbatch --parsable --array="1-$SHARDS" "$HERE/grade_array.sbatch" "$SUBMISSIONS" "$OUT")
merge=$(sbatch --parsable --dependency="afterany:${job%%;*}" "$HERE/merge.sbatch" "$OUT")
echo "grading: job $job ($SHARDS shards); gradebook: job $merge -> $OUT/gradebook.csv"
