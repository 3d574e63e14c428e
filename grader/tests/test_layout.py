"""The trust boundary is visible in the layout: ``grader/confined/`` is exactly what runs in the
sandbox (with ``grader/wire.py``), and the judge side never imports from it."""

from __future__ import annotations

import ast
import shutil
from pathlib import Path

from grader.containment.launch import SYSCALL_FILTER, stage

GRADER = Path(__file__).resolve().parents[1]
# The --in-process debugging backend runs the dispatcher in the judge on purpose (never for grading);
# the diagnosis replays a failed test's calls on the kit's own code (the reference and its curated
# mutants, never the submission) through it.
ALLOWED = {GRADER / "judge" / "inprocess.py"}
# The worker's configuration is the one thing both sides share besides the wire format: data only, built
# by the containment that starts the worker and read by confine.py.
CONFIG = "confined.config"


def _imports_of(path: Path) -> set[str]:
    names = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom):
            module = node.module or ""
            names |= {f"{'.' * node.level}{module}.{alias.name}".strip(".") for alias in node.names} | {
                "." * node.level + module}
        elif isinstance(node, ast.Import):
            names |= {alias.name for alias in node.names}
    return names


def test_the_judge_side_never_imports_the_sandbox_side():
    offenders = {}
    for path in GRADER.rglob("*.py"):
        if "confined" in path.parts or "tests" in path.relative_to(GRADER).parts or path in ALLOWED:
            continue
        found = {name for name in _imports_of(path) if "confined" in name}
        if "containment" in path.parts:
            found = {name for name in found if not name.lstrip(".").removeprefix("grader.").startswith(CONFIG)}
        if found:
            offenders[str(path.relative_to(GRADER))] = sorted(found)
    assert not offenders, offenders


def test_the_sandbox_side_imports_only_the_wire_format_from_the_kit():
    for path in (GRADER / "confined").glob("*.py"):
        kit = {name for name in _imports_of(path) if name.startswith("..") or name.startswith("grader")}
        assert kit <= {"..", "..wire"}, (path.name, kit)  # and its own modules (one dot)


def test_the_worker_holds_only_the_confined_folder_and_the_wire_format(tmp_path):
    package = tmp_path / "assignment"
    package.mkdir()
    (package / "__init__.py").write_text("")
    base = stage(package, None)
    try:
        code = sorted(p.name for p in (base / "work" / "_kit").glob("*.py"))
        assert code == sorted(["wire.py", *(p.name for p in (GRADER / "confined").glob("*.py") if p.name != "__init__.py")])
        data = {p.name for p in (base / "work" / "_kit").iterdir()} - set(code)
        assert data <= {SYSCALL_FILTER}, data  # the judge's seccomp program, bytes the worker loads
    finally:
        shutil.rmtree(base)


def test_containment_imports_only_the_backend_contract_and_the_wire_format():
    for path in (GRADER / "containment").glob("*.py"):
        kit = {name.lstrip(".").removeprefix("grader.").split(".")[0] for name in _imports_of(path)
               if name.startswith("..") or name.startswith("grader")}
        assert kit <= {"", "wire", "backend", "confined"}, (path.name, kit)  # confined: its WorkerConfig only
