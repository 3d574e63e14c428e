"""The one equality of the hidden suites: exact by default, loose on containers for checkpoints."""

from __future__ import annotations

import math
from collections import OrderedDict

import numpy as np
import pytest
import torch

from grader.judge.drivers.answers import same, same_value


@pytest.mark.parametrize("a, b, equal", [
    ((12, 4, 1), (12, 4, 1), True), ((12.0, 4.0, 1.0), (12, 4, 1), False), (torch.Size([3, 2]), (3, 2), False),
    (np.int64(6), 6, False), (True, 1, False), ((1, 2), [1, 2], False), (math.nan, math.nan, True),
    (0.0, -0.0, False), (1.0, 1.0 + 1e-12, False), (complex(1, math.nan), complex(1, math.nan), True),
    (torch.tensor([1.0, math.nan]), torch.tensor([1.0, math.nan]), True),
    (torch.tensor([0.0]), torch.tensor([-0.0]), False), (torch.tensor([1.0]), torch.tensor([1.0 + 1e-7]), False),
    (torch.zeros(0, 3), torch.zeros(0, 3), True), (torch.zeros(0, 3), torch.zeros(3, 0), False),
    (np.array([1, 2]), np.array([1, 2]), True), (np.array([1, 2]), np.array([1, 3]), False),
    ({"a": torch.ones(2)}, OrderedDict(a=torch.ones(2)), False),
])
def test_exact_is_by_type_and_bits(a, b, equal):
    assert same(a, b) is equal and same(b, a) is equal


@pytest.mark.parametrize("want, got, loose, exact", [
    ({"w": torch.ones(2)}, OrderedDict(w=torch.ones(2)), True, False), ([1, (2, 3)], (1, [2, 3]), True, False),
    ({"w": torch.ones(2)}, {"w": torch.nn.Parameter(torch.ones(2))}, True, False),
    ({"w": torch.ones(2)}, {"w": torch.ones(2, dtype=torch.float64)}, False, False), ([1, 2], [1, 2.0], False, False),
    ({"w": [1]}, {"w": 1}, False, False), ([0.0], [-0.0], False, False), ({"w": (1, 2.5)}, {"w": (1, 2.5)}, True, True),
])
def test_any_container_frees_only_the_containers_class(want, got, loose, exact):
    assert same(want, got, any_container=True) is loose and same(want, got) is exact


@pytest.mark.parametrize("got, want, equal", [
    ((3.0, 1), (3, 1), True), ([3, 1], (3, 1), True), (math.nan, math.nan, True), ({"a": 1.0}, {"a": 1}, True),
    ((3, 2), (3, 1), False), (torch.ones(2), (1.0, 1.0), False), (None, 0, False),
])
def test_same_value_ignores_types(got, want, equal):
    assert same_value(got, want) is equal
