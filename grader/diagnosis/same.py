"""Whether two answers are the same behaviour: the equality a diagnosis compares answers with.

Values are decoded wire data (``grader.wire``). Numbers and containers by type and value,
floats NaN-aware, with the sign of a zero, and to a relative 1e-6 (a mistake written another
way rounds differently); tensors and arrays by dtype, shape and values (close for floating
ones, NaN equal to NaN); exceptions by their type; values that do not cross as data (``Opaque``:
a generator, a module) by their type alone, the only thing of them the judge can act on.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import torch

from .. import wire

REL = 1e-6  # floats: a mistake written differently may round differently, never by this much
TENSOR = dict(rtol=1e-5, atol=1e-7, equal_nan=True)  # float32 sums taken in another order


def same(a: Any, b: Any) -> bool:
    """``a`` and ``b`` are the same answer (see the module's docstring)."""
    if type(a) is not type(b):
        return False
    if isinstance(a, wire.Opaque):
        return a.type == b.type
    if isinstance(a, float):
        return _same_float(a, b)
    if isinstance(a, complex):
        return _same_float(a.real, b.real) and _same_float(a.imag, b.imag)
    if isinstance(a, (list, tuple)):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b))
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(same(a[key], b[key]) for key in a)
    if isinstance(a, torch.Tensor):
        return a.dtype == b.dtype and a.shape == b.shape and _same_tensor(a, b)
    if isinstance(a, np.ndarray):
        return a.dtype == b.dtype and a.shape == b.shape and _same_tensor(torch.from_numpy(a), torch.from_numpy(b))
    if isinstance(a, wire.Raised):
        return a.types[:1] == b.types[:1]
    return bool(a == b)


def _same_float(a: float, b: float) -> bool:
    if math.isnan(a) or math.isnan(b):
        return math.isnan(a) and math.isnan(b)
    if a == 0 or b == 0:
        return a == b and math.copysign(1.0, a) == math.copysign(1.0, b)
    return math.isclose(a, b, rel_tol=REL)


def _same_tensor(a: torch.Tensor, b: torch.Tensor) -> bool:
    if a.dtype.is_floating_point or a.dtype.is_complex:
        try:
            return bool(torch.allclose(a.to(torch.complex128 if a.dtype.is_complex else torch.float64),
                                       b.to(torch.complex128 if b.dtype.is_complex else torch.float64), **TENSOR))
        except (RuntimeError, TypeError):  # a dtype with no arithmetic (float8 on some builds): bits
            return torch.equal(a.view(torch.uint8), b.view(torch.uint8))
    return torch.equal(a, b)
