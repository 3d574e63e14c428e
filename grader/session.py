"""The judge's handle on a submission: what hidden tests use to call student code.

``sub.call("memory.bytes_per_element", torch.float16)`` sends the call to the worker and
returns the decoded value; ``sub.raises(ValueError, "memory.as_count", -1)`` expects an
exception; ``sub.probe("optim.trajectory", ...)`` runs a grader-owned probe next to the
student code; ``sub.source("einsum")`` is the submitted text, read from the judge's own copy.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any, Protocol

from . import wire
from .confined import worker  # the --in-process debugging backend only

DEFAULT_CALL_SECONDS = 30.0


class StudentError(AssertionError):
    """Student code raised where a value was expected, or its worker failed: the test fails."""


class WorkerFailure(Exception):
    """The worker timed out, crashed, broke the protocol or used too much memory."""


class Backend(Protocol):
    isolation: dict[str, str]
    import_error: wire.Raised | None

    def request(self, message: dict, timeout: float) -> dict: ...

    def close(self) -> None: ...


def describe(target: str, args: tuple = (), kwargs: dict | None = None, limit: int = 240) -> str:
    """``module.function(arg, key=value)``, shortened for messages."""
    parts = [_show(a) for a in args] + [f"{k}={_show(v)}" for k, v in (kwargs or {}).items()]
    text = f"{target}({', '.join(parts)})"
    return text if len(text) <= limit else text[: limit - 4] + "...)"


def _show(value: Any) -> str:
    if hasattr(value, "shape") and hasattr(value, "dtype"):
        return f"<{type(value).__name__} {getattr(value, 'dtype')} shape={tuple(value.shape)}>"
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


class Submission:
    """Calls into one submission through a backend (sandboxed worker, or in-process for debugging)."""

    def __init__(self, backend: Backend, source_dir: Path, deadline: float | None = None,
                 call_seconds: float = DEFAULT_CALL_SECONDS) -> None:
        self.backend = backend
        self.source_dir = source_dir
        self.deadline = deadline
        self.call_seconds = call_seconds
        self._next_id = 0

    def _send(self, message: dict, what: str, timeout: float | None) -> Any:
        if self.deadline is not None and time.monotonic() > self.deadline:
            raise StudentError(f"{what} was not run: this submission used up its time budget")
        self._next_id += 1
        message["id"] = self._next_id
        timeout = timeout or self.call_seconds
        if self.deadline is not None:  # no call runs past the submission's time budget
            timeout = max(0.5, min(timeout, self.deadline - time.monotonic()))
        try:
            answer = self.backend.request(message, timeout)
        except WorkerFailure as exc:
            raise StudentError(f"{what}: {exc}") from None
        if answer.get("id") != self._next_id:
            raise StudentError(f"{what}: the worker answered out of turn")
        try:
            if "raised" in answer:
                raised = wire.decode(answer["raised"])
                if not isinstance(raised, wire.Raised):
                    raise wire.WireError("raised is not an exception")
                return raised
            return wire.decode(answer.get("value"))
        except wire.WireError as exc:
            raise StudentError(f"{what}: the worker sent a malformed answer ({exc})") from None

    def outcome(self, target: str, *args: Any, timeout: float | None = None, **kwargs: Any) -> Any:
        """The value returned, or a ``wire.Raised`` if the student code raised."""
        message = {"$type": "call", "target": target, "args": wire.encode(list(args)), "kwargs": wire.encode(kwargs)}
        return self._send(message, describe(target, args, kwargs), timeout)

    def call(self, target: str, *args: Any, timeout: float | None = None, **kwargs: Any) -> Any:
        """The value returned; a student exception fails the test with its message."""
        result = self.outcome(target, *args, timeout=timeout, **kwargs)
        if isinstance(result, wire.Raised):
            raise StudentError(f"{describe(target, args, kwargs)} raised {result}{self._import_hint()}")
        return result

    def raises(self, exc: type[BaseException], target: str, *args: Any, timeout: float | None = None,
               **kwargs: Any) -> wire.Raised:
        """Expect ``exc`` (or a subclass) to be raised; anything else fails the test."""
        result = self.outcome(target, *args, timeout=timeout, **kwargs)
        what = describe(target, args, kwargs)
        if not isinstance(result, wire.Raised):
            raise StudentError(f"{what} returned {_show(result)}, expected it to raise {exc.__name__}")
        if not result.is_a(exc):
            raise StudentError(f"{what} raised {result}, expected {exc.__name__}{self._import_hint()}")
        return result

    def probe(self, name: str, *, timeout: float | None = None, **kwargs: Any) -> Any:
        """Run the grader-owned probe ``probes/<module>.py:<name>`` on the student module."""
        message = {"$type": "probe", "probe": name, "kwargs": wire.encode(kwargs)}
        result = self._send(message, f"probe {name}", timeout)
        if isinstance(result, wire.Raised):
            raise StudentError(f"while driving your code ({name.replace('.', ': ', 1)}): {result}{self._import_hint()}")
        return result

    def source(self, module: str) -> str:
        """The submitted source of ``module`` (empty if the file is missing)."""
        path = self.source_dir / f"{module}.py"
        return path.read_text(errors="replace") if path.exists() else ""

    def _import_hint(self) -> str:
        error = self.backend.import_error
        return f" (note: importing your package failed: {error})" if error else ""


class InProcess:
    """Runs the submission inside the judge. For debugging the kit only: never grade with it."""

    isolation = {"mode": "in-process (UNSAFE: no isolation; for debugging the kit only)"}

    def __init__(self, folder: Path) -> None:
        self.import_error: wire.Raised | None = None
        try:
            worker.load_package(folder)
        except BaseException as exc:  # noqa: BLE001
            self.import_error = wire.decode(wire.encode_exception(exc))

    def request(self, message: dict, timeout: float) -> dict:
        # A JSON round trip both ways, so values cross exactly as they would from a worker.
        message = json.loads(json.dumps(message))
        answer = worker.handle(message, package=worker.PACKAGE, probes=f"{__package__}.probes")
        return json.loads(json.dumps(answer))

    def close(self) -> None:
        pass
