"""The instructor's own files the gradebook reads: the roster and the manual overrides.

Both are CSV files with a header (UTF-8, a spreadsheet's byte-order mark accepted); any other
column is ignored. Every mistake is refused with the file, the line and what is wrong, before
anything is written.

- roster: a ``student`` column (the submission's name, as ``grader batch`` uses it); an LMS export
  passes its other columns through (``lms``: Canvas's ``ID``, ``SIS User ID``, ...).
- overrides: ``student``, ``problem`` or ``test`` (one of them per line: a problem key such as
  ``P3``, or a test by its node id, its function name or its name as ``grader show`` prints
  it), ``points`` (the
  new score of that problem or test, from 0 to its points) and ``reason`` (required, kept in
  the gradebook's notes and summary).
"""

from __future__ import annotations

import csv
import math
from dataclasses import dataclass, replace
from pathlib import Path

from ...problems import PROBLEMS
from ...grading.results import TestResult
from .records import NO_SUBMISSION, NOT_IN_ROSTER, GradebookError, Record, number

ORDER = {key: index for index, key in enumerate(PROBLEMS)}
OVERRIDDEN = "by override"  # in the note of every overridden score


@dataclass(frozen=True)
class Override:
    """One line of overrides.csv."""

    where: str  # "overrides.csv line 3"
    student: str
    target: str  # a problem key, or a test's node id or name
    is_test: bool
    points: float
    reason: str


@dataclass(frozen=True)
class Change:
    """An override as applied: what it changed, from what, to what, why."""

    student: str
    item: str
    before: float
    after: float
    reason: str

    def note(self) -> str:
        return f"{self.item} {number(self.before)} -> {number(self.after)} {OVERRIDDEN}: {self.reason}"


def _lines(path: Path, required: set[str], one_of: set[str] = frozenset()) -> list[tuple[str, dict[str, str]]]:
    """(``"file line N"``, row with stripped cells) for each non-blank line; the header checked first."""
    try:
        with open(path, newline="", encoding="utf-8-sig") as stream:
            reader = csv.DictReader(stream)
            header = set(reader.fieldnames or ())
            absent = sorted(required - header) + ([" or ".join(sorted(one_of))] if one_of and not one_of & header else [])
            if absent:
                raise GradebookError(f"{path}: no {', '.join(absent)} column (the header has: "
                                     f"{', '.join(reader.fieldnames or ()) or 'nothing'})")
            rows = [(f"{path} line {reader.line_num}", {k: (v or "").strip() for k, v in row.items() if k})
                    for row in reader]
    except (OSError, UnicodeDecodeError, csv.Error) as exc:
        raise GradebookError(f"{path}: cannot read it ({exc.__class__.__name__}: {exc})") from None
    return [(where, row) for where, row in rows if any(row.values())]


# -- roster ------------------------------------------------------------------------------------------

def roster_rows(path: Path) -> dict[str, dict[str, str]]:
    """Each roster student's row (every column, for an LMS export), in the roster's order."""
    rows: dict[str, dict[str, str]] = {}
    lines: dict[str, str] = {}
    for where, row in _lines(path, {"student"}):
        student = row["student"]
        if not student:
            raise GradebookError(f"{where}: no student")
        if student in rows:
            raise GradebookError(f"{where}: {student} is listed twice (also on {lines[student]})")
        rows[student], lines[student] = row, where
    if not rows:
        raise GradebookError(f"{path}: the roster lists no student")
    return rows


def apply_roster(records: list[Record], roster: list[str]) -> list[Record]:
    """Roster students without a record become missing rows; records of students not in it are noted."""
    listed, present = set(roster), {r.student for r in records}
    noted = [r if r.student in listed else replace(r, notes=(*r.notes, NOT_IN_ROSTER)) for r in records]
    absent = [Record.missing(s, NO_SUBMISSION) for s in roster if s not in present]
    return sorted(noted + absent, key=lambda r: r.student)


# -- overrides ---------------------------------------------------------------------------------------

def read_overrides(path: Path) -> list[Override]:
    overrides: dict[tuple[str, str], str] = {}
    parsed = []
    for where, row in _lines(path, {"student", "points", "reason"}, {"problem", "test"}):
        problem, test = row.get("problem", ""), row.get("test", "")
        if not row["student"]:
            raise GradebookError(f"{where}: no student")
        if bool(problem) == bool(test):
            raise GradebookError(f"{where}: give either a problem or a test, not {'both' if problem else 'neither'}")
        if problem and problem.upper() not in PROBLEMS:
            raise GradebookError(f"{where}: unknown problem {problem!r} (use {', '.join(PROBLEMS)})")
        try:
            points = float(row["points"])
        except ValueError:
            points = math.nan
        if not math.isfinite(points):
            raise GradebookError(f"{where}: points must be a number, got {row['points']!r}")
        if not row["reason"]:
            raise GradebookError(f"{where}: give a reason (it is kept in the gradebook)")
        target = problem.upper() or test
        if (row["student"], target) in overrides:
            raise GradebookError(f"{where}: {row['student']} {target} is already overridden on "
                                 f"{overrides[row['student'], target]}")
        overrides[row["student"], target] = where
        parsed.append(Override(where, row["student"], target, bool(test), points, row["reason"]))
    return parsed


def _test(record: Record, override: Override) -> TestResult:
    """The test an override names: by node id (or its function name) or displayed name, else by its bare name."""
    found = [t for t in record.tests if override.target in (t.nodeid, t.title)
             or t.nodeid.endswith(f"::{override.target}")] or [t for t in record.tests if t.name == override.target]
    if len(found) != 1:
        what = "no test" if not found else f"{len(found)} tests"
        raise GradebookError(f"{override.where}: {record.student} has {what} named {override.target!r} (use a node "
                             f"id or the name `grader show` prints)")
    return found[0]


def apply_overrides(records: list[Record], overrides: list[Override]) -> tuple[list[Record], list[Change]]:
    """The records with each override applied (totals follow) and the list of changes; unknown names refused."""
    by_student = {r.student: r for r in records}
    claimed: dict[tuple[str, str], list[tuple[str, str]]] = {}
    changes = []
    for override in overrides:
        record = by_student.get(override.student)
        if record is None:
            raise GradebookError(f"{override.where}: unknown student {override.student!r} (no result, not in the "
                                 f"roster)")
        if record.status != "graded":
            raise GradebookError(f"{override.where}: {override.student} has no grade to override ({record.status}); "
                                 f"regrade first: grader batch SUBMISSIONS --out OUT --only {override.student}")
        if override.is_test:
            test = _test(record, override)
            problem, item, maximum, before = test.problem, test.title, test.points, test.score
        else:
            problem = item = override.target
            maximum, before = float(PROBLEMS[problem].points), record.problems[ORDER[problem]] or 0.0
        index = ORDER[problem]
        if not 0 <= override.points <= maximum:
            raise GradebookError(f"{override.where}: {item} is worth 0 to {number(maximum)} points, got "
                                 f"{number(override.points)}")
        others = claimed.setdefault((override.student, problem), [])  # (item, where) already overridden
        clash = [where for other, where in others if not override.is_test or other in (item, problem)]
        if clash:
            raise GradebookError(f"{override.where}: {override.student} {item} is also overridden on {clash[0]} "
                                 f"(override a whole problem or some of its tests, each once)")
        others.append((item, override.where))
        scores = list(record.problems)
        scores[index] = round((scores[index] or 0.0) - before + override.points, 4)
        change = Change(override.student, item, before, override.points, override.reason)
        record = replace(record, problems=tuple(scores), total=round(sum(s for s in scores if s is not None), 4),
                         notes=(*record.notes, change.note()))
        by_student[override.student] = record
        changes.append(change)
    return [by_student[r.student] for r in records], changes
