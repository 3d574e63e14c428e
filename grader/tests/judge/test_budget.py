"""The per-submission budget is a wall for the whole grading, start-up included, and shared among
the problems so that a problem that stalls spends only its own share (``grader.judge.budget``)."""

from __future__ import annotations

import json
import math
import shutil
import subprocess
import sys
import time
from pathlib import Path
from types import SimpleNamespace

import pytest

from grader.judge import budget as budgets
from grader import wire
from grader.judge.budget import Budget
from grader.grading.grade import grade
from grader.problems import MODULES
from grader.judge.handle import OutOfTime, Submission

KIT = Path(__file__).resolve().parents[3]
STALL = '''import time


def __getattr__(name):
    def stall(*args, **kwargs):
        time.sleep(3600)
    return stall
'''
SLOW = '''


def _slow(function):
    import functools
    import time

    @functools.wraps(function)
    def slow(*args, **kwargs):
        time.sleep(@SECONDS@)
        return function(*args, **kwargs)
    return slow


tensor_memory_bytes = _slow(tensor_memory_bytes)
'''  # what a slow loop in a student's memory.py looks like to the judge


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
    from grader.grading import grade

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


def slow_reference(folder: Path, seconds: float) -> Path:
    """The reference whose ``memory.tensor_memory_bytes`` (P1) sleeps ``seconds`` per call, then answers right."""
    package = folder / "assignment"
    shutil.copytree(KIT / "solutions", package, ignore=shutil.ignore_patterns("__pycache__"))
    with open(package / "memory.py", "a") as stream:
        stream.write(SLOW.replace("@SECONDS@", repr(seconds)))
    return folder


@pytest.mark.slow
@pytest.mark.parametrize("jobs", [1, 2])  # judge sessions [P1, P2, P3], or [P1, P3] and [P2]
def test_a_problem_that_stalls_spends_only_its_own_share_of_the_budget(tmp_path, jobs):
    budget = 90  # P3's share at 60 s was too short on a loaded 2-core CI machine (its tests went unjudged)
    result = grade(slow_reference(tmp_path, 0.5), problems=["P1", "P2", "P3"], jobs=jobs, gpu="off",
                   budget_seconds=budget, call_seconds=5, profile="ci")
    assert result.execution_time <= budget and not result.error
    tests = {key: [t for t in result.tests if t.problem == key] for key in ("P1", "P2", "P3")}
    for key in ("P2", "P3"):  # correct, and never call the slow function: full marks
        assert all(t.status == "passed" for t in tests[key]), [(t.name, t.message) for t in tests[key]]
    lost = [t for t in tests["P1"] if t.status != "passed"]  # not judged in P1's share, and saying so
    assert lost and all(t.status == "failed" and "P1 used up its time budget" in t.message for t in lost), \
        [(t.name, t.status, t.message) for t in lost]
    assert tests["P1"][0].status == "passed"  # judged before the stall: its verdict stands
    assert any("P1 used up its share of the time budget" in note for note in result.notes)


@pytest.fixture
def clock(monkeypatch) -> SimpleNamespace:
    """The budget's clock, set by hand (``clock.now``, in seconds)."""
    clock = SimpleNamespace(now=0.0)
    monkeypatch.setattr(budgets, "time", SimpleNamespace(monotonic=lambda: clock.now))
    return clock


def test_each_problem_gets_an_equal_share_of_the_time_left_and_hands_on_what_it_leaves(clock):
    budget = Budget(80)
    budget.start("P1", later=3)
    assert budget.left() == 20 and not budget.spent()
    clock.now = 5  # P1 took 5 of its 20 s
    budget.start("P2", later=2)
    assert budget.left() == 25  # (80 - 5) / 3
    clock.now = 30
    assert budget.spent() and budget.why() == "P2 used up its time budget (25 s)"
    budget.start("P2", later=2)  # its next test: the same share
    assert budget.spent()
    budget.start("P3", later=1)
    assert budget.left() == 25  # (80 - 30) / 2
    clock.now = 31
    budget.start("P4", later=0)
    assert budget.left() == 49  # the last one gets all that is left


def test_without_a_budget_no_problem_runs_out_of_time(clock):
    budget = Budget()
    budget.start("P1", later=7)
    clock.now = 1e9
    assert budget.left() == math.inf and not budget.spent()


class Recording:
    """A backend that answers every request with None and keeps the type of each message it was sent."""

    isolation: dict[str, str] = {}
    import_error = None
    restarts = 0

    def __init__(self) -> None:
        self.sent: list[str] = []

    def request(self, message: dict, timeout: float, on_callback=None) -> dict:
        self.sent.append(message["$type"])
        return {"$type": "result", "id": message["id"], "value": wire.encode(None)}

    def worker_pid(self) -> int:
        return 1


def test_a_problem_out_of_time_inside_the_delegation_check_still_disarms_it(clock):
    budget = Budget(10)
    budget.start("P5", later=1)
    sub = Submission(Recording(), KIT, budget)
    with pytest.raises(OutOfTime, match="P5 used up its time budget"):
        with sub.forbidding(["torch.optim.SGD.step"], "no delegation"):
            clock.now = 6  # past P5's 5 s
            sub.call("optim.step")
    assert sub.backend.sent == ["forbid", "allow"]
    budget.start("P6", later=0)
    assert sub.call("data.get_batch") is None and sub.backend.sent[-1] == "call"


def test_the_judge_s_own_time_goes_back_to_the_problem(monkeypatch):
    """Naming a known mistake after a failure is the judge's work: its time is given back to the problem's
    slice (never past the session's end)."""
    clock = [100.0]
    monkeypatch.setattr("grader.judge.budget.time.monotonic", lambda: clock[0])
    budget = Budget(100.0)
    budget.start("P1", later=1)  # a slice of 50 s: until 150
    clock[0] = 140.0
    budget.give_back(30.0)
    assert budget.left() == 40.0
    budget.give_back(1000.0)
    assert budget.deadline == budget.end == 200.0
