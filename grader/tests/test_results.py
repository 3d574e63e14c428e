"""The score is a pure function of parsed results; results.json always exists and is well formed."""

from __future__ import annotations

import json

import pytest

from grader.problems import PROBLEMS
from grader.results import FAILED_ENTRY, GradingResult, TestResult, write_json_atomic


def result(*tests: TestResult, **kwargs) -> GradingResult:
    return GradingResult(tests=tests, submission="alice", **kwargs)


def t(problem="P1", status="passed", points=2.0, gpu=False, name="a test", message="") -> TestResult:
    return TestResult(problem=problem, module=PROBLEMS[problem].module, name=name, points=points, status=status,
                      message=message, gpu=gpu)


def test_score_counts_only_passed_tests():
    graded = result(t(), t(status="failed", message="wrong"), t(problem="P2", points=3), t(status="not_run", gpu=True))
    assert graded.score == 5 and graded.max_score == 9
    problems = graded.problems()
    assert problems["P1"].score == 2 and problems["P1"].max_score == 6 and problems["P1"].not_run == 2
    assert problems["P1"].passed == 1 and problems["P1"].total == 3
    assert problems["P1"].first_failure == "a test: wrong"
    assert problems["P2"].score == 3 and problems["P3"].total == 0


def test_provisional_exactly_when_a_test_was_not_run():
    assert not result(t(), t(status="failed")).provisional
    assert result(t(), t(status="not_run", gpu=True)).provisional


def test_gradescope_dict_has_the_required_and_kit_keys():
    data = result(t(), t(status="failed", message="got 3, expected 2"), t(status="not_run", gpu=True),
                  isolation={"user": "uid 1"}).to_gradescope_dict()
    json.dumps(data)  # serialisable
    assert data["score"] == 2 and {"execution_time", "output", "tests", "problems", "provisional", "isolation",
                                   "kit_version"} <= data.keys()
    assert [test["status"] for test in data["tests"]] == ["passed", "failed", "failed"]
    assert data["tests"][1]["output"] == "got 3, expected 2" and data["tests"][0]["output"] == ""
    assert all({"name", "score", "max_score", "status", "output", "visibility"} <= test.keys() for test in data["tests"])
    assert data["problems"]["P1"] == {"name": "memory", "score": 2, "max_score": 6, "not_run": 2}
    assert list(data["problems"]) == list(PROBLEMS) and data["provisional"] is True
    assert "Provisional" in data["output"]


def test_grader_failure_is_a_visible_entry_with_details_hidden():
    data = GradingResult.failed("bob", "Traceback: secret internals").to_gradescope_dict()
    assert data["tests"][0]["name"] == FAILED_ENTRY and data["score"] == 0
    assert "secret internals" not in json.dumps(data["tests"]) and "secret internals" not in data["output"]
    assert data["grader_error"] == "Traceback: secret internals"


def test_results_roundtrip_through_json():
    graded = result(t(), t(problem="P8", status="not_run", gpu=True), isolation={"network": "none"},
                    notes=("budget used up",))
    back = GradingResult.from_gradescope_dict(json.loads(json.dumps(graded.to_gradescope_dict())))
    assert back.tests == graded.tests and back.isolation == graded.isolation and back.notes == graded.notes


def test_atomic_write_keeps_the_old_file_on_failure(tmp_path):
    target = tmp_path / "results.json"
    write_json_atomic(target, {"score": 1})
    with pytest.raises(TypeError):
        write_json_atomic(target, {"score": object()})
    assert json.loads(target.read_text()) == {"score": 1}
    assert [p.name for p in tmp_path.iterdir()] == ["results.json"]
