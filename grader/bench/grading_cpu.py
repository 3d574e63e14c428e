"""Where one grading spends its CPU time: CPU-seconds (user + system) by kind of process.

Runs ``python -m grader grade SUBMISSION --gpu off`` (the reference by default) ROUNDS times,
samples its process tree with psutil every few milliseconds, keeps each process's last CPU times
and sorts them by kind (the ``grade`` command, judge sessions, bubblewrap, workers, other). The
whole tree's CPU time comes from the kernel (a cgroup of its own, see ``cputime``), so what
processes did between two samples is counted as "between samples".
It also times bare interpreters importing torch, hypothesis and pytest: the fixed price every
process pays before it grades anything. CPU time, not wall time, so that a loaded machine does
not distort it:

    python -m grader.bench.grading_cpu                      # the reference, all problems, 1 round
    python -m grader.bench.grading_cpu --rounds 2 --problems P1,P3
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from collections import Counter, defaultdict
from pathlib import Path

import psutil

from grader.bench.cputime import TreeCPU
from grader.paths import KIT_ROOT

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
    if "-m pytest" in text or "-m grader.judge.session" in text:
        return "judge (pytest)"
    if len(argv) > 1 and argv[1] == "-I":
        return "worker"
    return "other"


def import_cost(tree: TreeCPU, module: str) -> float:
    """CPU-seconds of a fresh interpreter that imports ``module`` (less an empty one), the least of 3."""
    def run(code: str) -> float:
        before = tree.used()
        tree.popen([sys.executable, "-c", code]).wait()
        return tree.used() - before
    return min(run(f"import {module}") for _ in range(3)) - min(run("pass") for _ in range(3))


def profile(tree: TreeCPU, argv: list[str], period: float = 0.005) -> tuple[float, dict[str, float], Counter]:
    """(the tree's CPU-seconds, CPU-seconds seen by kind, processes seen by kind) of one grading."""
    before = tree.used()
    top = psutil.Process(tree.popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, cwd=KIT_ROOT).pid)
    seen: dict[int, tuple[str, float]] = {}  # the kind is read again each time: a fork runs its parent's argv until exec
    while top.status() != psutil.STATUS_ZOMBIE:
        try:
            processes = [top, *top.children(recursive=True)]
        except psutil.NoSuchProcess:
            break
        for process in processes:
            try:
                times = process.cpu_times()
                known, used = seen.get(process.pid, ("other", 0.0))
                found = kind(process)  # "other" as well when it is exiting: then the kind seen before stands
                seen[process.pid] = (known if found == "other" else found, max(times.user + times.system, used))
            except (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess):
                continue
        time.sleep(period)
    code = top.wait()
    if code != 0:
        raise SystemExit(f"{' '.join(argv)} exited with {code}")
    by_kind: dict[str, float] = defaultdict(float)
    count: Counter = Counter()
    for key, used in seen.values():
        by_kind[key] += used
        count[key] += 1
    return tree.used() - before, by_kind, count


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
    tree = TreeCPU()
    print(f"CPU time (user + sys) counted by {tree.how}")
    try:
        for module in ("torch", "hypothesis", "pytest"):
            print(f"import {module}: {import_cost(tree, module):.2f} CPU-s per process")
        for index in range(args.rounds):
            total, by_kind, count = profile(tree, command)
            print(f"grading {index + 1}: {total:.2f} CPU-s (whole tree)")
            for key in KINDS:
                if count[key]:
                    print(f"  {key:15} {by_kind[key]:6.2f} CPU-s  {count[key]} process{'es' * (count[key] > 1)}")
            print(f"  {'between samples':15} {total - sum(by_kind.values()):6.2f} CPU-s")
    finally:
        tree.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
