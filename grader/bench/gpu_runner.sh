#!/usr/bin/env bash
# Prove the kit on a GPU machine in one run, writing every result under one folder:
#   bash grader/bench/gpu_runner.sh [OUT_DIR]        (default: ./gpu-results)
# Run from the kit's root on the GPU machine, with a python3 that holds torch (CUDA build), numpy,
# einops, hypothesis, pytest, psutil, rich, matplotlib and nvidia-ml-py. Wheels in ./.whl (and a
# libseccomp2 .deb) are installed first where the machine has no network; the kit itself is used
# from this folder (PYTHONPATH), not installed.
# Steps, each with its own time limit and log (a failed step does not stop the others):
#   versions        nvidia-smi, lscpu, python, torch, CUDA
#   readings        python -m grader.bench.gpu_readings: what NVML and /proc show from outside
#   acceptance      grader selfcheck --gpu --out OUT/acceptance  (the reference and the stubs graded
#                   with --gpu require, the GPU-only curated mutants, one table)
#   attacks         the attacks on GPU tests (gpu = true in grader/selfproof/hostile/attacks.toml)
#   public          the public tests marked gpu, against the reference
#   class           three submissions (reference, stubs, a GPU mutant) graded in two passes,
#                   --gpu off then --gpu only, merged by grader gradebook
# Then OUT/summary.txt: one line per step with its exit status and time, also written as a bench record
# (grader.bench.records). STEPS="acceptance attacks" (names as above; class stands for both passes) runs only those.
set -uo pipefail
cd "$(dirname "$0")/../.." || exit 2
load=$(cut -d' ' -f1 /proc/loadavg)
out="$(realpath -m "${1:-gpu-results}")"
mkdir -p "$out"
python=${PYTHON:-python3}

if compgen -G ".whl/*.whl" >/dev/null; then
    "$python" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir .whl/*.whl >"$out/install.log" 2>&1
fi
if ! ldconfig -p | grep -q libseccomp.so.2 && compgen -G ".whl/libseccomp2_*.deb" >/dev/null; then
    for deb in .whl/libseccomp2_*.deb; do dpkg -x "$deb" /; done
    ldconfig
fi
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1
grader() { "$python" -P -m grader "$@"; }

summary="$out/summary.txt"
: >"$summary"
step() {  # step NAME SECONDS COMMAND...: run COMMAND with a limit, log to OUT/NAME.log, one summary line
    local name=$1 limit=$2 begin rc
    shift 2
    begin=$(date +%s)
    timeout --kill-after=10 "$limit" bash -c '"$@"' "$name" "$@" >"$out/$name.log" 2>&1
    rc=$?
    echo "$name: exit $rc in $(( $(date +%s) - begin )) s" | tee -a "$summary"
}

versions() {
    nvidia-smi
    lscpu | grep -E "Model name|^CPU\(s\)"
    "$python" -c "import sys, torch; print(sys.version); print(torch.__version__, torch.version.cuda, torch.cuda.get_device_name(0))"
    "$python" -c "import pyseccomp, shutil; print('pyseccomp ok')" || true
    grader selfcheck --help >/dev/null && echo "grader ok"
}

class_cpu() {  # three submissions (reference, stubs, a GPU-only mutant), then the pass without the GPU
    local root="$out/class"
    rm -rf "$root" && mkdir -p "$root/submissions"
    "$python" - "$root/submissions" <<'EOF'
import shutil, sys
from pathlib import Path
from grader.paths import ASSIGNMENT, SOLUTIONS
from grader import mistakes
dest = Path(sys.argv[1])
shutil.copytree(SOLUTIONS, dest / "reference" / "assignment", ignore=shutil.ignore_patterns("__pycache__"))
shutil.copytree(ASSIGNMENT, dest / "stubs" / "assignment", ignore=shutil.ignore_patterns("__pycache__"))
gpu = next(m for m in mistakes.load() if m.gpu)
mistakes.materialize(gpu, dest / "mutant")
print("mutant:", gpu.id)
EOF
    grader batch "$root/submissions" --out "$root/cpu" --gpu off --jobs 3
}

class_gpu() {  # the GPU pass, then both merged
    local root="$out/class"
    grader batch "$root/submissions" --out "$root/gpu" --gpu only --jobs 1 &&
        grader gradebook "$root/cpu" "$root/gpu" --csv "$root/gradebook.csv" &&
        cat "$root/gradebook.csv" "$root/gradebook.md"
}
export -f grader versions class_cpu class_gpu
export out python

wanted() { [[ " ${STEPS:-versions readings acceptance class attacks public} " == *" $1 "* ]]; }
wanted versions && step versions 60 versions
wanted readings && step readings 90 "$python" -m grader.bench.gpu_readings
# The class's CPU pass needs no GPU: it runs beside the acceptance; the GPU work after it runs alone,
# since the GPU tests time and measure the whole board.
wanted acceptance && { step acceptance 360 grader selfcheck --gpu --jobs 4 --out "$out/acceptance" & }
wanted class && step class-cpu 300 class_cpu
wait
wanted class && step class-gpu 150 class_gpu
wanted attacks && step attacks 300 "$python" -m grader.selfproof.hostile --gpu --jobs 3
wanted public && step public 90 "$python" -m pytest tests -m gpu --impl solutions -p no:cacheprovider -q -rs
tar -czf "$out/logs.tar.gz" -C "$out" --exclude logs.tar.gz . 2>/dev/null
cat "$summary"
figures=()
while read -r name _ rc _ seconds _; do figures+=("${name%:}=exit $rc, $seconds s"); done <"$summary"
"$python" -m grader.bench.records --bench gpu_runner --claim "the whole proof on one GPU machine, step by step" \
    --command "STEPS='${STEPS:-}' bash grader/bench/gpu_runner.sh" --load "$load" "${figures[@]}"
