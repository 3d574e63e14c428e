"""The per-submission budget is a wall for the whole grading, start-up included."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

from grader.problems import MODULES

KIT = Path(__file__).resolve().parents[2]
STALL = '''import time


def __getattr__(name):
    def stall(*args, **kwargs):
        time.sleep(3600)
    return stall
'''


def test_a_submission_whose_every_call_stalls_is_reported_before_the_budget_ends(tmp_path):
    package = tmp_path / "stalling" / "assignment"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text("")
    for module in MODULES:
        (package / f"{module}.py").write_text(STALL)
    out, budget = tmp_path / "results.json", 20
    started = time.monotonic()
    run = subprocess.run([sys.executable, "-m", "grader", "grade", str(package.parent), "--out", str(out),
                          "--budget-seconds", str(budget), "--call-seconds", "5", "--profile", "ci"],
                         cwd=KIT, capture_output=True, text=True, timeout=10 * budget)
    elapsed = time.monotonic() - started
    assert run.returncode == 0, run.stderr[-2000:]
    data = json.loads(out.read_text())
    # The budget counts from the grader's start (after the interpreter has imported it, which takes
    # seconds more on a loaded machine): the grader's own clock must stay within it.
    assert data["execution_time"] <= budget, f"graded in {data['execution_time']} s, past its {budget} s budget"
    assert elapsed < budget + 15, f"the whole command took {elapsed:.1f} s for a {budget} s budget"
    assert data["score"] == 0 and data["tests"] and "time budget" in data["output"]
    assert "0 / 100" in run.stdout


def test_judges_that_outlive_their_own_budget_are_stopped_at_the_wall(tmp_path, monkeypatch):
    from grader import grade

    package = tmp_path / "stalling" / "assignment"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package / "memory.py").write_text(STALL)
    monkeypatch.setattr(grade, "_judge_budget", lambda left, call: 3600.0)  # a judge that never gives up
    started = time.monotonic()
    result = grade.grade(package.parent, problems=["P1"], budget_seconds=12, call_seconds=5, profile="ci")
    assert time.monotonic() - started < 12
    assert [(t.problem, t.status, t.message) for t in result.tests] == [("P1", "failed", grade.BUDGET_MESSAGE)]
    assert result.score == 0 and result.max_score == 12 and any("time budget" in n for n in result.notes)
