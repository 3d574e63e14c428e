"""Eager processes skip importing ``torch._dynamo`` until something compiles.

``torch.optim``'s constructors and steps and ``torch.utils.checkpoint`` import ``torch._dynamo`` on their
first call, about a CPU-second, only to mark themselves as not to be traced (``disable``), to end a traced
graph (``graph_break``) or to read one setting (``config``): outside ``torch.compile`` the first two do
nothing. The judge, the worker and the public tests run eagerly, so each calls ``install`` before any such
call. ``Deferred`` then stands for ``torch._dynamo``: it answers ``graph_break``, ``is_compiling`` and
``disable`` the way eager mode does and ``config`` by importing that submodule alone. The first use of
anything else (an attribute, a ``from torch._dynamo import ...`` of another name, an import of a
submodule: a submission that compiles, say) imports the real module in its place, at the point where it
would have been imported without ``Deferred``; the functions ``disable`` had answered then ask the real
module on their next call.
"""

from __future__ import annotations

import builtins
import functools
import importlib
import importlib.util
import sys
import threading
import types
from typing import Any, Callable

NAME = "torch._dynamo"
CONFIG = f"{NAME}.config"  # the one submodule imported alone, without the package's __init__
ANSWERED = frozenset({"graph_break", "is_compiling", "disable", "config"})
_import = builtins.__import__
_loading = threading.RLock()  # a submission's threads may ask for it at once


class Deferred(types.ModuleType):
    """Stands for ``torch._dynamo`` until a name it does not answer is asked of it."""

    def __init__(self) -> None:
        super().__init__(NAME, __doc__)
        spec = importlib.util.find_spec(NAME)
        self.__path__ = list(spec.submodule_search_locations or []) if spec else []  # for CONFIG
        self.answered: list[Callable] = []  # the functions ``disable`` gave themselves back

    def graph_break(self) -> None:
        """Eager mode has no graph to break."""

    def is_compiling(self) -> bool:
        return False

    def disable(self, fn: Callable | None = None, recursive: bool = True, **options: Any) -> Callable:
        """``fn`` itself: nothing traces it. ``torch._compile._disable_dynamo`` keeps the answer on ``fn`` as
        ``__dynamo_disable``; ``load_real`` takes it off again."""
        if fn is None:
            return functools.partial(self.disable, recursive=recursive, **options)
        self.answered.append(fn)
        return fn

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)
        if name == "config":
            return importlib.import_module(CONFIG)
        return getattr(load_real(), name)


def _importing(name: str, globals: Any = None, locals: Any = None, fromlist: Any = (), level: int = 0) -> Any:
    """``import``: the real ``torch._dynamo`` first wherever more than ``Deferred`` answers is imported."""
    if level == 0 and (name == NAME and any(item not in ANSWERED for item in fromlist or ())
                       or name.startswith(NAME + ".") and name != CONFIG):
        load_real()
    return _import(name, globals, locals, fromlist, level)


def install() -> None:
    """Put ``Deferred`` in place of ``torch._dynamo``, unless the real module is loaded already."""
    import torch

    if NAME not in sys.modules:
        sys.modules[NAME] = torch._dynamo = Deferred()
        builtins.__import__ = _importing


def load_real() -> types.ModuleType:
    """The real ``torch._dynamo``, imported in place of ``Deferred`` if it stands there."""
    import torch

    with _loading:
        deferred = sys.modules.get(NAME)
        if not isinstance(deferred, Deferred):
            return importlib.import_module(NAME)
        if builtins.__import__ is _importing:
            builtins.__import__ = _import
        del sys.modules[NAME], torch._dynamo
        for fn in deferred.answered:
            fn.__dict__.pop("__dynamo_disable", None)
        real = importlib.import_module(NAME)
        if CONFIG in sys.modules:  # imported alone for ``Deferred``
            real.config = sys.modules[CONFIG]
        return real
