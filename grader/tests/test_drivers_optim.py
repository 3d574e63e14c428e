"""P5's judge-side driver (grader/drivers/optim.py): the source scan follows computed names,
mismatch messages locate the difference, hints name a mistake only when it matches, and the
judge-side adapter returns copies as the wire does."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from grader.drivers.local import Local
from grader.drivers import optim as drive

KIT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("code", [
    'getattr(torch.optim, "S" + "GD")',
    'NAME = "Ada" + "grad"\nOTHER = NAME\ngetattr(torch.optim, OTHER)',
    'getattr(torch.optim, f"{\'S\'}GD")',
    'getattr(torch.optim, "DGS"[::-1])',
    'getattr(torch.optim, "sgd".upper())',
    'getattr(torch, "_foreach_" + "add_")',
    'importlib.import_module("torch.optim." + "sgd")',
    '__import__(".".join(["torch", "optim", "adagrad"]))',
    'importlib.reload(module)',
    'vars(torch.optim)["S" + "GD"]',
    'sys.modules["torch.optim.sgd"]',
    'eval("torch.optim." + "SGD")',
    'from torch.optim.sgd import sgd',
    'import torch.optim.adagrad',
    'torch.optim.SGD(params)',
    'torch._foreach_mul_(params, 0.9)',
])
def test_the_scan_finds_delegation_through_computed_names(code):
    assert drive.shortcuts(code), code


@pytest.mark.parametrize("code", [
    'getattr(group, "lr")',
    'name = "S"\nname = name + "GD"\ngetattr(torch.optim, name)',  # assigned twice: not a constant
    'class SGD(torch.optim.Optimizer):\n    """Unlike torch.optim.SGD, mine."""',
])
def test_the_scan_leaves_ordinary_code_alone(code):
    assert drive.shortcuts(code) == []


@pytest.mark.parametrize("package", ["solutions", "assignment"])
def test_the_reference_and_the_stubs_pass_the_scan(package):
    assert drive.shortcuts((KIT / package / "optim.py").read_text()) == []


def test_a_mismatch_names_the_step_the_parameter_the_index_and_both_values():
    want = [torch.zeros(3, 2, 2)]
    got = [want[0].clone()]
    got[0][2, 1, 0] = 0.5
    message = drive.mismatch(got, want, "torch.optim.SGD")
    assert message.startswith("after step 2, parameter 0[1, 0] is 0.5, torch.optim.SGD gives 0.0")
    assert drive.mismatch(want, [w.clone() for w in want], "torch.optim.SGD") is None


SCENARIO = drive.Scenario(shapes=[(3,), (2, 2)], hyper=dict(lr=0.1, momentum=0.9, weight_decay=0.05), steps=6, seed=4)


@pytest.mark.parametrize("mistake", drive.MISTAKES["SGD"])
def test_a_hint_names_the_mistake_a_trajectory_matches(mistake):
    side = drive.Judge({"SGD": lambda spec, **hyper: drive._Mistaken(spec, "SGD", mistake, **hyper)})
    mistaken = drive.run(side, "SGD", SCENARIO)
    assert drive.known_mistake(mistaken, "SGD", SCENARIO) == f" Hint: this matches {mistake}."


def test_no_hint_for_a_trajectory_that_matches_no_known_mistake():
    correct = drive.run(drive.Judge(), "SGD", SCENARIO)
    assert drive.known_mistake(correct, "SGD", SCENARIO) == ""
    correct.params = [p + 1e-3 for p in correct.params]
    assert drive.known_mistake(correct, "SGD", SCENARIO) == ""


def test_the_judge_side_returns_copies_as_the_wire_does():
    parameter = Local(torch.nn.Parameter(torch.ones(2)))
    value = parameter.read()
    value.add_(1)
    assert torch.equal(parameter.read(), torch.ones(2)) and not value.requires_grad
    state = Local({"buffer": torch.zeros(2)}).call("get", "buffer")
    assert torch.equal(state, torch.zeros(2))
