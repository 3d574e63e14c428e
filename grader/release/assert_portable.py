"""Step: the release runs on Linux, macOS and Windows: no Python file in it imports a module
that exists on POSIX systems only (its CI runs the public tests on all three), except inside a test
skipped on Windows (``@pytest.mark.skipif(sys.platform == "win32", ...)``), which never runs there."""

from __future__ import annotations

import ast
from pathlib import Path

from ._context import ReleaseContext, ReleaseError

# Standard-library modules that Windows lacks (the Python docs' "Availability: Unix").
POSIX_ONLY = frozenset({"resource", "fcntl", "pwd", "grp", "termios", "tty", "pty", "posix", "crypt", "spwd",
                        "nis", "syslog", "readline", "curses", "_posixsubprocess"})
DYNAMIC_IMPORTS = {"__import__", "import_module"}


def _skipped_on_windows(node: ast.AST) -> bool:
    """A function whose decorators skip it where ``sys.platform`` is ``"win32"``."""
    return isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and any(
        isinstance(d, ast.Call) and getattr(d.func, "attr", "") == "skipif" and d.args
        and "sys.platform" in ast.unparse(d.args[0]) and "win32" in ast.unparse(d.args[0]) for d in node.decorator_list)


def _nodes(tree: ast.AST):
    """Every node of ``tree`` outside the functions skipped on Windows."""
    for child in ast.iter_child_nodes(tree):
        if not _skipped_on_windows(child):
            yield child
            yield from _nodes(child)


def _imported(tree: ast.AST) -> set[str]:
    """Top-level names of the modules ``tree`` imports, by statement or by a call with a literal name."""
    names: set[str] = set()
    for node in _nodes(tree):
        if isinstance(node, ast.Import):
            names |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names.add(node.module)
        elif isinstance(node, ast.Call) and node.args and isinstance(node.args[0], ast.Constant) \
                and isinstance(node.args[0].value, str) \
                and getattr(node.func, "id", getattr(node.func, "attr", None)) in DYNAMIC_IMPORTS:
            names.add(node.args[0].value)
    return {name.split(".")[0] for name in names}


def find_posix_only_imports(root: Path) -> list[str]:
    """``path: module`` for each POSIX-only module a Python file under ``root`` imports."""
    found = []
    for path in sorted(root.rglob("*.py")):
        for module in sorted(_imported(ast.parse(path.read_text(), str(path))) & POSIX_ONLY):
            found.append(f"{path.relative_to(root)}: {module}")
    return found


def assert_portable(context: ReleaseContext) -> None:
    found = find_posix_only_imports(context.out)
    if found:
        raise ReleaseError("the release imports modules Windows lacks: " + "; ".join(found))
