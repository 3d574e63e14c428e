"""``grader gradebook --lms canvas|plain --lms-out FILE``: the totals as an LMS imports them.

- canvas: the columns of Canvas's gradebook import (``Student``, ``ID``, ``SIS User ID``, ``SIS
  Login ID``, ``Section``, then one column named after the assignment), a ``Points Possible`` row
  second. Canvas matches students by those ids: they come from the roster's columns of the same
  names (a Canvas gradebook export is such a roster, with a ``student`` column added), else from
  the Canvas download the class was graded from (its user id). A student with no Canvas id is
  refused, by name: Canvas could not match the row.
- plain: ``student``, what the LMS export said of each (a Gradescope export's name, sid, email and
  submission time), the roster's other columns, ``points``, ``points_possible``, ``provisional``.

Points are the total out of the assignment's maximum. Error and missing rows are left blank (the
LMS keeps what it has; nothing says 0 by mistake) unless ``--missing zero``. A provisional row (GPU
tests not run) is never posted as final by default: the export is refused (``ProvisionalRows``) until
the instructor merges the GPU pass or chooses ``--provisional blank`` (left blank) or ``as-is`` (the
total without the GPU tests); the plain file says which rows are provisional.
"""

from __future__ import annotations

import csv
import io
from dataclasses import dataclass
from pathlib import Path

from ...problems import TOTAL_POINTS
from .records import GradebookError, Record, number

KINDS = ("canvas", "plain")
MISSING = ("blank", "zero")
PROVISIONAL = ("blank", "as-is")
CANVAS_IDS = ("Student", "ID", "SIS User ID", "SIS Login ID", "Section")
POINTS_POSSIBLE = "Points Possible"


@dataclass(frozen=True)
class Export:
    """What to write: the kind, where, the assignment's column name, and what an ungraded row gets."""

    kind: str
    out: Path
    assignment: str = "Resource accounting"
    missing: str = "blank"
    provisional: str | None = None  # what a provisional row gets: None refuses the export, else PROVISIONAL

    def points(self, record: Record) -> str:
        if record.status != "graded":
            return "0" if self.missing == "zero" else ""
        return "" if record.provisional and self.provisional == "blank" else number(record.total)


def _some(names: list[str], shown: int = 5) -> str:
    return ", ".join(names[:shown]) + (f" and {len(names) - shown} more" if len(names) > shown else "")


def refuse_provisional(records: list[Record], export: Export) -> None:
    """GradebookError when a provisional row would be posted and the instructor has not said how."""
    provisional = [r.student for r in records if r.status == "graded" and r.provisional]
    if provisional and export.provisional is None:
        raise GradebookError(f"--lms {export.kind}: {len(provisional)} provisional rows (GPU tests not run: "
                             f"{_some(provisional)}) "
                             f"would be posted as final; merge the GPU pass (grader batch --gpu only), or choose "
                             f"--provisional blank (left blank) or --provisional as-is (the total without them)")


def canvas_ids(record: Record, roster: dict[str, dict[str, str]]) -> dict[str, str]:
    """The Canvas columns of ``record``'s row: the roster's, else the Canvas download's (its name and user id)."""
    ids = roster.get(record.student) or ({"Student": record.lms.get("name", ""), "ID": record.lms.get("ID", "")}
                                         if record.lms.get("lms") == "canvas" else {})
    return {"Student": ids.get("Student") or record.student, **{c: ids.get(c, "") for c in CANVAS_IDS[1:]}}


def refuse_unmatched(records: list[Record], roster: dict[str, dict[str, str]]) -> None:
    """GradebookError naming the students whose Canvas row would carry no id Canvas can match."""
    unmatched = [r.student for r in records if not any(canvas_ids(r, roster)[c] for c in CANVAS_IDS[1:4])]
    if unmatched:
        raise GradebookError(f"--lms canvas: {len(unmatched)} students have no Canvas ID, SIS User ID or SIS Login ID "
                             f"({_some(unmatched)}): {'add them to the roster' if roster else 'give --roster'} (Canvas's "
                             f"gradebook export with a student column), or grade the class from its Canvas download")


def lms_text(records: list[Record], roster: dict[str, dict[str, str]], export: Export) -> str:
    """The export's CSV: one row per gradebook row, the roster's columns passed through."""
    refuse_provisional(records, export)
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    if export.kind == "canvas":
        refuse_unmatched(records, roster)
        rows = {record.student: canvas_ids(record, roster) for record in records}
        writer.writerow([*CANVAS_IDS, export.assignment])
        writer.writerow([POINTS_POSSIBLE, *[""] * (len(CANVAS_IDS) - 1), str(TOTAL_POINTS)])
        for record in records:
            writer.writerow([*(rows[record.student][c] for c in CANVAS_IDS), export.points(record)])
    else:
        rows = {r.student: {**{k: v for k, v in r.lms.items() if k != "lms"}, **roster.get(r.student, {})}
                for r in records}
        extra = list(dict.fromkeys(c for row in rows.values() for c in row if c != "student"))
        writer.writerow(["student", *extra, "points", "points_possible", "provisional"])
        for record in records:
            row = rows[record.student]
            writer.writerow([record.student, *(row.get(c, "") for c in extra), export.points(record), TOTAL_POINTS,
                             str(record.status == "graded" and record.provisional).lower()])
    return buffer.getvalue()
