"""Probes for P1 (memory.py): decode many bit patterns in one round trip."""

from __future__ import annotations

from types import ModuleType

import torch


def decode_patterns(memory: ModuleType, dtype: torch.dtype, patterns: list[int]) -> list:
    """``memory.decode_float(bits, dtype)`` for each pattern, in order.

    Stops at the first exception and returns it in place of its value (the judge reports it).
    """
    values = []
    for bits in patterns:
        try:
            values.append(memory.decode_float(bits, dtype))
        except Exception as exc:  # noqa: BLE001 - the student's exception is the answer
            values.append(exc)
            break
    return values
