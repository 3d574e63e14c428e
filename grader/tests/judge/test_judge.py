"""The judge/worker machinery end to end, on a miniature hidden suite and a doctored reference."""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

import pytest
import torch

from grader.grading.grade import grade

KIT = Path(__file__).resolve().parents[3]
HIDDEN = Path(__file__).resolve().parents[1] / "fixtures" / "hidden"
MISBEHAVING = '''

def spin():
    while True:
        pass


def leave():
    import os
    os._exit(0)


def crash():
    import os
    import signal
    os.kill(os.getpid(), signal.SIGSEGV)
'''


@pytest.fixture(scope="module")
def doctored(tmp_path_factory) -> Path:
    """The reference, with three functions that loop, exit and crash added to memory.py."""
    package = tmp_path_factory.mktemp("sub") / "assignment"
    shutil.copytree(KIT / "solutions", package, ignore=shutil.ignore_patterns("__pycache__"))
    with open(package / "memory.py", "a") as stream:
        stream.write(MISBEHAVING)
    return package.parent


@pytest.fixture(scope="module")
def graded(doctored):
    return grade(doctored, hidden=HIDDEN, call_seconds=3, profile="ci", jobs=2)


def named(result, name):
    return next(t for t in result.tests if t.nodeid.endswith(f"::{name}"))


@pytest.mark.parametrize("name", ["test_pure", "test_probe", "test_raises", "test_after", "test_tensor"])
def test_every_kind_of_call_is_judged(graded, name):
    test = named(graded, name)
    assert test.status == "passed", test.message


@pytest.mark.parametrize("name, why", [("test_spin", "time limit"), ("test_leave", "died"),
                                       ("test_crash", "SIGSEGV")])
def test_misbehaviour_fails_only_its_own_test(graded, name, why):
    test = named(graded, name)
    assert test.status == "failed" and why in test.message, test.message


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the CPU-only behaviour")
def test_gpu_tests_are_not_run_and_the_grade_is_provisional(graded):
    test = named(graded, "test_gpu")
    assert test.status == "not_run" and "needs a GPU" in test.message
    assert graded.provisional
    assert graded.problems()["P1"].not_run == 1


def test_a_test_this_host_cannot_grade_says_why_and_leaves_the_grade_final(graded):
    test = named(graded, "test_unmeasurable")
    assert (test.status, test.message) == ("not_run", "not run: this host cannot make the measurement the test needs")
    assert graded.not_measurable_here() == [test]


def test_scores_and_isolation_are_reported(graded):
    assert graded.score == 6 and graded.max_score == 11
    assert graded.problems()["P3"].score == 2
    assert graded.isolation.get("network", "").startswith("none") or sys.platform != "linux"
    assert "user" in graded.isolation


def test_in_process_mode_gives_the_same_verdicts_on_safe_calls(doctored):
    result = grade(doctored, hidden=HIDDEN, in_process=True, profile="ci", problems=["P3"])
    assert [t.status for t in result.tests] == ["passed", "not_run"]
    assert "UNSAFE" in result.isolation["mode"]
