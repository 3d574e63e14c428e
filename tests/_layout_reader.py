"""P1's "decode from the layout" rule, read from source: what ``decode_float`` reaches that reinterprets bits.

One reader for the public test and the grade (which loads this file by its path). It reads the package as the
call reaches it: ``decode_float`` and the module-level definitions it names, transitively; what it imports
from the package's other modules (the names imported, or a whole module imported as a module), followed the
same way; and ``__init__.py`` whole, which runs before any call and may rebind anything. A reinterpretation is
a ``.view``/``frombuffer``/``unpack``/``astype``/``tobytes``-like call, ``struct``, ``ctypes``, ``memoryview``,
or one of numpy's (or ml_dtypes') float types.
"""

from __future__ import annotations

import ast
from pathlib import Path

CALLS = {"view", "view_as", "frombuffer", "from_buffer", "from_buffer_copy", "from_numpy", "unpack", "unpack_from",
         "iter_unpack", "astype", "tobytes"}
MODULES = {"struct", "ctypes"}
NAMES = MODULES | {"memoryview"}
FLOAT_TYPE_MODULES = {"numpy", "ml_dtypes"}
FLOAT_TYPES = {"float16", "float32", "float64", "half", "single", "double", "float_", "bfloat16", "longdouble"}


def reinterpretations(package: Path, module: str = "memory", root: str = "decode_float") -> list[str]:
    """Where ``package``'s ``module.root`` and what it reaches reinterpret bits: ``"file: what on line N"``."""
    found: list[str] = []
    todo, seen = [(module, root)], set()
    init = package / "__init__.py"
    if init.is_file():
        todo.append(("__init__", ""))  # "": the whole module
    while todo:
        name, start = todo.pop()
        if (name, start) in seen or not (package / f"{name}.py").is_file():
            continue
        seen.add((name, start))
        tree = ast.parse((package / f"{name}.py").read_text(errors="replace"))
        imported = _imports(tree)
        nodes = _reachable(tree, start) if start else [tree]
        found += [f"{name}.py: {what}" for what in _reinterpreted(nodes, imported)]
        todo += _package_names(nodes, imported, tree)
    return list(dict.fromkeys(found))


def _imports(tree: ast.Module) -> dict[str, str]:
    """Local name -> what it was imported as (``np`` -> ``numpy``, ``unpack`` -> ``struct.unpack``; a relative
    import keeps its dots: ``h`` -> ``.helpers.h``)."""
    names = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                names[alias.asname or alias.name.split(".")[0]] = alias.name if alias.asname else alias.name.split(".")[0]
        elif isinstance(node, ast.ImportFrom):
            base = "." * node.level + (node.module or "")
            for alias in node.names:
                names[alias.asname or alias.name] = f"{base}.{alias.name}" if node.module else f"{base}{alias.name}"
    return names


def _reachable(tree: ast.Module, root: str) -> list[ast.AST]:
    """``root``'s definition plus the module-level definitions and assignments it (transitively) names."""
    defined: dict[str, list[ast.AST]] = {}
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            defined.setdefault(node.name, []).append(node)
        elif isinstance(node, (ast.Assign, ast.AnnAssign, ast.AugAssign)):
            for target in node.targets if isinstance(node, ast.Assign) else [node.target]:
                for name in ast.walk(target):
                    if isinstance(name, ast.Name):
                        defined.setdefault(name.id, []).append(node)
    seen, todo, nodes = {root}, [root], []
    while todo:
        for node in defined.get(todo.pop(), []):
            nodes.append(node)
            for inner in ast.walk(node):
                if isinstance(inner, ast.Name) and inner.id in defined and inner.id not in seen:
                    seen.add(inner.id)
                    todo.append(inner.id)
    return nodes


def _package_names(nodes: list[ast.AST], imported: dict[str, str], tree: ast.Module) -> list[tuple[str, str]]:
    """The package's modules (and names in them) that ``nodes`` use: ``(module, name)``, name "" for a whole
    module; ``from . import helpers`` and ``from .helpers import h`` alike."""
    used = {node.id for top in nodes for node in ast.walk(top) if isinstance(node, ast.Name)}
    if nodes == [tree]:
        used |= set(imported)
    follow = []
    for local in used & set(imported):
        target = imported[local]
        if not target.startswith("."):
            continue
        parts = target.lstrip(".").split(".")  # the package's modules sit side by side: one level
        follow.append((parts[0], parts[1] if len(parts) > 1 else ""))
    return follow


def _reinterpreted(nodes: list[ast.AST], imported: dict[str, str]) -> list[str]:
    def banned(name: str) -> bool:
        module, _, member = imported.get(name, "").partition(".")
        return module in MODULES or (module in FLOAT_TYPE_MODULES and member in FLOAT_TYPES)

    found = []
    for node in (inner for top in nodes for inner in ast.walk(top)):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in CALLS:
            found.append(f".{node.func.attr}(...) on line {node.lineno}")
        elif isinstance(node, ast.Name) and (node.id in NAMES or banned(node.id)):
            found.append(f"{node.id} on line {node.lineno}")
        elif (isinstance(node, ast.Attribute) and node.attr in FLOAT_TYPES and isinstance(node.value, ast.Name)
              and imported.get(node.value.id, "").split(".")[0] in FLOAT_TYPE_MODULES):
            found.append(f"{ast.unparse(node)} on line {node.lineno}")
    return found
