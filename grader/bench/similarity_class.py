"""A class to measure ``grader similarity`` on: honest submissions and planted copies.

Honest: the reference (``solutions/``), and each fixture of ``grader/tests/fixtures/``
(``alternatives/``, lenient ones included, ``mistakes/`` and ``blind_mistakes/``) written into a
copy of the stubs, as it is appended to the reference elsewhere: independent work on one problem,
the stubs everywhere else. Planted: copies of one honest submission disguised as a copier would,
one disguise at a time and all together: identifiers renamed, functions reordered, comments and
docstrings rewritten, dead code inserted (the code reformatted by ``ast.unparse`` on the way).
"""

from __future__ import annotations

import ast
import builtins
import shutil
from pathlib import Path

from ..paths import ASSIGNMENT, GRADER, SOLUTIONS

FIXTURES = GRADER / "tests" / "fixtures"
HONEST_SETS = ("alternatives", "mistakes", "blind_mistakes")
DISGUISES = ("renamed", "reordered", "recommented", "padded")


def _package(dest: Path) -> Path:
    """A fresh copy of the stubs as ``dest/assignment``."""
    package = dest / "assignment"
    shutil.copytree(ASSIGNMENT, package, ignore=shutil.ignore_patterns("__pycache__"))
    return package


def honest_class(dest: Path) -> list[str]:
    """Write the honest submissions under ``dest`` (one folder each); returns their names."""
    shutil.copytree(SOLUTIONS, dest / "reference" / "assignment", ignore=shutil.ignore_patterns("__pycache__"))
    names = ["reference"]
    for folder in HONEST_SETS:
        for fixture in sorted((FIXTURES / folder).glob("p*_*.py")):
            name = f"{folder}-{fixture.stem}"
            module = _package(dest / name) / f"{fixture.stem.split('_')[1]}.py"
            module.write_text(module.read_text() + "\n\n" + fixture.read_text())
            names.append(name)
    return names


class _Renamer(ast.NodeTransformer):
    """Every name the module defines (functions, classes, parameters, variables) gets a new one."""

    def __init__(self, tree: ast.Module):
        imported = {alias.asname or alias.name.split(".")[0] for node in ast.walk(tree)
                    if isinstance(node, (ast.Import, ast.ImportFrom)) for alias in node.names}
        defined = {node.name for node in ast.walk(tree) if isinstance(node, (ast.FunctionDef, ast.ClassDef))}
        defined |= {node.arg for node in ast.walk(tree) if isinstance(node, ast.arg)}
        defined |= {node.id for node in ast.walk(tree) if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store)}
        keep = imported | set(dir(builtins)) | {"self", "cls"}
        self.names = {name: f"my_{name.strip('_')}_{i}" for i, name in enumerate(sorted(defined - keep))
                      if not name.startswith("__")}

    def visit_Name(self, node: ast.Name) -> ast.Name:
        node.id = self.names.get(node.id, node.id)
        return node

    def visit_arg(self, node: ast.arg) -> ast.arg:
        node.arg = self.names.get(node.arg, node.arg)
        return self.generic_visit(node)

    def visit_FunctionDef(self, node: ast.FunctionDef) -> ast.FunctionDef:
        node.name = self.names.get(node.name, node.name)
        return self.generic_visit(node)

    visit_ClassDef = visit_FunctionDef

    def visit_keyword(self, node: ast.keyword) -> ast.keyword:
        node.arg = self.names.get(node.arg, node.arg) if node.arg else None
        return self.generic_visit(node)


def _bodies(tree: ast.Module):
    """The module, its classes and its functions: every node with a statement body."""
    return [n for n in ast.walk(tree) if isinstance(n, (ast.Module, ast.ClassDef, ast.FunctionDef))]


def _reorder(tree: ast.Module) -> None:
    """The module's and each class's functions in reverse order (imports and constants stay first)."""
    for node in _bodies(tree):
        if isinstance(node, ast.FunctionDef):
            continue
        functions = [s for s in node.body if isinstance(s, (ast.FunctionDef, ast.ClassDef))]
        others = [s for s in node.body if not isinstance(s, (ast.FunctionDef, ast.ClassDef))]
        node.body = others + functions[::-1]


def _recomment(tree: ast.Module) -> None:
    """Every docstring rewritten (comments are gone already: ``ast.unparse`` drops them)."""
    for node in _bodies(tree):
        first = node.body[0] if node.body else None
        if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant) and isinstance(first.value.value, str):
            first.value.value = f"My own work on {getattr(node, 'name', 'this module')}, written from the lecture."


def _pad(tree: ast.Module) -> None:
    """Dead code in every function: an unused local counter, and a branch that never runs."""
    for node in _bodies(tree):
        if isinstance(node, ast.FunctionDef):
            node.body[:0] = ast.parse("debug_steps = 0\nif debug_steps > 1:\n    print('debugging', debug_steps)").body
    tree.body.append(ast.parse("def _unused_helper(values):\n    total = 0\n    for v in values:\n"
                               "        total += v * v\n    return total ** 0.5").body[0])


def disguise(source: str, disguises: tuple[str, ...]) -> str:
    """``source`` with the given disguises applied, reformatted by ``ast.unparse``."""
    tree = ast.parse(source)
    if "renamed" in disguises:
        tree = _Renamer(tree).visit(tree)
    for name, change in (("reordered", _reorder), ("recommented", _recomment), ("padded", _pad)):
        if name in disguises:
            change(tree)
    return ast.unparse(ast.fix_missing_locations(tree)) + "\n"


def planted_copies(original: Path, dest: Path) -> list[str]:
    """Copies of the submission folder ``original`` under ``dest``: each disguise alone, then all of them."""
    names = []
    for disguises in [(d,) for d in DISGUISES] + [DISGUISES]:
        name = f"copy-of-{original.name}-{'+'.join(disguises) if len(disguises) == 1 else 'all'}"
        package = dest / name / "assignment"
        package.mkdir(parents=True)
        for module in sorted((original / "assignment").glob("*.py")):
            (package / module.name).write_text(disguise(module.read_text(), disguises))
        names.append(name)
    return names
