"""The score is a pure function of parsed results; results.json always exists and is well formed."""

from __future__ import annotations

import json
import os

import pytest

from grader.problems import PROBLEMS
from grader.grading.results import ERROR_OUTPUT, FAILED_ENTRY, SCHEMA, GradingResult, TestResult, write_json_atomic


def result(*tests: TestResult, **kwargs) -> GradingResult:
    return GradingResult(tests=tests, submission="alice", **kwargs)


def t(problem="P1", status="passed", points=2.0, gpu=False, name="a test", message="",
      mistakes: tuple[str, ...] = ()) -> TestResult:
    return TestResult(problem=problem, module=PROBLEMS[problem].module, name=name, points=points, status=status,
                      message=message, gpu=gpu, mistakes=mistakes)


def test_score_counts_only_passed_tests():
    graded = result(t(), t(status="failed", message="wrong"), t(problem="P2", points=3), t(status="not_run", gpu=True))
    assert graded.score == 5 and graded.max_score == 9
    problems = graded.problems()
    assert problems["P1"].score == 2 and problems["P1"].max_score == 6 and problems["P1"].not_run == 2
    assert problems["P1"].passed == 1 and problems["P1"].total == 3
    assert problems["P1"].first_failure == "a test: wrong"
    assert problems["P2"].score == 3 and problems["P3"].total == 0


def test_provisional_exactly_when_a_gpu_test_was_not_run():
    assert not result(t(), t(status="failed")).provisional
    assert result(t(), t(status="not_run", gpu=True)).provisional


def test_a_test_this_host_cannot_measure_is_not_a_gpu_matter_and_the_summary_says_which():
    why = "not run: this host gives the worker no memory limit that counts kernel buffers (a cgroup)"
    graded = result(t(), t(problem="P8", status="not_run", name="keeps only block inputs", message=why))
    data = graded.to_gradescope_dict()
    assert not graded.provisional and "Provisional" not in data["output"]
    assert f"Not graded on this host: P8 keeps only block inputs ({why})" in data["output"]


def test_gradescope_dict_keeps_the_kit_keys_under_extra_data_and_writes_each_test_once():
    data = result(t(), t(status="failed", message="got 3, expected 2"), t(status="not_run", gpu=True),
                  isolation={"user": "uid 1"}).to_gradescope_dict()
    json.dumps(data)  # serialisable
    assert data.keys() == {"score", "execution_time", "output", "visibility", "stdout_visibility", "tests",
                           "extra_data"}
    assert data["score"] == 2 and {"problems", "provisional", "isolation", "kit_version"} <= data["extra_data"].keys()
    assert "got 3, expected 2" not in json.dumps(data["extra_data"])
    assert json.dumps(data).count("got 3, expected 2") == 1  # not repeated anywhere
    assert [test.get("status") for test in data["tests"]] == ["passed", "failed", None]
    assert data["tests"][1]["output"] == "got 3, expected 2" and data["tests"][0]["output"] == ""
    assert all({"name", "score", "max_score", "output", "visibility"} <= test.keys() for test in data["tests"])
    assert data["extra_data"]["problems"]["P1"] == {"name": "memory", "score": 2, "max_score": 6, "not_run": 2}
    assert list(data["extra_data"]["problems"]) == list(PROBLEMS) and data["extra_data"]["provisional"] is True
    assert "Provisional" in data["output"]


@pytest.mark.parametrize("mode, max_score", [("exclude", 0), ("zero", 2.0)])
def test_a_test_not_run_says_so_and_is_not_a_failure(mode, max_score):
    data = result(t(), t(status="not_run", gpu=True, message="not run: needs a GPU")).to_gradescope_dict(not_run=mode)
    entry = data["tests"][1]
    assert "status" not in entry and entry["output"].startswith("not run") and entry["score"] == 0
    assert entry["max_score"] == max_score and data["extra_data"]["not_run"] == mode


def test_an_error_test_scores_0_and_asks_for_a_regrade_without_internals():
    graded = result(t(), t(status="error", message="judge session died: Traceback internals"))
    data = graded.to_gradescope_dict()
    assert graded.score == 2 and data["tests"][1]["status"] == "failed" and data["tests"][1]["score"] == 0
    assert data["tests"][1]["output"] == ERROR_OUTPUT and "regrade" in ERROR_OUTPUT
    assert graded.problems()["P1"].errors == 1 and "regrade" in graded.problems()["P1"].first_failure
    assert GradingResult.from_gradescope_dict(data).tests == graded.tests


def test_grader_failure_is_a_visible_entry_with_details_hidden():
    data = GradingResult.failed("bob", "Traceback: secret internals").to_gradescope_dict()
    assert data["tests"][0]["name"] == FAILED_ENTRY and data["score"] == 0
    assert "secret internals" not in json.dumps(data["tests"]) and "secret internals" not in data["output"]
    assert data["extra_data"]["grader_error"] == "Traceback: secret internals"


def test_results_roundtrip_through_json():
    graded = result(t(), t(problem="P8", status="not_run", gpu=True), t(status="failed", message="no"),
                    t(status="failed", message="Known mistake (p1-x)", mistakes=("p1-x",)), isolation={"network": "none"}, notes=("budget used up",))
    back = GradingResult.from_gradescope_dict(json.loads(json.dumps(graded.to_gradescope_dict())))
    assert back.tests == graded.tests and back.isolation == graded.isolation and back.notes == graded.notes


def test_known_mistakes_from_a_judges_report_compare_as_read_back():
    from_judge = t(status="failed", mistakes=["p1-x"])  # the judge's report holds a JSON list
    back = GradingResult.from_gradescope_dict(json.loads(json.dumps(result(from_judge).to_gradescope_dict())))
    assert back.tests == (from_judge,)


def validate(data: dict) -> list[str]:
    from jsonschema import Draft202012Validator

    validator = Draft202012Validator(json.loads(SCHEMA.read_text()))
    return [error.message for error in validator.iter_errors(data)]


@pytest.mark.parametrize("made", [
    result(t(), t(status="failed", message="x"), t(status="not_run", gpu=True), t(status="error")),
    result(t(status="failed", message="Known mistake (p4-x): ...", mistakes=("p4-x",))),
    GradingResult.failed("bob", "unreadable zip"),
    result(),
], ids=["graded", "diagnosed", "failed", "empty"])
def test_every_results_file_the_kit_writes_matches_the_schema(made):
    assert validate(made.to_gradescope_dict()) == []
    assert validate(made.to_gradescope_dict(not_run="zero", visibility="after_due_date")) == []


@pytest.mark.parametrize("break_it", [
    lambda d: d.update(kit_tests=[]),  # a kit key at the top level
    lambda d: d["tests"][0].update(status="not_run"),  # a status Gradescope does not know
    lambda d: d["tests"][0].pop("max_score"),
    lambda d: d.update(visibility="sometimes"),
    lambda d: d["extra_data"].update(surprise=1),
])
def test_the_schema_refuses_what_gradescope_would_not_read(break_it):
    data = result(t()).to_gradescope_dict()
    break_it(data)
    assert validate(data)


def test_the_schema_is_checked_by_check_jsonschema(tmp_path):
    import subprocess
    import sys

    path = tmp_path / "results.json"
    write_json_atomic(path, result(t(), t(status="not_run", gpu=True)).to_gradescope_dict())
    run = subprocess.run([sys.executable, "-m", "check_jsonschema", "--schemafile", str(SCHEMA), str(path)],
                         capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stdout + run.stderr


def test_atomic_write_keeps_the_old_file_on_failure(tmp_path):
    target = tmp_path / "results.json"
    write_json_atomic(target, {"score": 1})
    with pytest.raises(TypeError):
        write_json_atomic(target, {"score": object()})
    assert json.loads(target.read_text()) == {"score": 1}
    assert [p.name for p in tmp_path.iterdir()] == ["results.json"]


def test_terminal_report_counts_tests_not_run_apart_and_keeps_each_row_on_one_line():
    from rich.console import Console

    from grader.grading.report import print_result

    graded = result(t(), t(status="failed", message="got 3, expected 2 " * 30), t(status="not_run", gpu=True),
                    t(problem="P8", status="error"), isolation={"network": "none (own namespace, root)",
                                                                 "user": "uid 9 (dropped from root)"})
    console = Console(width=80, record=True)
    print_result(graded, console)
    lines = console.export_text().splitlines()
    p1 = next(line for line in lines if "P1 memory" in line)
    assert "1 / 2" in p1 and "1 / 3" not in p1  # 2 tests ran, 1 passed; the one not run is no failure
    assert "got 3, expected 2" in p1 and not any(line.startswith("│ ") and "P1" not in line and "expected 2" in line
                                                 for line in lines)  # the failure does not wrap
    assert "(1 error)" in next(line for line in lines if "P8 amp" in line)
    isolation = [line for line in lines if line.startswith("isolation")]
    assert len(isolation) == 1 and "namespace" not in isolation[0] and "--verbose" in isolation[0]
    assert all(len(line) <= 80 for line in lines)
    console = Console(width=80, record=True)
    print_result(graded, console, verbose=True)
    assert "own namespace" in console.export_text()


def test_junit_has_a_testcase_per_test_with_the_problem_as_class_and_points_as_properties():
    import xml.etree.ElementTree as ET

    from grader.grading.junit import junit_xml

    graded = result(t(), t(status="failed", message="wrong"), t(problem="P8", status="not_run", gpu=True),
                    t(problem="P8", status="error", message="judge died"))
    root = ET.fromstring(junit_xml({"alice": graded, "bob": GradingResult.failed("bob", "unreadable zip")}))
    alice, bob = root.findall("testsuite")
    assert alice.get("name") == "alice" and (alice.get("tests"), alice.get("failures"), alice.get("errors"),
                                             alice.get("skipped")) == ("4", "1", "1", "1")
    cases = alice.findall("testcase")
    assert [c.get("classname") for c in cases] == ["P1", "P1", "P8", "P8"]
    assert [[c.tag for c in case if c.tag != "properties"] for case in cases] == [[], ["failure"], ["skipped"],
                                                                                  ["error"]]
    assert {p.get("name"): p.get("value") for p in cases[1].find("properties")}["points"] == "2"
    assert bob.find("testcase/error").get("message") == "unreadable zip"


@pytest.mark.parametrize("umask, mode", [(0o022, 0o640), (0o002, 0o640), (0o077, 0o600)])
def test_written_files_are_readable_by_the_group_as_the_umask_allows(tmp_path, umask, mode):
    previous = os.umask(umask)
    try:
        write_json_atomic(tmp_path / "results.json", {"score": 1})
    finally:
        os.umask(previous)
    assert (tmp_path / "results.json").stat().st_mode & 0o777 == mode
