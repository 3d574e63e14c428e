"""grader show: one student's feedback exactly as the student reads it (hidden tests left out);
a clear one-line refusal for an unknown student. Results are made here, no grading."""

from __future__ import annotations

import pytest

from grader.cli import main as grader
from grader.grading.results import ERROR_OUTPUT, GradingResult, TestResult, write_json_atomic

TESTS = (TestResult("P1", "memory", "sizes", 12.0, "passed"),
         TestResult("P3", "einsum", "rewrite 1", 6.0, "failed", message="got shape (2, 3), expected (3, 2)"),
         TestResult("P3", "einsum", "rewrite 2", 6.0, "error", message="worker lost"),
         TestResult("P8", "amp", "speed on a GPU", 2.0, "not_run", gpu=True, message="not run: needs a GPU"))


def save(folder, student: str, result: GradingResult, visibility: str = "visible", hide: tuple[str, ...] = ()) -> None:
    data = result.to_gradescope_dict(visibility=visibility)
    for test in data["tests"]:
        if test["name"] in hide:
            test["visibility"] = "hidden"
    write_json_atomic(folder / "results" / f"{student}.json", data)


def test_every_visible_test_with_its_points_and_message(tmp_path, capsys):
    save(tmp_path, "alice", GradingResult(tests=TESTS), hide=("P1 memory: sizes",))
    save(tmp_path, "bob", GradingResult(tests=TESTS[:1]))
    assert grader(["show", str(tmp_path), "alice"]) == 0
    out, err = capsys.readouterr()
    assert out.startswith("alice\n\nScore: 12 / 26\nProvisional: GPU tests were not run")
    assert "[failed] P3 einsum: rewrite 1: 0 / 6\n    got shape (2, 3), expected (3, 2)\n" in out
    assert f"[failed] P3 einsum: rewrite 2: 0 / 6\n    {ERROR_OUTPUT}\n" in out and "worker lost" not in out
    assert "[not run] P8 amp: speed on a GPU: 0 / 0\n    not run: needs a GPU" in out
    assert "sizes" not in out and err == "grader show: 1 hidden tests not shown (the student does not see them)\n"


def test_a_failed_grading_shows_the_autograder_failed_entry_not_the_details(tmp_path, capsys):
    save(tmp_path, "mia", GradingResult.failed("mia.zip", "Traceback: secret path /grader/hidden"))
    assert grader(["show", str(tmp_path), "mia"]) == 0
    out = capsys.readouterr().out
    assert "[failed] Autograder failed: 0 / 0\n    The grader could not finish" in out and "secret" not in out


def test_results_hidden_as_a_whole_show_nothing_but_that(tmp_path, capsys):
    save(tmp_path, "alice", GradingResult(tests=TESTS), visibility="hidden")
    assert grader(["show", str(tmp_path), "alice"]) == 0
    out, err = capsys.readouterr()
    assert out == "alice\n\n(these results are hidden from the student: visibility hidden)\n" and "4 hidden" in err


@pytest.mark.parametrize("present, reason", [
    (("alice", "bob"), "no result for 'carol' in {folder} (2 students: alice, bob)"),
    ((), "no result for 'carol' in {folder} (no results at all)"),
])
def test_an_unknown_student_is_refused_on_one_line(tmp_path, capsys, present, reason):
    (tmp_path / "results").mkdir()
    for student in present:
        save(tmp_path, student, GradingResult(tests=TESTS))
    assert grader(["show", str(tmp_path), "carol"]) == 2
    out, err = capsys.readouterr()
    assert out == "" and err == f"grader show: {reason.format(folder=tmp_path)}\n"
