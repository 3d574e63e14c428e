"""Peak resident memory of a command's whole process tree: ``python -m grader.bench.tree_memory -- CMD ...``.

Polls the process tree (psutil) every ``--interval`` seconds, sums the resident set (RSS) of the command and every
process descended from it, and prints the peak sum, the peak of the largest single process and
the wall time. Shared pages (torch's libraries mapped by judge and worker) are counted once per
process, so the sum is an upper bound of what a memory cgroup would charge.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import time

import psutil

from grader.bench import records
from grader.containment.tree import processes


def _tree_rss(root: int) -> tuple[int, int, int]:
    """(sum of RSS in bytes, largest RSS, process count) of ``root`` and its descendants."""
    sizes = []
    for process in processes(root):
        try:
            sizes.append(process.memory_info().rss)
        except psutil.Error:
            continue
    return sum(sizes), max(sizes, default=0), len(sizes)


def measure(command: list[str], interval: float = 0.05) -> dict[str, float]:
    started = time.monotonic()
    process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    peak_sum = peak_one = peak_count = 0
    while process.poll() is None:
        total, largest, count = _tree_rss(process.pid)
        peak_sum, peak_one, peak_count = max(peak_sum, total), max(peak_one, largest), max(peak_count, count)
        time.sleep(interval)
    return {"peak_tree_mib": peak_sum / 2**20, "peak_process_mib": peak_one / 2**20, "processes": peak_count,
            "seconds": time.monotonic() - started, "exit": process.returncode}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m grader.bench.tree_memory", description=__doc__)
    parser.add_argument("--interval", type=float, default=0.05)
    parser.add_argument("command", nargs=argparse.REMAINDER)
    args = parser.parse_args(argv)
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not command:
        parser.error("give the command to measure after --")
    run = records.start("tree_memory", argv)
    result = measure(command, args.interval)
    print(f"peak resident memory of the process tree: {result['peak_tree_mib']:.0f} MiB (largest process "
          f"{result['peak_process_mib']:.0f} MiB, up to {result['processes']} processes); {result['seconds']:.1f} s, "
          f"exit {result['exit']}")
    run.write(f"peak resident memory of the process tree of: {' '.join(command)}",
              {name: round(value, 1) if isinstance(value, float) else value for name, value in result.items()})
    return 0


if __name__ == "__main__":
    sys.exit(main())
