"""grader gradebook --lms: Canvas's gradebook-import columns (read back with the csv module), the
roster's ids passed through, blank for error and missing rows unless --missing zero; provisional rows
refused until --provisional says what they get; a plain per-student CSV; the similarity pairs to review
in the summary; bad options refused before work."""

from __future__ import annotations

import csv

import pytest

from grader.cli import main as grader
from grader.grading.results import GradingResult
from grader.problems import TOTAL_POINTS
from grader.tests.classroom.test_gradebook import sample_results, write

# Canvas's gradebook import: the student columns of its own export, then one column per assignment;
# the second row holds each assignment's points possible.
CANVAS_HEADER = ["Student", "ID", "SIS User ID", "SIS Login ID", "Section"]
ROSTER = ("student,Student,ID,SIS User ID,SIS Login ID,Section,email\n"
          "alice,\"Liddell, Alice\",1001,S-1,alice@uni,Sec 1,a@uni\n"
          "bob,Bob Babbage,1002,S-2,bob@uni,Sec 2,b@uni\n"
          "carol,Carol Cray,1003,S-3,carol@uni,Sec 1,c@uni\n")


@pytest.fixture
def graded(tmp_path):
    """alice graded 18 (12 + 6, provisional: a GPU test not run), bob an error row, carol in the roster with
    no submission."""
    write(tmp_path / "run", "alice", GradingResult(tests=sample_results(p3=("passed", "failed"))))
    write(tmp_path / "run", "bob", GradingResult.failed("bob.zip", "not a readable zip file"))
    (tmp_path / "roster.csv").write_text(ROSTER)
    return tmp_path


def _export(folder, *extra: str) -> int:
    return grader(["gradebook", str(folder / "run"), "--csv", str(folder / "gb.csv"), "--roster",
                   str(folder / "roster.csv"), *extra])


def _rows(path) -> list[list[str]]:
    with open(path, newline="") as stream:
        return list(csv.reader(stream))


def test_canvas_export_has_canvas_columns_ids_and_blank_ungraded_rows(graded):
    assert _export(graded, "--lms", "canvas", "--lms-out", str(graded / "canvas.csv"),
                   "--lms-assignment", "HW3 Resource accounting (4242)", "--provisional", "as-is") == 0
    header, possible, *students = _rows(graded / "canvas.csv")
    assert header == [*CANVAS_HEADER, "HW3 Resource accounting (4242)"]
    assert possible == ["Points Possible", "", "", "", "", str(TOTAL_POINTS)]
    assert students == [["Liddell, Alice", "1001", "S-1", "alice@uni", "Sec 1", "18"],
                        ["Bob Babbage", "1002", "S-2", "bob@uni", "Sec 2", ""],
                        ["Carol Cray", "1003", "S-3", "carol@uni", "Sec 1", ""]]


def test_missing_zero_gives_error_and_missing_rows_zero(graded):
    assert _export(graded, "--lms", "canvas", "--lms-out", str(graded / "canvas.csv"), "--missing", "zero",
                   "--provisional", "as-is") == 0
    assert [row[-1] for row in _rows(graded / "canvas.csv")[2:]] == ["18", "0", "0"]


@pytest.mark.parametrize("kind", ["canvas", "plain"])
def test_provisional_rows_are_refused_until_the_instructor_says_what_they_get(graded, capsys, kind):
    assert _export(graded, "--lms", kind, "--lms-out", str(graded / "lms.csv")) == 2
    err = capsys.readouterr().err
    assert "1 provisional rows (GPU tests not run: alice)" in err and err.count("\n") == 1
    assert "--provisional blank" in err and "--provisional as-is" in err
    assert not (graded / "lms.csv").exists() and not (graded / "gb.csv").exists()
    assert _export(graded, "--lms", kind, "--lms-out", str(graded / "lms.csv"), "--provisional", "blank") == 0
    alice = _rows(graded / "lms.csv")[2 if kind == "canvas" else 1]
    assert alice[0] in ("Liddell, Alice", "alice") and "18" not in alice


def test_a_class_without_provisional_rows_needs_no_choice(tmp_path):
    complete = tuple(t for t in sample_results() if t.status != "not_run")
    write(tmp_path / "run", "alice", GradingResult(tests=complete))
    (tmp_path / "roster.csv").write_text(ROSTER)
    assert _export(tmp_path, "--lms", "canvas", "--lms-out", str(tmp_path / "canvas.csv")) == 0
    assert _rows(tmp_path / "canvas.csv")[2][-1] == "24"


def test_plain_export_passes_every_roster_column_through(graded):
    assert _export(graded, "--lms", "plain", "--lms-out", str(graded / "totals.csv"), "--provisional", "as-is") == 0
    with open(graded / "totals.csv", newline="") as stream:
        rows = list(csv.DictReader(stream))
    assert list(rows[0]) == ["student", "Student", "ID", "SIS User ID", "SIS Login ID", "Section", "email",
                             "points", "points_possible", "provisional"]
    assert [(r["student"], r["email"], r["points"], r["points_possible"], r["provisional"]) for r in rows] == [
        ("alice", "a@uni", "18", str(TOTAL_POINTS), "true"), ("bob", "b@uni", "", str(TOTAL_POINTS), "false"),
        ("carol", "c@uni", "", str(TOTAL_POINTS), "false")]


def test_similarity_pairs_to_review_are_listed_in_the_summary_and_change_no_grade(graded):
    (graded / "sim").mkdir()
    (graded / "sim" / "similarity.csv").write_text("a,b,score,a_in_b,b_in_a,lines,baseline,to_review,cluster\n"
                                                   "alice,bob,0.910,0.910,0.800,420,0.300,yes,1\n"
                                                   "alice,carol,0.300,0.300,0.200,12,0.300,,\n")
    assert _export(graded, "--similarity", str(graded / "sim")) == 0
    summary = (graded / "gb.md").read_text()
    assert "## To review: submissions that look alike" in summary and "| 1 | alice, bob | 1 | 0.91 |" in summary
    assert "carol |" not in summary.split("## To review")[1]
    assert _rows(graded / "gb.csv")[2][:2] == ["alice", "18"]


@pytest.mark.parametrize("args, message", [
    (["--lms", "canvas"], "--lms needs --lms-out FILE"),
    (["--lms-out", "x.csv"], "--lms-out needs --lms"),
    (["--lms", "moodle", "--lms-out", "x.csv"], "argument --lms: invalid choice: 'moodle'"),
    (["--lms", "canvas", "--lms-out", "x.txt"], "x.txt: expected a .csv file name"),
    (["--missing", "half"], "argument --missing: invalid choice: 'half'"),
    (["--provisional", "final"], "argument --provisional: invalid choice: 'final'"),
    (["--provisional", "blank"], "--provisional says what provisional rows get in an LMS file: use it with --lms"),
])
def test_bad_lms_options_are_refused_on_one_line_before_work(graded, capsys, args, message):
    assert _export(graded, *args) == 2
    err = capsys.readouterr().err
    assert message in err and err.count("\n") == 1
    assert not (graded / "gb.csv").exists()


def test_the_lms_file_may_not_overwrite_the_gradebook(graded, capsys):
    assert _export(graded, "--lms", "plain", "--lms-out", str(graded / "gb.csv")) == 2
    assert "is the gradebook's own --csv" in capsys.readouterr().err and not (graded / "gb.csv").exists()


def test_an_unreadable_similarity_folder_is_refused_and_nothing_is_written(graded, capsys):
    (graded / "sim").mkdir()
    assert _export(graded, "--similarity", str(graded / "sim"), "--lms", "plain", "--lms-out",
                   str(graded / "totals.csv")) == 2
    err = capsys.readouterr().err
    assert "similarity.csv: cannot read it" in err and err.count("\n") == 1
    assert {p.name for p in graded.glob("*.csv")} == {"roster.csv"}


def test_canvas_refuses_a_student_missing_from_the_roster_by_name(graded, capsys):
    (graded / "roster.csv").write_text(ROSTER.replace("alice,", "alicia,"))
    assert _export(graded, "--lms", "canvas", "--lms-out", str(graded / "canvas.csv"), "--provisional", "as-is") == 2
    err = capsys.readouterr().err
    assert "--lms canvas: 1 students have no Canvas ID, SIS User ID or SIS Login ID (alice): add them to the roster" in err
    assert not (graded / "canvas.csv").exists()
