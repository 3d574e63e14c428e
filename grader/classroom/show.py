"""``grader show OUT_DIR STUDENT [--overrides FILE]``: one student's feedback as Gradescope shows it to them.

The student's results.json is found under OUT_DIR as the gradebook finds results (a batch's
folder, a folder holding several, or plain results files named after the students). What is
printed is what the student reads once the results are published: the overall output, then
every test (name, points, outcome, message) except those whose visibility is ``hidden``;
nothing but a line saying so when the whole result is hidden. The tests that met a function not
implemented yet are one line per problem naming those functions, not a line per test. With
``--overrides`` (the gradebook's file) the student's overridden scores follow, with the reason
and the total after them. How many tests were left out goes to stderr, for the instructor only.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ..problems import PROBLEMS
from .gradebook.inputs import Change, apply_overrides, read_overrides
from ..grading.results import stub_function
from .gradebook.records import GradebookError, merge, number, read_record, read_results, result_files

HIDDEN = "hidden"


def _points(value: Any) -> str:
    return f"{float(value or 0):g}"


def _problem(test: dict[str, Any]) -> str:
    kit = test.get("extra_data")
    return str(kit.get("problem", "")) if isinstance(kit, dict) else ""


def _stub_function(test: dict[str, Any]) -> str:
    return stub_function(str(test.get("output", ""))) if test.get("status") == "failed" else ""


def _test_lines(test: dict[str, Any]) -> list[str]:
    lines = [f"[{test.get('status', 'not run')}] {test.get('name', '?')}: {_points(test.get('score'))} / "
             f"{_points(test.get('max_score'))}"]
    return lines + [f"    {line}" for line in str(test.get("output", "")).splitlines()]


def student_view(data: dict[str, Any], changes: Sequence[Change] = (), total: float | None = None,
                 passed: bool = True) -> tuple[str, int]:
    """The text the student sees, and how many tests are hidden from them; ``changes``: the instructor's
    overrides of this student's scores, ``total`` the score after them; ``passed=False`` counts the passed
    tests instead of listing them (the class report's short form)."""
    tests = [t for t in data.get("tests", []) if isinstance(t, dict)]
    default = data.get("visibility", "visible")
    if default == HIDDEN:
        return "(these results are hidden from the student: visibility hidden)\n", len(tests)
    order = {key: index for index, key in enumerate(PROBLEMS)}  # results written in the order sessions ended
    shown = sorted((t for t in tests if t.get("visibility", default) != HIDDEN),
                   key=lambda t: order.get(_problem(t), -1))
    stubs: dict[str, list[dict[str, Any]]] = {}  # by problem, the failed tests that met a stub
    for test in shown:
        if _stub_function(test):
            stubs.setdefault(_problem(test), []).append(test)
    lines = [str(data.get("output", "")).rstrip(), ""]
    if not passed:
        lines.append(f"{sum(t.get('status') == 'passed' for t in shown)} tests passed (not listed)")
    for test in shown:
        key = _problem(test)
        if not passed and test.get("status") == "passed":
            continue
        if not _stub_function(test):
            lines += _test_lines(test)
        elif test is stubs[key][0]:
            functions = ", ".join(dict.fromkeys(_stub_function(t) for t in stubs[key]))
            module = (test.get("extra_data") or {}).get("module", "")
            lines += [f"[not implemented] {key} {module}: {len(stubs[key])} tests, 0 / "
                      f"{_points(sum(float(t.get('max_score') or 0) for t in stubs[key]))}: still to write: {functions}",
                      "    (each still raises NotImplementedError; its handout section says what it does)"]
    if changes:
        lines += ["", "Changed by your instructor:"]
        lines += [f"    {c.item}: {number(c.before)} -> {number(c.after)} ({c.reason})" for c in changes]
        lines.append(f"Score after these changes: {number(total)}")
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


def overridden(path: Path, overrides: Path | None) -> tuple[list[Change], float | None]:
    """The overrides of the student whose results are at ``path``, as applied, and their total after them."""
    if overrides is None:
        return [], None
    record = read_record(path)
    records, changes = apply_overrides([record], [o for o in read_overrides(overrides) if o.student == record.student])
    return changes, records[0].total


def main(out_dir: str, student: str, *, overrides: Path | None = None) -> int:
    """Print ``student``'s feedback; 0 when shown, 2 when there is no such result (or the overrides are refused)."""
    try:
        path = find(Path(out_dir), student)
        data, _ = read_results(path)
        changes, total = overridden(path, overrides)
    except GradebookError as exc:
        print(f"grader show: {' '.join(str(exc).split())}", file=sys.stderr)
        return 2
    text, hidden = student_view(data, changes, total)
    print(f"{student}\n\n{text}", end="")
    if hidden:
        print(f"grader show: {hidden} hidden tests not shown (the student does not see them)", file=sys.stderr)
    return 0
