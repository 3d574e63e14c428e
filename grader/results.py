"""The results model: one graded submission, and the only code that writes results.json.

``TestResult`` and ``GradingResult`` are frozen plain data. ``to_gradescope_dict`` builds
Gradescope's format (score, execution_time, output, tests[]) plus the kit's own keys
(problems, provisional, isolation, kit_version). A grading failure still yields a file: a
visible "Autograder failed" entry, its details kept out of the students' view.
"""

from __future__ import annotations

import json
import os
import tempfile
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from . import __version__
from .problems import PROBLEMS

STATUSES = ("passed", "failed", "not_run", "error")  # error: not judged (grading failed; regrade)
FAILED_ENTRY = "Autograder failed"


@dataclass(frozen=True)
class TestResult:
    __test__ = False  # a result, not a pytest test class
    problem: str  # "P1"
    module: str  # "memory"
    name: str  # what students read
    points: float
    status: str  # one of STATUSES
    message: str = ""
    duration: float = 0.0
    gpu: bool = False
    nodeid: str = ""

    @property
    def score(self) -> float:
        return self.points if self.status == "passed" else 0.0


@dataclass(frozen=True)
class ProblemScore:
    name: str
    score: float
    max_score: float
    not_run: float
    passed: int
    total: int
    first_failure: str


@dataclass(frozen=True)
class GradingResult:
    tests: tuple[TestResult, ...]
    submission: str = ""
    isolation: dict[str, str] = field(default_factory=dict)
    execution_time: float = 0.0
    error: str = ""  # why grading could not complete (shown as "Autograder failed")
    notes: tuple[str, ...] = ()  # facts students should see (time budget used up, import errors)

    @property
    def score(self) -> float:
        return round(sum(t.score for t in self.tests), 4)

    @property
    def max_score(self) -> float:
        return sum(t.points for t in self.tests)

    @property
    def provisional(self) -> bool:
        return any(t.status == "not_run" for t in self.tests)

    def problems(self) -> dict[str, ProblemScore]:
        """Per problem (P1..P8, in order): points, points not run, tests passed, first failure."""
        scores = {}
        for key, name in PROBLEMS.items():
            mine = [t for t in self.tests if t.problem == key]
            failures = [t for t in mine if t.status == "failed"]
            scores[key] = ProblemScore(
                name=name.module, score=round(sum(t.score for t in mine), 4),
                max_score=sum(t.points for t in mine), not_run=sum(t.points for t in mine if t.status == "not_run"),
                passed=sum(t.status == "passed" for t in mine), total=len(mine),
                first_failure=f"{failures[0].name}: {failures[0].message}" if failures else "")
        return scores

    @classmethod
    def failed(cls, submission: str, error: str, execution_time: float = 0.0) -> GradingResult:
        return cls(tests=(), submission=submission, error=error, execution_time=execution_time)

    def to_gradescope_dict(self) -> dict[str, Any]:
        tests = [_gradescope_test(t) for t in self.tests]
        if self.error:
            tests.insert(0, {"name": FAILED_ENTRY, "score": 0, "max_score": 0, "status": "failed",
                             "output": "The grader could not finish grading this submission; your instructor "
                                       "has the details. Your score may be incomplete.",
                             "visibility": "visible"})
        summary = [f"Score: {self.score:g} / {self.max_score:g}"]
        if self.provisional:
            summary.append("Provisional: GPU tests were not run here; the official grade comes from a GPU runner.")
        summary += list(self.notes)
        return {
            "score": self.score,
            "execution_time": round(self.execution_time, 2),
            "output": "\n".join(summary),
            "visibility": "visible",
            "stdout_visibility": "hidden",
            "tests": tests,
            "problems": {key: {"name": p.name, "score": p.score, "max_score": p.max_score, "not_run": p.not_run}
                         for key, p in self.problems().items()},
            "provisional": self.provisional,
            "isolation": dict(self.isolation),
            "kit_version": __version__,
            "submission": self.submission,
            "grader_error": self.error,
            "kit_tests": [asdict(t) for t in self.tests],
        }

    @classmethod
    def from_gradescope_dict(cls, data: dict[str, Any]) -> GradingResult:
        """Rebuild from a results.json written by ``to_gradescope_dict`` (for merging and reports)."""
        return cls(tests=tuple(TestResult(**t) for t in data.get("kit_tests", [])),
                   submission=data.get("submission", ""), isolation=dict(data.get("isolation", {})),
                   execution_time=float(data.get("execution_time", 0.0)), error=data.get("grader_error", ""),
                   notes=tuple(line for line in data.get("output", "").splitlines()[1:]
                               if not line.startswith("Provisional:")))


def _gradescope_test(test: TestResult) -> dict[str, Any]:
    output = test.message if test.status != "passed" else ""
    return {"name": f"{test.problem} {test.module}: {test.name}", "score": test.score, "max_score": test.points,
            "status": "passed" if test.status == "passed" else "failed", "output": output,
            "visibility": "visible", "tags": [test.problem] + (["gpu"] if test.gpu else [])}


def write_atomic(path: Path, data: bytes) -> None:
    """Write ``path`` so that it holds either the old file or the whole new one, never a part."""
    path.parent.mkdir(parents=True, exist_ok=True)
    handle, temp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(handle, "wb") as stream:
            stream.write(data)
            stream.flush()
            os.fsync(stream.fileno())
        os.replace(temp, path)
    except BaseException:
        Path(temp).unlink(missing_ok=True)
        raise


def write_json_atomic(path: Path, data: dict[str, Any]) -> None:
    write_atomic(path, json.dumps(data, indent=1).encode())
