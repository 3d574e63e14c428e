"""The kill matrix's verdict on one mutant's grading (``selfcheck._verdict``), on results built by hand."""

from __future__ import annotations

import pytest

from grader.grading.results import GradingResult, TestResult
from grader import mistakes
from grader.selfproof.selfcheck import _lost, _verdict

MUTANT = mistakes.Mutant(id="p2-example", problem="P2", module="strides", find="a", replace="b", description="example")
REFERENCE = {"P1": 2.0, "P2": 3.0}


def graded(p1: str, p2: str, error: str = "") -> GradingResult:
    """A grading with one P1 test (2 points) and one P2 test (3 points) of the given statuses."""
    return GradingResult(tests=(TestResult("P1", "memory", "a", 2.0, p1), TestResult("P2", "strides", "b", 3.0, p2)),
                         error=error)


@pytest.mark.parametrize("p1, p2, error, expected", [
    ("passed", "failed", "", "killed"),
    ("passed", "passed", "", "SURVIVED"),
    ("failed", "passed", "", "SURVIVED"),
    ("failed", "failed", "", "MISATTRIBUTED (P1)"),
    ("passed", "failed", "judge stopped", "GRADER ERROR"),
])
def test_a_mutant_is_killed_only_by_points_lost_in_its_own_problem(p1, p2, error, expected):
    result = graded(p1, p2, error)
    assert _verdict(MUTANT, result, _lost(result, REFERENCE)) == expected


def test_a_first_failure_grading_of_its_own_problem_is_a_kill():
    """Stopped at its first failure, the tests after it are not run: the verdict is still a kill."""
    result = GradingResult(tests=(TestResult("P2", "strides", "b", 3.0, "failed"),
                                  TestResult("P2", "strides", "c", 1.0, "not_run")))
    assert _verdict(MUTANT, result, _lost(result, {"P2": 4.0})) == "killed"


def test_points_gained_in_its_own_problem_are_no_kill():
    result = graded("passed", "passed")
    assert _verdict(MUTANT, result, _lost(result, {"P1": 2.0, "P2": 1.0})) == "SURVIVED"
