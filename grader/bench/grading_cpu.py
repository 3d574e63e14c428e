"""Where one grading spends its CPU time: CPU-seconds (user + system) by kind of process.

Runs ``python -m grader grade SUBMISSION --gpu off`` (the reference by default) ROUNDS times,
samples its process tree with psutil every few milliseconds, keeps each process's last CPU times
and sorts them by kind (the ``grade`` command, judge sessions, bubblewrap, workers, other). The
whole tree's CPU time comes from the kernel (this script's RUSAGE_CHILDREN, which counts every
reaped descendant), so processes that lived between two samples are counted as "between samples".
It also times bare interpreters importing torch, hypothesis and pytest: the fixed price every
process pays before it grades anything. CPU time, not wall time, so that a loaded machine does
not distort it:

    python -m grader.bench.grading_cpu                      # the reference, all problems, 1 round
    python -m grader.bench.grading_cpu --rounds 2 --problems P1,P3
"""

from __future__ import annotations

import argparse
import os
import resource
import subprocess
import sys
import time
from collections import Counter, defaultdict
from pathlib import Path

import psutil

from grader.grade import KIT_ROOT

KINDS = ("grade command", "judge (pytest)", "bubblewrap", "worker", "other")


def kind(process: psutil.Process) -> str:
    try:
        name, argv = process.name(), process.cmdline()
    except (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess):
        return "other"
    text = " ".join(argv)
    if name == "bwrap" or (argv and argv[0].endswith("bwrap")):
        return "bubblewrap"
    if "-m grader grade" in text:
        return "grade command"
    if "-m pytest" in text:
        return "judge (pytest)"
    if len(argv) > 1 and argv[1] == "-I":
        return "worker"
    return "other"


def children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def import_cost(module: str) -> float:
    """CPU-seconds of a fresh interpreter that imports ``module`` (less an empty one)."""
    def run(code: str) -> float:
        before = children_cpu()
        subprocess.run([sys.executable, "-c", code], check=True)
        return children_cpu() - before
    return min(run(f"import {module}") for _ in range(3)) - min(run("pass") for _ in range(3))


def profile(argv: list[str], period: float = 0.005) -> tuple[float, dict[str, float], Counter]:
    """(the tree's CPU-seconds, CPU-seconds seen by kind, processes seen by kind) of one grading."""
    before = children_cpu()
    top = psutil.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, cwd=KIT_ROOT)
    seen: dict[int, tuple[str, float]] = {}
    while top.poll() is None:
        try:
            tree = [top, *top.children(recursive=True)]
        except psutil.NoSuchProcess:
            break
        for process in tree:
            try:
                times = process.cpu_times()
                used = times.user + times.system
                key = seen[process.pid][0] if process.pid in seen else kind(process)
                seen[process.pid] = (key, max(used, seen.get(process.pid, ("", 0.0))[1]))
            except (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess):
                continue
        time.sleep(period)
    if top.wait() != 0:
        raise SystemExit(f"{' '.join(argv)} exited with {top.returncode}")
    by_kind: dict[str, float] = defaultdict(float)
    count: Counter = Counter()
    for key, used in seen.values():
        by_kind[key] += used
        count[key] += 1
    return children_cpu() - before, by_kind, count


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--submission", type=Path, default=KIT_ROOT / "solutions")
    parser.add_argument("--problems", default="", help="comma-separated ('' for all)")
    parser.add_argument("--rounds", type=int, default=1)
    args = parser.parse_args(argv)
    command = [sys.executable, "-m", "grader", "grade", str(args.submission), "--gpu", "off"]
    command += ["--problems", args.problems] if args.problems else []
    env_jobs = os.environ.get("KIT_BENCH_JOBS")
    command += ["--jobs", env_jobs] if env_jobs else []
    for module in ("torch", "hypothesis", "pytest"):
        print(f"import {module}: {import_cost(module):.2f} CPU-s per process")
    for index in range(args.rounds):
        total, by_kind, count = profile(command)
        seen = sum(by_kind.values())
        print(f"grading {index + 1}: {total:.2f} CPU-s (user + sys, whole tree)")
        for key in KINDS:
            if count[key]:
                print(f"  {key:15} {by_kind[key]:6.2f} CPU-s  {count[key]} process{'es' * (count[key] > 1)}")
        print(f"  {'between samples':15} {total - seen:6.2f} CPU-s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
