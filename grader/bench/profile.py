"""Where one grading's CPU time goes, by phase: py-spy samples the whole process tree.

Runs ``python -m grader grade SUBMISSION --gpu off`` (the reference by default) in a cgroup of its own
(``cputime``: the kernel counts the whole tree) and attaches ``py-spy record --subprocesses`` to it, so
that the judge sessions and the workers behind bubblewrap are sampled too. Each sample is put in the
process it was taken in (the grade command, a judge, a worker: started cold behind bubblewrap, or forked from a
worker template, whose own imports count as the workers') and in the phase its innermost known frame
belongs to (``PHASES``, searched from the leaf outwards: a tensor copied by the wire is the wire's, an
import inside an oracle is an import).

Only threads holding the GIL are sampled (``--gil``): py-spy cannot tell a sleeping thread from a running
one here (a worker's thread ids are its PID namespace's, and on a loaded host a waiting thread was counted
as running), while a thread that holds the GIL is running Python. The samples are then scaled to the
kernel's count of the whole tree, so each figure is that count times its share of the samples; work done
with the GIL released (torch's kernels, bubblewrap) is spread over the phases in proportion:

    python -m grader.bench.profile                            # the reference, all problems
    python -m grader.bench.profile --problems P5 --rate 200 --raw /tmp/p5.txt
"""

from __future__ import annotations

import argparse
import re
import shutil
import subprocess
import sys
import tempfile
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

from grader.bench import records
from grader.bench.cputime import TreeCPU
from grader.options import PROFILES
from grader.paths import KIT_ROOT, kit_pythonpath

# (phase, frame file patterns): the first phase one of whose patterns a frame's file matches, searched from
# the innermost frame outwards, is the sample's phase.
PHASES: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("imports", ("<frozen importlib", "/importlib/__init__")),
    ("pytest's own work", ("/_pytest/", "/pluggy/")),
    ("wire (encode, decode, pipes)", ("/grader/wire.py", "/containment/channel.py", "/_kit/wire.py")),
    ("outside measurements", ("/containment/tree.py", "/containment/cgroup.py", "/containment/watchdog.py")),
    ("worker launch and stop", ("/containment/launch.py", "/containment/bubblewrap.py", "/containment/worker.py",
                                "/containment/uids.py", "/containment/syscalls.py", "/subprocess.py",
                                "/_kit/confine.py", "/_kit/rootfs.py")),
    ("diagnosis", ("/judge/diagnosis/",)),
    ("recording for the diagnosis", ("/judge/plugin.py",)),
    ("judge's oracles and tests", ("/judge/drivers/", "/judge/hidden/", "/judge/handle.py")),
    ("worker's answers", ("/_kit/dispatch.py", "/_kit/worker.py")),
    ("hypothesis generation", ("/hypothesis/",)),
)
OTHER = "other"
BARE = "interpreter start-up and exit (no Python frame)"
PROCESSES = ("grade command", "judge", "worker", "other")
# A process frame's argv may hold ';' and '"': it ends at the first '";' that a frame or a process follows.
_PROCESS = re.compile(r'process \d+:"(?P<argv>.*?)"(?:;(?=process \d+:"|[^;]* \([^;]*\)(?:;|$))|$)')
_FRAME = re.compile(r"^(?P<function>.*) \((?P<file>[^()]*?)(?::\d+)?\)$")


@dataclass(frozen=True)
class Sample:
    """Samples of one stack: the innermost process it was taken in, its frames' files (outermost first)."""

    process: str
    files: tuple[str, ...]
    count: int


def process_kind(argv: str) -> str:
    if "-m grader grade" in argv:
        return "grade command"
    if "-m grader.judge.session" in argv or "-m pytest" in argv:
        return "judge"
    if ("confine.main()" in argv or "template.main()" in argv) and "bwrap" not in argv.split(" ", 1)[0]:
        return "worker"  # a forked worker (and the process between it and its template) keeps the template's argv
    return "other"


def parse_raw(text: str) -> list[Sample]:
    """py-spy's raw (collapsed) output with --subprocesses: ``process A;process B;frame;frame COUNT``."""
    samples = []
    for line in text.splitlines():
        stack, _, count = line.rpartition(" ")
        if not stack or not count.isdigit():
            continue
        process, position = "other", 0
        while (found := _PROCESS.match(stack, position)) is not None:
            process, position = process_kind(found["argv"]), found.end()
        frames = [frame for frame in map(_FRAME.match, stack[position:].split(";")) if frame is not None]
        samples.append(Sample(process, tuple(frame["file"] for frame in frames), int(count)))
    return samples


def phase_of(files: tuple[str, ...]) -> str:
    """The phase of the innermost frame that belongs to one (``PHASES``); ``OTHER`` when none does, ``BARE``
    when there is no frame."""
    if not files:
        return BARE
    for file in reversed(files):
        for phase, patterns in PHASES:
            if any(pattern in file for pattern in patterns):
                return phase
    return OTHER


def tally(samples: list[Sample]) -> Counter:
    """Samples by (phase, process kind)."""
    counts: Counter = Counter()
    for sample in samples:
        counts[phase_of(sample.files), sample.process] += sample.count
    return counts


def by_phase(counts: Counter, tree_seconds: float) -> dict[str, list[float]]:
    """CPU-seconds by phase (those sampled, then the whole tree) and process: the kernel's count of the whole
    tree times each cell's share of the samples."""
    sampled = sum(counts.values())
    scale = tree_seconds / sampled if sampled else 0.0
    rows = {phase: [counts[phase, kind] * scale for kind in PROCESSES]
            for phase in [BARE, *(phase for phase, _ in PHASES), OTHER]}
    totals = [sum(count for (_, kind_of), count in counts.items() if kind_of == kind) * scale for kind in PROCESSES]
    return {phase: row for phase, row in rows.items() if sum(row)} | {"the whole tree": totals}


def table(counts: Counter, tree_seconds: float) -> str:
    """A Markdown table of ``by_phase``, with each phase's sum and share."""
    lines = ["| phase | " + " | ".join(PROCESSES) + " | all | share |", "|---" * (len(PROCESSES) + 3) + "|"]
    for phase, row in by_phase(counts, tree_seconds).items():
        share = 1.0 if phase == "the whole tree" else sum(row) / tree_seconds
        total = tree_seconds if phase == "the whole tree" else sum(row)
        lines.append(f"| {phase} | " + " | ".join(f"{value:.2f}" for value in row) + f" | {total:.2f} | {share:.0%} |")
    return "\n".join(lines)


def sample(tree: TreeCPU, command: list[str], rate: int, raw: Path) -> float:
    """Run ``command`` in ``tree``'s cgroup with py-spy attached from outside it; the tree's CPU-seconds."""
    spy = shutil.which("py-spy") or str(Path(sys.executable).with_name("py-spy"))
    before = tree.used()
    grading = tree.popen(command, cwd=KIT_ROOT, env=kit_pythonpath(), stdout=subprocess.DEVNULL,
                         stderr=subprocess.PIPE)
    sampler = subprocess.run([spy, "record", "--pid", str(grading.pid), "--subprocesses", "--nonblocking", "--gil", "--rate", str(rate),
                              "--format", "raw", "--full-filenames", "--output", str(raw)], capture_output=True, text=True)
    errors = grading.communicate()[1].decode(errors="replace")
    if grading.returncode != 0:
        raise SystemExit(f"grading failed (exit {grading.returncode}): {errors[-500:]}")
    if not raw.exists():
        raise SystemExit(f"py-spy wrote no samples: {sampler.stderr.strip()[-500:]}")
    return tree.used() - before


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--submission", type=Path, default=KIT_ROOT / "solutions")
    parser.add_argument("--problems", default="", help="comma-separated ('' for all)")
    parser.add_argument("--profile", choices=PROFILES, default="grading", help="hypothesis profile")
    parser.add_argument("--rate", type=int, default=100, help="samples per second (default 100)")
    parser.add_argument("--raw", type=Path, help="also keep py-spy's raw samples here")
    args = parser.parse_args(argv)
    run = records.start("profile", argv)
    if args.rate < 1:
        parser.error("--rate must be at least 1")
    if not args.submission.exists():
        parser.error(f"no submission at {args.submission}")
    command = [sys.executable, "-P", "-m", "grader", "grade", str(args.submission), "--gpu", "off",
               "--profile", args.profile] + (["--problems", args.problems] if args.problems else [])
    tree = TreeCPU()
    try:
        with tempfile.TemporaryDirectory(prefix="kit-profile-") as tmp:
            raw = args.raw or Path(tmp) / "samples.txt"
            seconds = sample(tree, command, args.rate, raw)
            counts = tally(parse_raw(raw.read_text()))
    finally:
        tree.close()
    print(f"CPU time counted by {tree.how}; {sum(counts.values())} samples ({args.rate} a second) of threads "
          "holding the GIL, scaled to that count")
    print(table(counts, seconds))
    run.write(f"where a grading of {args.submission.name} spends its CPU time, by phase "
              f"({args.problems or 'all problems'}, {args.profile} profile)", {"whole tree CPU-s": round(seconds, 2)},
              rows={phase: {kind: round(value, 2) for kind, value in zip(PROCESSES, row)}
                    for phase, row in by_phase(counts, seconds).items()})
    return 0


if __name__ == "__main__":
    sys.exit(main())
