"""The layout is a picture of who trusts whom (CONTRIBUTING.md, "Layout"): every import between the
zones of ``grader/`` follows an allowed arrow, and ``grader/confined/`` (with ``grader/wire.py``, ``grader/deferred_dynamo.py`` and ``grader/forks.py``) is
exactly what the worker holds.

A zone is a folder of ``grader/`` or ``core``, the modules at its top: the command line, options,
paths, problem facts, catalogs, and the three contracts that cross a process boundary (``wire``
judge <-> worker, ``backend`` judge <-> containment, ``record`` judge -> grading). Imports inside a
zone are free; ``bench`` and ``tests`` measure and prove everything and may import anything.

Every reading of what a worker did is containment's, asked through the backend (``Submission.measure``,
``measure_gpu``, ``page_cache_bytes``, ``paused_call``): no driver of ``grader/judge/drivers/`` (nor hidden suite)
reads /proc, ``mincore``, NVML or a clock or usage count of another process itself, starts a thread to sample
beside a call (containment's one sampler does: ``containment.sampler``), or stops the worker itself (the backend's
raw ``pause``, a SIGSTOP) (a scan of their code, docstrings and comments left out).
"""

from __future__ import annotations

import ast
import shutil
from pathlib import Path

import pytest

from grader.containment.launch import SYSCALL_FILTER, worker_folders
from grader.containment.template import BESIDE, SHARED

GRADER = Path(__file__).resolve().parents[2]
FREE = {"bench", "tests"}
# zone -> what it may import: zones, or single modules ("core.wire", "confined.config").
ARROWS: dict[str, set[str]] = {
    # inside the sandbox: the wire format, torch._dynamo deferred (deferred_dynamo), the zygote's loop (the template's) and its own modules; public:
    # the public tests' "code is reached by its name" hook (staged beside them in the sandbox)
    "confined": {"core.wire", "core.deferred_dynamo", "core.forks", "core.public"},
    # confined.config: the worker's start record; options and paths: the kit's default limits and its folders
    # forks: following the workers the warm template forks
    "containment": {"core.wire", "core.backend", "core.options", "core.paths", "core.forks", "core.public",
                    "confined.config"},
    "mistakes": {"core"},  # the catalog of known mistakes: a fact of the problem set, like problems.py
    "judge": {"core", "containment", "mistakes"},  # the diagnosis replays the known mistakes
    # the judge runs as its own process (pytest -p grader.judge.plugin): never imported; a warm block starts
    # the worker template beside its warm judge
    "grading": {"core", "containment.template"},
    "classroom": {"core", "grading", "mistakes"},  # the report explains the known mistakes it counts
    "selfproof": {"core", "mistakes", "grading", "classroom", "containment", "release"},  # the release is part of the proof
    "release": {"core", "mistakes"},  # the leak check refuses the text of the known mistakes
    "core": {"core.wire", "core.backend", "core.record", "core.options", "core.paths", "core.problems",
             "core.arguments", "core.toml_catalogs", "core.submission", "grading.results"},  # a refused command still leaves a results.json
}
# The command line is the entry: it reaches every zone's ``main`` (by name) and asks containment about the host.
ENTRY = GRADER / "cli.py"
# The --in-process debugging backend (and the diagnosis, through it) runs the dispatcher in the judge on
# purpose, on the kit's own code or for debugging: the one module outside the sandbox that imports it.
IN_PROCESS = GRADER / "judge" / "inprocess.py"


def _zone(path: Path) -> str:
    parts = path.relative_to(GRADER).parts
    return "core" if len(parts) == 1 else parts[0]


def _is_module(name: str) -> bool:
    path = GRADER.parent.joinpath(*name.split("."))
    return path.is_dir() or path.with_suffix(".py").exists()


def _imported(path: Path, text: str) -> set[str]:
    """The absolute names (``grader.x.y``) that ``text``, the source of ``path``, imports from the kit,
    relative imports resolved."""
    package = list(path.relative_to(GRADER.parent).parts[:-1])
    names = set()
    for node in ast.walk(ast.parse(text)):
        if isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                base = ".".join(package[: len(package) - node.level + 1] + ([node.module] if node.module else []))
            names |= {f"{base}.{alias.name}" for alias in node.names}
            names |= {base} if not all(_is_module(f"{base}.{alias.name}") for alias in node.names) else set()
        elif isinstance(node, ast.Import):
            names |= {alias.name for alias in node.names}
    return {name for name in names if name == "grader" or name.startswith("grader.")}


def _target(name: str) -> str | None:
    """``grader.judge.plugin`` -> ``judge.plugin``, ``grader.wire`` -> ``core.wire``; None for the package
    itself or an attribute of it."""
    parts = name.split(".")[1:]
    if not parts:
        return None
    if (GRADER / parts[0]).is_dir():
        return ".".join(parts)
    return f"core.{'.'.join(parts)}" if (GRADER / f"{parts[0]}.py").exists() else None


def _allowed(source: str, target: str) -> bool:
    """Inside its own zone, or along an arrow: to a whole zone, or to a module named and what it holds."""
    return target.split(".")[0] == source or any(target == to or target.startswith(to + ".") for to in ARROWS[source])


def _wrong_arrows(sources: dict[Path, str]) -> dict[str, set[str]]:
    """The imports of ``sources`` (path: text) that follow no arrow, by module."""
    wrong: dict[str, set[str]] = {}
    for path, text in sources.items():
        source = _zone(path)
        if source in FREE:
            continue
        for name in _imported(path, text):
            target = _target(name)
            if target is None or path == ENTRY or (path == IN_PROCESS and target.startswith("confined")):
                continue
            if not _allowed(source, target):
                wrong.setdefault(str(path.relative_to(GRADER)), set()).add(name)
    return wrong


def test_every_zone_has_its_arrows():
    zones = {_zone(path) for path in GRADER.rglob("*.py")} - FREE
    assert zones == set(ARROWS), zones ^ set(ARROWS)


def test_every_import_between_zones_follows_an_allowed_arrow():
    wrong = _wrong_arrows({path: path.read_text() for path in GRADER.rglob("*.py")})
    assert not wrong, wrong


@pytest.mark.parametrize(("source", "name"), [
    ("judge", "grader.confined.worker"), ("containment", "grader.judge.handle"), ("confined", "grader.backend"),
    ("grading", "grader.judge.plugin"), ("judge", "grader.grading.results"), ("containment", "grader.confined.dispatch"),
    ("classroom", "grader.selfproof.hostile"), ("core", "grader.judge.handle"), ("release", "grader.selfproof.hostile")])
def test_a_wrong_arrow_is_refused(source, name):
    assert not _allowed(source, _target(name))


def test_a_wrong_import_is_found():
    planted = {GRADER / "containment" / "planted.py": "from ..judge.handle import Submission\nfrom .. import wire\n"}
    assert _wrong_arrows(planted) == {"containment/planted.py": {"grader.judge.handle", "grader.judge.handle.Submission"}}


DRIVERS = GRADER / "judge" / "drivers"
HIDDEN = GRADER / "judge" / "hidden"
# What only containment reads: text a driver's code may not hold (paths and programs that read a process from
# outside), modules it may not import, functions it may not name (another process's clock, usage, mappings;
# stopping the worker: the raw pause, a signal).
READING_TEXT = ("/proc", "schedstat", "smaps", "nvidia-smi", "mincore", "nvml")
READING_MODULES = {"ctypes", "_ctypes", "pynvml", "psutil", "grader.containment.tree", "grader.containment.gpu",
                   "grader.containment.pagecache", "grader.containment.cgroup", "grader.containment.sampler",
                   "grader.containment.pauses"}
READING_NAMES = {"mincore", "getrusage", "prlimit", "times", "wait3", "wait4", "clock_getcpuclockid",
                 "pthread_getcpuclockid", "sched_getaffinity", "pause", "SIGSTOP", "SIGCONT"}
# A sampling thread: a module that starts threads (a driver may, to warm a second worker up beside the suite)
# and waits in a loop or on a timer, the shape of a poll or a pauser beside a call (containment's sampler).
THREAD_MODULES = {"threading", "_thread", "concurrent.futures"}
WAITS = {"wait", "sleep", "Timer"}


def _docstrings(tree: ast.AST) -> set[int]:
    """The ids of the docstring nodes of ``tree`` (a module's, a class's, a function's)."""
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) and node.body:
            first = node.body[0]
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant) and isinstance(first.value.value, str):
                found.add(id(first.value))
    return found


def _outside_readings(path: Path, text: str) -> set[str]:
    """What the code of ``text`` (the source of ``path``) reads of a process from outside it: text, modules,
    names (docstrings and comments are not code)."""
    tree = ast.parse(text)
    skipped, found = _docstrings(tree), set()
    imported = {name.rsplit(".", 1)[0] if not _is_module(name) and name.startswith("grader.") else name
                for name in _imported(path, text)}
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in skipped:
            found |= {f"text {word!r}" for word in READING_TEXT if word in node.value.lower()}
        elif isinstance(node, ast.Import):
            imported |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and not node.level:
            imported.add(node.module or "")
            found |= {f"name {alias.name}" for alias in node.names if alias.name in READING_NAMES}
        elif isinstance(node, ast.Attribute) and node.attr in READING_NAMES:
            found.add(f"name {node.attr}")
        elif isinstance(node, ast.Name) and (node.id in READING_NAMES or "nvml" in node.id.lower()):
            found.add(f"name {node.id}")
        if isinstance(node, ast.Attribute) and "nvml" in node.attr.lower():
            found.add(f"name {node.attr}")
    found |= {f"module {name}" for name in imported
              if any(name == module or name.startswith(module + ".") for module in READING_MODULES)}
    if imported & THREAD_MODULES and _waits_on_a_schedule(tree):
        found.add("a sampling thread")
    return found


def _waits_on_a_schedule(tree: ast.AST) -> bool:
    """Whether ``tree`` waits or sleeps inside a loop, or starts a timer."""
    def called(node: ast.AST) -> str:
        return getattr(node.func, "attr", getattr(node.func, "id", "")) if isinstance(node, ast.Call) else ""

    loops = [node for node in ast.walk(tree) if isinstance(node, (ast.While, ast.For))]
    return (any(called(node) in WAITS for loop in loops for node in ast.walk(loop))
            or any(called(node) == "Timer" for node in ast.walk(tree)))


def test_no_driver_reads_a_worker_from_outside_itself():
    """/proc, mincore, NVML, another process's clock or usage, a sampling thread, a pause: containment takes them,
    through the backend."""
    found = {str(path.relative_to(GRADER)): readings for path in sorted([*DRIVERS.rglob("*.py"), *HIDDEN.rglob("*.py")])
             if (readings := _outside_readings(path, path.read_text()))}
    assert not found, found


@pytest.mark.parametrize(("planted", "reading"), [
    ('with open(f"/proc/{pid}/io") as io:\n    io.read()\n', "text '/proc'"),
    ("import ctypes\nlibc = ctypes.CDLL(None)\n", "module ctypes"),
    ("from ...containment import pagecache\npagecache.cached_bytes(3)\n", "module grader.containment.pagecache"),
    ("import pynvml\n", "module pynvml"),
    ("import os\nos.times()\n", "name times"),
    ("import resource\nresource.getrusage(resource.RUSAGE_CHILDREN)\n", "name getrusage"),
    ("import resource\nresource.prlimit(7, resource.RLIMIT_AS)\n", "name prlimit"),
    ("from pynvml import nvmlDeviceGetComputeRunningProcesses\n", "module pynvml"),
    ("import os\nos.wait4(7, 0)\n", "name wait4"),
    ("import threading\ndone = threading.Event()\ndef poll():\n    while not done.wait(0.01):\n        sub.measure()\n"
     "threading.Thread(target=poll, daemon=True).start()\n", "a sampling thread"),
    ("from concurrent.futures import ThreadPoolExecutor\ndef poll():\n    for _ in range(9):\n"
     "        time.sleep(0.01)\nThreadPoolExecutor().submit(poll)\n", "a sampling thread"),
    ("import threading\nthreading.Timer(0.01, sub.measure).start()\n", "a sampling thread"),
    ("from ...containment.sampler import sampled\nsampled(call, poll())\n", "module grader.containment.sampler"),
    ("sub.pause(True)\n", "name pause"),
    ("sub.backend.pause(True)\n", "name pause"),
    ("import os, signal\nos.kill(sub.worker_pid(), signal.SIGSTOP)\n", "name SIGSTOP"),
    ('open("/sys/fs/cgroup/x/cpu.stat")\n# schedstat\n', None),
    ("import threading\nthreading.Thread(target=warm_up, daemon=True).start()\nfor _ in range(3):\n    sub.call('f')\n",
     None),
])
def test_a_driver_that_reads_a_worker_is_found(planted, reading):
    """A planted driver that reads a worker from outside is named; a comment (or a cgroup file: containment
    would not hand a driver its folder), or a thread that warms a worker up without a schedule, is not what the
    scan looks for."""
    found = _outside_readings(DRIVERS / "planted.py", f'"""Mentions /proc and mincore: a docstring."""\n{planted}')
    assert (reading in found) if reading else not found, found


def test_the_worker_holds_only_the_confined_folder_and_the_wire_format(tmp_path):
    package = tmp_path / "assignment"
    package.mkdir()
    (package / "__init__.py").write_text("")
    base = worker_folders(package, None)
    try:
        code = sorted(p.name for p in (base / "work" / "_kit").glob("*.py"))
        assert code == sorted([*BESIDE, *SHARED, *(p.name for p in (GRADER / "confined").glob("*.py") if p.name != "__init__.py")])
        data = {p.name for p in (base / "work" / "_kit").iterdir()} - set(code)
        assert data <= {SYSCALL_FILTER}, data  # the judge's seccomp program, bytes the worker loads
    finally:
        shutil.rmtree(base)


def test_the_sandbox_imports_the_package_the_judge_stages():
    """``confined/`` may import nothing of the kit, so it names the package again: the same one."""
    from grader.confined import dispatch
    from grader.paths import PACKAGE

    assert dispatch.PACKAGE == PACKAGE
