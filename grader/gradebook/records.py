"""One student's line of the gradebook: read from a results.json, merged across folders."""

from __future__ import annotations

import json
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..problems import PROBLEMS, TOTAL_POINTS
from ..results import GradingResult, TestResult, kit_data, regrade_reason

COLUMNS = ("student", "total", *PROBLEMS, "provisional", "status", "graded_at", "isolation", "notes")
MAX_ROW = ["max points", str(TOTAL_POINTS), *(str(p.points) for p in PROBLEMS.values()), "", "max", "", "", ""]
NO_RESULT = "listed by its batch, no result (interrupted? re-run the batch)"
NO_SUBMISSION = "in the roster, no submission"
NOT_IN_ROSTER = "not in the roster"


class GradebookError(ValueError):
    """The gradebook cannot be written (conflicting duplicates, unreadable results or inputs, nothing found)."""


@dataclass(frozen=True)
class Record:
    """One student's line of the gradebook, with what the summary needs.

    An error or missing row has a total of 0 (what a grade import needs), no problem scores,
    and its ``reason``; ``notes`` are the roster's and the overrides' remarks.
    """

    student: str
    status: str  # graded | error | missing
    total: float
    problems: tuple[float | None, ...]  # in PROBLEMS order; None where the problem was not graded
    provisional: bool
    graded_at: str
    content_hash: str = ""
    reason: str = ""
    notes: tuple[str, ...] = ()
    tests: tuple[TestResult, ...] = ()
    source: str = ""
    isolation: str = ""  # the containment the worker actually got, e.g. "bubblewrap + seccomp + cgroup v1"

    @classmethod
    def missing(cls, student: str, reason: str) -> Record:
        return cls(student=student, status="missing", total=0.0, problems=(None,) * len(PROBLEMS),
                   provisional=False, graded_at="", reason=reason)

    def row(self) -> list[str]:
        notes = "; ".join(" ".join(note.split())[:300] for note in (self.reason, *self.notes) if note)
        return [self.student, number(self.total), *map(number, self.problems),
                "" if self.status == "missing" else str(self.provisional).lower(), self.status, self.graded_at, self.isolation,
                notes]

    def identity(self) -> tuple:
        """What two records of one student must share to be the same grade (not when or where it was written)."""
        return self.content_hash, self.status, self.total, self.problems, self.provisional, self.reason


def number(value: float | None) -> str:
    return "" if value is None else f"{value:.4f}".rstrip("0").rstrip(".")


def result_files(folder: Path) -> list[Path]:
    """``folder/results/*.json``, else every ``results/*.json`` below it, else the results files in it."""
    if (folder / "results").is_dir():
        return sorted((folder / "results").glob("*.json"))
    nested = sorted(folder.rglob("results/*.json"))
    return nested or sorted(p for p in folder.glob("*.json") if p.name != "batch.json")


def read_results(path: Path) -> tuple[dict[str, Any], GradingResult]:
    """A results.json as written by ``grader grade`` or ``grader batch``; GradebookError when it is not one."""
    try:
        data = json.loads(path.read_text())
        return data, GradingResult.from_gradescope_dict(data)
    except (OSError, ValueError, TypeError, AttributeError, KeyError) as exc:
        raise GradebookError(f"{path}: not a results file ({exc.__class__.__name__}: {exc})") from None


def student_of(path: Path, data: dict[str, Any]) -> str:
    return (kit_data(data).get("batch") or {}).get("student") or path.stem


def read_record(path: Path) -> Record:
    """The record of one results file: an error row when the grader failed or could not judge a test."""
    data, result = read_results(path)
    batch: dict[str, Any] = kit_data(data).get("batch") or {}
    reason = regrade_reason(data) or ("error recorded by the batch" if batch.get("status") == "error" else "")
    graded = not reason
    return Record(
        student=student_of(path, data), status="graded" if graded else "error", total=result.score if graded else 0.0,
        problems=tuple(p.score if graded and p.total else None for p in result.problems().values()),
        provisional=result.provisional, graded_at=batch.get("graded_at", ""),
        content_hash=batch.get("content_hash", ""), reason=reason, tests=result.tests, source=str(path.resolve()),
        isolation=result.isolation.get("mechanism", ""))


def merge(records: list[Record]) -> list[Record]:
    """One record per student, sorted; identical duplicates collapse, conflicting ones are refused."""
    by_student: dict[str, list[Record]] = defaultdict(list)
    for record in records:
        by_student[record.student].append(record)
    merged, conflicts = [], []
    for student in sorted(by_student):
        group = sorted(by_student[student], key=lambda r: (r.graded_at, r.source))
        first = group[0]
        for other in group[1:]:
            if other.identity() != first.identity():
                conflicts.append(f"{student}: {first.source} ({_describe(first)}) and {other.source} "
                                 f"({_describe(other)})")
        merged.append(first)
    if conflicts:
        raise GradebookError("conflicting results for the same student (merge only one of them: drop the "
                             "stale folder or re-grade):\n  " + "\n  ".join(conflicts))
    return merged


def _describe(record: Record) -> str:
    what = f"total {number(record.total)}" if record.status == "graded" else record.status
    return f"{what}, submission {record.content_hash[7:19] or 'unknown'}, graded {record.graded_at or '?'}"


def listed_without_result(folders: list[Path], present: set[str]) -> tuple[list[str], list[str]]:
    """Students listed by a batch.json without a result, and shards whose siblings are absent."""
    manifests = {p.resolve() for folder in folders for p in folder.rglob("batch.json")}
    listed, shards, unsharded = set(), defaultdict(set), False
    for path in sorted(manifests):
        try:
            manifest = json.loads(path.read_text())
        except (OSError, ValueError):
            continue
        listed |= set(manifest.get("students", []))
        if manifest.get("shard"):
            index, count = (int(part) for part in manifest["shard"].split("/"))
            shards[count].add(index)
        else:
            unsharded = True
    gaps = [] if unsharded else [f"shard {i}/{count}" for count in sorted(shards)
                                 for i in range(1, count + 1) if i not in shards[count]]
    return sorted(listed - present), gaps
