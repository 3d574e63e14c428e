"""Batch throughput: ``grader batch --jobs 2`` against ``--jobs 1`` on the same class.

Makes a class of COPIES identical submissions (copies of the reference, or of ``--submission``),
grades it once with one judge at a time and once with two, each into a fresh folder, and prints
submissions per minute for both and their ratio, measured in this one run:

    python -m grader.bench.batch_throughput                 # 6 copies, P1 only, ci profile
    python -m grader.bench.batch_throughput --copies 4 --problems P1,P3

Grading is real (``python -m grader grade`` per submission) unless ``--grade-command`` names
another command taking the same arguments (the kit's tests use a fake one to check this script).
"""

from __future__ import annotations

import argparse
import shlex
import shutil
import sys
import tempfile
import time
from pathlib import Path

from grader import batch
from grader.grade import KIT_ROOT


def make_class(source: Path, copies: int, dest: Path) -> Path:
    folder = dest / "class"
    for index in range(copies):
        shutil.copytree(source, folder / f"student{index:02d}" / "assignment",
                        ignore=shutil.ignore_patterns("__pycache__"))
    return folder


def measure(folder: Path, out: Path, jobs: int, problems: list[str] | None, command: tuple[str, ...]) -> float:
    started = time.perf_counter()
    code = batch.main(str(folder), out=out, jobs=jobs, gpu="off", profile="ci", problems=problems,
                      grade_command=command)
    seconds = time.perf_counter() - started
    if code != 0:
        raise SystemExit(f"grader batch --jobs {jobs} exited with {code}")
    return seconds


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--copies", type=int, default=6, help="submissions in the class")
    parser.add_argument("--problems", default="P1", help="problems graded, comma-separated ('' for all)")
    parser.add_argument("--submission", type=Path, default=KIT_ROOT / "solutions", help="the folder copied")
    parser.add_argument("--grade-command", default="", help="instead of python -m grader grade (tests)")
    args = parser.parse_args(argv)
    problems = [p.strip().upper() for p in args.problems.split(",") if p.strip()] or None
    command = tuple(shlex.split(args.grade_command)) if args.grade_command else batch.GRADE_COMMAND
    with tempfile.TemporaryDirectory(prefix="kit-bench-") as tmp:
        folder = make_class(args.submission, args.copies, Path(tmp))
        seconds = {jobs: measure(folder, Path(tmp) / f"out-{jobs}", jobs, problems, command) for jobs in (1, 2)}
    rate = {jobs: 60 * args.copies / s for jobs, s in seconds.items()}
    print(f"{args.copies} submissions, problems {','.join(problems) if problems else 'all'}:")
    for jobs in (1, 2):
        print(f"  --jobs {jobs}: {seconds[jobs]:.1f} s, {rate[jobs]:.2f} submissions/min")
    print(f"throughput ratio (--jobs 2 / --jobs 1): {rate[2] / rate[1]:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
