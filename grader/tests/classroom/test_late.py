"""grader gradebook --late / grader report --late: a due date, free late days and a penalty per day,
extensions and own due dates by student, applied to the LMS's submission times; days late and the
penalty in the CSV, the summary and the report; a late student without a time reported (exit 1); a
bad late file refused on one line, nothing written. Results are made here, no grading."""

from __future__ import annotations

import csv
import json

import pytest

from grader.cli import main as grader
from grader.grading.results import GradingResult, write_json_atomic
from grader.tests.classroom.test_gradebook import sample_results, write

POLICY = """\
due: 2026-03-03T23:59:00-08:00
grace_minutes: 10
late_days: 1
penalty_per_day: 10
students:
  carol: {extension_days: 2, reason: illness}
"""


def _submitted(folder, student: str, lms: dict[str, str]) -> None:
    """``student`` graded 24 (of 24 run), with what the LMS export said of the submission."""
    path = write(folder / "run", student, GradingResult(tests=sample_results()))
    data = json.loads(path.read_text())
    data["extra_data"]["batch"]["lms"] = lms
    write_json_atomic(path, data)


@pytest.fixture
def term(tmp_path):
    _submitted(tmp_path, "alice", {"lms": "gradescope", "submitted_at": "2026-03-04T00:05:00-08:00"})  # in the grace
    _submitted(tmp_path, "bob", {"lms": "gradescope", "submitted_at": "2026-03-05T11:00:00-08:00"})  # 2 days
    _submitted(tmp_path, "carol", {"lms": "gradescope", "submitted_at": "2026-03-05T20:00:00-08:00"})  # extended
    _submitted(tmp_path, "dave", {"lms": "canvas", "ID": "1004", "late": "true"})  # Canvas: late, no time
    write(tmp_path / "run", "erin", GradingResult.failed("erin.zip", "not a readable zip file"))  # nothing to charge
    (tmp_path / "late.yml").write_text(POLICY)
    return tmp_path


def _gradebook(folder, *extra: str) -> int:
    return grader(["gradebook", str(folder / "run"), "--csv", str(folder / "gb.csv"), "--late",
                   str(folder / "late.yml"), *extra])


def _rows(folder) -> dict[str, dict[str, str]]:
    with open(folder / "gb.csv", newline="") as stream:
        return {r["student"]: r for r in list(csv.DictReader(stream))[1:]}


def test_days_late_free_days_and_penalties_go_into_the_totals_csv_summary_and_report(term, capsys):
    assert _gradebook(term) == 1  # dave: Canvas says late, and nobody said how late
    assert "1 late students without a submission time" in capsys.readouterr().err
    rows = _rows(term)
    assert {s: (r["total"], r["days_late"], r["late_penalty"]) for s, r in rows.items()} == {
        "alice": ("24", "0", "0"), "bob": ("21.6", "2", "2.4"), "carol": ("24", "0", "0"), "dave": ("24", "", ""),
        "erin": ("0", "", "")}
    assert "2 days late (1 free, -2.4 points)" in rows["bob"]["notes"]
    (term / "late.yml").write_text(POLICY + "  dave: {days_late: 3, reason: 'Canvas LATE, TA checked the time'}\n")
    assert _gradebook(term) == 0
    assert _rows(term)["dave"]["total"] == "19.2"  # 3 days, 1 free: 20% off
    summary = (term / "gb.md").read_text()
    assert "## Late" in summary and "| bob | 2 | 1 | 2.4 |  |" in summary and "| alice |" not in summary.split("## Late")[1]
    assert grader(["report", str(term / "run"), "--late", str(term / "late.yml"), "--html", str(term / "r.html")]) == 0
    page = (term / "r.html").read_text()
    assert "<td>2 days late (1 free, -2.4 points)</td><td>provisional, late</td>" in page
    assert '<td class="n">21.6</td>' in page


def test_without_a_late_file_nothing_is_late(term):
    assert grader(["gradebook", str(term / "run"), "--csv", str(term / "gb.csv")]) == 0
    rows = [r for r in _rows(term).values() if r["status"] == "graded"]
    assert {r["total"] for r in rows} == {"24"} and {r["days_late"] for r in _rows(term).values()} == {""}


@pytest.mark.parametrize("text, message", [
    ("due: 2026-03-03 23:59\n", "due: expected a date and time with its time zone"),
    ("due: 2026-03-03T23:59:00Z\nlate_day: 2\n", "unknown key 'late_day'"),
    ("due: 2026-03-03T23:59:00Z\npenalty_per_day: 150\n", "penalty_per_day: expected a number from 0 to 100"),
    ("due: 2026-03-03T23:59:00Z\nstudents:\n  bob: {extension: 2}\n", "students: bob: expected some of"),
    ("due: 2026-03-03T23:59:00Z\nstudents:\n  zed: {extension_days: 2}\n", "unknown student 'zed'"),
    ("late_days: [\n", "cannot read it"),
])
def test_a_bad_late_file_is_refused_on_one_line_and_nothing_is_written(term, capsys, text, message):
    (term / "late.yml").write_text(text)
    assert _gradebook(term) == 2
    err = capsys.readouterr().err
    assert message in err and err.count("\n") == 1 and not (term / "gb.csv").exists()
