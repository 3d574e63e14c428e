#!/usr/bin/env bash
# Gradescope runs this (as /autograder/run_autograder, as root) for each submission: grade
# /autograder/submission into /autograder/results/results.json with the kit's judge. Student
# code runs only in the judge's sandboxed worker, which drops root to a dedicated uid.
# Paths and settings come from the environment (defaults: Gradescope's layout, config.sh):
#   AUTOGRADER_ROOT (/autograder)  KIT_SOURCE ($AUTOGRADER_ROOT/source)
#   KIT_SUBMISSION ($AUTOGRADER_ROOT/submission)  KIT_RESULTS ($AUTOGRADER_ROOT/results/results.json)
#   KIT_PYTHON ($KIT_VENV/bin/python, KIT_VENV=$AUTOGRADER_ROOT/venv)  KIT_GPU  KIT_PROFILE
#   KIT_MEMORY_MB (worker memory cap)  KIT_BUDGET_SECONDS (per-submission wall, start-up included)
#   KIT_GRADER_ARGS (more arguments for `grader grade`, e.g. "--problems P1")
set -uo pipefail

ROOT="${AUTOGRADER_ROOT:-/autograder}"
SOURCE="${KIT_SOURCE:-$ROOT/source}"
# shellcheck source=/dev/null
. "$SOURCE/config.sh"
SUBMISSION="${KIT_SUBMISSION:-$ROOT/submission}"
RESULTS="${KIT_RESULTS:-$ROOT/results/results.json}"
PYTHON="${KIT_PYTHON:-${KIT_VENV:-$ROOT/venv}/bin/python}"
read -r -a EXTRA <<< "${KIT_GRADER_ARGS:-}"

mkdir -p "$(dirname "$RESULTS")"
rm -f "$RESULTS"
cd "$SOURCE/kit" || exit 1
PYTHONPATH="$SOURCE/kit" "$PYTHON" -m grader grade "$SUBMISSION" --out "$RESULTS" --gpu "$KIT_GPU" \
    --profile "$KIT_PROFILE" --memory-mb "$KIT_MEMORY_MB" --budget-seconds "$KIT_BUDGET_SECONDS" "${EXTRA[@]}"
status=$?

if [ ! -s "$RESULTS" ]; then  # the grader could not even start: still a visible, well-formed result
    cat > "$RESULTS" <<JSON
{"score": 0, "execution_time": 0, "visibility": "visible", "stdout_visibility": "hidden",
 "output": "The grader could not finish grading this submission; your instructor has the details.",
 "tests": [{"name": "Autograder failed", "score": 0, "max_score": 0, "status": "failed", "visibility": "visible",
            "output": "The grader could not finish grading this submission; your instructor has the details. Your score may be incomplete."}],
 "extra_data": {"kit_version": "unknown", "grader_error": "run_autograder: the grader exited with status $status and wrote no results"}}
JSON
    echo "run_autograder: the grader exited with status $status and wrote no results" >&2
fi
exit 0
