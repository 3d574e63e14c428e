"""The student's loop: how long the public test runs a student makes take, each the median of ROUNDS.

Times ``pytest tests --collect-only`` (collect-only), ``pytest tests -m pN`` for each problem (pN)
and the whole ``pytest tests`` (whole-suite), each in a fresh process from a kit's root, against the stubs (what a student
starts with) or ``--impl solutions`` (what a finished student runs), and the floor under them all: pytest running
one test that imports torch, nothing of the kit (floor). Wall time is what a student
waits; CPU time (user + system, of the pytest process) is what a shared machine's load does not
inflate. ``--against PATH`` times another checkout of the kit the same way, run by run in turn,
and prints the ratio of CPU times (this kit over that one). Runs keep ``PYTHONDONTWRITEBYTECODE``
out, as a student's shell does, so bytecode and pytest's rewritten modules are cached after the
first round:

    python -m grader.bench.public_loop                                  # the stubs, 3 rounds
    python -m grader.bench.public_loop --impl solutions --rounds 5
    python -m grader.bench.public_loop --only collect-only p1 --against ../kit-before
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from grader.bench import records
from grader.paths import KIT_ROOT
from grader.problems import PROBLEMS

KEPT_OUT = ("PYTHONPATH", "PYTHONDONTWRITEBYTECODE")


FLOOR = "floor"
FLOOR_TEST = "import torch\n\n\ndef test_floor():\n    assert torch.ones(2).sum() == 2\n"


def runs() -> dict[str, list[str]]:
    """Each timed run's label and its pytest arguments (the floor's: its own test file's)."""
    problems = {p.lower(): ["-m", p.lower()] for p in PROBLEMS}
    return {FLOOR: [], "collect-only": ["--collect-only"], **problems, "whole-suite": []}


def measure(folder: Path, arguments: list[str]) -> tuple[float, float]:
    """(wall, CPU) seconds of one ``python -m pytest -q ARGUMENTS`` run in ``folder``."""
    env = {k: v for k, v in os.environ.items() if k not in KEPT_OUT}
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    subprocess.run([sys.executable, "-m", "pytest", "-q", *arguments],
                   cwd=folder, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def kit_root(text: str) -> Path:
    path = Path(text).resolve()
    if not (path / "tests" / "conftest.py").is_file():
        raise argparse.ArgumentTypeError(f"{text}: not a kit checkout (no tests/conftest.py)")
    return path


def measure_floor() -> tuple[float, float]:
    """(wall, CPU) seconds of pytest running ``FLOOR_TEST`` alone, from a folder of its own."""
    with tempfile.TemporaryDirectory(prefix="kit-floor-") as folder:
        (Path(folder) / "test_floor.py").write_text(FLOOR_TEST)
        return measure(Path(folder), ["test_floor.py"])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--impl", default="assignment", help="the implementation tested (default: the stubs)")
    parser.add_argument("--rounds", type=int, default=3, help="runs of each, the median shown (default: 3)")
    parser.add_argument("--only", nargs="+", metavar="LABEL", help=f"runs to time (default: all of {list(runs())})")
    parser.add_argument("--against", type=kit_root, help="another kit checkout, timed in turn with this one")
    args = parser.parse_args(argv)
    if args.rounds < 1:
        parser.error("--rounds must be at least 1")
    unknown = set(args.only or ()) - set(runs())
    if unknown:
        parser.error(f"--only: {sorted(unknown)} not among {list(runs())}")
    kits = [KIT_ROOT, *([args.against] if args.against else [])]
    run = records.start("public_loop", argv)
    rows: dict[str, dict[str, float]] = {}
    print(f"--impl {args.impl}, median of {args.rounds}, {os.cpu_count()} CPUs, load {os.getloadavg()[0]:.1f} at the start")
    header = f"{'run':<16}{'wall s':>8}{'CPU s':>8}"
    if args.against:
        header += f"{'wall s':>10}{'CPU s':>8}{'CPU ratio':>11}   (the second pair: {args.against})"
    print(header)
    for label, arguments in runs().items():
        if args.only and label not in args.only:
            continue
        times: dict[Path, list[tuple[float, float]]] = {kit: [] for kit in kits}
        for _ in range(args.rounds):
            for kit in kits:
                times[kit].append(measure_floor() if label == FLOOR
                                  else measure(kit, ["tests", "--impl", args.impl, *arguments]))
        medians = [(statistics.median(w for w, _ in times[kit]), statistics.median(c for _, c in times[kit]))
                   for kit in kits]
        line = f"{label:<16}" + "".join(f"{w:>{8 if i == 0 else 10}.2f}{c:>8.2f}" for i, (w, c) in enumerate(medians))
        if args.against:
            line += f"{medians[0][1] / medians[1][1]:>11.2f}"
        print(line, flush=True)
        rows[label] = {"wall s": round(medians[0][0], 2), "CPU s": round(medians[0][1], 2), **(
            {"other wall s": round(medians[1][0], 2), "other CPU s": round(medians[1][1], 2),
             "CPU ratio": round(medians[0][1] / medians[1][1], 3)} if args.against else {})}
    print(f"load {os.getloadavg()[0]:.1f} at the end")
    run.write(f"the student's loop: public test runs against {args.impl}, median of {args.rounds}",
              {label: row["CPU s"] for label, row in rows.items() if label in (FLOOR, "collect-only", "whole-suite")},
              rows=rows)
    return 0


if __name__ == "__main__":
    sys.exit(main())
