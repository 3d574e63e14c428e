"""What recording and diagnosis cost: grading time with this kit against a baseline checkout.

Grades each submission (the reference, and the reference with a mistake of
``grader/tests/fixtures/mistakes/`` appended) on one problem, in turns with this kit and with
the kit checked out at ``--baseline`` (e.g. ``git worktree add /tmp/base main``: a kit without
diagnosis), ``--rounds`` times, and prints the median wall time of each and their ratio::

    python -m grader.bench.diagnosis_cost --baseline /tmp/base --problem P4 --mistake p4_flops_multiply_adds.py
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

from grader.paths import KIT_ROOT
from grader.submission import stage

MISTAKES = KIT_ROOT / "grader" / "tests" / "fixtures" / "mistakes"


def seconds(kit: Path, submission: Path, problem: str, profile: str) -> float:
    """Wall time of ``grader grade`` of ``kit`` (its own code first on the path) on one problem."""
    env = {**os.environ, "PYTHONPATH": str(kit)}
    begin = time.perf_counter()
    subprocess.run([sys.executable, "-m", "grader", "grade", str(submission), "--gpu", "off", "--problems", problem,
                    "--profile", profile], cwd=kit, env=env, check=True, capture_output=True)
    return time.perf_counter() - begin


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m grader.bench.diagnosis_cost", description=__doc__.splitlines()[0])
    parser.add_argument("--baseline", type=Path, required=True, help="a checkout of the kit without diagnosis")
    parser.add_argument("--problem", default="P4")
    parser.add_argument("--mistake", default="p4_flops_multiply_adds.py", help="a file of fixtures/mistakes/")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--profile", choices=("grading", "ci"), default="grading")
    options = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="kit-cost-") as scratch:
        module = options.mistake.split("_")[1]
        package = stage(KIT_ROOT / "solutions", Path(scratch) / "mistaken")
        target = package / f"{module}.py"
        target.write_text(target.read_text() + "\n\n" + (MISTAKES / options.mistake).read_text())
        for name, submission in (("reference", KIT_ROOT / "solutions"), (options.mistake, package)):
            times: dict[str, list[float]] = {"this kit": [], "baseline": []}
            for _ in range(options.rounds):
                times["this kit"].append(seconds(KIT_ROOT, submission, options.problem, options.profile))
                times["baseline"].append(seconds(options.baseline.resolve(), submission, options.problem,
                                                options.profile))
            mine, base = (statistics.median(times[k]) for k in ("this kit", "baseline"))
            print(f"{options.problem} {name}: this kit {mine:.1f} s, baseline {base:.1f} s (medians of "
                  f"{options.rounds}), ratio {mine / base:.2f}", flush=True)


if __name__ == "__main__":
    main()
