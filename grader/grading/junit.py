"""JUnit XML of graded submissions, so that a CI system shows a grading as it shows any test run.

One ``testsuite`` per submission (named after it), one ``testcase`` per hidden test: the problem
(``P1``) is its class name, its points and score are properties; a failed test is a
``failure``, a test the grader could not judge an ``error``, a test not run ``skipped``. A
grading that could not complete is one ``Autograder failed`` testcase with an ``error``.
"""

from __future__ import annotations

import xml.etree.ElementTree as ET

from .results import FAILED_ENTRY, GradingResult, TestResult

OUTCOME_ELEMENT = {"failed": "failure", "error": "error", "not_run": "skipped"}


def _testcase(suite: ET.Element, test: TestResult) -> None:
    case = ET.SubElement(suite, "testcase", classname=test.problem, name=test.name, time=f"{test.duration:.3f}")
    properties = ET.SubElement(case, "properties")
    for name, value in (("points", test.points), ("score", test.score), ("nodeid", test.nodeid)):
        ET.SubElement(properties, "property", name=name, value=value if isinstance(value, str) else f"{value:g}")
    if test.status in OUTCOME_ELEMENT:
        first = test.message.splitlines()[0] if test.message else test.status
        ET.SubElement(case, OUTCOME_ELEMENT[test.status], message=first[:500]).text = test.message


def _suite(parent: ET.Element, name: str, result: GradingResult) -> None:
    count = {status: sum(t.status == status for t in result.tests) for status in OUTCOME_ELEMENT}
    suite = ET.SubElement(parent, "testsuite", name=name, tests=str(len(result.tests) + bool(result.error)),
                          failures=str(count["failed"]), errors=str(count["error"] + bool(result.error)),
                          skipped=str(count["not_run"]), time=f"{result.execution_time:.2f}")
    properties = ET.SubElement(suite, "properties")
    for key, value in (("score", result.score), ("max_score", result.max_score)):
        ET.SubElement(properties, "property", name=key, value=f"{value:g}")
    if result.error:
        case = ET.SubElement(suite, "testcase", classname="grader", name=FAILED_ENTRY, time="0")
        ET.SubElement(case, "error", message=result.error.splitlines()[0][:500] if result.error else "").text = \
            result.error
    for test in result.tests:
        _testcase(suite, test)


def junit_xml(results: dict[str, GradingResult]) -> bytes:
    """The JUnit XML document of ``results`` (suite name -> result), suites in the given order."""
    root = ET.Element("testsuites", name="grader")
    for name, result in results.items():
        _suite(root, name, result)
    ET.indent(root)
    return ET.tostring(root, encoding="utf-8", xml_declaration=True) + b"\n"
