"""A judge-local object with the interface of ``session.Remote``, for oracles.

A driver written once against ``call``/``get``/``set``/``read`` runs the same sequence on an
object the worker holds (the submission's answer) and on a local torch object (the oracle).
"""

from __future__ import annotations

from typing import Any

import torch


class Local:
    """Wraps a judge-side object; ``keep`` is accepted and ignored (everything stays here)."""

    def __init__(self, value: Any) -> None:
        self.value = value

    def call(self, method: str, *args: Any, keep: bool = False, **kwargs: Any) -> Any:
        result = getattr(self.value, method)(*_unwrap(args), **_unwrap(kwargs))
        return Local(result) if keep else _copy(result)

    def get(self, name: str, keep: bool = False) -> Any:
        result = getattr(self.value, name)
        return Local(result) if keep else _copy(result)

    def set(self, name: str, value: Any) -> None:
        setattr(self.value, name, _unwrap(value))

    def read(self) -> Any:
        return _copy(self.value)


def _unwrap(value: Any) -> Any:
    if isinstance(value, Local):
        return value.value
    if type(value) in (list, tuple):
        return type(value)(_unwrap(item) for item in value)
    if type(value) is dict:
        return {key: _unwrap(item) for key, item in value.items()}
    return value


def _copy(value: Any) -> Any:
    """What the wire would give: tensors as detached CPU copies (no shared storage, no grad)."""
    if isinstance(value, torch.Tensor):
        return value.detach().to("cpu").clone()
    if type(value) in (list, tuple):
        return type(value)(_copy(item) for item in value)
    if type(value) is dict:
        return {key: _copy(item) for key, item in value.items()}
    return value
