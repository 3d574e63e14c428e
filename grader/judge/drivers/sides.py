"""The judge's side: objects built here and driven with the interface of ``handle.Remote``.

A recipe written once against a ``Side`` (``lib``) and its ``Handle``s (``call``/``get``/``read``)
runs the same sequence on objects the worker holds (side: the ``handle.Submission``) and on
objects built in the judge (side: ``JUDGE``, handles: ``Local``), for oracles.
"""

from __future__ import annotations

import contextlib
from pydoc import locate
from typing import Any, Callable, Iterator, Protocol

import numpy as np
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


class Handle(Protocol):
    """What a recipe needs of an object: ``handle.Remote`` in the worker, ``Local`` in the judge."""

    def call(self, method: str, *args: Any, keep: bool = False, **kwargs: Any) -> Any: ...

    def get(self, name: str, keep: bool = False) -> Any: ...

    def read(self) -> Any: ...


class Side(Protocol):
    """Where ``lib`` builds library objects: a ``handle.Submission`` (in the worker) or ``JUDGE``."""

    def lib(self, target: str, *args: Any, **kwargs: Any) -> Handle: ...


class JudgeLibrary:
    """Builds library objects in the judge: the oracle's side."""

    def lib(self, target: str, *args: Any, **kwargs: Any) -> Local:
        factory = locate(target)
        if not callable(factory):
            raise LookupError(f"no library callable {target!r}")
        return Local(factory(*unwrap(args), **unwrap(kwargs)))


JUDGE = JudgeLibrary()


@contextlib.contextmanager
def one_thread(side: Side) -> Iterator[None]:
    """Torch on one intra-op thread on ``side``, then as before: small ops run many times faster so on
    a busy machine, CPU timings stop jumping with descheduled sibling threads, and both sides of a
    comparison reduce in the same order."""
    from ..handle import StudentError

    threads = side.lib("torch.get_num_threads").read()
    side.lib("torch.set_num_threads", 1)
    try:
        yield
    finally:
        with contextlib.suppress(StudentError):  # a worker that died has nothing to put back
            side.lib("torch.set_num_threads", threads)


def unwrap(value: Any) -> Any:
    """``Local`` wrappers inside a value become the objects they hold."""
    return _rebuild(value, lambda item: item.obj if isinstance(item, Local) else item)


def copy(value: Any) -> Any:
    """A value as it would cross the wire: tensors as detached CPU clones, containers rebuilt."""
    return _rebuild(value, _copied)


def _copied(item: Any) -> Any:
    if isinstance(item, torch.Tensor):
        return item.detach().to("cpu").clone()
    return item.copy() if isinstance(item, np.ndarray) else item


def _rebuild(value: Any, leaf: Callable[[Any], Any]) -> Any:
    """``value`` with lists, tuples and dicts rebuilt (dicts as plain dicts) and ``leaf`` applied to the rest."""
    if isinstance(value, list):
        return [_rebuild(item, leaf) for item in value]
    if isinstance(value, tuple):
        return tuple(_rebuild(item, leaf) for item in value)
    if isinstance(value, dict):
        return {key: _rebuild(item, leaf) for key, item in value.items()}
    return leaf(value)
