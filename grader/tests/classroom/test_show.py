"""grader show: one student's feedback exactly as the student reads it (hidden tests left out,
problems in order, functions not implemented yet one line per problem, the instructor's overrides
with their reason); a broken upload says what to upload; a clear one-line refusal for an unknown
student. Results are made here, no grading."""

from __future__ import annotations

import subprocess
import sys

import pytest

from grader.cli import main as grader
from grader.paths import KIT_ROOT
from grader.release.stubs import stub_message
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


def _stub_test(problem: str, module: str, function: str, points: float) -> TestResult:
    """A test failed on a stub: the judge's words around the stub's own message (``release.stubs``)."""
    message = f"{module}.{function}(1) raised NotImplementedError: {stub_message(module, function)}"
    return TestResult(problem, module, f"{function} works", points, "failed", message=message)


def test_problems_in_order_and_functions_not_implemented_yet_summarised_per_problem(tmp_path, capsys):
    stubs = tuple(_stub_test("P5", "optim", f, 2.0) for f in ("sgd_step", "sgd_step", "adagrad_step"))
    wrong = TestResult("P5", "optim", "state dict round trip", 3.0, "failed", message="lost the step count")
    save(tmp_path, "sam", GradingResult(tests=(*stubs, wrong, TESTS[1], TESTS[0])))  # as sessions finish: P5 first
    assert grader(["show", str(tmp_path), "sam"]) == 0
    out = capsys.readouterr().out
    assert out.index("P1 memory: sizes") < out.index("P3 einsum") < out.index("P5 optim")
    assert "[not implemented] P5 optim: 3 tests, 0 / 6: still to write: optim.sgd_step, optim.adagrad_step" in out
    assert "sgd_step works" not in out and out.count("NotImplementedError") == 1
    assert "[failed] P5 optim: state dict round trip: 0 / 3\n    lost the step count" in out  # a wrong answer stays


def test_show_applies_the_instructors_overrides_with_their_reason(tmp_path, capsys):
    save(tmp_path, "alice", GradingResult(tests=(TESTS[0], TESTS[1], TESTS[3])))
    overrides = tmp_path / "overrides.csv"
    overrides.write_text("student,problem,test,points,reason\n"
                         "alice,,P3 einsum: rewrite 1,6,regrade: transposed output accepted\n"
                         "bob,P1,,0,copied\n")
    assert grader(["show", str(tmp_path), "alice", "--overrides", str(overrides)]) == 0
    out = capsys.readouterr().out
    assert ("Changed by your instructor:\n    P3 einsum: rewrite 1: 0 -> 6 (regrade: transposed output accepted)\n"
            "Score after these changes: 18\n") in out
    assert grader(["show", str(tmp_path), "alice"]) == 0 and "Changed by" not in capsys.readouterr().out
    overrides.write_text("student,problem,points,reason\nalice,P1,40,typo\n")
    assert grader(["show", str(tmp_path), "alice", "--overrides", str(overrides)]) == 2
    assert "P1 is worth 0 to 12 points, got 40" in capsys.readouterr().err


def test_a_broken_upload_tells_the_student_what_to_upload(tmp_path, capsys):
    (tmp_path / "upload.zip").write_bytes(b"PK\x03\x04 not really")
    run = subprocess.run([sys.executable, "-m", "grader", "grade", str(tmp_path / "upload.zip"), "--out",
                          str(tmp_path / "results" / "mia.json")], capture_output=True, text=True, cwd=KIT_ROOT,
                         timeout=120)
    assert run.returncode == 2
    assert grader(["show", str(tmp_path), "mia"]) == 0
    out = " ".join(capsys.readouterr().out.split())
    assert "Your upload could not be graded: upload.zip is not a readable zip file" in out
    assert "Upload again: a readable .zip with your assignment/ folder (memory.py" in out
    assert "your instructor has the details" not in out


def test_the_results_output_names_the_functions_not_implemented_yet_once():
    from grader.grading.grade import _notes

    stubs = [_stub_test("P1", "memory", f, 1.0) for f in ("sizes", "sizes", "layout")]
    wrong = TestResult("P1", "memory", "bits", 1.0, "failed", message="got 3, expected 4")
    assert _notes([], [*stubs, wrong]) == ("Not implemented yet (still raising NotImplementedError): memory.sizes, "
                                           "memory.layout; the tests below that call them fail until they are written.",)
    assert _notes([], [wrong]) == ()
