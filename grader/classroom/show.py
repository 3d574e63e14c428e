"""``grader show OUT_DIR STUDENT``: one student's feedback as Gradescope shows it to them.

The student's results.json is found under OUT_DIR as the gradebook finds results (a batch's
folder, a folder holding several, or plain results files named after the students). What is
printed is what the student reads once the results are published: the overall output, then
every test (name, points, outcome, message) except those whose visibility is ``hidden``;
nothing but a line saying so when the whole result is hidden. How many tests were left out
goes to stderr, for the instructor only.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from .gradebook.records import GradebookError, merge, read_record, read_results, result_files

HIDDEN = "hidden"


def _points(value: Any) -> str:
    return f"{float(value or 0):g}"


def student_view(data: dict[str, Any]) -> tuple[str, int]:
    """The text the student sees, and how many tests are hidden from them."""
    tests = [t for t in data.get("tests", []) if isinstance(t, dict)]
    default = data.get("visibility", "visible")
    if default == HIDDEN:
        return "(these results are hidden from the student: visibility hidden)\n", len(tests)
    shown = [t for t in tests if t.get("visibility", default) != HIDDEN]
    lines = [str(data.get("output", "")).rstrip(), ""]
    for test in shown:
        outcome = test.get("status", "not run")
        lines.append(f"[{outcome}] {test.get('name', '?')}: {_points(test.get('score'))} / "
                     f"{_points(test.get('max_score'))}")
        lines += [f"    {line}" for line in str(test.get("output", "")).splitlines()]
    return "\n".join(lines).rstrip() + "\n", len(tests) - len(shown)


def find(folder: Path, student: str) -> Path:
    """The results file of ``student`` under ``folder`` (several identical copies are fine)."""
    files = result_files(folder)
    mine = [p for p in files if p.stem == student]
    if not mine:
        known = sorted({p.stem for p in files})
        listing = ", ".join(known[:10]) + (f" and {len(known) - 10} more" if len(known) > 10 else "")
        raise GradebookError(f"no result for {student!r} in {folder} "
                             f"({f'{len(known)} students: {listing}' if known else 'no results at all'})")
    return Path(merge([read_record(p) for p in mine])[0].source)


def main(out_dir: str, student: str) -> int:
    """Print ``student``'s feedback; 0 when shown, 2 when there is no such result."""
    try:
        data, _ = read_results(find(Path(out_dir), student))
    except GradebookError as exc:
        print(f"grader show: {' '.join(str(exc).split())}", file=sys.stderr)
        return 2
    text, hidden = student_view(data)
    print(f"{student}\n\n{text}", end="")
    if hidden:
        print(f"grader show: {hidden} hidden tests not shown (the student does not see them)", file=sys.stderr)
    return 0
