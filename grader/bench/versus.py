"""Grading time of the reference, this kit against an earlier revision of it, in one run.

Exports ``--base`` (a git revision of this repository) into a temporary folder, then grades the
reference with both kits, alternating, ``--rounds`` times each (``python -m grader grade
solutions --profile ci``), and prints each run's wall time, both medians and their ratio:

    python -m grader.bench.versus --base 0d7d68c              # all problems, 3 rounds
    python -m grader.bench.versus --base 0d7d68c --problems P5,P6 --rounds 5
"""

from __future__ import annotations

import argparse
import io
import os
import statistics
import subprocess
import sys
import tarfile
import tempfile
import time
from pathlib import Path

from grader.paths import KIT_ROOT


def export(revision: str, dest: Path) -> Path:
    """The tree of ``revision`` (``git archive``), unpacked into ``dest``."""
    archive = subprocess.run(["git", "-C", str(KIT_ROOT), "archive", revision], capture_output=True, check=True).stdout
    with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
        if hasattr(tarfile, "data_filter"):  # Python 3.10.12 and later
            tar.extractall(dest, filter="data")
        else:
            tar.extractall(dest)
    return dest


def grade_seconds(kit: Path, problems: str | None, out: Path) -> float:
    """Wall seconds of one ``grade solutions`` run of the kit in ``kit`` (its own code, by PYTHONPATH)."""
    command = [sys.executable, "-P", "-m", "grader", "grade", str(kit / "solutions"), "--profile", "ci",
               "--out", str(out)] + (["--problems", problems] if problems else [])
    env = {**os.environ, "PYTHONPATH": str(kit)}
    started = time.monotonic()
    run = subprocess.run(command, cwd=kit, env=env, capture_output=True, text=True)
    seconds = time.monotonic() - started
    if run.returncode != 0:
        raise SystemExit(f"grading with the kit in {kit} failed (exit {run.returncode}): {run.stderr[-500:]}")
    return seconds


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--base", required=True, help="git revision to compare with")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--problems", help="e.g. P5,P6 (default: all)")
    args = parser.parse_args(argv)
    if args.rounds < 1:
        parser.error("--rounds must be at least 1")
    with tempfile.TemporaryDirectory(prefix="kit-versus-") as tmp:
        base = export(args.base, Path(tmp) / "base")
        times: dict[str, list[float]] = {"base": [], "now": []}
        for round_number in range(args.rounds):
            for name, kit in (("base", base), ("now", KIT_ROOT)):
                times[name].append(grade_seconds(kit, args.problems, Path(tmp) / f"{name}.json"))
                print(f"round {round_number + 1}: {name:4} {times[name][-1]:7.1f} s", flush=True)
    base_median, now_median = statistics.median(times["base"]), statistics.median(times["now"])
    print(f"median: {args.base} {base_median:.1f} s, this kit {now_median:.1f} s, "
          f"ratio {now_median / base_median:.2f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
