"""What a mistaken submission costs against the reference: both graded with this kit, in one run.

The mistaken submission is the reference with each ``--mistake`` (a file of
``grader/tests/fixtures/mistakes/``, named after its module) appended to its module, as a student's
wrong function would replace the right one. Both are graded in turns, ``--rounds`` times (``grader
grade --gpu off``, the ``--profile`` given), and each run's wall time and CPU-seconds (the whole
process tree, counted by the kernel: ``cputime``) are printed with both medians and their ratios::

    python -m grader.bench.mistaken_cost --mistake p1_memory_subnormal_exponent.py \\
        --mistake p5_optim_adagrad_eps_in_root.py --mistake p7_checkpoint_numpy_rng_forgotten.py
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from grader.bench.cputime import TreeCPU
from grader.bench.diagnosis_cost import MISTAKES
from grader.options import PROFILES
from grader.paths import KIT_ROOT
from grader.submission import stage


def mistaken(mistakes: list[str], dest: Path) -> Path:
    """The reference staged into ``dest`` with each mistake appended to its module."""
    package = stage(KIT_ROOT / "solutions", dest)
    for name in mistakes:
        target = package / f"{name.split('_')[1]}.py"
        target.write_text(target.read_text() + "\n\n" + (MISTAKES / name).read_text())
    return package


def run(tree: TreeCPU, submission: Path, profile: str) -> tuple[float, float]:
    """Wall seconds and CPU-seconds of one grading of ``submission``."""
    command = [sys.executable, "-P", "-m", "grader", "grade", str(submission), "--gpu", "off", "--profile", profile]
    started, cpu = time.monotonic(), tree.used()
    done = tree.popen(command, cwd=KIT_ROOT, env={**os.environ, "PYTHONPATH": str(KIT_ROOT)},
                      stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    _, errors = done.communicate()
    if done.returncode != 0:
        raise SystemExit(f"grading {submission} failed (exit {done.returncode}): {errors[-500:]}")
    return time.monotonic() - started, tree.used() - cpu


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m grader.bench.mistaken_cost", description=__doc__.splitlines()[0])
    parser.add_argument("--mistake", action="append", required=True, help="a file of fixtures/mistakes/ (repeat)")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--profile", choices=PROFILES, default="grading")
    args = parser.parse_args(argv)
    missing = [name for name in args.mistake if not (MISTAKES / name).is_file()]
    if missing:
        parser.error(f"no such mistake in {MISTAKES}: {', '.join(missing)}")
    tree = TreeCPU()
    print(f"CPU time (user + sys) counted by {tree.how}; load average {os.getloadavg()[0]:.2f} at the start")
    runs: dict[str, list[tuple[float, float]]] = {"reference": [], "mistaken": []}
    try:
        with tempfile.TemporaryDirectory(prefix="kit-mistaken-") as scratch:
            submissions = {"reference": KIT_ROOT / "solutions", "mistaken": mistaken(args.mistake, Path(scratch) / "m")}
            for round_number in range(args.rounds):
                for name, submission in submissions.items():
                    runs[name].append(run(tree, submission, args.profile))
                    wall, cpu = runs[name][-1]
                    print(f"round {round_number + 1}: {name:9} {wall:7.1f} s {cpu:7.1f} CPU-s", flush=True)
    finally:
        tree.close()
    for index, what in ((0, "s"), (1, "CPU-s")):
        reference, wrong = (statistics.median(r[index] for r in runs[name]) for name in ("reference", "mistaken"))
        print(f"median: reference {reference:.1f} {what}, mistaken {wrong:.1f} {what}, ratio {wrong / reference:.2f}x")
    print(f"load average {os.getloadavg()[0]:.2f} at the end")
    return 0


if __name__ == "__main__":
    sys.exit(main())
