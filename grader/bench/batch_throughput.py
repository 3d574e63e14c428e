"""Batch throughput: ``grader batch --jobs 2`` against ``--jobs 1`` on the same class, and what each pass costs.

Makes a class of COPIES identical submissions (copies of the reference, or of ``--submission``),
grades it (the CPU pass, ``--gpu off``) once with one judge at a time and once with two, each into
a fresh folder, and prints for both submissions per hour, CPU-seconds per submission (user +
system of the whole process tree, counted by the kernel in a cgroup of its own (``cputime``):
the figure to plan with on a shared machine)
and their ratio, measured in this one run. Where CUDA is present it then grades the class whole
(``--gpu require``) and as the GPU pass alone (``--gpu only``), one at a time, and prints both;
without CUDA it says that the GPU pass cannot run here, and measures its floor instead: a judge
session over the hidden suites with only the GPU tests selected, none of which can run (a GPU
pass costs at least that, plus the workers it starts and the GPU tests themselves):

    python -m grader.bench.batch_throughput                 # 6 copies, P1 only, ci profile
    python -m grader.bench.batch_throughput --copies 4 --problems '' --profile grading
    python -m grader.bench.batch_throughput --base REV      # and an earlier revision, in turn

``--base REV`` also grades the class with that revision of the kit (``git archive``), each ``--jobs`` with
both kits in turn, and prints the ratios (this kit's over the base's): machines of one kind differ by up
to 2x, so a change is judged by ratios taken in one run.

Grading is real (``python -m grader grade`` per submission) unless ``--grade-command`` names
another command taking the same arguments (the kit's tests use a fake one to check this script).
"""

from __future__ import annotations

import argparse
import os
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from grader.classroom import batch
from grader.bench import records
from grader.bench.cputime import TreeCPU
from grader.bench.versus import export
from grader.grading.grade import hidden_suites, judge_command
from grader.grading.judges import judge_environment
from grader.submission import stage
from grader.options import GradingOptions
from grader.paths import KIT_ROOT


def make_class(source: Path, copies: int, dest: Path) -> Path:
    folder = dest / "class"
    for index in range(copies):
        shutil.copytree(source, folder / f"student{index:02d}" / "assignment",
                        ignore=shutil.ignore_patterns("__pycache__"))
    return folder


@dataclass(frozen=True)
class Run:
    seconds: float  # wall
    cpu: float  # CPU-seconds of the whole tree

    def figures(self, what: str, copies: int) -> dict[str, float]:
        """This run's figures for a record, each name starting with ``what``."""
        return {f"{what} s": round(self.seconds, 1), f"{what} per hour": round(3600 * copies / self.seconds, 1),
                f"{what} CPU-s each": round(self.cpu / copies, 2)}

    def line(self, what: str, copies: int) -> str:
        return (f"  {what}: {self.seconds:.1f} s, {3600 * copies / self.seconds:.1f} submissions/hour, "
                f"{self.cpu / copies:.1f} CPU-s per submission")


def measure(tree: TreeCPU, folder: Path, out: Path, jobs: int, problems: list[str] | None,
            command: tuple[str, ...], gpu: str = "off", profile: str = "ci", kit: Path = KIT_ROOT) -> Run:
    """Grade the class with ``grader batch`` of the kit in ``kit``, in a process of its own, its whole tree
    counted by ``tree``."""
    call = (f"import sys; from grader.classroom import batch; from grader.options import GradingOptions; "
            f"sys.exit(batch.main({str(folder)!r}, out={str(out)!r}, jobs={jobs}, grade_command={command!r}, "
            f"options=GradingOptions(gpu={gpu!r}, profile={profile!r}, problems={problems!r})))")
    started, cpu = time.perf_counter(), tree.used()
    code = tree.popen([sys.executable, "-c", call], cwd=kit, env={**os.environ, "PYTHONPATH": str(kit)},
                      stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL).wait()
    run = Run(time.perf_counter() - started, tree.used() - cpu)
    if code != 0:
        raise SystemExit(f"grader batch --jobs {jobs} --gpu {gpu} exited with {code}")
    return run


def gpu_pass_floor(tree: TreeCPU, submission: Path, scratch: Path) -> Run:
    """One judge session over every hidden suite with only the GPU tests selected (``-m gpu``), on a
    machine where none of them can run: what a GPU pass spends before its first GPU test."""
    package = stage(submission, scratch / "staged")
    command = judge_command(hidden_suites(), package, scratch / "judge-report.json", GradingOptions(gpu="off"),
                            600.0) + ["-m", "gpu"]
    started, cpu = time.perf_counter(), tree.used()
    tree.popen(command, cwd=scratch, env=judge_environment(), stdout=subprocess.DEVNULL,
               stderr=subprocess.DEVNULL).wait()
    return Run(time.perf_counter() - started, tree.used() - cpu)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--copies", type=int, default=6, help="submissions in the class")
    parser.add_argument("--problems", default="P1", help="problems graded, comma-separated ('' for all)")
    parser.add_argument("--profile", choices=("ci", "grading"), default="ci", help="hypothesis profile")
    parser.add_argument("--submission", type=Path, default=KIT_ROOT / "solutions", help="the folder copied")
    parser.add_argument("--grade-command", default="", help="instead of python -m grader grade (tests)")
    parser.add_argument("--base", help="also an earlier revision of the kit, in turn with this one")
    args = parser.parse_args(argv)
    run = records.start("batch_throughput", argv)
    problems = [p.strip().upper() for p in args.problems.split(",") if p.strip()] or None
    command = tuple(shlex.split(args.grade_command)) if args.grade_command else batch.GRADE_COMMAND
    tree = TreeCPU()
    try:
        with tempfile.TemporaryDirectory(prefix="kit-bench-") as tmp:
            folder = make_class(args.submission, args.copies, Path(tmp))
            kits = {"": KIT_ROOT, **({args.base: export(args.base, Path(tmp) / "base")} if args.base else {})}
            measured = {(name, jobs): measure(tree, folder, Path(tmp) / f"out-{jobs}-{index}", jobs, problems,
                                              command, profile=args.profile, kit=kit)
                        for jobs in (1, 2) for index, (name, kit) in enumerate(kits.items())}
            runs = {jobs: measured["", jobs] for jobs in (1, 2)}
            gpu = {mode: measure(tree, folder, Path(tmp) / f"out-{mode}", 1, problems, command, mode, args.profile)
                   for mode in ("require", "only")} if batch._cuda_available() else {}
            floor = None if gpu or args.grade_command else gpu_pass_floor(tree, args.submission, Path(tmp))
    finally:
        tree.close()
    print(f"{args.copies} submissions, problems {','.join(problems) if problems else 'all'}, {args.profile} profile; "
          f"CPU time (user + sys) counted by {tree.how}:")
    for jobs in (1, 2):
        print(runs[jobs].line(f"CPU pass (--gpu off) --jobs {jobs}", args.copies))
    print(f"throughput ratio (--jobs 2 / --jobs 1): {runs[1].seconds / runs[2].seconds:.2f}")
    if args.base:
        for jobs in (1, 2):
            base = measured[args.base, jobs]
            print(base.line(f"{args.base}: CPU pass (--gpu off) --jobs {jobs}", args.copies))
            print(f"  this kit / {args.base}, --jobs {jobs}: CPU {runs[jobs].cpu / base.cpu:.2f}x, "
                  f"wall {runs[jobs].seconds / base.seconds:.2f}x")
        print(f"{args.base}: throughput ratio (--jobs 2 / --jobs 1): "
              f"{measured[args.base, 1].seconds / measured[args.base, 2].seconds:.2f}")
    if gpu:
        print(gpu["require"].line("whole grading (--gpu require)", args.copies))
        print(gpu["only"].line("GPU pass (--gpu only)", args.copies))
        print(f"GPU pass / whole grading, wall time: {gpu['only'].seconds / gpu['require'].seconds:.2f}")
    else:
        print("no CUDA here: the GPU pass (--gpu only) cannot run; a whole grading here is the CPU pass above")
    if floor:
        print(f"  the GPU pass's floor (a judge session with only the GPU tests selected, none run): "
              f"{floor.seconds:.1f} s, {floor.cpu:.1f} CPU-s per submission")
    sides = {name or "this kit": {**measured[name, 1].figures("--jobs 1", args.copies),
                                  **measured[name, 2].figures("--jobs 2", args.copies)} for name in kits}
    figures = {"throughput ratio": round(runs[1].seconds / runs[2].seconds, 3), **sides["this kit"],
               **{key: value for mode, done in gpu.items()
                  for key, value in done.figures(f"--gpu {mode}", args.copies).items()},
               **(floor.figures("GPU pass floor", 1) if floor else {})}
    if args.grade_command:  # a stand-in grading measures the batch's machinery, not a grading: no record
        print("no record: --grade-command stood in for the grading")
        return 0
    run.write(f"a class graded with --jobs 2 against --jobs 1 ({args.copies} copies, problems "
              f"{','.join(problems) if problems else 'all'}, {args.profile} profile)", figures,
              sides if args.base else None)
    return 0


if __name__ == "__main__":
    sys.exit(main())
