"""Diagnosis by behaviour (grader.judge.diagnosis): the answer equality, the replay of a recording on a
known variant, the catalog's sections, and the feedback. In process: no worker is started."""

from __future__ import annotations

import math
import re
from pathlib import Path

import pytest
import torch

from grader.judge import diagnosis, handle
from grader import mistakes
from grader import wire
from grader.judge.inprocess import InProcess
from grader.judge.diagnosis.replay import unreplayable
from grader.judge.drivers import optim as drive
from grader.judge.drivers.answers import same
from grader.submission import stage

HANDOUT = Path(__file__).resolve().parents[3] / "handout.md"


@pytest.mark.parametrize("a, b, equal", [
    (math.nan, math.nan, True), (0.0, -0.0, False), (1.0, 1.0 + 1e-12, True), (1.0, 1.001, False),
    (48, 48.0, False), (True, 1, False), ((1, 2), [1, 2], False), ({"a": 1}, {"a": 1}, True),
    (torch.tensor([1.0, math.nan]), torch.tensor([1.0 + 1e-9, math.nan]), True),
    (torch.tensor([1.0]), torch.tensor([1.0], dtype=torch.float64), False),
    (torch.tensor([1, 2]), torch.tensor([1, 3]), False), (torch.zeros(2, 3), torch.zeros(3, 2), False),
    (wire.Raised(("builtins.ValueError",), "a"), wire.Raised(("builtins.ValueError",), "b"), True),
    (wire.Raised(("builtins.ValueError",), "a"), wire.Raised(("builtins.IndexError",), "a"), False),
    (wire.Opaque("Generator", "<at 0x1>"), wire.Opaque("Generator", "<at 0x2>"), True),
    (wire.Opaque("Generator", "<at 0x1>"), wire.Opaque("Module", "<at 0x1>"), False),
])
def test_answers_are_the_same_behaviour_by_type_value_and_nan(a, b, equal):
    assert same(a, b, close=True) is equal and same(b, a, close=True) is equal


def recorded(package: Path, *calls: tuple) -> handle.Recording:
    """The recording of ``calls`` made on ``package`` in process, as the judge records a test."""
    sub = handle.Submission(InProcess(package), package)
    for target, *args in calls:
        sub.attempt(target, *args)
    return sub.recording


@pytest.fixture(scope="module")
def diagnoser() -> diagnosis.Diagnoser:
    return diagnosis.Diagnoser()


def mutant(identifier: str) -> mistakes.Mutant:
    return next(m for m in mistakes.load() if m.id == identifier)


CALLS = {"P4": [("flops.matmul_flops", 2, 3, 4), ("flops.training_days", 7e9, 1e12, 8, 1e15, 1.0),
                ("flops.backward_flops", 10, 100)],
         "P1": [("memory.decode_float", 0x0001, torch.float16), ("memory.decode_float", 0x8000, torch.float16),
                ("memory.decode_float", 0x7E00, torch.float16)]}


@pytest.mark.parametrize("identifier, problem", [("p4-matmul-missing-factor-2", "P4"),
                                                 ("p4-mfu-bound-excludes-one", "P4"),
                                                 ("p1-subnormal-exponent-off-by-one", "P1"),
                                                 ("p1-negative-zero-lost", "P1")])
def test_a_variant_is_named_by_its_own_behaviour_and_the_reference_by_none(identifier, problem, diagnoser, tmp_path):
    package = mistakes.materialize(mutant(identifier), tmp_path / "mutant")
    found = diagnoser.diagnose(problem, recorded(package, *CALLS[problem]), 60)
    assert [m.id for m in found] == [identifier]
    reference = stage(mistakes.SOLUTIONS, tmp_path / "reference")
    assert diagnoser.diagnose(problem, recorded(reference, *CALLS[problem]), 60) == []


OPTIMIZERS = {"AdaGrad": dict(lr=0.1, eps=0.1, initial_accumulator_value=0.5, weight_decay=0.01),
              "SGD": dict(lr=0.05, momentum=0.9, weight_decay=0.01)}


def driven(package: Path, kind: str) -> handle.Recording:
    """The recording of a P5 trajectory test on ``package`` in process: the optimizer built and stepped by
    handle under the delegation tripwires, as the hidden suite drives it."""
    sub = handle.Submission(InProcess(package), package)
    with sub.forbidding(drive.DELEGATION, drive.DELEGATION_RULE):
        drive.run(drive.WorkerSide(sub), kind, drive.Scenario(shapes=[(3,), (2, 2)], hyper=OPTIMIZERS[kind], steps=8))
    return sub.recording


@pytest.mark.parametrize("identifier, kind", [("p5-adagrad-eps-inside-sqrt", "AdaGrad"),
                                              ("p5-adagrad-ignores-initial-accumulator", "AdaGrad"),
                                              ("p5-adagrad-sum-restarts", "AdaGrad"),
                                              ("p5-sgd-weight-decay-after-momentum", "SGD"),
                                              ("p5-sgd-damped-first-momentum", "SGD"),
                                              ("p5-sgd-momentum-buffer-restarts", "SGD")])
def test_an_optimizer_stepped_by_handle_is_named_by_its_trajectory(identifier, kind, diagnoser, tmp_path):
    originals = (torch.optim.SGD.step, torch.optim.Adagrad.__init__, torch._foreach_add_)
    found = diagnoser.diagnose("P5", driven(mistakes.materialize(mutant(identifier), tmp_path / "mutant"), kind), 60)
    assert [m.id for m in found] == [identifier]
    assert diagnoser.diagnose("P5", driven(stage(mistakes.SOLUTIONS, tmp_path / "reference"), kind), 60) == []
    assert (torch.optim.SGD.step, torch.optim.Adagrad.__init__, torch._foreach_add_) == originals  # tripwires off


def test_calls_that_do_not_tell_the_mistake_apart_name_nothing(diagnoser, tmp_path):
    """The mutant's own bug is not exercised: its answers are the reference's, so nothing explains a failure."""
    package = mistakes.materialize(mutant("p4-matmul-missing-factor-2"), tmp_path / "mutant")
    assert diagnoser.diagnose("P4", recorded(package, ("flops.backward_flops", 10, 100)), 60) == []


def test_a_recording_that_cannot_be_replayed_names_nothing(diagnoser, tmp_path):
    package = mistakes.materialize(mutant("p4-matmul-missing-factor-2"), tmp_path / "mutant")
    recording = recorded(package, *CALLS["P4"])
    recording.block("the source text")
    assert diagnoser.diagnose("P4", recording, 60) == []
    assert diagnoser.diagnose("P4", handle.Recording(), 60) == []
    assert diagnoser.diagnose("P4", recorded(package, *CALLS["P4"]), 0) == []  # no time: nothing known


def test_handles_made_during_the_test_are_renumbered_and_earlier_ones_stop_the_replay(diagnoser, tmp_path):
    package = mistakes.materialize(mutant("p1-subnormal-exponent-off-by-one"), tmp_path / "mutant")
    sub = handle.Submission(InProcess(package), package)
    sub.lib("builtins.list", [1])  # a handle made before the test: the worker's numbers go on from it
    earlier = sub.lib("builtins.list", [2])
    sub.recording = handle.Recording()
    values = sub.lib("builtins.map", sub.named("memory.decode_float"), [1, 0x8000], [torch.float16] * 2)
    assert sub.lib("builtins.list", values).read() == [2.0**-25, -0.0]
    assert [m.id for m in diagnoser.diagnose("P1", sub.recording, 60)] == ["p1-subnormal-exponent-off-by-one"]
    sub.lib("builtins.len", earlier)
    assert diagnoser.diagnose("P1", sub.recording, 60) == []


def test_only_library_calls_safe_in_the_judge_are_replayed():
    call = ({"$type": "construct", "target": "torch.nn.Parameter", "library": True}, {})
    assert unreplayable([call]) == ""
    instance = ({"$type": "construct", "target": "torch.optim.Optimizer.__instancecheck__", "library": True}, {})
    assert unreplayable([call, instance]) == ""  # how the P5 driver asks whether the optimizer is one
    assert "ctypes.CDLL" in unreplayable([call, ({"$type": "construct", "target": "ctypes.CDLL", "library": True}, {})])
    assert unreplayable([]) != "" and unreplayable([({"$type": "callback"}, {})]) != ""


def test_every_known_mistake_has_a_misconception_and_a_handout_section():
    headings = set(re.findall(r"^### (\w+\.\w+)$", HANDOUT.read_text(), re.MULTILINE))
    for problem in ("P1", "P2", "P3", "P4", "P5", "P6", "P7", "P8"):
        for mistake in diagnosis.catalog(problem):
            assert mistake.misconception and mistake.section in headings, mistake


def test_feedback_names_one_mistake_with_its_section_several_by_id_and_none_says_nothing():
    one = diagnosis.Mistake("p9-x", "P9", "adds eps inside the square root", "optim.AdaGrad")
    other = diagnosis.Mistake("p9-y", "P9", "forgets the bias correction", "optim.AdaGrad")
    assert feedback_has(diagnosis.feedback([one]), "p9-x", "adds eps inside the square root", "'optim.AdaGrad'")
    assert feedback_has(diagnosis.feedback([one, other]), "p9-x", "p9-y")
    assert diagnosis.feedback([]) == ""


def feedback_has(text: str, *parts: str) -> bool:
    return all(part in text for part in parts)


def test_an_object_answered_by_value_is_known_by_its_class_whatever_the_package(diagnoser, tmp_path):
    """An optimizer built where it should have raised crosses as an ``Opaque`` named in the student's package
    (``assignment.optim.AdaGrad``); a variant's is named in its own, and still reproduces it."""
    package = stage(mistakes.SOLUTIONS, tmp_path / "student")
    written = Path(__file__).parents[1] / "fixtures" / "blind_mistakes" / "p5_optim_adagrad_eps_unchecked.py"
    (package / "optim.py").write_text((package / "optim.py").read_text() + "\n\n" + written.read_text())
    sub = handle.Submission(InProcess(package), package)
    assert isinstance(sub.attempt("optim.AdaGrad", [torch.zeros(2)], eps=-1.0), wire.Opaque)
    assert [m.id for m in diagnoser.diagnose("P5", sub.recording, 60)] == ["p5-adagrad-no-eps-validation"]
