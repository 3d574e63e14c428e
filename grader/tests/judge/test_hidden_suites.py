"""The hidden suites' bookkeeping: points per problem, names, independence, and the mutant catalog."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

from grader import mistakes
from grader.problems import PROBLEMS
from grader.selfproof.selfcheck import independence_violations
from grader.options import GradingOptions

IN_PROCESS = GradingOptions(in_process=True, profile="ci").to_json()  # the judge runs the submission in process

KIT = Path(__file__).resolve().parents[3]
HIDDEN = KIT / "grader" / "judge" / "hidden"


@pytest.fixture(scope="module")
def collected(tmp_path_factory) -> list[dict]:
    report = tmp_path_factory.mktemp("co") / "judge-report.json"
    run = subprocess.run([sys.executable, "-m", "pytest", str(HIDDEN), "-p", "grader.judge.plugin", "--co", "-q",
                          "-c", str(HIDDEN / "pytest.ini"), "--submission", str(KIT / "solutions"), "--grading-options", IN_PROCESS,
                          "--judge-report", str(report)], cwd=KIT, capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-2000:]
    return json.loads(report.read_text())["tests"]


def test_points_per_problem_match_the_problem_set(collected):
    points = Counter()
    for record in collected:
        points[record["problem"]] += record["points"]
    assert dict(points) == {key: problem.points for key, problem in PROBLEMS.items()}


def test_every_hidden_test_has_a_readable_name(collected):
    unnamed = [o["nodeid"] for o in collected if o["name"].startswith("test_")]
    assert not unnamed, f"hidden tests without a one-line docstring: {unnamed}"


def test_problems_are_independent():
    assert independence_violations() == []


def test_mutant_catalog_applies_cleanly_and_covers_every_problem():
    catalog = mistakes.load()
    per_problem = Counter(m.problem for m in catalog)
    assert len(catalog) >= 40 and all(per_problem[key] >= 4 for key in PROBLEMS), dict(per_problem)
    for mutant in catalog:
        source = (KIT / "solutions" / f"{mutant.module}.py").read_text()
        mutated = mutant.apply(source)
        assert mutated != source
        compile(mutated, f"{mutant.id}.py", "exec")


def test_a_falsifying_example_shows_the_values_the_test_used(tmp_path):
    """P5's skipped-parameter test draws the momentum and weight decay it runs with (none overridden after the
    draw): the optimizer its message names is the one in hypothesis's failing test case."""
    from grader.grading.grade import grade

    mutant = next(m for m in mistakes.load() if m.id == "p5-sgd-none-grad-as-zero")
    result = grade(mistakes.materialize(mutant, tmp_path), problems=["P5"], profile="ci", diagnose=False,
                   in_process=True, rules=("P5.skip-none-grad",))
    [failed] = [t for t in result.tests if t.status == "failed"]
    told, case = re.split(r"Failing (?:test case|explicit example)", failed.message, maxsplit=1)  # drawn or @example
    hyper = dict(re.findall(r"(lr|momentum|weight_decay)=([\d.e-]+)", told))
    drawn = dict(re.findall(r"'(lr|momentum|weight_decay)': ([\d.e-]+)", case))
    assert hyper and hyper == drawn, failed.message
