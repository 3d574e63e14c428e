"""The untrusted worker: imports the submission and executes the judge's requests.

Copied into the sandbox beside ``wire.py`` and the probes. It answers each request with one
frame holding plain data; nothing it returns is trusted, and nothing else it does (printing,
writing files, exiting) reaches the grade.

Requests: ``{"$type": "call", "id", "target": "module.function", "args", "kwargs"}`` runs a
student function; ``{"$type": "probe", "id", "probe": "module.name", "kwargs"}`` runs a
grader-owned probe ``probes.<module>.<name>(student_module, **kwargs)`` that drives stateful
code. The answer is ``{"$type": "result", "id", "value"}`` or ``{..., "raised"}``.
"""

from __future__ import annotations

import importlib
import importlib.util
import os
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

if __package__:
    from .. import wire
else:  # inside the sandbox, where wire.py is copied beside this file
    import wire

PACKAGE = "assignment"


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


def _announce(module_name: str, starting: bool) -> None:
    """Tell the judge that a module's first import starts or ended (set by ``serve``; a no-op in process)."""


def _student_module(package: str, module_name: str) -> ModuleType:
    """Import a module of the submission. A failure is reported as an ImportError that names what
    went wrong, whatever was raised: a module that raises ValueError as it is imported does not
    pass the tests that expect a ValueError from its functions. Before a first import the judge
    is told, so that it can tell a module that ends (or hangs) the worker as it is imported."""
    first = f"{package}.{module_name}" not in sys.modules
    if first:
        _announce(module_name, True)
    try:
        module = importlib.import_module(f"{package}.{module_name}")
        if first:
            _announce(module_name, False)
        return module
    except BaseException as exc:  # noqa: BLE001 - SystemExit and KeyboardInterrupt at import too
        if first:
            _announce(module_name, False)
        try:
            detail = f"{type(exc).__name__}: {exc}"
        except BaseException:  # noqa: BLE001 - a hostile __str__
            detail = type(exc).__name__
        raise ImportError(f"importing {package}/{module_name}.py failed: {detail}") from None


def _resolve(package: str, dotted: str) -> tuple[ModuleType, Any]:
    module_name, _, attribute = dotted.partition(".")
    module = _student_module(package, module_name)
    return module, (getattr(module, attribute) if attribute else module)


def handle(message: dict, package: str = PACKAGE, probes: str = "kit_probes") -> dict:
    """Run one request; never raises (a student exception is part of the answer)."""
    answer: dict[str, Any] = {"$type": "result", "id": message.get("id")}
    try:
        kwargs = wire.decode(message.get("kwargs", {"$t": "dict", "items": []}))
        if message["$type"] == "call":
            args = wire.decode(message.get("args", []))
            _, function = _resolve(package, message["target"])
            value = function(*args, **kwargs)
        elif message["$type"] == "probe":
            module_name, _, probe_name = message["probe"].partition(".")
            student_module = _student_module(package, module_name)
            probe = getattr(importlib.import_module(f"{probes}.{module_name}"), probe_name)
            value = probe(student_module, **kwargs)
        else:
            raise ValueError(f"unknown request {message['$type']!r}")
        answer["value"] = wire.encode(value)
    except BaseException as exc:  # noqa: BLE001 - SystemExit and KeyboardInterrupt from student code too
        answer["raised"] = wire.encode_exception(exc)
    return answer


def serve(request_fd: int, response_fd: int, folder: Path, isolation: dict[str, str]) -> None:
    """Report the isolation (before any student code runs), import the package, report readiness,
    then answer requests until the judge closes the pipe."""
    global _announce
    requests = os.fdopen(request_fd, "rb", buffering=0)
    responses = os.fdopen(response_fd, "wb", buffering=0)
    wire.write_frame(responses, {"$type": "hello", "isolation": isolation})
    _announce = lambda module_name, starting: wire.write_frame(  # noqa: E731
        responses, {"$type": "importing" if starting else "imported", "module": module_name})
    ready: dict[str, Any] = {"$type": "ready"}
    try:
        load_package(folder)
    except BaseException as exc:  # noqa: BLE001 - an import-time failure is reported with each failing call
        ready["import_error"] = wire.encode_exception(exc)
    wire.write_frame(responses, ready)
    while True:
        header = _read_exact(requests, 4)
        if header is None:
            return
        payload = _read_exact(requests, wire.frame_length(header))
        if payload is None:
            return
        wire.write_frame(responses, handle(wire.parse_frame(payload)))


def _read_exact(stream, size: int) -> bytes | None:
    chunks, remaining = [], size
    while remaining:
        chunk = stream.read(remaining)
        if not chunk:
            return None
        chunks.append(chunk)
        remaining -= len(chunk)
    return b"".join(chunks)
