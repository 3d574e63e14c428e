"""P7's diagnosis by behaviour (grader.judge.diagnosis.checkpoint): a mistake written as a student would is
named by the probe on the tests its behaviour bears on, correct code in another layout and code with two
mistakes are named nothing, and the variants run in the judge leave its generators as they were. In
process (the "student" is kit code here), but for one check through the sandboxed workers grading uses."""

from __future__ import annotations

import ast
import random
from pathlib import Path

import numpy as np
import pytest
import torch

from grader.containment.limits import Limits
from grader.containment.worker import Worker
from grader.grading.submission import stage
from grader.judge import diagnosis, handle as session
from grader.judge.diagnosis import checkpoint
from grader.judge.inprocess import InProcess
from grader.paths import KIT_ROOT
from grader.selfproof import mutants

FIXTURES = KIT_ROOT / "grader" / "tests" / "fixtures"


@pytest.fixture(scope="module")
def diagnoser() -> diagnosis.Diagnoser:
    return diagnosis.Diagnoser()


def staged(folder: Path, *appended: Path) -> Path:
    """The reference staged in ``folder`` with each of ``appended`` added to its checkpoint.py."""
    package = stage(mutants.SOLUTIONS, folder)
    target = package / "checkpoint.py"
    target.write_text("\n\n".join([target.read_text(), *(path.read_text() for path in appended)]))
    return package


def submission(folder: Path, *appended: Path) -> session.Submission:
    """``staged``, served in process."""
    package = staged(folder, *appended)
    return session.Submission(InProcess(package), package)


def named(diagnoser: diagnosis.Diagnoser, sub: session.Submission, test: str = "") -> list[str]:
    return [mistake.id for mistake in diagnoser.diagnose("P7", session.Recording(), 60, sub, test)]


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
    package = staged(tmp_path, FIXTURES / "mistakes" / "p7_checkpoint_python_rng_forgotten.py")
    sub = session.Submission(Worker(package, Limits()), package)
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


def test_every_hidden_p7_test_says_which_observations_bear_on_it(diagnoser):
    """A test added or renamed in the suite, or an observation renamed in the probe, fails here."""
    suite = ast.parse((KIT_ROOT / "grader" / "judge" / "hidden" / "test_p7_checkpoint.py").read_text())
    tests = {node.name for node in suite.body if isinstance(node, ast.FunctionDef) and node.name.startswith("test_")}
    assert tests == set(checkpoint.OBSERVED_BY)
    reference, _ = diagnoser._load("P7")
    assert set().union(*checkpoint.OBSERVED_BY.values()) <= set(diagnoser._signature(reference))


def test_two_mistakes_at_once_are_named_nothing(diagnoser, tmp_path):
    """No single known variant behaves like it: never a guess at one of them."""
    both = [FIXTURES / "mistakes" / name for name in ("p7_checkpoint_direct_torch_save.py",
                                                      "p7_checkpoint_python_rng_forgotten.py")]
    assert named(diagnoser, submission(tmp_path, *both)) == []


def test_the_variants_leave_the_judge_generators_as_they_were(tmp_path):
    fresh = diagnosis.Diagnoser()
    torch.manual_seed(3), np.random.seed(3), random.seed(3)
    before = torch.get_rng_state(), np.random.get_state()[1].copy(), random.getstate()
    reference, variants = fresh._load("P7")
    for variant in (reference, *(variant for _, variant in variants)):
        fresh._signature(variant)
    assert torch.equal(torch.get_rng_state(), before[0]) and (np.random.get_state()[1] == before[1]).all()
    assert random.getstate() == before[2]
