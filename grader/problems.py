"""The problem set's fixed facts (docs/PROBLEMS.md): keys, modules, titles and points.

``PROBLEMS`` is the one registry of problems: everything else of a problem is named after its entry (its
files, handout section, rule ids, mistakes), and ``grader.selfproof.problemset`` checks that each part is
there and agrees with it (``docs/authoring.md``: changing a problem, adding one).
"""

from __future__ import annotations

import re
from dataclasses import dataclass


@dataclass(frozen=True)
class Problem:
    module: str
    title: str
    points: int
    seconds: float  # its hidden suite's wall time for the reference (sum of its tests'), 2 idle cores, --jobs 2
    own_worker: bool = False  # its tests run in a worker of their own (library code withheld), not the shared one
    diagnosed: bool = True  # feedback names its known mistakes (python -m grader.bench.diagnosis measured how well)


PROBLEMS: dict[str, Problem] = {
    "P1": Problem("memory", "dtype memory accounting", 12, 4.5),
    "P2": Problem("strides", "strides, views and contiguity", 14, 10.4),
    "P3": Problem("einsum", "einops rewrites", 12, 8.4),
    "P4": Problem("flops", "FLOP accounting and MFU", 14, 46.8),
    "P5": Problem("optim", "SGD and AdaGrad from scratch", 14, 24.1, own_worker=True),
    "P6": Problem("data", "token files and memmap batching", 12, 6.9),
    "P7": Problem("checkpoint", "checkpointing and exact resume", 10, 3.3),
    "P8": Problem("amp", "mixed precision training loop", 12, 4.2),
}
MODULES = tuple(p.module for p in PROBLEMS.values())
TOTAL_POINTS = sum(p.points for p in PROBLEMS.values())
RANGE = f"{next(iter(PROBLEMS))}..{next(reversed(PROBLEMS))}"  # the keys as a message names them, first..last

SUITE_FILE = re.compile(r"test_(p\d+)_(\w+)\.py")  # a hidden suite's file name: test_p<N>_<module>.py


def suite_file(key: str, problem: Problem | None = None) -> str:
    """The file name of problem ``key``'s hidden suite (and of its public tests): ``test_p4_flops.py``; ``problem``:
    its entry, where it is not the registry's (a registry under test)."""
    return f"test_{key.lower()}_{(problem or PROBLEMS[key]).module}.py"


def suite_problem(name: str) -> str | None:
    """The problem key a suite file name belongs to (``test_p4_flops.py`` -> ``P4``); None for another name."""
    found = SUITE_FILE.fullmatch(name)
    return found.group(1).upper() if found and found.group(1).upper() in PROBLEMS else None
