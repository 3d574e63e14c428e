"""The judge's report crossing into grading: one JSON shape, read back exactly, another version refused."""

from __future__ import annotations

import json

import pytest

from grader.grading import grade
from grader.record import NOT_JUDGED, VERSION, JudgeReport, RecordError, TestRecord


def report() -> JudgeReport:
    return JudgeReport(complete=True, isolation={"namespaces": "user, pid"}, tests=[
        TestRecord("P1", "memory", "sizes", 12.0, "passed", duration=0.5, nodeid="a"),
        TestRecord("P4", "flops", "counts", 3.0, "failed", message="off by 2x", nodeid="b", mistakes=["p4-madds"])])


def test_a_report_reads_back_as_written():
    assert JudgeReport.from_json(report().to_json()) == report()


@pytest.mark.parametrize("change, reason", [
    (lambda d: d.update(version=VERSION + 1), f"reads version {VERSION}"),
    (lambda d: d.pop("record"), "not a judge report"),
    (lambda d: d["tests"][0].update(status="skipped"), "is not one of"),
    (lambda d: d["tests"][0].update(points="12"), "TestRecord.points: expected float"),
    (lambda d: d["tests"][0].update(passed=True), "unknown field passed"),
    (lambda d: d["tests"][1].pop("status"), "no field status"),
    (lambda d: d.update(complete="yes"), "JudgeReport.complete: expected bool"),
])
def test_anything_but_a_report_of_this_version_is_refused_saying_why(change, reason):
    data = json.loads(report().to_json())
    change(data)
    with pytest.raises(RecordError, match=reason):
        JudgeReport.from_json(json.dumps(data))


def test_a_session_whose_report_is_of_another_version_earns_nothing(tmp_path):
    data = json.loads(report().to_json())
    data["version"] = VERSION + 1
    (tmp_path / "judge-report.json").write_text(json.dumps(data))
    (tmp_path / "judge.log").write_text("")
    files = [tmp_path / "test_p1_memory.py", tmp_path / "test_p4_flops.py"]
    session = grade._session_report(1, files, tmp_path / "judge-report.json", tmp_path / "judge.log")
    assert {(t.status, t.message) for t in session.tests} == {("error", NOT_JUDGED)}
    assert "P1, P4 failed" in session.failed and f"reads version {VERSION}" in session.failed
