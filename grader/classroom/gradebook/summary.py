"""The gradebook's text files: the CSV (a max-points row first) and the Markdown summary."""

from __future__ import annotations

import csv
import io
import statistics
from collections import defaultdict
from collections.abc import Sequence
from typing import NamedTuple

from ...problems import PROBLEMS, TOTAL_POINTS
from ..similarity.pairs import Review, grouped
from .inputs import Change
from .late import UNKNOWN
from ...grading.results import TestResult, stub_function
from .records import COLUMNS, MAX_ROW, NO_RESULT, NOT_IN_ROSTER, Record, number

MOST_FAILED = 10
OUTCOMES = ("passed", "failed", "not_attempted", "error", "not_run")  # not attempted: failed on a stub


def csv_text(records: list[Record]) -> str:
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(COLUMNS)
    writer.writerow(MAX_ROW)
    writer.writerows(record.row() for record in records)
    return buffer.getvalue()


def counts(records: list[Record]) -> dict[str, int]:
    return {status: sum(r.status == status for r in records) for status in ("graded", "error", "missing")}


def totals(records: list[Record]) -> list[float]:
    """The totals the statistics and the histogram describe: graded rows only (error and missing rows are 0)."""
    return [r.total for r in records if r.status == "graded"]


def summary_text(records: list[Record], gaps: list[str], changes: list[Change],
                 reviews: Sequence[Review] = ()) -> str:
    graded = [r for r in records if r.status == "graded"]
    count = counts(records)
    lines = ["# Gradebook summary", "",
             f"{len(records)} students: {count['graded']} graded, {count['error']} errors, "
             f"{count['missing']} missing; {sum(r.provisional for r in graded)} provisional (GPU tests not run); "
             f"{len(changes)} overrides."]
    if graded:
        scores = totals(records)
        lines += ["", f"Totals of the graded rows: mean {statistics.fmean(scores):.2f}, median "
                      f"{number(statistics.median(scores))}, min {number(min(scores))}, max {number(max(scores))} "
                      f"(out of {TOTAL_POINTS}); error and missing rows are 0 in the CSV and left out here."]
    lines += ["", "## Per problem", "", "Mean % and tests passed both leave tests not run (GPU tests without a GPU) out.",
              "", "| problem | graded | mean | max points | mean % | tests passed | tests not run |",
              "|---|---:|---:|---:|---:|---:|---:|"]
    lines += [f"| {m.key} {m.module} | {m.graded} | {m.mean:.2f} | {m.points} | {m.percent} | {m.rate} | {m.not_run} |"
              for m in problem_means(graded)]
    lines += _tests_section([r for r in records if r.tests])
    lines += _mistakes_section([r for r in records if r.tests])
    lines += _problem_rows(records, gaps, changes)
    lines += _reviews_section(reviews)
    return "\n".join(lines) + "\n"


class ProblemMean(NamedTuple):
    """One problem over the graded rows; ``percent`` and ``rate`` both leave tests not run out."""

    key: str
    module: str
    graded: int  # rows graded on it
    mean: float  # mean score
    points: int
    percent: str  # the scores' share of the points of the tests that ran ("-" when none ran)
    rate: str  # tests passed / tests run
    not_run: int  # tests not run (GPU tests without a GPU), over every row


def problem_means(graded: list[Record]) -> list[ProblemMean]:
    """Each problem some row was graded on, in order."""
    found = []
    for index, (key, problem) in enumerate(PROBLEMS.items()):
        rows = [r for r in graded if r.problems[index] is not None]
        if rows:
            tests = [t for r in rows for t in r.tests if t.problem == key]
            ran = sum(t.points for t in tests if t.status != "not_run")
            scores = [r.problems[index] or 0.0 for r in rows]
            outcomes = {o: sum(t.status == o for t in tests) for o in ("passed", "failed", "not_run")}
            found.append(ProblemMean(key, problem.module, len(rows), statistics.fmean(scores), problem.points,
                                     f"{100 * sum(scores) / ran:.1f}" if ran else "-", pass_rate(outcomes),
                                     outcomes["not_run"]))
    return found


def outcome(test: TestResult) -> str:
    """The test's status, but ``not_attempted`` for a failure on a function still a stub."""
    return "not_attempted" if test.status == "failed" and stub_function(test.message) else test.status


def tally_tests(judged: list[Record]) -> dict[str, dict[str, int]]:
    """Each test (``"P3 name"``, in problem order) and how many rows it passed, failed (a wrong answer), did
    not attempt (a stub), errored or did not run."""
    tally: dict[tuple[int, str], dict[str, int]] = defaultdict(lambda: dict.fromkeys(OUTCOMES, 0))
    order = {key: i for i, key in enumerate(PROBLEMS)}
    for record in judged:
        for test in record.tests:
            tally[(order.get(test.problem, len(order)), f"{test.problem} {test.name}")][outcome(test)] += 1
    return {name: counts for (_, name), counts in sorted(tally.items())}


def most_failed(tally: dict[str, dict[str, int]]) -> list[tuple[str, int]]:
    """The ``MOST_FAILED`` tests failed by the most rows: (test, how many)."""
    failed = sorted(((name, c["failed"]) for name, c in tally.items() if c["failed"]), key=lambda x: (-x[1], x[0]))
    return failed[:MOST_FAILED]


def pass_rate(counts: dict[str, int]) -> str:
    ran = counts["passed"] + counts["failed"] + counts.get("not_attempted", 0)
    return f"{100 * counts['passed'] / ran:.1f}%" if ran else "-"


def _tests_section(judged: list[Record]) -> list[str]:
    """Pass rate per test (passed / run) and the tests most often answered wrong (a stub is not attempted, not
    wrong), over every row with tests."""
    tally = tally_tests(judged)
    lines = ["", "## Pass rate per test", "", "| test | passed | failed | not attempted | error | not run | pass rate |",
             "|---|---:|---:|---:|---:|---:|---:|"]
    for name, n in tally.items():
        lines.append(f"| {_cell(name)} | {n['passed']} | {n['failed']} | {n['not_attempted']} | {n['error']} | "
                     f"{n['not_run']} | {pass_rate(n)} |")
    lines += ["", f"## Most often failed, stubs left out (top {MOST_FAILED})", ""]
    lines += [f"{i}. {_cell(name)}: failed by {n} of {len(judged)}" for i, (name, n) in
              enumerate(most_failed(tally), 1)] or ["No test failed."]
    return lines


def known_mistakes(judged: list[Record]) -> list[tuple[str, str, list[str]]]:
    """(problem, mistake, the students) for each known mistake a failed test named (``grader.judge.diagnosis``),
    in problem order, the most common first."""
    students: dict[tuple[str, str], set[str]] = defaultdict(set)
    for record in judged:
        for test in record.tests:
            for mistake in test.mistakes:
                students[(test.problem, mistake)].add(record.student)
    order = {key: i for i, key in enumerate(PROBLEMS)}
    ranked = sorted(students.items(), key=lambda item: (order.get(item[0][0], len(order)), -len(item[1]), item[0][1]))
    return [(problem, mistake, sorted(who)) for (problem, mistake), who in ranked]


def _mistakes_section(judged: list[Record]) -> list[str]:
    """Per problem, how many students a failed test of theirs named each known mistake."""
    mistakes = known_mistakes(judged)
    if not mistakes:
        return ["", "## Known mistakes", "", "No failed test matched a known mistake."]
    return ["", "## Known mistakes (students whose failed tests behave like each)", "",
            "| problem | mistake | students |", "|---|---|---:|"] + [
        f"| {problem} | {_cell(mistake)} | {len(who)} |" for problem, mistake, who in mistakes]


def _problem_rows(records: list[Record], gaps: list[str], changes: list[Change]) -> list[str]:
    """Sections for what needs the instructor: errors, missing results, students not in the roster, overrides."""
    lines = []
    errors = [r for r in records if r.status == "error"]
    if errors:
        lines += ["", "## Errors (0 points: look at the logs, fix, re-run the batch with --retry-errors)", "",
                  "| student | reason |", "|---|---|"]
        lines += [f"| {_cell(r.student)} | {_cell(r.reason[:300])} |" for r in errors]
    missing = [r for r in records if r.status == "missing"]
    if missing or gaps:
        lines += ["", "## Missing (0 points)", ""]
        lines += [f"- {r.student}: {r.reason}" for r in missing]
        lines += [f"- {gap}: no batch.json found (its results were not merged)" for gap in gaps]
    late = [r for r in records if (r.late and r.late.days) or UNKNOWN in r.notes]
    if late:
        lines += ["", "## Late", "", "| student | days late | free days | penalty | note |", "|---|---:|---:|---:|---|"]
        lines += [f"| {_cell(r.student)} | {r.late.days} | {r.late.free} | {number(r.late.penalty)} | "
                  f"{_cell(r.late.reason)} |" if r.late else f"| {_cell(r.student)} | ? | | | {UNKNOWN} |" for r in late]
    unlisted = [r.student for r in records if NOT_IN_ROSTER in r.notes]
    if unlisted:
        lines += ["", "## Not in the roster (graded all the same: check the student ids)", ""]
        lines += [f"- {student}" for student in unlisted]
    if changes:
        lines += ["", "## Overrides", "", "| student | what | from | to | reason |", "|---|---|---:|---:|---|"]
        lines += [f"| {_cell(c.student)} | {_cell(c.item)} | {number(c.before)} | {number(c.after)} | {_cell(c.reason)} |"
                  for c in changes]
    return lines


def _reviews_section(reviews: Sequence[Review]) -> list[str]:
    """The clusters ``grader similarity`` flagged: to look at, never a grade change."""
    if not reviews:
        return []
    return ["", "## To review: submissions that look alike (grader similarity; no grade was changed)", "",
            "| cluster | submissions | pairs | best score |", "|---:|---|---:|---:|"] + [
        f"| {c.number} | {_cell(', '.join(c.names))} | {c.pairs} | {c.best:.2f} |" for c in grouped(list(reviews))]


def incomplete(records: list[Record], gaps: list[str]) -> list[str]:
    """What makes the gradebook incomplete (exit status 1): results a batch lost, shards, unknown students,
    late students whose lateness is unknown."""
    lost = sum(r.reason == NO_RESULT for r in records)
    unlisted = sum(NOT_IN_ROSTER in r.notes for r in records)
    unknown = sum(UNKNOWN in r.notes for r in records)
    return ([f"{lost} students without a result"] * bool(lost) + gaps
            + [f"{unlisted} submissions not in the roster"] * bool(unlisted)
            + [f"{unknown} late students without a submission time (days_late in the late file)"] * bool(unknown))


def _cell(text: str) -> str:
    return " ".join(text.split()).replace("|", "\\|")
