"""The class as the LMS hands it over, detected by its layout, as one ``Entry`` per student.

- a Gradescope "Export Submissions" (``gradescope``): ``submission_metadata.yml`` beside one
  ``submission_<id>/`` folder per submission; the student id is the submitter's email;
- a Canvas "Download Submissions" (``canvas``): one flat folder of files named
  ``<login>[_LATE]_<user id>_<submission id>_<original name>``; the student id is the login;
- otherwise a plain folder (``batch_entries.submissions``): one entry per student, its name the id.

Each LMS entry carries what the LMS matches a grade by (``Entry.lms``: its kind, the name, the ids,
when it was submitted, whether it was late). What cannot be a student's submission is reported by
name with the reason (``Unmatched``), never graded as a student.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from ..batch_entries import Entry, submissions
from . import canvas, gradescope


@dataclass(frozen=True)
class Unmatched:
    """A file or folder of the class that is no student's submission, and why."""

    name: str
    reason: str


@dataclass(frozen=True)
class Intake:
    """The class: its layout, the students' entries (sorted by id) and what matched no student."""

    layout: str  # plain | gradescope | canvas
    entries: list[Entry]
    unmatched: list[Unmatched]


def read_class(folder: Path, scratch: Path) -> Intake:
    """The entries of ``folder`` in whichever layout it has; ``scratch`` holds any files regrouped per student."""
    if (folder / gradescope.METADATA).is_file():
        entries, unmatched = gradescope.entries(folder)
        layout = "gradescope"
    elif canvas.is_download(folder):
        entries, unmatched = canvas.entries(folder, scratch / "canvas")
        layout = "canvas"
    else:
        return Intake("plain", submissions(folder), [])
    return Intake(layout, sorted(entries, key=lambda e: e.student), [Unmatched(*u) for u in unmatched])
