"""P7's diagnosis by behaviour (grader.judge.diagnosis.checkpoint): a mistake written as a student would is
named by the probe on the tests its behaviour bears on, and correct code in another layout and code with two
mistakes are named nothing (what every probe must hold: ``test_diagnosis_probes.py``). In
process (the "student" is kit code here), but for one check through the sandboxed workers grading uses."""

from __future__ import annotations

from pathlib import Path

import pytest

from grader.containment.limits import Limits
from grader.containment.worker import Worker
from grader.judge import diagnosis, handle
from grader.tests.judge import _probes as probes
from grader.tests.judge._probes import FIXTURES


@pytest.fixture(scope="module")
def diagnoser() -> diagnosis.Diagnoser:
    return diagnosis.Diagnoser()


def submission(folder: Path, *appended: Path) -> handle.Submission:
    return probes.submission(folder, "checkpoint", *appended)


def named(diagnoser: diagnosis.Diagnoser, sub: handle.Submission, test: str = "") -> list[str]:
    return probes.named(diagnoser, "P7", sub, test)


@pytest.mark.parametrize("fixture, mistake", [("p7_checkpoint_numpy_rng_forgotten.py", "p7-numpy-rng-not-restored"),
                                              ("p7_checkpoint_tmp_kept_on_error.py", "p7-temp-file-left-on-error")])
def test_a_mistake_written_as_a_student_would_is_named(fixture, mistake, diagnoser, tmp_path):
    """The numpy fixture saves in a layout of its own: each side loads what it saved itself."""
    assert named(diagnoser, submission(tmp_path, FIXTURES / "mistakes" / fixture)) == [mistake]


@pytest.mark.parametrize("alternative", [None, "p7_checkpoint_layout.py", "p7_checkpoint_lenient.py"])
def test_correct_code_is_named_nothing(alternative, diagnoser, tmp_path):
    """The reference, and correct code with other key names, another RNG form and another atomic save."""
    appended = [FIXTURES / "alternatives" / alternative] if alternative else []
    assert named(diagnoser, submission(tmp_path, *appended)) == []


def test_the_student_is_probed_in_sandboxed_workers(diagnoser, tmp_path):
    """The probe's save and load run in two fresh workers of the submission, as grading makes them."""
    package = probes.staged(tmp_path, "checkpoint", FIXTURES / "mistakes" / "p7_checkpoint_python_rng_forgotten.py")
    sub = handle.Submission(Worker(package, Limits()), package)
    try:
        assert named(diagnoser, sub) == ["p7-python-random-not-restored"]
    finally:
        sub.close()


def test_a_mistake_is_named_only_on_the_tests_its_behaviour_bears_on(diagnoser, tmp_path):
    """Python's generator left alone shows in what a load restores, not in which extras a save refuses: a
    failed extras test (another, unprobed mistake of the same code) is not blamed on it."""
    sub = submission(tmp_path, FIXTURES / "mistakes" / "p7_checkpoint_python_rng_forgotten.py")
    assert named(diagnoser, sub, "test_every_rng_state_restored") == ["p7-python-random-not-restored"]
    assert named(diagnoser, sub, "test_unsafe_extras_refused_before_writing") == []


def test_two_mistakes_at_once_are_named_nothing(diagnoser, tmp_path):
    """No single known variant behaves like it: never a guess at one of them."""
    both = [FIXTURES / "mistakes" / name for name in ("p7_checkpoint_direct_torch_save.py",
                                                      "p7_checkpoint_python_rng_forgotten.py")]
    assert named(diagnoser, submission(tmp_path, *both)) == []
