"""P8's diagnosis by behaviour (grader.judge.diagnosis.amp): mistakes written as a student would are named by
the probe, on the tests their behaviour bears on; the reference and correct code written otherwise are named
nothing. In process (the "student" is kit code here), but for one check through the sandboxed worker
grading uses."""

from __future__ import annotations

import pytest

from grader import mistakes
from grader.containment.limits import Limits
from grader.containment.worker import Worker
from grader.judge import diagnosis, handle
from grader.judge.inprocess import InProcess
from grader.tests.judge import _probes as probes
from grader.tests.judge._probes import FIXTURES

MISTAKES = FIXTURES / "mistakes"


@pytest.fixture(scope="module")
def diagnoser() -> diagnosis.Diagnoser:
    return diagnosis.Diagnoser()


@pytest.mark.parametrize("fixture, mistake", [("p8_amp_clip_before_unscale.py", "p8-clip-before-unscale"),
                                              ("p8_amp_no_scaler_update.py", "p8-missing-scaler-update"),
                                              ("p8_amp_grads_zeroed.py", "p8-zero-grad-keeps-tensors")])
def test_a_mistake_written_as_a_student_would_is_named(fixture, mistake, diagnoser, tmp_path):
    sub = probes.submission(tmp_path, "amp", MISTAKES / fixture)
    assert probes.named(diagnoser, "P8", sub) == [mistake]


@pytest.mark.parametrize("identifier, test", [
    ("p8-clip-first-param-group", "test_clipping_is_applied_to_unscaled_gradients"),
    ("p8-skipped-on-non-finite-grads-without-scaler", "test_non_finite_gradient_skips_the_step")])
def test_a_mistake_shown_only_without_a_scaler_or_with_two_groups_is_named(identifier, test, diagnoser, tmp_path):
    """Clipping the first param group only, and a step without a scaler called skipped on an inf gradient:
    the probe clips an optimizer of two param groups and poisons a step without a scaler."""
    found = next(m for m in mistakes.load() if m.id == identifier)
    package = mistakes.materialize(found, tmp_path / "mutant")
    assert probes.named(diagnoser, "P8", handle.Submission(InProcess(package), package), test) == [identifier]


@pytest.mark.parametrize("alternative", [None, "p8_amp.py", "p8_amp_lenient.py"])
def test_correct_code_is_named_nothing(alternative, diagnoser, tmp_path):
    """The reference, and correct code that autocasts with enabled=False, tells a skipped step by a step hook,
    clips with clip_grads_with_norm_ and checks train's count by value."""
    appended = [FIXTURES / "alternatives" / alternative] if alternative else []
    assert probes.named(diagnoser, "P8", probes.submission(tmp_path, "amp", *appended)) == []


def test_the_student_is_probed_in_a_sandboxed_worker(diagnoser, tmp_path):
    """The probe runs in a fresh worker of the submission, as grading makes it."""
    package = probes.staged(tmp_path, "amp", MISTAKES / "p8_amp_scaled_loss.py")
    sub = handle.Submission(Worker(package, Limits()), package)
    try:
        assert probes.named(diagnoser, "P8", sub) == ["p8-scaled-loss-reported"]
    finally:
        sub.close()


def test_checkpointing_skipped_is_named_by_the_memory_it_keeps(diagnoser, tmp_path):
    """Blocks run plainly under enabled=True give the right values and gradients: only the memory kept for
    backward, measured from outside the sandboxed worker as the hidden test measures it, tells the mistake
    (written by a student-like author who never read the catalog: fixtures/blind_mistakes)."""
    package = probes.staged(tmp_path, "amp", FIXTURES / "blind_mistakes" / "p8_amp_checkpoint_ignored.py")
    sub = handle.Submission(Worker(package, Limits()), package)
    try:
        assert probes.named(diagnoser, "P8", sub, "test_checkpointed_keeps_only_block_inputs") == [
            "p8-checkpoint-ignored"]
        assert probes.named(diagnoser, "P8", sub, "test_fp32_step_matches_a_manual_step") == []
    finally:
        sub.close()


def test_a_mistake_is_named_only_on_the_tests_its_behaviour_bears_on(diagnoser, tmp_path):
    """A loss computed outside autocast shows only in a loss that is a matmul: a failed clipping test
    (another, unprobed mistake of the same code) is not blamed on it."""
    sub = probes.submission(tmp_path, "amp", MISTAKES / "p8_amp_loss_outside_autocast.py")
    assert probes.named(diagnoser, "P8", sub, "test_autocast_follows_precision_and_batch_device") == [
        "p8-loss-outside-autocast"]
    assert probes.named(diagnoser, "P8", sub, "test_clipping_is_applied_to_unscaled_gradients") == []


def test_two_mistakes_at_once_are_named_nothing(diagnoser, tmp_path):
    """The scaled loss reported and the scaler never updated: no single known variant behaves like that."""
    source = (MISTAKES / "p8_amp_no_scaler_update.py").read_text()
    both = tmp_path / "both.py"
    both.write_text(source.replace("        scaler.scale(loss).backward()", "        loss = scaler.scale(loss)\n        loss.backward()"))
    assert both.read_text() != source
    assert probes.named(diagnoser, "P8", probes.submission(tmp_path / "package", "amp", both)) == []
