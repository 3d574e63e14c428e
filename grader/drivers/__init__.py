"""Judge-side drivers of stateful problems: the loops, inputs and oracles of the hidden suites.

A driver runs in the judge. It drives the submission's objects in the worker through handles
(``session.Remote``) and, where PyTorch has the answer, the very same code drives PyTorch's
objects in the judge through ``Local``, a wrapper with the Remote's methods, so both sides get
identical inputs and call sequences. Nothing here is ever copied into the worker.
"""

from __future__ import annotations

from typing import Any, Callable

import torch


class Local:
    """A judge-side object driven like a ``Remote``: ``call``, ``get``, ``set``, ``read``.

    Results come back as copies (tensors detached and cloned to the CPU, containers rebuilt),
    as a worker's results do, unless ``keep=True`` wraps them for further driving."""

    def __init__(self, obj: Any) -> None:
        self.obj = obj

    def __repr__(self) -> str:
        return f"<{type(self.obj).__name__} in the judge>"

    def call(self, method: str, *args: Any, keep: bool = False, **kwargs: Any) -> Any:
        result = getattr(self.obj, method)(*unwrap(args), **unwrap(kwargs))
        return Local(result) if keep else copy(result)

    def get(self, name: str, keep: bool = False) -> Any:
        value = getattr(self.obj, name)
        return Local(value) if keep else copy(value)

    def set(self, name: str, value: Any) -> None:
        setattr(self.obj, name, unwrap(value))

    def read(self) -> Any:
        return copy(self.obj)

    def release(self) -> None:
        pass


def unwrap(value: Any) -> Any:
    """``Local`` wrappers inside a value become the objects they hold."""
    return _rebuild(value, lambda item: item.obj if isinstance(item, Local) else item)


def copy(value: Any) -> Any:
    """A value as it would cross the wire: tensors as detached CPU clones, containers rebuilt."""
    return _rebuild(value, lambda item: item.detach().to("cpu").clone() if isinstance(item, torch.Tensor) else item)


def _rebuild(value: Any, leaf: Callable[[Any], Any]) -> Any:
    """``value`` with lists, tuples and dicts rebuilt (dicts as plain dicts) and ``leaf`` applied to the rest."""
    if isinstance(value, list):
        return [_rebuild(item, leaf) for item in value]
    if isinstance(value, tuple):
        return tuple(_rebuild(item, leaf) for item in value)
    if isinstance(value, dict):
        return {key: _rebuild(item, leaf) for key, item in value.items()}
    return leaf(value)
