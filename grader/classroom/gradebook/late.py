"""``--late FILE``: a due date and a late policy, applied to the submission times the LMS export gave.

The file is YAML::

    due: 2026-03-03T23:59:00-08:00   # required, with its time zone
    grace_minutes: 15                # a submission this late is on time (default 0)
    late_days: 2                     # each student's budget of free late days (default 0)
    penalty_per_day: 10              # % of the student's total taken per day beyond the budget (default 100)
    students:                        # by student id (as the gradebook names them); each key optional
      alice@uni.edu: {extension_days: 2, reason: "illness, dean's note"}
      babbagebob: {days_late: 1, reason: "Canvas says late; its download has no time"}
      carol: {due: 2026-03-06T12:00:00-08:00, late_days: 4, submitted_at: 2026-03-06T11:00:00-08:00}

A day late is any part of 24 hours after the due date (plus grace) that applies to the student: their
own ``due``, else the class's moved by ``extension_days``. The free days come off first; each day
beyond them costs ``penalty_per_day`` percent of the student's total (never below 0). The time is the
LMS's (a Gradescope export's ``:created_at:``), else the file's ``submitted_at``, else ``days_late``; a
student the LMS marks late (Canvas's ``_LATE_``) without a time is reported until the file says how late.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import yaml

from .records import GradebookError, Record, number

STUDENT_KEYS = {"due", "extension_days", "late_days", "days_late", "submitted_at", "reason"}
POLICY_KEYS = {"due", "grace_minutes", "late_days", "penalty_per_day", "students"}
UNKNOWN = "late by the LMS, no submission time: give days_late in the late file"


@dataclass(frozen=True)
class Late:
    """How late one student was and what it cost."""

    days: int  # days late (0: on time)
    free: int  # of which free late days
    penalty: float  # points taken
    reason: str = ""

    def note(self) -> str:
        cost = f", -{number(self.penalty)} points" if self.penalty else ""
        return f"{self.days} days late ({self.free} free{cost})" + (f": {self.reason}" if self.reason else "")


@dataclass(frozen=True)
class Policy:
    due: datetime
    grace: timedelta
    late_days: int
    penalty_per_day: float
    students: dict[str, dict[str, Any]]


def _time(value: Any, where: str) -> datetime:
    when = value if isinstance(value, datetime) else None
    if isinstance(value, str):
        try:
            when = datetime.fromisoformat(value)
        except ValueError:
            when = None
    if when is None or when.tzinfo is None:
        raise GradebookError(f"{where}: expected a date and time with its time zone, e.g. 2026-03-03T23:59:00-08:00, "
                             f"got {value!r}")
    return when


def _count(value: Any, where: str, maximum: float = math.inf) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 <= value <= maximum:
        raise GradebookError(f"{where}: expected a number from 0{'' if maximum == math.inf else f' to {maximum:g}'}, "
                             f"got {value!r}")
    return value


def read_policy(path: Path) -> Policy:
    """The late file, every value checked; GradebookError naming the file and the key otherwise."""
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, yaml.YAMLError) as exc:
        raise GradebookError(f"{path}: cannot read it ({' '.join(str(exc).split())})") from None
    if not isinstance(data, dict) or "due" not in data:
        raise GradebookError(f"{path}: expected a mapping with at least a due date (due: 2026-03-03T23:59:00-08:00)")
    unknown = sorted(set(map(str, data)) - POLICY_KEYS)
    students = data.get("students") or {}
    if unknown or not isinstance(students, dict):
        raise GradebookError(f"{path}: unknown key {unknown[0]!r} (use {', '.join(sorted(POLICY_KEYS))})" if unknown
                             else f"{path}: students is a mapping of student id to their terms")
    for student, terms in students.items():
        where = f"{path}: students: {student}"
        if not isinstance(terms, dict) or set(map(str, terms)) - STUDENT_KEYS:
            raise GradebookError(f"{where}: expected some of {', '.join(sorted(STUDENT_KEYS))}")
        for key in ("extension_days", "late_days", "days_late"):
            if key in terms:
                _count(terms[key], f"{where}: {key}")
        for key in ("due", "submitted_at"):
            if key in terms:
                _time(terms[key], f"{where}: {key}")
    return Policy(_time(data["due"], f"{path}: due"),
                  timedelta(minutes=_count(data.get("grace_minutes", 0), f"{path}: grace_minutes")),
                  int(_count(data.get("late_days", 0), f"{path}: late_days")),
                  _count(data.get("penalty_per_day", 100), f"{path}: penalty_per_day", 100),
                  {str(k): v for k, v in students.items()})


def days_late(record: Record, policy: Policy) -> int | None:
    """Whole days (any part counts) the student's submission came after their due date; None when unknown."""
    terms = policy.students.get(record.student, {})
    if "days_late" in terms:
        return int(terms["days_late"])
    submitted = terms.get("submitted_at") or record.lms.get("submitted_at")
    if not submitted:
        return None if record.lms.get("late") == "true" else 0
    due = (_time(terms["due"], "due") if "due" in terms
           else policy.due + timedelta(days=terms.get("extension_days", 0))) + policy.grace
    late = _time(submitted, f"{record.student}: submitted_at") - due
    return max(0, math.ceil(late / timedelta(days=1)))


def apply_late(records: list[Record], policy: Policy) -> list[Record]:
    """The graded records with their lateness and its cost (their totals follow); others as they are."""
    unknown = sorted(set(policy.students) - {r.student for r in records})
    if unknown:
        raise GradebookError(f"late file: unknown student {unknown[0]!r} (no result, not in the roster)")
    changed = []
    for record in records:
        if record.status != "graded":  # error and missing rows have no grade to charge
            changed.append(record)
            continue
        days = days_late(record, policy)
        terms = policy.students.get(record.student, {})
        if days is None:
            changed.append(replace(record, notes=(*record.notes, UNKNOWN)))
            continue
        free = min(days, int(terms.get("late_days", policy.late_days)))
        share = min(1.0, (days - free) * policy.penalty_per_day / 100)
        late = Late(days, free, round(record.total * share, 4), str(terms.get("reason", "")))
        changed.append(replace(record, late=late, total=round(record.total - late.penalty, 4),
                               notes=(*record.notes, late.note())) if days else replace(record, late=late))
    return changed
