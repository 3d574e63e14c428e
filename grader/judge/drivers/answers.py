"""Whether two answers are the same (the one equality the hidden suites and the diagnosis compare
with), and how an answer is shown in a message.

``same(a, b)`` is equality with the same types all the way down, so that ``(12.0, 4.0, 1.0)``,
``torch.Size([3, 2])`` or ``np.int64(6)`` do not pass for ``(12, 4, 1)``, ``(3, 2)`` or ``6``:
floats and complexes bit for bit (NaN equals NaN, -0.0 differs from 0.0), tensors and arrays by
dtype, shape and bytes, exceptions (``wire.Raised``) by their type, values that do not cross as
data (``wire.Opaque``: a generator, a module) by their type alone. Two options, each for one use:

- ``close``: floats to a relative ``REL`` and floating tensors to ``TENSOR`` (the diagnosis: a
  mistake written another way rounds differently), the sign of a zero still counted;
- ``any_container``: a container's class is free (a dict or an OrderedDict, a list or a tuple, a
  tensor or a Parameter), its contents' types are not (a checkpoint's layout is the submission's).

``same_value(got, want)`` compares as values, whatever the types: an answer is accepted as the
answer to the same call spelled with arguments of another type (``(3.0, 1)`` for ``(3, 1)``).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import torch

from grader import wire

REL = 1e-6  # floats: a mistake written differently may round differently, never by this much
TENSOR = dict(rtol=1e-5, atol=1e-7, equal_nan=True)  # float32 sums taken in another order
_KINDS = (dict, (list, tuple), torch.Tensor)  # the classes any_container lets vary


def same(a: Any, b: Any, *, close: bool = False, any_container: bool = False) -> bool:
    """``a`` and ``b`` are the same answer (see the module's docstring)."""
    rel = REL if close else 0.0
    if any_container and any(isinstance(a, kind) for kind in _KINDS):
        if not any(isinstance(a, kind) and isinstance(b, kind) for kind in _KINDS):
            return False
    elif type(a) is not type(b):
        return False
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(same(a[k], b[k], close=close, any_container=any_container) for k in a)
    if isinstance(a, (list, tuple)):
        return len(a) == len(b) and all(same(x, y, close=close, any_container=any_container) for x, y in zip(a, b))
    if isinstance(a, float):
        return _same_float(a, b, rel)
    if isinstance(a, complex):
        return _same_float(a.real, b.real, rel) and _same_float(a.imag, b.imag, rel)
    if isinstance(a, np.ndarray):
        a, b = torch.from_numpy(a), torch.from_numpy(b)
    if isinstance(a, torch.Tensor):
        return a.dtype == b.dtype and a.shape == b.shape and _same_tensor(a, b, close)
    if isinstance(a, wire.Opaque):
        return a.type == b.type
    if isinstance(a, wire.Raised):
        return a.types[:1] == b.types[:1]
    return bool(a == b)


def same_value(got: Any, want: Any) -> bool:
    """Equal as values, whatever the types: ``(3.0, 1) == (3, 1)``, tuples and lists alike, NaN equals NaN."""
    if isinstance(want, (tuple, list)):
        return isinstance(got, (tuple, list)) and len(got) == len(want) and all(map(same_value, got, want))
    if isinstance(want, dict):
        return isinstance(got, dict) and got.keys() == want.keys() and all(same_value(got[k], want[k]) for k in want)
    if isinstance(want, float) and math.isnan(want):
        return isinstance(got, float) and math.isnan(got)
    try:
        return bool(got == want)
    except Exception:  # noqa: BLE001 - a value that cannot be compared is not the same answer
        return False


def shown(value: Any, limit: int = 200) -> str:
    """A value for a message: an exception as "raised Type: message", anything else as a short repr."""
    text = f"raised {value}" if isinstance(value, wire.Raised) else repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _same_float(a: float, b: float, rel: float) -> bool:
    if math.isnan(a) or math.isnan(b):
        return math.isnan(a) and math.isnan(b)
    if a == 0 or b == 0:
        return a == b and math.copysign(1.0, a) == math.copysign(1.0, b)
    return math.isclose(a, b, rel_tol=rel, abs_tol=0.0)


def _same_tensor(a: torch.Tensor, b: torch.Tensor, close: bool) -> bool:
    """Same dtype and shape given: close values (floating ones, when ``close``), else the same bytes."""
    try:
        if close and (a.dtype.is_floating_point or a.dtype.is_complex):
            wide = torch.complex128 if a.dtype.is_complex else torch.float64
            return bool(torch.allclose(a.to(wide), b.to(wide), **TENSOR))
    except (RuntimeError, TypeError):  # a dtype with no arithmetic (float8 on some builds): its bytes
        pass
    try:
        return torch.equal(_bytes(a), _bytes(b))
    except (RuntimeError, NotImplementedError):  # a tensor with no plain bytes (sparse, quantized...)
        return False


def _bytes(tensor: torch.Tensor) -> torch.Tensor:
    """The tensor's elements as raw bytes (an empty tensor, whose stride may be 0, has none)."""
    flat = tensor.detach().cpu().reshape(-1)
    return flat.view(torch.uint8) if flat.numel() else torch.zeros(0, dtype=torch.uint8)
