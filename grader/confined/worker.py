"""The untrusted worker's entry point: import the submission, then answer the judge's requests.

Copied into the sandbox beside ``wire.py`` and ``dispatch.py``. Frames go over two pipes (never
stdin/stdout). Each request gets one answer frame from the dispatcher; while a request runs,
the submission may call a judge callback (``wire.Callback``): the worker then sends a
``callback`` frame and serves the judge's nested requests until the judge's ``return`` frame.
Nothing it answers is trusted, and nothing else it does (printing, writing files, exiting)
reaches the grade.
"""

from __future__ import annotations

import gc
import importlib.util
import os
import sys
from pathlib import Path
from types import ModuleType
from typing import Any, BinaryIO, Sequence

if __package__:
    from .. import deferred_dynamo, wire
    from ..public import public_module
    from .dispatch import PACKAGE, TRUSTED_EVENTS, Dispatcher
    from .kernels import withhold

    by_name = public_module("_by_name.py")
else:  # inside the sandbox, where wire.py, deferred_dynamo.py, dispatch.py, kernels.py and _by_name.py are copied beside this file
    import _by_name as by_name
    import deferred_dynamo
    import wire
    from dispatch import PACKAGE, TRUSTED_EVENTS, Dispatcher
    from kernels import withhold


KIT = os.path.dirname(os.path.abspath(__file__))  # where the worker's modules were imported from
OWN = frozenset(name[:-3] for name in os.listdir(KIT) if name.endswith(".py"))  # the names they are imported by


class CallbackFailed(RuntimeError):
    """A judge callback raised (or the judge answered it with something other than a return)."""


def load_package(folder: Path, name: str = PACKAGE) -> ModuleType:
    """Import the submission folder as package ``name`` (replacing any earlier one)."""
    for key in [k for k in sys.modules if k == name or k.startswith(name + ".")]:
        del sys.modules[key]
    init = folder / "__init__.py"
    spec = importlib.util.spec_from_file_location(name, init, submodule_search_locations=[str(folder)])
    assert spec is not None and spec.loader is not None
    package = importlib.util.module_from_spec(spec)
    sys.modules[name] = package
    spec.loader.exec_module(package)
    return package


class PipeChannel:
    """The dispatcher's way back to the judge over the answer pipe."""

    def __init__(self, requests: BinaryIO, responses: BinaryIO) -> None:
        self.requests, self.responses = requests, responses
        self.dispatcher: Dispatcher | None = None

    def announce(self, module: str, starting: bool) -> None:
        wire.write_frame(self.responses, {"$type": "importing" if starting else "imported", "module": module})

    def callback(self, number: int, args: tuple, kwargs: dict) -> Any:
        wire.write_frame(self.responses, {"$type": "callback", "callback": number, "args": wire.encode(list(args)),
                                          "kwargs": wire.encode(kwargs)})
        while True:
            message = self.next_request()
            if message is None:
                raise SystemExit(0)  # the judge went away
            if message["$type"] == "return":
                if "raised" in message:
                    raise CallbackFailed(str(wire.decode(message["raised"])))
                return wire.decode(message.get("value"))
            wire.write_frame(self.responses, self.dispatcher.handle(message))

    def next_request(self) -> dict | None:
        return wire.read_frame(self.requests)


def _leave_the_import_path() -> None:
    """The worker's own modules are no module of the submission's: their folder leaves ``sys.path`` and they
    leave ``sys.modules`` (the worker keeps the objects it runs), so ``import kernels`` finds nothing."""
    sys.path[:] = [entry for entry in sys.path if os.path.abspath(entry) != KIT]
    for name in OWN:
        sys.modules.pop(name, None)


def serve(request_fd: int, response_fd: int, folder: Path, isolation: dict[str, str],
          withheld_kernels: Sequence[str] = (), withheld_rule: str = "", code_by_name: bool = True) -> None:
    """Withhold the listed operator kernels (``kernels.withhold``), defer ``torch._dynamo`` (``deferred_dynamo``), take the
    worker's modules off the import path, report the isolation (before any student code runs), refuse what
    "code is reached by its name" forbids (``_by_name``: from here on, for every thread), import the package,
    report readiness, then answer requests until the judge closes the pipe."""
    if withheld_kernels:
        count = withhold(list(withheld_kernels), withheld_rule)
        isolation = {**isolation, "withheld kernels": f"{count} aten operators raise ({', '.join(withheld_kernels)})"}
    deferred_dynamo.install()
    _leave_the_import_path()
    gc.freeze()  # the kit's and torch's objects: the collector walks only what the submission makes
    channel = PipeChannel(os.fdopen(request_fd, "rb", buffering=0), os.fdopen(response_fd, "wb", buffering=0))
    if code_by_name:
        sys.dont_write_bytecode = True  # the package is compiled from its text alone: a compiled copy is refused
        by_name.install(str(folder), everywhere=True, trusted=TRUSTED_EVENTS)
        isolation = {**isolation, "code by name": "compiling or running text, unpickling, marshal, ctypes, frame "
                                                  "and referrer walks refused from the submission's import on "
                                                  "(audit hook)"}
    wire.write_frame(channel.responses, {"$type": "hello", "isolation": isolation})
    ready: dict[str, Any] = {"$type": "ready"}
    try:
        load_package(folder)
    except BaseException as exc:  # noqa: BLE001 - an import-time failure is reported with each failing call
        ready["import_error"] = wire.encode_exception(exc)
    channel.dispatcher = Dispatcher(channel, str(folder))
    wire.write_frame(channel.responses, ready)
    while (message := channel.next_request()) is not None:
        wire.write_frame(channel.responses, channel.dispatcher.handle(message))

