"""What a mistaken submission costs against the reference: both graded with this kit, in one run.

The mistaken submission is the reference with each ``--mistake`` (a file of
``grader/tests/fixtures/mistakes/``, named after its module) appended to its module, as a student's
wrong function would replace the right one. Both are graded in turns, ``--rounds`` times (``grader
grade --gpu off``, the ``--profile`` given), and each run's wall time and CPU-seconds (the whole
process tree, counted by the kernel) are printed with both medians and their ratios (``alternate``)::

    python -m grader.bench.mistaken_cost --mistake p1_memory_subnormal_exponent.py \\
        --mistake p5_optim_adagrad_eps_in_root.py --mistake p7_checkpoint_numpy_rng_forgotten.py
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from pathlib import Path

from grader.bench import records
from grader.bench.alternate import Command, alternate, summary
from grader.options import PROFILES
from grader.paths import KIT_ROOT
from grader.submission import stage

MISTAKES = KIT_ROOT / "grader" / "tests" / "fixtures" / "mistakes"


def mistaken(mistakes: list[str], dest: Path) -> Path:
    """The reference staged into ``dest`` with each mistake appended to its module."""
    package = stage(KIT_ROOT / "solutions", dest)
    for name in mistakes:
        target = package / f"{name.split('_')[1]}.py"
        target.write_text(target.read_text() + "\n\n" + (MISTAKES / name).read_text())
    return package


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m grader.bench.mistaken_cost", description=__doc__.splitlines()[0])
    parser.add_argument("--mistake", action="append", required=True, help="a file of fixtures/mistakes/ (repeat)")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--profile", choices=PROFILES, default="grading")
    args = parser.parse_args(argv)
    missing = [name for name in args.mistake if not (MISTAKES / name).is_file()]
    if missing:
        parser.error(f"no such mistake in {MISTAKES}: {', '.join(missing)}")
    run = records.start("mistaken_cost", argv)
    with tempfile.TemporaryDirectory(prefix="kit-mistaken-") as scratch:
        submissions = {"reference": KIT_ROOT / "solutions", "mistaken": mistaken(args.mistake, Path(scratch) / "m")}
        runs = alternate({name: Command([sys.executable, "-P", "-m", "grader", "grade", str(submission), "--gpu",
                                         "off", "--profile", args.profile], KIT_ROOT,
                                        {**os.environ, "PYTHONPATH": str(KIT_ROOT)})
                          for name, submission in submissions.items()}, args.rounds)
    run.write(f"a mistaken submission against the reference ({', '.join(sorted(args.mistake))}, {args.profile} "
              "profile)", *summary(runs))
    return 0


if __name__ == "__main__":
    sys.exit(main())
