"""The results model: one graded submission, and the only code that writes results.json.

``TestResult`` and ``GradingResult`` are frozen plain data. ``to_gradescope_dict`` builds
Gradescope's documented format (score, execution_time, output, visibility, stdout_visibility,
tests[], extra_data; schema in ``results.schema.json``): the kit's own facts (per-problem
scores, isolation, kit version, grader error) live under ``extra_data``, and each test's under
its own ``extra_data``, so that nothing is written twice and the file can be read back. A
grading failure still yields a file: a visible "Autograder failed" entry, its details kept out
of the students' view. Tests not run (GPU tests without a GPU) say so and are not failures:
``not_run="exclude"`` leaves their points out of the possible points, ``"zero"`` counts them
as 0 out of their points.
"""

from __future__ import annotations

import json
import os
import re
import secrets
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .. import __version__
from ..problems import PROBLEMS
from ..record import TestRecord

VISIBILITIES = ("visible", "hidden", "after_due_date", "after_published")
FAILED_ENTRY = "Autograder failed"
ERROR_OUTPUT = "grading failed, regrade: the grader could not judge this test; your instructor has the details."
SCHEMA = Path(__file__).resolve().parent / "results.schema.json"
FILE_MODE = 0o640  # results and gradebooks: the owner writes, the course group reads


@dataclass(frozen=True)
class TestResult:
    __test__ = False  # a result, not a pytest test class
    problem: str  # "P1"
    module: str  # "memory"
    name: str  # what students read
    points: float
    status: str  # one of grader.record.STATUSES
    message: str = ""
    duration: float = 0.0
    gpu: bool = False
    nodeid: str = ""
    mistakes: tuple[str, ...] = ()  # ids of the known mistakes the failure reproduces (grader.judge.diagnosis)

    def __post_init__(self) -> None:
        object.__setattr__(self, "mistakes", tuple(self.mistakes))  # a list is accepted

    @classmethod
    def from_record(cls, record: TestRecord) -> TestResult:
        """The result a judge recorded in ``record``."""
        return cls(problem=record.problem, module=record.module, name=record.name, points=float(record.points),
                   status=record.status, message=record.message, duration=float(record.duration), gpu=record.gpu,
                   nodeid=record.nodeid, mistakes=tuple(record.mistakes))

    @property
    def score(self) -> float:
        return self.points if self.status == "passed" else 0.0

    @property
    def title(self) -> str:
        """The name Gradescope (and ``grader show``) display: ``P3 einsum: <test name>``."""
        return f"{self.problem} {self.module}: {self.name}"


@dataclass(frozen=True)
class ProblemScore:
    name: str
    score: float
    max_score: float
    not_run: float
    passed: int
    total: int
    first_failure: str
    not_run_tests: int = 0
    errors: int = 0


@dataclass(frozen=True)
class GradingResult:
    tests: tuple[TestResult, ...]
    submission: str = ""
    isolation: dict[str, str] = field(default_factory=dict)
    execution_time: float = 0.0
    error: str = ""  # why grading could not complete (shown as "Autograder failed")
    notes: tuple[str, ...] = ()  # facts students should see (time budget used up, import errors)
    options: dict[str, Any] = field(default_factory=dict)  # how it was graded (gpu mode, seed, profile, budgets)

    @property
    def score(self) -> float:
        return round(sum(t.score for t in self.tests), 4)

    @property
    def max_score(self) -> float:
        return sum(t.points for t in self.tests)

    @property
    def provisional(self) -> bool:
        """GPU tests were not run: a GPU runner's pass gives the official grade."""
        return any(t.status == "not_run" and t.gpu for t in self.tests)

    def not_measurable_here(self) -> list[TestResult]:
        """Tests this host could not grade (not GPU tests: a measurement it cannot make, said in their message)."""
        return [t for t in self.tests if t.status == "not_run" and not t.gpu]

    def problems(self) -> dict[str, ProblemScore]:
        """Per problem (in ``PROBLEMS`` order): points, points not run, tests passed, first failure."""
        scores = {}
        for key, name in PROBLEMS.items():
            mine = [t for t in self.tests if t.problem == key]
            failures = [t for t in mine if t.status in ("failed", "error")]
            scores[key] = ProblemScore(
                name=name.module, score=round(sum(t.score for t in mine), 4),
                max_score=sum(t.points for t in mine), not_run=sum(t.points for t in mine if t.status == "not_run"),
                passed=sum(t.status == "passed" for t in mine), total=len(mine),
                first_failure=f"{failures[0].name}: {_output(failures[0])}" if failures else "",
                not_run_tests=sum(t.status == "not_run" for t in mine), errors=sum(t.status == "error" for t in mine))
        return scores

    @classmethod
    def failed(cls, submission: str, error: str, execution_time: float = 0.0, fix: str = "") -> GradingResult:
        """A grading that could not complete; ``fix``: what the student can do about it (their upload's fault)."""
        return cls(tests=(), submission=submission, error=error, execution_time=execution_time,
                   notes=(fix,) if fix else ())

    def to_gradescope_dict(self, not_run: str = "exclude", visibility: str = "visible") -> dict[str, Any]:
        """Gradescope's results.json; ``not_run`` (exclude|zero) says how tests not run count."""
        tests = [_gradescope_test(t, not_run, visibility) for t in self.tests]
        if self.error:
            tests.insert(0, {"name": FAILED_ENTRY, "score": 0, "max_score": 0, "status": "failed",
                             "output": " ".join(self.notes) if self.notes and not self.tests else
                             "The grader could not finish grading this submission; your instructor "
                             "has the details. Your score may be incomplete.",
                             "visibility": "visible"})
        summary = [f"Score: {self.score:g} / {self.max_score:g}"]
        if self.options.get("gpu") == "only":
            summary.append("GPU pass: only the GPU tests were run here; the other tests are graded by the CPU pass.")
        elif self.provisional:
            summary.append("Provisional: GPU tests were not run here; the official grade comes from a GPU runner.")
        if self.options.get("gpu") != "only" and self.not_measurable_here():
            summary.append("Not graded on this host: " + "; ".join(
                f"{t.problem} {t.name} ({t.message})" for t in self.not_measurable_here()))
        summary += list(self.notes)
        return {
            "score": self.score,
            "execution_time": round(self.execution_time, 2),
            "output": "\n".join(summary),
            "visibility": visibility,
            "stdout_visibility": "hidden",
            "tests": tests,
            "extra_data": {
                "kit_version": __version__,
                "submission": self.submission,
                "problems": {key: {"name": p.name, "score": p.score, "max_score": p.max_score, "not_run": p.not_run}
                             for key, p in self.problems().items()},
                "provisional": self.provisional,
                "not_run": not_run,
                "isolation": dict(self.isolation),
                "notes": list(self.notes),
                "grader_error": self.error,
                "options": dict(self.options),
            },
        }

    @classmethod
    def from_gradescope_dict(cls, data: dict[str, Any]) -> GradingResult:
        """Rebuild from a results.json written by ``to_gradescope_dict`` (for merging and reports)."""
        extra = kit_data(data)
        return cls(tests=tuple(_kit_test(t) for t in data.get("tests", []) if "extra_data" in t),
                   submission=extra.get("submission", ""), isolation=dict(extra.get("isolation", {})),
                   execution_time=float(data.get("execution_time", 0.0)), error=extra.get("grader_error", ""),
                   notes=tuple(extra.get("notes", ())), options=dict(extra.get("options", {})))


def kit_data(data: dict[str, Any]) -> dict[str, Any]:
    """The kit's own part of a results.json (``extra_data``), empty when there is none."""
    extra = data.get("extra_data")
    return extra if isinstance(extra, dict) else {}


def regrade_reason(data: dict[str, Any]) -> str:
    """Why a results.json is not a grade (the grader failed, or could not judge some tests); "" when it is."""
    kit = kit_data(data)
    if kit.get("grader_error"):
        return str(kit["grader_error"])
    unjudged = [str(t.get("name", "?")) for t in data.get("tests", [])
                if isinstance(t, dict) and isinstance(t.get("extra_data"), dict) and t["extra_data"].get("status") == "error"]
    if unjudged:
        return f"the grader could not judge {len(unjudged)} test{'s' * (len(unjudged) > 1)}: {'; '.join(unjudged)}"
    return ""


STUB = re.compile(r"NotImplementedError: (\w+\.\w+) is not implemented yet")  # a stub's raise (release.stubs)


def stub_function(message: str) -> str:
    """The function a failed test found not implemented yet (``memory.float_layout``), else ""."""
    found = STUB.search(message)
    return found[1] if found else ""


def _output(test: TestResult) -> str:
    """What a student reads under a test: nothing when passed, the reason otherwise."""
    if test.status == "passed":
        return ""
    if test.status == "error":
        return ERROR_OUTPUT
    if test.status == "not_run":
        return test.message if test.message.lower().startswith("not run") else f"not run: {test.message}"
    return test.message


def _gradescope_test(test: TestResult, not_run: str, visibility: str) -> dict[str, Any]:
    kit = {"problem": test.problem, "module": test.module, "test": test.name, "points": test.points,
           "status": test.status, "duration": round(test.duration, 3), "gpu": test.gpu, "nodeid": test.nodeid}
    if test.mistakes:
        kit["mistakes"] = list(test.mistakes)
    output = _output(test)
    if output != test.message:
        kit["message"] = test.message
    entry = {"name": test.title, "score": test.score,
             "max_score": 0 if test.status == "not_run" and not_run == "exclude" else test.points,
             "output": output, "visibility": visibility, "tags": [test.problem] + (["gpu"] if test.gpu else []),
             "extra_data": kit}
    if test.status != "not_run":  # Gradescope knows passed and failed only: a test not run is neither
        entry["status"] = "passed" if test.status == "passed" else "failed"
    return entry


def _kit_test(entry: dict[str, Any]) -> TestResult:
    kit = entry["extra_data"]
    return TestResult(problem=kit["problem"], module=kit["module"], name=kit["test"], points=float(kit["points"]),
                      status=kit["status"], message=kit.get("message", entry.get("output", "")),
                      duration=float(kit.get("duration", 0.0)), gpu=bool(kit.get("gpu")), nodeid=kit.get("nodeid", ""),
                      mistakes=tuple(kit.get("mistakes", ())))


def write_atomic(path: Path, data: bytes) -> None:
    """Write ``path`` so that it holds either the old file or the whole new one, never a part.

    The file is created with mode ``FILE_MODE`` less the umask (0640 under the usual 022 or 002:
    readable by the course group, by no one else), not mkstemp's 0600.
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    temp = path.parent / f".{path.name}.{secrets.token_hex(8)}.tmp"
    handle = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_CLOEXEC", 0), FILE_MODE)
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
