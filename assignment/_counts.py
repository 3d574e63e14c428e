"""A helper given to every module: validate a count such as a batch size or 70e9 parameters."""

from __future__ import annotations

import math
import numbers


def as_count(value: object, name: str) -> int:
    """``value`` as a non-negative int; whole-number floats (``70e9``) are accepted.

    Raises ValueError for bools, negatives, non-whole or non-finite numbers and non-numbers.
    """
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise ValueError(f"{name} must be a whole number, got {value!r}")
    if isinstance(value, numbers.Integral):
        count = int(value)
    elif math.isfinite(float(value)) and float(value).is_integer():
        count = int(float(value))
    else:
        raise ValueError(f"{name} must be a whole number, got {value!r}")
    if count < 0:
        raise ValueError(f"{name} must be non-negative, got {value!r}")
    return count
