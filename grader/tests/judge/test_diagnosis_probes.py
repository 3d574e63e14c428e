"""What every probe (grader.judge.diagnosis.PROBES: P7's checkpoint, P8's amp) must hold: each hidden test of
its problem says which observations bear on it, and running the variants in the judge leaves the judge's
generators as they were."""

from __future__ import annotations

import ast
import random

import numpy as np
import pytest
import torch

from grader.judge import diagnosis
from grader.paths import KIT_ROOT
from grader.problems import suite_file


@pytest.mark.parametrize("problem", sorted(diagnosis.PROBES))
def test_every_hidden_test_says_which_observations_bear_on_it(problem):
    """A test added or renamed in the suite, or an observation renamed in the probe, fails here."""
    prober = diagnosis.PROBES[problem]
    suite = ast.parse((KIT_ROOT / "grader" / "judge" / "hidden" / suite_file(problem)).read_text())
    tests = {node.name for node in suite.body if isinstance(node, ast.FunctionDef) and node.name.startswith("test_")}
    assert tests == set(prober.OBSERVED_BY)
    fresh = diagnosis.Diagnoser()
    reference, _ = fresh._load(problem)
    assert set().union(*prober.OBSERVED_BY.values()) <= set(fresh._signature(problem, reference))


@pytest.mark.parametrize("problem", sorted(diagnosis.PROBES))
def test_the_variants_leave_the_judge_generators_as_they_were(problem):
    fresh = diagnosis.Diagnoser()
    torch.manual_seed(3), np.random.seed(3), random.seed(3)
    before = torch.get_rng_state(), np.random.get_state()[1].copy(), random.getstate()
    reference, variants = fresh._load(problem)
    for variant in (reference, *(variant for _, variant in variants)):
        fresh._signature(problem, variant)
    assert torch.equal(torch.get_rng_state(), before[0]) and (np.random.get_state()[1] == before[1]).all()
    assert random.getstate() == before[2]
