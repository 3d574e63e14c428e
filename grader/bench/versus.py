"""Grading time of the reference, this kit against an earlier revision of it, in one run.

Exports ``--base`` (a git revision of this repository) into a temporary folder, then grades the
reference with both kits, alternating, ``--rounds`` times each (``python -m grader grade
solutions --profile ci --gpu auto``, or the ``--profile`` and ``--gpu`` given), and prints each
run's wall time and CPU-seconds (user + system of its whole process tree, counted by the kernel),
both medians and their ratios (``alternate``). With ``--mutants`` each run is the kill matrix of those
mutants instead (``grader selfcheck --sections mutants --mutants ... --jobs 2``: many gradings in one
process, as selfcheck and CI grade):

    python -m grader.bench.versus --base 0d7d68c              # all problems, 3 rounds
    python -m grader.bench.versus --base 0d7d68c --problems P5,P6 --rounds 5
    python -m grader.bench.versus --base main --profile grading --gpu off --rounds 2
    python -m grader.bench.versus --base main --mutants P2,P3 --rounds 1
"""

from __future__ import annotations

import argparse
import io
import os
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path

from grader.bench import records
from grader.bench.alternate import Command, alternate, summary
from grader.options import GPU_MODES, PROFILES
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


def command(kit: Path, args: argparse.Namespace, out: Path) -> list[str]:
    """One run of the kit in ``kit``: a grading of its reference, or the kill matrix of ``args.mutants``."""
    if args.mutants:
        return [sys.executable, "-P", "-m", "grader", "selfcheck", "--sections", "mutants", "--mutants", args.mutants,
                "--jobs", "2"]
    return [sys.executable, "-P", "-m", "grader", "grade", str(kit / "solutions"), "--profile", args.profile,
            "--gpu", args.gpu, "--jobs", str(args.jobs), "--out", str(out)] + (
        ["--problems", args.problems] if args.problems else [])


def parse(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--base", required=True, help="git revision to compare with")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--problems", help="e.g. P5,P6 (default: all)")
    parser.add_argument("--profile", choices=PROFILES, default="ci", help="hypothesis profile (default: ci)")
    parser.add_argument("--gpu", choices=GPU_MODES, default="auto")
    parser.add_argument("--jobs", type=int, default=1, help="judge sessions of a grading (the quick start's: 2)")
    parser.add_argument("--mutants", help="time the kill matrix of these mutant ids or problems instead (e.g. P2,P3)")
    args = parser.parse_args(argv)
    if args.rounds < 1:
        parser.error("--rounds must be at least 1")
    if args.jobs < 1:
        parser.error("--jobs must be at least 1")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse(argv)
    run = records.start("versus", argv)
    with tempfile.TemporaryDirectory(prefix="kit-versus-") as tmp:
        base = export(args.base, Path(tmp) / "base")
        runs = alternate({name: Command(command(kit, args, Path(tmp) / f"{label}.json"), kit,
                                        {**os.environ, "PYTHONPATH": str(kit)})
                          for name, label, kit in ((args.base, "base", base), ("this kit", "now", KIT_ROOT))},
                         args.rounds)
    run.write(claim(args), *summary(runs))
    return 0


def claim(args: argparse.Namespace) -> str:
    """What a run of ``args`` measures, the same for every base it is compared with."""
    if args.mutants:
        return f"this kit against an earlier one: the kill matrix of {args.mutants}"
    return (f"this kit against an earlier one: a grading of the reference ({args.problems or 'all problems'}, "
            f"--jobs {args.jobs}, {args.profile} profile, --gpu {args.gpu})")


if __name__ == "__main__":
    sys.exit(main())
