"""``grader gradebook --lms canvas|plain --lms-out FILE``: the totals as an LMS imports them.

- canvas: the columns of Canvas's gradebook import (``Student``, ``ID``, ``SIS User ID``, ``SIS
  Login ID``, ``Section``, then one column named after the assignment), a ``Points Possible`` row
  second. Canvas matches students by those ids: they come from the roster's columns of the same
  names (a Canvas gradebook export is such a roster, with a ``student`` column added).
- plain: ``student``, the roster's other columns as they are, ``points``, ``points_possible``.

Points are the total out of the assignment's maximum. Error and missing rows are left blank (the
LMS keeps what it has; nothing says 0 by mistake) unless ``--missing zero``.
"""

from __future__ import annotations

import csv
import io
from dataclasses import dataclass
from pathlib import Path

from ...problems import TOTAL_POINTS
from .records import Record, number

KINDS = ("canvas", "plain")
MISSING = ("blank", "zero")
CANVAS_IDS = ("Student", "ID", "SIS User ID", "SIS Login ID", "Section")
POINTS_POSSIBLE = "Points Possible"


@dataclass(frozen=True)
class Export:
    """What to write: the kind, where, the assignment's column name, and what an ungraded row gets."""

    kind: str
    out: Path
    assignment: str = "Resource accounting"
    missing: str = "blank"

    def points(self, record: Record) -> str:
        if record.status == "graded":
            return number(record.total)
        return "0" if self.missing == "zero" else ""


def lms_text(records: list[Record], roster: dict[str, dict[str, str]], export: Export) -> str:
    """The export's CSV: one row per gradebook row, the roster's columns passed through."""
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    if export.kind == "canvas":
        writer.writerow([*CANVAS_IDS, export.assignment])
        writer.writerow([POINTS_POSSIBLE, *[""] * (len(CANVAS_IDS) - 1), str(TOTAL_POINTS)])
        for record in records:
            ids = roster.get(record.student, {})
            writer.writerow([ids.get("Student") or record.student, *(ids.get(c, "") for c in CANVAS_IDS[1:]),
                             export.points(record)])
    else:
        extra = list(dict.fromkeys(c for row in roster.values() for c in row if c != "student"))
        writer.writerow(["student", *extra, "points", "points_possible"])
        for record in records:
            row = roster.get(record.student, {})
            writer.writerow([record.student, *(row.get(c, "") for c in extra), export.points(record), TOTAL_POINTS])
    return buffer.getvalue()
