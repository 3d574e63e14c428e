"""Grading time of the reference under bubblewrap against the hand-written namespaces.

Grades ``solutions/`` on the same problems twice in this one run, once with the hand-written
namespaces (``GRADER_CONFINEMENT=namespaces``) and once with the default (bubblewrap where it
runs), alternating ``--rounds`` times, and prints the median seconds of each and their ratio:

    python -m grader.bench.containment                  # P1,P2, 2 rounds
    python -m grader.bench.containment --problems P3 --rounds 3
"""

from __future__ import annotations

import argparse
import os
import statistics
import time

from grader.containment import bubblewrap
from grader.grading.grade import grade
from grader.paths import KIT_ROOT

MODES = {"hand-written": "namespaces", "bubblewrap": ""}


def timed(problems: list[str], confinement: str) -> tuple[float, float, str]:
    """(seconds, score, mechanism) of one grading of the reference."""
    os.environ["GRADER_CONFINEMENT"] = confinement
    started = time.perf_counter()
    result = grade(KIT_ROOT / "solutions", problems=problems, profile="ci", gpu="off")
    return time.perf_counter() - started, result.score, result.isolation.get("mechanism", "?")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--problems", default="P1,P2")
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args()
    if bubblewrap.why_not_usable():
        print(f"bubblewrap cannot be compared here: {bubblewrap.why_not_usable()}")
        return 1
    problems = args.problems.split(",")
    seconds: dict[str, list[float]] = {name: [] for name in MODES}
    saved = os.environ.get("GRADER_CONFINEMENT")
    try:
        for _ in range(args.rounds):
            for name, confinement in MODES.items():
                took, score, mechanism = timed(problems, confinement)
                seconds[name].append(took)
                print(f"  {name:12} {took:6.1f} s  score {score:g}  ({mechanism})", flush=True)
    finally:
        os.environ.pop("GRADER_CONFINEMENT", None)
        if saved is not None:
            os.environ["GRADER_CONFINEMENT"] = saved
    old, new = (statistics.median(seconds[name]) for name in MODES)
    print(f"median: hand-written {old:.1f} s, bubblewrap {new:.1f} s; ratio bubblewrap / hand-written {new / old:.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
