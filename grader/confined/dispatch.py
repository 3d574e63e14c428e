"""The worker's remote-object dispatcher: student objects held by handle, driven by the judge.

The judge sends requests; the dispatcher runs each one next to the submission and answers with
plain data (``wire``). Objects that must stay in the worker (an optimizer, a model, a tensor
whose storage matters) are kept in a table and named by handle (``wire.Ref``); arguments may
name them back. Requests (``$type``):

- ``call``: ``target`` "module.name" of the submission, called with ``args``/``kwargs``;
  ``named``: that object itself (a function to pass on, a class, a module);
- ``construct``: ``target`` a submission name ("optim.SGD") or, with ``library: true``, a
  library callable by qualified name ("torch.nn.Parameter", "builtins.dict"), called;
- ``call_method``: ``method`` of the object ``handle``; ``get_attr`` / ``set_attr``: ``name``
  (``value``); ``read``: the object itself as data; ``release``: drop ``handles``;
- ``forbid`` / ``allow``: arm or disarm tripwires on library names (``names``) that the
  submission must not call while a test runs (``rule`` is the message); a tripped wire raises
  ``DelegationError`` in the submission and is reported with every answer until disarmed.

With ``keep: true`` the result stays here and the answer is its handle. A ``wire.Callback`` in
the arguments becomes a function that asks the judge (``channel.callback``) and returns its
answer. Nothing here decides anything: whatever is answered is the submission's own result.
"""

from __future__ import annotations

import builtins
import ctypes
import importlib
import os
import sys
from types import ModuleType
from typing import Any, Protocol

if __package__:
    from .. import wire
else:  # inside the sandbox, where wire.py is copied beside this file
    import wire

PACKAGE = "assignment"  # grader.paths.PACKAGE: the sandbox imports nothing of the kit (test_layout checks they agree)


class DelegationError(RuntimeError):
    """The submission called a library function that the running test forbids."""


class Channel(Protocol):
    def announce(self, module: str, starting: bool) -> None: ...

    def callback(self, number: int, args: tuple, kwargs: dict) -> Any: ...


# The C library's allocator settings, resolved at import (before the worker refuses ctypes): glibc's mallopt
# parameters, and nothing where the C library has no such functions.
_LIBC = ctypes.CDLL(None)
_MALLOPT, _MALLOC_TRIM = getattr(_LIBC, "mallopt", None), getattr(_LIBC, "malloc_trim", None)
M_TRIM_THRESHOLD, M_MMAP_THRESHOLD = -1, -3
# The events the dispatcher's own code raises while submission code runs (``_by_name``'s ``trusted``): a
# tripwire asks which file called it, and hands nobody the frame; the allocator's fixed calls.
TRUSTED_EVENTS = frozenset({("sys._getframe", __file__, "tripwire"),
                            ("ctypes.call_function", __file__, "_op_release_memory")})


class Dispatcher:
    """The handle table and the request handlers, for one imported submission package."""

    def __init__(self, channel: Channel, folder: str, package: str = PACKAGE) -> None:
        self.channel = channel
        self.folder = os.path.realpath(folder)
        self.package = package
        self.table: dict[int, Any] = {}
        self.next_handle = 0
        self.tripwires: dict[tuple[Any, str], Any] = {}  # (owner, attribute) -> the original
        self.rule = ""
        self.violations: list[str] = []

    # -- requests ------------------------------------------------------------------------------

    def handle(self, message: dict) -> dict:
        """Answer one request; never raises (a student exception is part of the answer)."""
        answer: dict[str, Any] = {"$type": "result", "id": message.get("id")}
        try:
            value = getattr(self, "_op_" + str(message["$type"]))(message)
            if message.get("keep"):
                self.next_handle += 1
                self.table[self.next_handle] = value
                answer["kept"] = _qualname(type(value))
                value = wire.Ref(self.next_handle)
            answer["value"] = wire.encode(value)
        except AttributeError as exc:
            if exc.obj is self:
                exc = ValueError(f"unknown request {message.get('$type')!r}")
            answer["raised"] = wire.encode_exception(exc)
        except BaseException as exc:  # noqa: BLE001 - SystemExit and KeyboardInterrupt from student code too
            answer["raised"] = wire.encode_exception(exc)
        if self.violations:
            answer["violations"] = list(self.violations)
        return answer

    def _arguments(self, message: dict) -> tuple[list, dict]:
        args = self._resolve(wire.decode(message.get("args", [])))
        kwargs = self._resolve(wire.decode(message.get("kwargs", {"$t": "dict", "items": []})))
        return args, kwargs

    def _op_call(self, message: dict) -> Any:
        args, kwargs = self._arguments(message)
        return self.student(message["target"])(*args, **kwargs)

    def _op_named(self, message: dict) -> Any:
        return self.student(message["target"])

    def _op_construct(self, message: dict) -> Any:
        args, kwargs = self._arguments(message)
        factory = library(message["target"]) if message.get("library") else self.student(message["target"])
        return factory(*args, **kwargs)

    def _op_call_method(self, message: dict) -> Any:
        args, kwargs = self._arguments(message)
        return getattr(self.held(message["handle"]), message["method"])(*args, **kwargs)

    def _op_get_attr(self, message: dict) -> Any:
        return getattr(self.held(message["handle"]), message["name"])

    def _op_set_attr(self, message: dict) -> None:
        setattr(self.held(message["handle"]), message["name"], self._resolve(wire.decode(message.get("value"))))

    def _op_read(self, message: dict) -> Any:
        return self.held(message["handle"])

    def _op_release_memory(self, message: dict) -> None:
        """Give the memory the C library holds free back, and map every later allocation of 64 KiB or more on its
        own, so that the resident set follows the objects held (glibc; nothing elsewhere)."""
        if _MALLOPT is not None and _MALLOC_TRIM is not None:
            _MALLOPT(M_MMAP_THRESHOLD, 64 * 1024)
            _MALLOPT(M_TRIM_THRESHOLD, 0)
            _MALLOC_TRIM(0)

    def _op_release(self, message: dict) -> None:
        for number in message.get("handles", []):
            self.table.pop(number, None)

    def _op_forbid(self, message: dict) -> None:
        self._disarm()
        self.rule = str(message.get("rule", "this call is not allowed here"))
        for name in message.get("names", []):
            self._arm(str(name))

    def _op_allow(self, message: dict) -> None:
        self._disarm()

    # -- objects ---------------------------------------------------------------------------------

    def held(self, number: Any) -> Any:
        if type(number) is not int or number not in self.table:
            raise LookupError(f"handle {number!r} is not held here (released, or the worker was restarted)")
        return self.table[number]

    def _resolve(self, value: Any) -> Any:
        """Handles become the objects they name; callbacks become functions that ask the judge."""
        if isinstance(value, wire.Ref):
            return self.held(value.id)
        if isinstance(value, wire.Callback):
            number = value.id
            return lambda *args, **kwargs: self.channel.callback(number, args, kwargs)
        if type(value) is list:
            return [self._resolve(item) for item in value]
        if type(value) is tuple:
            return tuple(self._resolve(item) for item in value)
        if type(value) is dict:
            return {key: self._resolve(item) for key, item in value.items()}
        return value

    def student(self, dotted: str) -> Any:
        """``module.name`` of the submission (the module itself when no name is given)."""
        module_name, _, attribute = dotted.partition(".")
        module = self.student_module(module_name)
        for part in filter(None, attribute.split(".")):
            module = getattr(module, part)
        return module

    def student_module(self, module_name: str) -> ModuleType:
        """Import a module of the submission. A failure is reported as an ImportError naming the
        file as the student sees it, whatever was raised: a module that raises ValueError as it
        is imported does not pass the tests that expect a ValueError from its functions. Before a
        first import the judge is told, so that it can tell a module that ends (or hangs) the
        worker as it is imported."""
        first = f"{self.package}.{module_name}" not in sys.modules
        if first:
            self.channel.announce(module_name, True)
        try:
            module = importlib.import_module(f"{self.package}.{module_name}")
        except BaseException as exc:  # noqa: BLE001 - SystemExit and KeyboardInterrupt at import too
            try:
                detail = f"{type(exc).__name__}: {exc}"
            except BaseException:  # noqa: BLE001 - a hostile __str__
                detail = type(exc).__name__
            raise ImportError(f"importing assignment/{module_name}.py failed: {detail}") from None
        finally:
            if first:
                self.channel.announce(module_name, False)
        return module

    # -- tripwires -------------------------------------------------------------------------------

    def _arm(self, name: str) -> None:
        """Wrap ``name`` (a function, a method "pkg.Class.method", or "torch._foreach_*" for all)."""
        if name.endswith("*"):
            owner_name, _, prefix = name[:-1].rpartition(".")
            owner = library(owner_name)
            for attribute in [a for a in dir(owner) if a.startswith(prefix)]:
                self._wrap(owner, attribute, f"{owner_name}.{attribute}")
            return
        owner_name, _, attribute = name.rpartition(".")
        try:
            owner = library(owner_name)
        except (ImportError, AttributeError):
            return  # not in this torch version
        if hasattr(owner, attribute):
            self._wrap(owner, attribute, name)

    def _wrap(self, owner: Any, attribute: str, name: str) -> None:
        original = owner.__dict__.get(attribute, getattr(owner, attribute)) if isinstance(owner, type) \
            else getattr(owner, attribute)
        if (owner, attribute) in self.tripwires or not callable(original):
            return
        function = original.__func__ if isinstance(original, (staticmethod, classmethod)) else original

        def tripwire(*args: Any, **kwargs: Any) -> Any:
            caller = sys._getframe(1).f_code.co_filename
            mine = args and type(args[0]).__module__.partition(".")[0] == self.package
            if os.path.realpath(caller).startswith(self.folder + os.sep) or mine:
                self.violations.append(f"{name} (called from {os.path.basename(caller)})")
                raise DelegationError(f"{name} was called: {self.rule}")
            return function(*args, **kwargs)

        self.tripwires[(owner, attribute)] = original
        setattr(owner, attribute, type(original)(tripwire) if isinstance(original, (staticmethod, classmethod))
                else tripwire)

    def _disarm(self) -> None:
        for (owner, attribute), original in self.tripwires.items():
            setattr(owner, attribute, original)
        self.tripwires.clear()
        self.violations.clear()
        self.rule = ""


def library(qualified: str) -> Any:
    """A library object by qualified name: the longest importable module prefix, then attributes."""
    parts = qualified.split(".")
    for cut in range(len(parts), 0, -1):
        try:
            value: Any = importlib.import_module(".".join(parts[:cut]))
        except ImportError:
            continue
        for part in parts[cut:]:
            value = getattr(value, part)
        return value
    return getattr(builtins, qualified)


def _qualname(cls: type) -> str:
    return f"{getattr(cls, '__module__', '?')}.{getattr(cls, '__qualname__', '?')}"

