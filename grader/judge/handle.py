"""The judge's handle on a submission: what hidden tests use to call student code.

``sub.call("memory.bytes_per_element", torch.float16)`` sends the call to the worker and
returns the decoded value; ``sub.raises(ValueError, "memory.as_count", -1)`` expects an
exception; ``sub.source("einsum")`` is the submitted text, read from the judge's own copy.

Stateful code is driven from the judge through objects the worker holds (``Remote``):
``sub.new("optim.SGD", [p], lr=0.1)`` builds a submission class there, ``sub.lib("torch.nn.
Parameter", t)`` a library object; ``opt.call("step")``, ``p.get("grad")``, ``p.set("grad", g)``
and ``p.read()`` drive and read them step by step, and ``sub.callback(fn)`` passes a judge
function the submission may call (a closure) while the one call it is passed to runs. Every
loop, loss, gradient and expected value is computed in the judge; the worker only runs the
submission's own code.
"""

from __future__ import annotations

from contextlib import contextmanager, suppress
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Iterator, NoReturn, TypeVar

from .. import wire
from ..backend import Backend, Exchange, GpuActivity, GpuUsage, Usage, WorkerFailure
from ..containment import gpu
from ..options import GradingOptions
from .budget import Budget

T = TypeVar("T")

if TYPE_CHECKING:
    from ..containment.worker import Withheld


class StudentError(AssertionError):
    """Student code raised where a value was expected, or its worker failed: the test fails."""


class OutOfTime(BaseException):
    """The test's problem used up its share of the time budget: the test stops, not judged. Not an
    Exception, so that nothing catches it on the way (hypothesis, which would replay the example,
    nor a test that expects a call to fail)."""


@dataclass
class Recording:
    """One test's requests and the worker's answers, in order, for replaying them on a known
    mistake (``grader.judge.diagnosis``); ``blocked`` says why they cannot be replayed (the test
    used a callback, the exchange folder, the worker's pid or the source text, or the worker failed)."""

    exchanges: list[tuple[dict, dict]] = field(default_factory=list)
    blocked: str = ""

    def block(self, why: str) -> None:
        self.blocked = self.blocked or why


def describe(target: str, args: tuple = (), kwargs: dict | None = None, limit: int = 240) -> str:
    """``module.function(arg, key=value)``, shortened for messages."""
    parts = [_show(a) for a in args] + [f"{k}={_show(v)}" for k, v in (kwargs or {}).items()]
    text = f"{target}({', '.join(parts)})"
    return text if len(text) <= limit else text[: limit - 4] + "...)"


def _show(value: Any, items: int = 4) -> str:
    """A short, one-line picture of an argument (containers shown by their first few items)."""
    if not isinstance(value, type) and hasattr(value, "shape") and hasattr(value, "dtype"):
        return f"<{type(value).__name__} {getattr(value, 'dtype')} shape={tuple(value.shape)}>"
    if type(value) in (list, tuple):
        inner = [_show(item) for item in value[:items]] + (["..."] if len(value) > items else [])
        return ("[{}]" if type(value) is list else "({},)" if len(value) == 1 else "({})").format(", ".join(inner))
    if type(value) is dict:
        inner = [f"{key!r}: {_show(item)}" for key, item in list(value.items())[:items]]
        return "{" + ", ".join(inner + (["..."] if len(value) > items else [])) + "}"
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


class Submission:
    """Calls into one submission through a backend (sandboxed worker, or in-process for debugging)."""

    def __init__(self, backend: Backend, source_dir: Path, budget: Budget | None = None,
                 call_seconds: float = GradingOptions.call_seconds) -> None:
        self.backend = backend
        self.source_dir = source_dir
        self.budget = budget or Budget()
        self.call_seconds = call_seconds
        self._next_id = 0
        self._issued = 0
        self._callbacks: dict[int, Callable[..., Any]] = {}  # handed out, not yet passed to a call
        self._in_flight: dict[int, tuple[int, Callable[..., Any]]] = {}  # passed: token -> (call id, function)
        self._rule = ""
        self.recording = Recording()
        self.withheld_isolation: dict[str, str] = {}  # what the workers of ``withholding`` obtained

    def _send(self, message: dict, what: str, timeout: float | None, budgeted: bool = True) -> Any:
        timeout, cut = self._clock(what, timeout, budgeted)
        self._next_id += 1
        message["id"] = number = self._next_id
        failures: list[BaseException] = []
        tokens = self._bind_callbacks(message, number)
        try:
            answer = self.backend.request(message, timeout, lambda frame: self._run_callback(frame, number, failures))
        except WorkerFailure as exc:
            self._failed(exc, what, cut)
        finally:
            for token in tokens:  # a callback lives as long as the call it was passed to
                del self._in_flight[token]
        self.recording.exchanges.append((message, answer))
        if failures:  # a judge callback failed (a nested call, an assertion): that is the test's failure
            raise failures[0]
        if answer.get("id") != number:
            raise StudentError(f"{what}: the worker answered out of turn")
        if answer.get("violations"):
            raise StudentError(f"{what}: {self._rule} Called: {', '.join(map(str, answer['violations']))[:300]}")
        return self._decoded(answer, what)

    def _clock(self, what: str, timeout: float | None, budgeted: bool) -> tuple[float, bool]:
        """The time one call may take, and whether the problem's budget cut it short; raises
        OutOfTime when that budget is spent."""
        if budgeted and self.budget.spent():
            self.recording.block("the time budget")
            raise OutOfTime(f"{what} was not run: {self.budget.why()}")
        timeout = timeout or self.call_seconds
        cut = budgeted and self.budget.left() < timeout  # no call runs past its problem's share of the budget
        return (max(0.5, self.budget.left()) if cut else timeout), cut

    def _failed(self, exc: WorkerFailure, what: str, cut: bool) -> NoReturn:
        """A worker failure as the test sees it: out of time if the budget cut the call, else a failure."""
        self.recording.block("the worker failed")
        if cut and self.budget.spent():
            raise OutOfTime(f"{what} was stopped: {self.budget.why()}") from None
        raise StudentError(f"{what}: {exc}") from None

    def _decoded(self, answer: dict, what: str) -> Any:
        """An answer's value (a ``Remote`` for a handle), or the ``wire.Raised`` it carries."""
        try:
            if "raised" in answer:
                raised = wire.decode(answer["raised"])
                if not isinstance(raised, wire.Raised):
                    raise wire.WireError("raised is not an exception")
                return raised
            value = wire.decode(answer.get("value"))
        except wire.WireError as exc:
            raise StudentError(f"{what}: the worker sent a malformed answer ({exc})") from None
        if isinstance(value, wire.Ref):
            return Remote(self, value, str(answer.get("kept", "?")), self.backend.restarts)
        return value

    def _bind_callbacks(self, message: dict, number: int) -> list[int]:
        """Bind the callbacks among a request's arguments to that request (call ``number``): each was
        handed out by ``callback`` for this one call and is refused once the call has returned. (Before the
        first callback is handed out there is none to find: the message is not walked.)"""
        tokens = list(dict.fromkeys(_callback_tokens(message))) if self._issued else []
        reused = [token for token in tokens if token not in self._callbacks]
        if reused:
            raise ValueError(f"judge callback(s) {reused} passed to a second call: make a fresh one per call")
        for token in tokens:
            self._in_flight[token] = (number, self._callbacks.pop(token))
        return tokens

    def _run_callback(self, frame: dict, number: int, failures: list[BaseException]) -> dict:
        """Run the judge function a ``callback`` frame names, if it was passed to call ``number`` (the
        call now running); its value (or failure) is the return frame."""
        try:
            token = frame.get("callback")
            call, function = self._in_flight.get(token, (None, None)) if type(token) is int else (None, None)
            if call != number or function is None:
                raise StudentError(f"the submission called judge callback {token!r} outside the call it was passed "
                                   "to: a callback may only be called while that call runs")
            args, kwargs = wire.decode(frame.get("args", [])), wire.decode(frame.get("kwargs", {"$t": "dict", "items": []}))
            if type(args) is not list or type(kwargs) is not dict:
                raise wire.WireError("bad callback arguments")
            return {"$type": "return", "value": wire.encode(_refs(function(*args, **kwargs)))}
        except BaseException as exc:  # noqa: BLE001 - reported to the worker, re-raised in the judge
            failures.append(exc if not isinstance(exc, (KeyError, wire.WireError)) else
                            StudentError(f"the worker called back with a malformed request ({exc})"))
            return {"$type": "return", "raised": wire.encode_exception(exc)}

    def attempt(self, target: str, *args: Any, timeout: float | None = None, **kwargs: Any) -> Any:
        """The value returned, or a ``wire.Raised`` if the student code raised."""
        return self._request("call", describe(target, args, kwargs), timeout, target=target, args=args, kwargs=kwargs)

    def _request(self, kind: str, what: str, timeout: float | None, args: tuple = (), kwargs: dict | None = None,
                 **fields: Any) -> Any:
        message = {"$type": kind, **fields, "args": wire.encode(_refs(list(args))),
                   "kwargs": wire.encode(_refs(kwargs or {}))}
        return self._send(message, what, timeout)

    def _value(self, result: Any, what: str) -> Any:
        if isinstance(result, wire.Raised):
            raise StudentError(f"{what} raised {result}{self._import_hint()}")
        return result

    def new(self, target: str, *args: Any, timeout: float | None = None, **kwargs: Any) -> Remote:
        """Build the submission's ``module.Class(*args, **kwargs)`` in the worker; its handle."""
        what = describe(target, args, kwargs)
        return self._value(self._request("construct", what, timeout, args, kwargs, target=target, keep=True), what)

    def release_memory(self) -> None:
        """Have the worker's C library give back the memory it holds free (and map large allocations alone)."""
        self._request("release_memory", "release_memory()", None)

    def named(self, target: str) -> Remote:
        """The submission's ``module.name`` itself (not called), held in the worker: e.g. a function
        to hand to a library call there (``sub.lib("builtins.map", sub.named("memory.f"), xs)``)."""
        return self._value(self._request("named", target, None, target=target, keep=True), target)

    def lib(self, target: str, *args: Any, timeout: float | None = None, **kwargs: Any) -> Remote:
        """Build a library object (``torch.nn.Parameter``, ``builtins.dict``...) in the worker; its handle."""
        what = describe(target, args, kwargs)
        return self._value(self._request("construct", what, timeout, args, kwargs, target=target, library=True,
                                         keep=True), what)

    def callback(self, function: Callable[..., Any]) -> wire.Callback:
        """A judge function the submission may call (e.g. an optimizer's closure); pass it as an argument
        of one call: the submission may call it while that call runs, and never after it returned."""
        self.recording.block("a judge callback")
        self._issued += 1
        self._callbacks[self._issued] = function
        return wire.Callback(self._issued)

    @contextmanager
    def forbidding(self, names: list[str], rule: str) -> Iterator[None]:
        """While the block runs, the submission calling any of ``names`` fails the request with ``rule``."""
        self._send({"$type": "forbid", "names": names, "rule": rule}, "arming the delegation check", None)
        self._rule, armed = rule, self.backend.restarts
        try:
            yield
        finally:
            self._rule = ""
            if self.backend.restarts == armed:  # the armed worker runs on: disarm it even past the time budget
                self._send({"$type": "allow"}, "disarming the delegation check", None, budgeted=False)

    def call(self, target: str, *args: Any, timeout: float | None = None, **kwargs: Any) -> Any:
        """The value returned; a student exception fails the test with its message."""
        return self._value(self.attempt(target, *args, timeout=timeout, **kwargs), describe(target, args, kwargs))

    def raises(self, exc: type[BaseException], target: str, *args: Any, timeout: float | None = None,
               **kwargs: Any) -> wire.Raised:
        """Expect ``exc`` (or a subclass) to be raised; anything else fails the test."""
        result = self.attempt(target, *args, timeout=timeout, **kwargs)
        what = describe(target, args, kwargs)
        if not isinstance(result, wire.Raised):
            raise StudentError(f"{what} returned {_show(result)}, expected it to raise {exc.__name__}")
        if not result.is_a(exc):
            raise StudentError(f"{what} raised {result}, expected {exc.__name__}{self._import_hint()}")
        return result

    def exchange(self) -> Exchange:
        """The folder the judge shares with the running worker: write inputs into ``.host``, give
        student code ``.path(name)``, inspect what it wrote from the judge. Starts the worker if it
        is not running; a worker restart (after a failure) gives a fresh, empty folder."""
        self.worker_pid()
        self.recording.block("the exchange folder")
        return self.backend.exchange()

    def worker_pid(self) -> int:
        """The pid of the process running the submission, for measurements taken from outside it
        (``/proc/<pid>/status``, ``smaps_rollup``, ``io``). Starts the worker if it is not running."""
        self.recording.block("a measurement from outside the worker")
        pid = self.backend.worker_pid()
        if pid is None:
            self._start()
            pid = self.backend.worker_pid()
        if pid is None:
            raise StudentError("the worker process could not be found to measure it")
        return pid

    def _start(self) -> None:
        """Start the worker (its package imported) on the clock of one call."""
        what = "starting the worker"
        timeout, cut = self._clock(what, None, True)
        try:
            self.backend.start(timeout)
        except WorkerFailure as exc:
            self._failed(exc, what, cut)

    def sibling(self) -> Submission:
        """The same submission in a second, separate worker (started on its first request, under
        the same budget): nothing of this worker's process reaches it, only what the judge hands
        over. ``close`` it when done."""
        return Submission(self.backend.sibling(), self.source_dir, self.budget, self.call_seconds)

    @contextmanager
    def withholding(self, withheld: Withheld) -> Iterator[None]:
        """While the block runs, every request goes to a separate worker of the submission (started on its
        first request) whose library lacks the code ``withheld`` names; it is closed after the block, and
        what confinement it obtained is kept (``withheld_isolation``). The recording, budget and call clock
        stay this submission's."""
        shared, self.backend = self.backend, self.backend.sibling(withheld)
        try:
            yield
        finally:
            self.backend.close()
            self.withheld_isolation.update(self.backend.isolation)
            self.backend = shared

    def close(self) -> None:
        """Stop the worker and remove its folders."""
        self.backend.close()

    def measure(self, reset_peak: bool = False) -> Usage:
        """What the worker's whole process tree has used (CPU time, memory, bytes read, page faults), read by the
        judge from outside it: through its cgroup where the host gives one, else its processes in
        /proc (``grader.containment.tree``). ``reset_peak``: the next reading's ``peak_bytes`` is the
        most held from this one on. Starts the worker if it is not running."""
        return self._reading(lambda: self.backend.measure(reset_peak))

    def measure_files(self) -> int:
        """Bytes on disk of the files the worker's tree wrote where it may write to disk (the exchange folder:
        left there, held open or mapped, named or not), read by the judge from outside it
        (``Backend.measure_files``). Starts the worker if it is not running."""
        return self._reading(self.backend.measure_files)

    def measure_gpu(self) -> GpuUsage:
        """What the worker's processes hold for the GPU (device memory as the NVIDIA driver lists it, pinned
        host memory as its mappings show), read by the judge from outside them (``Backend.measure_gpu``).
        Starts the worker if it is not running."""
        return self._reading(self.backend.measure_gpu)

    def evict_page_cache(self, fd: int) -> None:
        """Drop the clean pages of the judge's own file behind ``fd`` from the page cache, before a call whose
        reads of it are counted (``Backend.evict_page_cache``)."""
        self.backend.evict_page_cache(fd)

    def page_cache_bytes(self, fd: int) -> int:
        """How many bytes of the judge's own file behind ``fd`` are in the page cache now, by whatever route they
        came in and whoever brought them (``Backend.page_cache_bytes``: ``mincore`` on the judge's mapping)."""
        return self.backend.page_cache_bytes(fd)

    def gpu_idle_watts(self) -> float | None:
        """The GPU board's draw while nothing runs on it, read by NVML (``containment.gpu``); None without an
        energy counter or NVML."""
        return gpu.idle_watts()

    def gpu_activity(self, run: Callable[[], T], idle: float | None) -> tuple[T, GpuActivity | None]:
        """``run()``'s result and what the GPU board did meanwhile, read by NVML (``containment.gpu``: energy
        above ``idle`` watts, utilization); None when NVML cannot say (``gpu_unavailable``)."""
        return gpu.activity(run, idle)

    def gpu_unavailable(self) -> str | None:
        """Why NVML cannot read the GPU from outside here (None when it can)."""
        return gpu.unavailable()

    def _reading(self, read: Callable[[], T | None]) -> T:
        """A reading of the running worker from outside it (the worker started first)."""
        self.worker_pid()
        found = read()
        if found is None:
            raise StudentError("the worker process could not be found to measure it")
        return found

    def paused_call(self, call: Callable[[], T], stop_seconds: float, running_share: float) -> tuple[T, float]:
        """``call()``'s value (a call into the worker) while containment stops the worker's whole process tree
        ``stop_seconds`` at a time and continues it, from outside, so that it runs ``running_share`` of the call's
        wall time (``Backend.paused_call``), and the share of that wall time it stood still."""
        self.recording.block("a pause of the worker")
        try:
            return self.backend.paused_call(call, stop_seconds, running_share)
        except WorkerFailure as exc:
            self._failed(exc, "pausing the worker", cut=False)

    def source(self, module: str) -> str:
        """The submitted source of ``module`` (empty if the file is missing)."""
        self.recording.block("the source text")
        path = self.source_dir / f"{module}.py"
        return path.read_text(errors="replace") if path.exists() else ""

    def _import_hint(self) -> str:
        error = self.backend.import_error
        return f" (note: importing your package failed: {error})" if error else ""


@contextmanager
def holding(remote: Remote) -> Iterator[Remote]:
    """Release ``remote`` in the worker when the block ends (a worker that is gone holds nothing)."""
    try:
        yield remote
    finally:
        with suppress(StudentError):
            remote.release()


class Remote:
    """An object held by the worker, driven from the judge. Only what ``read``/``call``/``get``
    return crosses back, as data; a Remote passed as an argument names the object again."""

    def __init__(self, owner: Submission, ref: wire.Ref, type_name: str, generation: int) -> None:
        self.owner, self.ref, self.type_name, self.generation = owner, ref, type_name, generation

    def __repr__(self) -> str:
        return f"<{self.type_name.rsplit('.', 1)[-1]} in the worker>"

    def _request(self, kind: str, what: str, *args: Any, timeout: float | None = None, keep: bool = False,
                 **fields: Any) -> Any:
        if self.owner.backend.restarts != self.generation:
            raise StudentError(f"{what}: the worker was restarted after an earlier failure, and this object was lost")
        kwargs = fields.pop("kwargs", {})
        result = self.owner._request(kind, what, timeout, args, kwargs, handle=self.ref.id, keep=keep, **fields)
        return self.owner._value(result, what)

    def call(self, method: str, *args: Any, timeout: float | None = None, keep: bool = False, **kwargs: Any) -> Any:
        """``obj.method(*args, **kwargs)``; a Remote of the result with ``keep=True``."""
        what = describe(f"{self}.{method}", args, kwargs)
        return self._request("call_method", what, *args, timeout=timeout, keep=keep, method=method, kwargs=kwargs)

    def attempt(self, method: str, *args: Any, timeout: float | None = None, **kwargs: Any) -> Any:
        """``obj.method(...)``'s value, or a ``wire.Raised``."""
        return self.owner._request("call_method", describe(f"{self}.{method}", args, kwargs), timeout, args,
                                   kwargs, handle=self.ref.id, method=method)

    def get(self, name: str, keep: bool = False) -> Any:
        return self._request("get_attr", f"{self}.{name}", keep=keep, name=name)

    def set(self, name: str, value: Any) -> None:
        self._request("set_attr", f"setting {self}.{name}", name=name, value=wire.encode(_refs(value)))

    def read(self) -> Any:
        return self._request("read", f"reading {self}")

    def release(self) -> None:
        self.owner._send({"$type": "release", "handles": [self.ref.id]}, f"releasing {self}", None)


def _callback_tokens(encoded: Any) -> list[int]:
    """The ids of the judge callbacks in an encoded message (tagged ``{"$t": "callback"}``)."""
    if type(encoded) is list:
        return [token for item in encoded for token in _callback_tokens(item)]
    if type(encoded) is not dict:
        return []
    if encoded.get("$t") == "callback":
        return [encoded["id"]]
    return [token for item in encoded.values() for token in _callback_tokens(item)]


def _refs(value: Any) -> Any:
    """Remotes inside a value become the handles they hold."""
    if isinstance(value, Remote):
        return value.ref
    if type(value) is list:
        return [_refs(item) for item in value]
    if type(value) is tuple:
        return tuple(_refs(item) for item in value)
    if type(value) is dict:
        return {key: _refs(item) for key, item in value.items()}
    return value
