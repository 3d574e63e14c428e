"""The handout's "code is reached by its name", enforced where code runs: an audit hook (``sys.addaudithook``).

``install`` adds a hook, which no Python code can remove, that refuses the events by which code runs or is
reached otherwise than by its name: compiling or executing text, executing a code object, unpickling a
global, loading marshalled code, building code or function objects, swapping a function's code, ctypes,
frame and referrer walks (``sys._getframe``, a traceback's or a generator's frame, ``__code__``,
``gc.get_objects`` / ``get_referrers`` / ``get_referents``), tracing and profiling hooks, another audit
hook, and opening the process's own memory. A refused event raises ``Refused`` (a ``RuntimeError``) naming
the rule and the submission's line that led to it; the operation does not happen.

Where an event comes from decides, never its arguments alone:

- the import system (``importlib``'s frozen modules) may compile, load and run a module whose file lies
  under the interpreter's library folders or the submission's package, with the text or compiled bytes
  that file holds on disk; a code object can only come from there, so running one is the import's;
- a library's module-level code, while that library is imported, runs as it would anyway;
- a library function in ``LIBRARY`` (what correct solutions reach through torch, numpy and the standard
  library: a warning that finds its caller's line) may raise the events listed with it, and one in
  ``LIBRARY_CALLS`` may raise the events listed with it in anything it calls (torch counting CUDA devices);
- a library module in ``GENERATES_ON_IMPORT`` writes code to a file of its own and imports it as it is
  imported itself: ``install`` imports it first, so its module-level code runs as it would anyway.

Everything else is refused. ``everywhere=True`` (the grader's worker) judges every event after ``install``,
whatever thread or finalizer raises it; ``everywhere=False`` (the public tests, which run in pytest's own
process) judges the events raised while a frame of the submission's package is on the stack.
"""

from __future__ import annotations

import contextlib
import importlib
import os
import re
import sys
import sysconfig
import threading
from pathlib import Path
from types import FrameType

RULE = ("code is reached by its name: no problem needs to compile or run text, unpickle, load marshalled "
        "code, build code or function objects, use ctypes, walk frames or the collector's referrers, trace, "
        "or touch the process's own memory (handout.md, 'Rules that hold for every problem')")
JUDGED = frozenset({
    "compile", "exec", "marshal.loads", "marshal.load", "pickle.find_class", "code.__new__", "function.__new__",
    "object.__getattr__", "object.__setattr__", "object.__delattr__", "sys._getframe", "sys._current_frames",
    "sys._current_exceptions", "gc.get_objects", "gc.get_referrers", "gc.get_referents", "sys.settrace",
    "sys.setprofile", "sys.addaudithook", "sys.monitoring.register_callback", "open",
})
_ATTRIBUTES = frozenset({"__code__", "tb_frame", "gi_frame", "gi_code", "cr_frame", "cr_code", "ag_frame",
                         "ag_code"})  # the object.__*attr__ events judged: the others set or read plain attributes
_IMPORT = ("<frozen importlib._bootstrap", "<frozen zipimport")
_OWN_MEMORY = re.compile(r"/proc/(?:self|thread-self|\d+)(?:/task/\d+)?/(?:mem|map_files/.*)")
# (event, file path's end, function): what correct solutions reach through libraries, none of it handing the
# caller a frame, a code object or an evaluation of its data (each returns a bool, a name, a signature or text).
LIBRARY = frozenset({
    ("object.__getattr__", "/inspect.py", "_has_code_flag"),  # torch.no_grad() asks: a generator function?
    ("object.__getattr__", "/inspect.py", "_signature_from_function"),
    ("compile", "/typing.py", "__init__"),  # ForwardRef checks its text is an expression (evaluating it is refused)
    ("sys._getframe", "/typing.py", "_caller"),  # the module a TypeVar or NamedTuple is made in: a name
    ("sys._getframe", "/typing_extensions.py", "_has_generic_or_protocol_as_origin"),  # IO[bytes] and the like
    ("sys._getframe", "/typing_extensions.py", "_caller"),
    ("sys._getframe", "/collections/__init__.py", "namedtuple"),  # the module it is made in: a name
    ("compile", "/collections/__init__.py", "namedtuple"),  # __new__ from field names it checked are identifiers
    ("exec", "/collections/__init__.py", "namedtuple"),
    ("sys._getframe", "/traceback.py", "extract_stack"),  # torch's lazy CUDA calls keep where they were queued,
    ("sys._getframe", "/traceback.py", "format_stack"),  # as text
})
# Libraries whose import writes a module to a temporary file and imports that: torch 2.6's remote-module
# template (torch.distributed.nn; later versions compile the text in torch's own code, a library's module-level
# code while it is imported). torch._dynamo imports it, so a correct P3 or P8 reaches it.
GENERATES_ON_IMPORT = ("torch.distributed.nn",)
# (event prefix, file path's end, function): library functions that raise these events in what they call, take no
# callable and return a count. torch.cuda.device_count() on a CUDA build (get_rng_state_all() calls it) asks NVML
# through ctypes.
LIBRARY_CALLS = frozenset({
    ("ctypes.", "/cuda/__init__.py", "_raw_device_count_nvml"),
    ("ctypes.", "/cuda/__init__.py", "_raw_device_uuid_nvml"),
})


class Refused(RuntimeError):
    """An event the rule refuses, raised where the submission made it happen."""


def described(exc: BaseException) -> str:
    """``Type: message`` of ``exc``, followed by the refusal it was raised from, if a library wrapped one
    (numpy's "Failed to interpret file ... as a pickle" hides why the pickle could not load)."""
    text = f"{type(exc).__name__}: {exc}"
    seen, cause = {id(exc)}, exc.__cause__ or exc.__context__
    while cause is not None and id(cause) not in seen:
        if isinstance(cause, Refused):
            return f"{text} (raised from {cause})"
        seen.add(id(cause))
        cause = cause.__cause__ or cause.__context__
    return text


def _library_roots() -> tuple[str, ...]:
    paths = sysconfig.get_paths()
    roots = {os.path.realpath(paths[key]) for key in ("stdlib", "platstdlib", "purelib", "platlib") if key in paths}
    roots |= {os.path.realpath(entry) for entry in sys.path if "site-packages" in entry or "dist-packages" in entry}
    return tuple(sorted(root + os.sep for root in roots))


class _Policy:
    """The hook's state, held only by the hook (nothing importable names it)."""

    def __init__(self, package: str, everywhere: bool, trusted: frozenset[tuple[str, str, str]]) -> None:
        self.package = os.path.realpath(package) + os.sep
        self.spellings = (self.package, os.path.abspath(package) + os.sep)  # as frames name its files
        # the package's modules as they were before any of its code ran: its folder may be writable, and a
        # module written or rewritten at run time is text carried as data
        self.sources = {str(path.resolve()): path.read_bytes() for path in Path(package).rglob("*.py")}
        self.libraries = _library_roots()
        self.everywhere = everywhere
        self.trusted = trusted
        self.busy = threading.local()

    def __call__(self, event: str, args: tuple) -> None:
        if event not in JUDGED and not event.startswith("ctypes.") or getattr(self.busy, "on", False):
            return
        if event.startswith("object.") and (len(args) < 2 or args[1] not in _ATTRIBUTES):
            return
        if event == "open" and not self._own_memory(args[0]):
            return
        self.busy.on = True
        try:
            try:
                frame: FrameType | None = sys._getframe(1)
            except ValueError:  # raised from C with no Python frame: an atexit or a thread's bare callable
                frame = None
            why = self._refusal(event, args, frame)
        finally:
            self.busy.on = False
        if why:
            raise Refused(why)

    def _own_memory(self, path: object) -> bool:
        if not isinstance(path, (str, bytes)):
            return False
        text = os.fsdecode(path)
        return "/proc" in os.path.abspath(text) and bool(_OWN_MEMORY.fullmatch(os.path.realpath(text)))

    def _refusal(self, event: str, args: tuple, frame: FrameType | None) -> str:
        """Why ``event``, raised with ``frame`` innermost, is refused; empty where it is not."""
        stack = list(_frames(frame))
        mine = [f for f in stack if f.f_code.co_filename.startswith(self.spellings)]
        if not self.everywhere and not mine:
            return ""
        where = f" (from {_line(mine[0])})" if mine else ""
        if frame is not None and self._allowed(event, args, frame, stack):
            return ""
        what = event if not event.startswith("object.") else f"{event} {args[1]!r}"
        origin = f" in {_line(frame)}" if frame is not None and frame not in mine[:1] else ""
        return f"refused: {what}{origin}{where}: {RULE}"

    def _allowed(self, event: str, args: tuple, frame: FrameType, stack: list[FrameType]) -> bool:
        file = frame.f_code.co_filename
        if file.startswith(_IMPORT):
            return self._imported(event, args, frame)
        if (event, file, frame.f_code.co_name) in self.trusted or self._library(file) and any(
                (event, end, frame.f_code.co_name) in LIBRARY for end in _ends(file)):
            return True
        for outer in stack:  # inside a library call listed for it, or a library's module-level code while imported
            name = outer.f_code.co_filename
            if name.startswith(self.spellings):
                return False
            if self._library(name) and (outer.f_code.co_name == "<module>"
                                        or _library_call(event, name, outer.f_code.co_name)):
                return True
        return False

    def _imported(self, event: str, args: tuple, frame: FrameType) -> bool:
        """The import system compiles a file's own text, loads its own compiled bytes (past the 16-byte
        header), and runs what it made (no other code object can be had)."""
        if event == "exec":  # a code object comes from a compile or a load judged here, or is frozen in
            name = getattr(args[0], "co_filename", "")
            return name.startswith("<frozen ") or self._importable(name)
        if event == "compile" and isinstance(args[1], str):
            path, source = os.path.realpath(args[1]), args[0]
            if path.startswith(self.package):
                return _as_bytes(source) == self.sources.get(path)
            return self._library(path) and _holds(path, source, 0)
        if event == "marshal.loads":
            path = frame.f_locals.get("bytecode_path")
            if not isinstance(path, str):
                return False
            if self._library(path):
                return _holds(path, args[0], 16)
            # a package's compiled copy can be forged: the worker writes none and loads none; the public tests
            # load the one beside an unchanged module (the student's earlier runs wrote it)
            source = frame.f_locals.get("source_path")
            return not self.everywhere and isinstance(source, str) and _holds(source, self.sources.get(
                os.path.realpath(source), b"\0"), 0)
        return False

    def _importable(self, path: str) -> bool:
        real = os.path.realpath(path)
        return real.startswith(self.package) or self._library(real)

    def _library(self, path: str) -> bool:
        real = os.path.realpath(path)
        return real.startswith(self.libraries) and not real.startswith(self.package)


def _as_bytes(data: object) -> bytes:
    return bytes(data) if isinstance(data, (bytes, bytearray, memoryview)) else str(data).encode()


def _holds(path: str, data: object, offset: int) -> bool:
    """Whether the file at ``path`` (a library's: read-only) holds ``data`` from ``offset`` to its end."""
    try:
        with open(path, "rb") as file:
            file.seek(offset)
            return file.read() == _as_bytes(data)
    except OSError:
        return False


def _frames(frame: FrameType | None):
    while frame is not None:
        yield frame
        frame = frame.f_back


def _ends(file: str) -> tuple[str, str]:
    """The ends ``LIBRARY`` names a file by: ``/typing.py``, ``/collections/__init__.py``."""
    parts = file.replace(os.sep, "/").rsplit("/", 2)
    return "/" + parts[-1], "/" + "/".join(parts[-2:])


def _library_call(event: str, file: str, function: str) -> bool:
    """Whether ``LIBRARY_CALLS`` lets ``function`` of ``file`` raise ``event`` in what it calls."""
    ends = _ends(file)
    return any(event.startswith(prefix) and ending in ends and function == listed
               for prefix, ending, listed in LIBRARY_CALLS)


def _line(frame: FrameType) -> str:
    return f"{frame.f_code.co_filename}:{frame.f_lineno}"


def install(package: str, everywhere: bool, trusted: frozenset[tuple[str, str, str]] = frozenset()) -> None:
    """Refuse, for the rest of the process's life, what ``RULE`` forbids (see the module's docstring);
    ``trusted``: (event, file, function) of the caller's own code that may raise the event."""
    for name in GENERATES_ON_IMPORT:
        with contextlib.suppress(Exception):  # absent from this build: nothing of it to import later either
            importlib.import_module(name)
    sys.addaudithook(_Policy(package, everywhere, trusted))
