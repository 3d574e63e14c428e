"""Two commands measured side by side: each in turn, ``rounds`` times, with each run's wall time and
CPU-seconds (user + system of its whole process tree, counted by the kernel: ``cputime``), then both
medians and their ratio (the second command's over the first's). Machines of one kind differ by up to 2x,
so a change is judged by such a ratio, taken in one run (``versus``: two kits; ``mistaken_cost``: two
submissions)."""

from __future__ import annotations

import os
import statistics
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

from grader.bench.cputime import TreeCPU
from grader.bench.records import Figures


@dataclass(frozen=True)
class Command:
    argv: list[str]
    cwd: Path
    env: dict[str, str]


def _timed(tree: TreeCPU, name: str, command: Command) -> tuple[float, float]:
    """Wall seconds and CPU-seconds of one run of ``command``; exits with its error if it fails."""
    started, cpu = time.monotonic(), tree.used()
    run = tree.popen(command.argv, cwd=command.cwd, env=command.env, stdout=subprocess.DEVNULL,
                     stderr=subprocess.PIPE, text=True)
    _, errors = run.communicate()
    seconds, cpu = time.monotonic() - started, tree.used() - cpu
    if run.returncode != 0:
        raise SystemExit(f"the run of {name} failed (exit {run.returncode}): {errors[-500:]}")
    return seconds, cpu


def alternate(commands: dict[str, Command], rounds: int) -> dict[str, list[tuple[float, float]]]:
    """Run the two ``commands`` in turn ``rounds`` times, printing each run and then the medians; each
    name's (wall seconds, CPU-seconds) per round."""
    first, second = commands
    width = max(map(len, commands))
    tree = TreeCPU()
    print(f"CPU time (user + sys) counted by {tree.how}; load average {os.getloadavg()[0]:.2f} at the start")
    runs: dict[str, list[tuple[float, float]]] = {name: [] for name in commands}
    try:
        for round_number in range(rounds):
            for name, command in commands.items():
                runs[name].append(_timed(tree, name, command))
                wall, cpu = runs[name][-1]
                print(f"round {round_number + 1}: {name:{width}} {wall:7.1f} s {cpu:7.1f} CPU-s", flush=True)
    finally:
        tree.close()
    for index, what in ((0, "s"), (1, "CPU-s")):
        before, after = (statistics.median(run[index] for run in runs[name]) for name in (first, second))
        print(f"median: {first} {before:.1f} {what}, {second} {after:.1f} {what}, ratio {after / before:.2f}x")
    print(f"load average {os.getloadavg()[0]:.2f} at the end")
    return runs


def summary(runs: dict[str, list[tuple[float, float]]]) -> tuple[Figures, dict[str, Figures]]:
    """The record of an ``alternate`` run: the second side's medians over the first's, and each side's medians
    and rounds."""
    sides = {name: {"wall s": round(statistics.median(wall for wall, _ in run), 2),
                    "CPU-s": round(statistics.median(cpu for _, cpu in run), 2), "rounds": len(run)}
             for name, run in runs.items()}
    first, second = (sides[name] for name in runs)
    return {"CPU ratio": round(second["CPU-s"] / first["CPU-s"], 3),
            "wall ratio": round(second["wall s"] / first["wall s"], 3)}, sides
