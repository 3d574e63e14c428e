"""Many runs of the public tests from one warm process: ``python -m grader.selfproof.public_runs``.

Each line of standard input is a JSON run, ``{"package": "/tmp/.../assignment", "rules": ["P5.x"]}``; each line of
standard output answers one, in the same order: ``{"exit": 1, "failed": ["tests/test_p5_optim.py::test_x[sgd]"]}``.
The process imports what every run imports (torch, numpy, hypothesis, pytest) once, then forks a child per run
that calls ``pytest.main`` on the kit's ``tests/`` with ``--impl`` and ``--rule``: a run costs its tests, not an
interpreter and an import of torch. Children run ``jobs`` at a time.
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
from pathlib import Path

KIT = Path(__file__).resolve().parents[2]


class _Failed:
    """A pytest plugin that keeps the node ids of the tests that failed."""

    def __init__(self) -> None:
        self.nodeids: list[str] = []

    def pytest_runtest_logreport(self, report) -> None:
        if report.failed and report.nodeid not in self.nodeids:
            self.nodeids.append(report.nodeid)


def _child(run: dict, answer: Path) -> None:
    """In the forked child: the public tests of ``run``'s rules on its package; the answer written to ``answer``."""
    import pytest

    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, 1)
    os.dup2(devnull, 2)
    failed = _Failed()
    args = ["tests", "--impl", run["package"], "-q", "-p", "no:cacheprovider"]
    args += [part for rule in run["rules"] for part in ("--rule", rule)]
    code = int(pytest.main(args, plugins=[failed]))
    answer.write_text(json.dumps({"exit": code, "failed": failed.nodeids}))


def serve(runs: list[dict], jobs: int) -> list[dict]:
    """Every run's answer, in order (a child that dies answers exit -1)."""
    import hypothesis  # noqa: F401 - imported once here, inherited by every child
    import numpy  # noqa: F401
    import pytest  # noqa: F401
    import torch  # noqa: F401

    os.chdir(KIT)
    answers: list[dict] = [{}] * len(runs)
    with tempfile.TemporaryDirectory(prefix="kit-public-runs-") as folder:
        running: dict[int, int] = {}
        pending = list(enumerate(runs))
        while pending or running:
            while pending and len(running) < jobs:
                index, run = pending.pop(0)
                pid = os.fork()
                if pid == 0:
                    try:
                        _child(run, Path(folder) / f"{index}.json")
                    finally:
                        os._exit(0)
                running[pid] = index
            pid, _ = os.wait()
            index = running.pop(pid)
            path = Path(folder) / f"{index}.json"
            answers[index] = json.loads(path.read_text()) if path.exists() else {"exit": -1, "failed": []}
    return answers


def main() -> None:
    jobs = int(sys.argv[1]) if len(sys.argv) > 1 else 2
    runs = [json.loads(line) for line in sys.stdin if line.strip()]
    for answer in serve(runs, jobs):
        print(json.dumps(answer))


if __name__ == "__main__":
    main()
