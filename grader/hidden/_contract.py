"""The problem set's plain types: shapes, strides, offsets, indices and counts are Python ints.

``plain_equal(got, want)`` is ``got == want`` with the same type all the way down, so that
``(12.0, 4.0, 1.0)``, ``torch.Size([3, 2])`` or ``np.int64(6)`` do not pass for ``(12, 4, 1)``,
``(3, 2)`` or ``6``. The public tests apply the same rule (``tests/_kit.py``, ``check_equal``).
"""

from __future__ import annotations

from typing import Any


def plain_equal(got: Any, want: Any) -> bool:
    """Equal values of exactly the same types, elementwise inside tuples, lists and dicts."""
    if type(got) is not type(want):
        return False
    if isinstance(want, (tuple, list)):
        return len(got) == len(want) and all(plain_equal(g, w) for g, w in zip(got, want))
    if isinstance(want, dict):
        return got.keys() == want.keys() and all(plain_equal(got[k], want[k]) for k in want)
    return bool(got == want)


def type_tree(value: Any) -> str:
    """The types inside a value, for messages: ``tuple[float, float]``."""
    if isinstance(value, (tuple, list)):
        return f"{type(value).__name__}[{', '.join(type_tree(v) for v in value)}]"
    return type(value).__name__
