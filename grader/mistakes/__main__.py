"""Quick kill check while writing a suite: ``python -m grader.mistakes P1 [P2 ...]``.

Runs each mutant of the named problems against that problem's hidden suite in-process
(fast, unsafe, for development); ``grader selfcheck`` is the real, sandboxed proof.
"""

from __future__ import annotations

import subprocess
import sys
import tempfile
from pathlib import Path

from ..paths import HIDDEN
from . import load, materialize
from ..options import GradingOptions

IN_PROCESS = GradingOptions(in_process=True, profile="ci").to_json()  # the judge runs the submission in process



def main(problems: list[str]) -> int:
    survivors = 0
    for mutant in load():
        if (problems and mutant.problem not in problems) or mutant.gpu:  # GPU-only: grader selfcheck --gpu
            continue
        with tempfile.TemporaryDirectory() as tmp:
            package = materialize(mutant, Path(tmp))
            suite = next(HIDDEN.glob(f"test_{mutant.problem.lower()}_*.py"))
            run = subprocess.run([sys.executable, "-m", "pytest", str(suite), "-p", "grader.judge.plugin", "-q", "-x",
                                  "--assert=plain", "-p", "no:cacheprovider", "--submission", str(package),
                                  "--grading-options", IN_PROCESS], capture_output=True, text=True)
        killed = run.returncode != 0
        survivors += not killed
        last = run.stdout.strip().splitlines()[-1] if run.stdout.strip() else run.stderr[-200:]
        print(f"{'killed  ' if killed else 'SURVIVED'} {mutant.problem} {mutant.id}: {last}")
    return 1 if survivors else 0


if __name__ == "__main__":
    sys.exit(main([a.upper() for a in sys.argv[1:]]))
