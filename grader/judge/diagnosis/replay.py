"""Replaying one test's recorded requests on a known variant, in the judge.

A variant (the reference with one curated mutant applied: kit code, trusted) is imported in
the judge process under a package name of its own and served by the worker's own dispatcher
(``grader.confined.dispatch``). The recorded requests are sent to it in order, handles renumbered
(the worker numbered them over the whole session), and each answer is compared with the
student's (``same``). The judge's global state that replayed library calls could touch (the
random generators, torch's thread count and default dtype) is restored afterwards.
"""

from __future__ import annotations

import copy
import random
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Iterator

import numpy as np
import torch

from ... import wire
from ...paths import PACKAGE
from ..inprocess import Dispatcher, load_package
from ..drivers.answers import same

REQUESTS = {"call", "named", "construct", "call_method", "get_attr", "set_attr", "read", "release", "forbid", "allow",
            "release_memory"}
# Library objects the hidden suites build in the worker that are safe to build in the judge (state restored).
LIBRARY = {"builtins.dict", "builtins.list", "builtins.map", "builtins.set", "builtins.tuple", "builtins.object",
           "builtins.getattr", "itertools.repeat", "operator.attrgetter", "copy.deepcopy", "numpy.array",
           "numpy.random.default_rng", "numpy.random.seed", "torch.arange", "torch.clone", "torch.randn", "torch.manual_seed",
           "torch.nn.Parameter", "torch.nn.MSELoss", "torch.nn.Sequential", "torch.nn.ModuleList", "torch.Tensor.to",
           "torch.optim.SGD", "torch.optim.Optimizer.__instancecheck__"}


class Mismatch(Exception):
    """The variant's answer differs from the student's."""


def unreplayable(exchanges: list[tuple[dict, dict]]) -> str:
    """Why these requests cannot be replayed in the judge ("" when they can)."""
    if not exchanges:
        return "no call was recorded"
    for message, _ in exchanges:
        if message.get("$type") not in REQUESTS:
            return f"a {message.get('$type')!r} request"
        if message.get("library") and message.get("target") not in LIBRARY:
            return f"the library call {message.get('target')}"
    return ""


class Variant:
    """A submission package imported in the judge as ``package`` (kit code only: never a student's)."""

    def __init__(self, folder: Path, package: str) -> None:
        self.folder, self.package = folder, package
        load_package(folder, package)

    def reproduces(self, exchanges: list[tuple[dict, dict]], deadline: float) -> bool:
        """Whether this variant answers every recorded request as the student did (before ``deadline``)."""
        dispatcher = Dispatcher(_NoCallbacks(), str(self.folder), self.package)
        handles: dict[int, int] = {}
        try:
            with judge_state():
                for message, answer in exchanges:
                    if time.monotonic() > deadline:
                        return False
                    _compare(answer, dispatcher.handle(_renumber(message, handles)), handles, self.package)
            return True
        except Mismatch:
            return False
        finally:
            dispatcher._disarm()


class _NoCallbacks:
    """Recordings with callbacks are not replayed (``session.Recording.blocked``)."""

    def announce(self, module: str, starting: bool) -> None:
        pass

    def callback(self, number: int, args: tuple, kwargs: dict) -> Any:
        raise Mismatch("a callback")


def _renumber(message: dict, handles: dict[int, int]) -> dict:
    """The request with the student's handle numbers replaced by the variant's."""
    def walk(value: Any) -> Any:
        if type(value) is list:
            return [walk(item) for item in value]
        if type(value) is dict:
            if value.get("$t") == "ref":
                return {"$t": "ref", "id": _handle(value.get("id"), handles)}
            return {key: walk(item) for key, item in value.items()}
        return value

    request = walk(copy.deepcopy(message))
    if "handle" in request:
        request["handle"] = _handle(request["handle"], handles)
    if "handles" in request:
        request["handles"] = [_handle(number, handles) for number in request["handles"]]
    return request


def _handle(number: Any, handles: dict[int, int]) -> int:
    if number not in handles:
        raise Mismatch(f"handle {number!r} was made before this test")
    return handles[number]


def _compare(student: dict, variant: dict, handles: dict[int, int], package: str) -> None:
    """Raise Mismatch unless the two answers to one request are the same (an object that crossed as an
    ``Opaque``, such as an optimizer returned by value, by its class, named as in the student's package)."""
    if bool(student.get("violations")) != bool(variant.get("violations")) or ("raised" in student) != (
            "raised" in variant):
        raise Mismatch("a different kind of answer")
    try:
        mine, theirs = (wire.decode(student["raised"]), wire.decode(variant["raised"])) if "raised" in student else (
            wire.decode(student.get("value")), wire.decode(variant.get("value")))
    except wire.WireError:
        raise Mismatch("a malformed answer") from None
    if isinstance(theirs, wire.Opaque) and theirs.type.startswith(f"{package}."):
        theirs = wire.Opaque(PACKAGE + theirs.type[len(package):], theirs.repr)
    if isinstance(mine, wire.Ref) and isinstance(theirs, wire.Ref):
        handles[mine.id] = theirs.id
    elif not same(mine, theirs, close=True):
        raise Mismatch("a different value")


@contextmanager
def judge_state() -> Iterator[None]:
    """Keep the judge's random generators, thread count and default dtype as they were."""
    saved = (torch.random.get_rng_state(), np.random.get_state(), random.getstate(), torch.get_num_threads(),
             torch.get_default_dtype())
    try:
        yield
    finally:
        torch.random.set_rng_state(saved[0])
        np.random.set_state(saved[1])
        random.setstate(saved[2])
        torch.set_num_threads(saved[3])
        torch.set_default_dtype(saved[4])
