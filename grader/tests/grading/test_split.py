"""``grader grade --jobs J`` groups the problems by their expected wall time (``Problem.seconds``): each
suite once, in order within its group after the problems graded in a worker of their own (P5: its worker
ends before the shared one starts), and no group much longer than its share (taking them in turn put P4
and P2, P6, P8 together: 60% of the time in one of two sessions). A grading of more than one session forks them
from a warm judge of its own (one import of the judge's libraries, one worker template), unless a batch's
serves it."""

from __future__ import annotations

import contextlib
from pathlib import Path

import pytest

from grader.grading import grade, judges
from grader.grading.grade import split
from grader.paths import KIT_ROOT
from grader.problems import PROBLEMS, suite_file, suite_problem

FILES = [Path("/hidden", suite_file(key)) for key in PROBLEMS]


def seconds(group: list[Path]) -> float:
    return sum(PROBLEMS[suite_problem(file.name)].seconds for file in group)


@pytest.mark.parametrize("jobs", [1, 2, 3, 8, 20])
def test_each_suite_once_in_order(jobs):
    groups = split(FILES, jobs)
    assert len(groups) == min(jobs, len(FILES))
    assert sorted(file for group in groups for file in group) == sorted(FILES)
    for group in groups:
        own = [file for file in group if PROBLEMS[suite_problem(file.name)].own_worker]
        assert group == own + sorted((file for file in group if file not in own), key=FILES.index)


def test_a_problem_with_a_worker_of_its_own_comes_first():
    own = [file for file in FILES if PROBLEMS[suite_problem(file.name)].own_worker]
    assert own, "no problem is graded in a worker of its own"
    (group,) = split(FILES, 1)
    assert group[: len(own)] == own


def test_two_sessions_share_the_time():
    total = seconds(FILES)
    assert max(map(seconds, split(FILES, 2))) <= 0.55 * total


def test_a_file_of_no_problem_counts_as_short():
    other = Path("/hidden/test_extra.py")
    groups = split([*FILES, other], 2)
    assert sum(other in group for group in groups) == 1


@pytest.mark.parametrize("jobs, batch, warm", [(2, False, True), (1, False, False), (2, True, False)])
def test_a_grading_of_several_sessions_forks_them_from_a_warm_judge_of_its_own(jobs, batch, warm, monkeypatch):
    open_blocks, runs = [], []

    @contextlib.contextmanager
    def warm_block():
        open_blocks.append(True)
        yield
        open_blocks.pop()

    monkeypatch.setattr(judges, "warm", warm_block)
    monkeypatch.setattr(grade, "_run_judges", lambda groups, *rest: runs.append((len(groups), bool(open_blocks))) or [])
    if batch:
        monkeypatch.setenv(judges.SHARED, "/a/batch/warm/judge/socket")
    else:
        monkeypatch.delenv(judges.SHARED, raising=False)
    grade.grade(KIT_ROOT / "solutions", jobs=jobs, problems=["P2", "P3"])
    assert runs == [(jobs, warm)] and not open_blocks
