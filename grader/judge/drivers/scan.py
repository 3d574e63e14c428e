"""The static source scan shared by the problems graded on their source (P3's form, P5's delegation).

Everything here reads the judge's own copy of the submitted files; nothing runs them.

- ``Source``: one parsed module: its import aliases (``dotted`` resolves ``e.rearrange`` to
  ``einops.rearrange``), the strings it always computes (``fold``: literals, ``+``, f-strings,
  ``join``, ``[::-1]``, ``.upper()`` and friends, names assigned such a string once), and the
  attribute names it asks for by string (``getattr(torch.optim, "S" + "GD")``).
- ``dynamic``: the rule for every problem graded on its source: no dynamic way of reaching a
  module or an object (``importlib``, ``__import__``, ``sys.modules``, ``eval``/``exec``/``compile``,
  ``gc``, ``inspect``, ``ctypes``, frames and closures, ``getattr`` on a module with a name the
  scan cannot compute...). A reader of the source cannot tell what such code reaches.
- ``package``: a module of the submission and every module of the package it imports,
  transitively (``__init__.py`` included: importing any module of the package runs it; or only
  where the module takes names from the package itself).
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from pathlib import Path

from ...paths import PACKAGE

DYNAMIC_WAYS = ("importlib, __import__, sys.modules, eval/exec/compile, gc, inspect, ctypes, pickle, "
                "torch.load(weights_only=False), pydoc.locate, profilers and debuggers that run text, frames, "
                "closures, getattr on a module with a computed name...")
DYNAMIC_RULE = (f"code graded on its source may not reach modules or objects dynamically ({DYNAMIC_WAYS}): "
                "the grader could not tell what it reaches (see the handout, 'Rules that hold for every problem')")
# Modules whose only use here would be reaching code by name, by address or by unpickling.
DYNAMIC_MODULES = frozenset({"importlib", "imp", "gc", "inspect", "ctypes", "_ctypes", "runpy", "pkgutil",
                             "zipimport", "builtins", "code", "codeop", "pickle", "_pickle", "marshal", "copyreg",
                             "dill", "cloudpickle",
                             # resolvers by string, and runners of text (``locate``, ``runctx``, ``exec`` of docs)
                             "pydoc", "trace", "cProfile", "profile", "pdb", "bdb", "timeit", "doctest"})
# Those names as plain names too (``importlib.reload(m)``); ``code`` and ``imp`` are common variable names.
_DYNAMIC_MODULE_NAMES = DYNAMIC_MODULES - {"code", "codeop", "imp"}
DYNAMIC_NAMES = frozenset({"__import__", "eval", "exec", "compile", "globals", "locals", "vars", "__builtins__",
                           "breakpoint"})
# Attributes of frames, functions and classes that hand out other code's objects.
DYNAMIC_ATTRIBUTES = frozenset({"_getframe", "f_back", "f_globals", "f_locals", "f_builtins", "tb_frame", "gi_frame",
                                "cr_frame", "ag_frame", "__closure__", "cell_contents", "__globals__", "__builtins__",
                                "__subclasses__", "__getattribute__", "__import__", "__loader__", "__reduce__",
                                "__reduce_ex__", "attrgetter", "methodcaller", "_import_dotted_name", "runctx",
                                "runcall"})
_GETTERS = ("getattr", "hasattr")
_TEXT_METHODS = {"upper", "lower", "strip", "title", "capitalize", "casefold"}


@dataclass(frozen=True)
class Finding:
    """One use of something a rule forbids: where, and what."""

    file: str
    line: int
    what: str

    def __str__(self) -> str:
        return f"{self.file} line {self.line}: {self.what}"


def fold(node: ast.AST, constants: dict[str, str]) -> str | None:
    """The string an expression always evaluates to, where constants decide it; else None."""
    if isinstance(node, ast.Constant):
        return node.value if isinstance(node.value, str) else None
    if isinstance(node, ast.Name):
        return constants.get(node.id)
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        left, right = fold(node.left, constants), fold(node.right, constants)
        return None if left is None or right is None else left + right
    if isinstance(node, ast.JoinedStr):
        parts = [fold(v.value if isinstance(v, ast.FormattedValue) else v, constants) for v in node.values]
        return None if None in parts else "".join(parts)  # type: ignore[arg-type]
    if isinstance(node, ast.Subscript) and isinstance(node.slice, ast.Slice):
        text, s = fold(node.value, constants), node.slice
        steps = [None if part is None else _integer(part) for part in (s.lower, s.upper, s.step)]
        if text is not None and all(v is None or type(v) is int for v in steps):
            return text[slice(*steps)]
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and not node.keywords:
        owner = fold(node.func.value, constants)
        if owner is not None and node.func.attr in _TEXT_METHODS and not node.args:
            return getattr(owner, node.func.attr)()
        if owner is not None and node.func.attr == "join" and len(node.args) == 1 and isinstance(
                node.args[0], (ast.List, ast.Tuple)):
            parts = [fold(item, constants) for item in node.args[0].elts]
            return None if None in parts else owner.join(parts)  # type: ignore[arg-type]
    return None


def _integer(node: ast.AST) -> int | str:
    """A literal int (``-1`` included), or "?"."""
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        value = _integer(node.operand)
        return -value if type(value) is int else "?"
    return node.value if isinstance(node, ast.Constant) and type(node.value) is int else "?"


def _root(node: ast.AST) -> str | None:
    """The name an expression is built on (``torch`` for ``torch.optim.x[0]()``); None if not a name."""
    while isinstance(node, (ast.Attribute, ast.Subscript, ast.Call)):
        node = node.func if isinstance(node, ast.Call) else node.value
    return node.id if isinstance(node, ast.Name) else None


class Source:
    """One module's text, parsed, with its aliases, constants and names asked for by string."""

    def __init__(self, text: str, file: str) -> None:
        self.file = file
        self.tree = ast.parse(text)
        self.aliases = self._aliases()
        self.constants = self._constants()

    def _aliases(self) -> dict[str, str]:
        """Local name -> the dotted name it was imported as (``e`` -> ``einops``, ``r`` -> ``einops.rearrange``;
        relative imports as ``.module.name``). Star imports bind nothing here."""
        aliases: dict[str, str] = {}
        for node in ast.walk(self.tree):
            if isinstance(node, ast.Import):
                for alias in node.names:
                    root = alias.name.split(".")[0]
                    aliases[alias.asname or root] = alias.name if alias.asname else root
            elif isinstance(node, ast.ImportFrom):
                base = "." * node.level + (node.module or "")
                for alias in node.names:
                    if alias.name != "*":
                        aliases[alias.asname or alias.name] = f"{base}.{alias.name}" if node.module else base + alias.name
        return aliases

    def _constants(self) -> dict[str, str]:
        """Names assigned exactly once, to a string the folder can compute."""
        assigned: dict[str, list[ast.AST]] = {}
        for names, value, exact in _bindings(self.tree):
            for name in names:  # a name also bound otherwise (a loop, a parameter, +=) is not a constant
                assigned.setdefault(name, []).append(value if exact and value is not None else ast.Constant(None))
        constants: dict[str, str] = {}
        for _ in range(3):  # names built from names
            for name, values in assigned.items():
                if len(values) == 1 and (text := fold(values[0], constants)) is not None:
                    constants[name] = text
        return constants

    def dotted(self, node: ast.AST) -> str | None:
        """``e.rearrange`` -> ``einops.rearrange`` (None when the root is not a name)."""
        parts = []
        while isinstance(node, ast.Attribute):
            parts.append(node.attr)
            node = node.value
        if not isinstance(node, ast.Name):
            return None
        return ".".join([self.aliases.get(node.id, node.id), *reversed(parts)])

    def fold(self, node: ast.AST) -> str | None:
        return fold(node, self.constants)

    def asked_by_string(self, keys: bool = False) -> list[tuple[int, str]]:
        """(line, text) for each attribute name given as a computable string: ``getattr(x, "S" + "GD")``,
        ``hasattr``, ``operator.attrgetter``/``methodcaller``, ``x.__getattribute__(...)``; with
        ``keys``, subscripts too (``vars(m)["S" + "GD"]``)."""
        found = []
        for node in ast.walk(self.tree):
            if isinstance(node, ast.Call) and _callee(node) in (*_GETTERS, "attrgetter", "methodcaller",
                                                                "__getattribute__"):
                found += [(node.lineno, t) for t in map(self.fold, node.args[:2]) if t is not None]
            elif keys and isinstance(node, ast.Subscript) and (text := self.fold(node.slice)) is not None:
                found.append((node.lineno, text))
        return found

    def plain_names(self) -> set[str]:
        """Names bound here (parameters, assignments, loop and ``with`` targets) to something not built
        on a module: ``getattr`` on them with any name is ordinary code (``getattr(self, key)``)."""
        bindings = list(_bindings(self.tree))
        modular = set(self.aliases)
        for _ in range(4):  # aliases of aliases
            modular |= {name for names, value, _ in bindings if value is not None and _root(value) in modular
                        for name in names}
        return {name for names, _, _ in bindings for name in names} - modular

    def finding(self, node: ast.AST, what: str) -> Finding:
        return Finding(self.file, getattr(node, "lineno", 0), what)


def _bound(target: ast.AST) -> list[str]:
    """The names an assignment target binds (``a, *b = ...``: a and b; ``self.x = ...``, ``d[k] = ...``: none)."""
    if isinstance(target, ast.Name):
        return [target.id]
    if isinstance(target, ast.Starred):
        return _bound(target.value)
    if isinstance(target, (ast.Tuple, ast.List)):
        return [name for item in target.elts for name in _bound(item)]
    return []


def _bindings(tree: ast.Module) -> list[tuple[list[str], ast.AST | None, bool]]:
    """For every binding: the names bound, the expression they are bound to, iterate over or default
    to (None when unknown), and whether they are bound to exactly that expression's value."""
    found: list[tuple[list[str], ast.AST | None, bool]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign):
            found += [(_bound(t), node.value, True) for t in node.targets]
        elif isinstance(node, (ast.AnnAssign, ast.AugAssign, ast.NamedExpr)):
            found.append((_bound(node.target), node.value, not isinstance(node, ast.AugAssign)))
        elif isinstance(node, (ast.For, ast.AsyncFor, ast.comprehension)):
            found.append((_bound(node.target), node.iter, False))
        elif isinstance(node, ast.withitem) and node.optional_vars is not None:
            found.append((_bound(node.optional_vars), node.context_expr, False))
        elif isinstance(node, ast.ExceptHandler) and node.name:
            found.append(([node.name], None, False))
        elif isinstance(node, ast.arguments):
            params = [*node.posonlyargs, *node.args, *node.kwonlyargs, node.vararg, node.kwarg]
            defaults = [None] * (len(node.posonlyargs) + len(node.args) - len(node.defaults)) + [*node.defaults]
            defaults += [*node.kw_defaults, None, None]
            found += [([a.arg], d, False) for a, d in zip(params, defaults) if a is not None]
    return found


def _callee(node: ast.Call) -> str:
    return node.func.id if isinstance(node.func, ast.Name) else node.func.attr if isinstance(
        node.func, ast.Attribute) else ""


def dynamic(source: Source) -> list[Finding]:
    """Uses of the dynamic ways of reaching modules and objects that ``DYNAMIC_RULE`` forbids."""
    found = []
    plain = source.plain_names()
    called = {id(node.func) for node in ast.walk(source.tree) if isinstance(node, ast.Call)}
    for node in ast.walk(source.tree):
        if isinstance(node, ast.Import):
            found += [source.finding(node, f"import {a.name}") for a in node.names
                      if a.name.split(".")[0] in DYNAMIC_MODULES]
        elif isinstance(node, ast.ImportFrom) and not node.level and node.module:
            if node.module.split(".")[0] in DYNAMIC_MODULES or (node.module == "sys" and any(
                    a.name in ("modules", "_getframe") for a in node.names)) or any(
                    a.name in DYNAMIC_ATTRIBUTES for a in node.names):
                found.append(source.finding(node, f"from {node.module} import ..."))
        elif isinstance(node, ast.Name) and node.id in DYNAMIC_NAMES | _DYNAMIC_MODULE_NAMES:
            found.append(source.finding(node, node.id))
        elif isinstance(node, ast.Name) and node.id in _GETTERS and id(node) not in called:
            found.append(source.finding(node, f"{node.id} passed on as a value"))
        elif isinstance(node, ast.Attribute) and (node.attr in DYNAMIC_ATTRIBUTES or (
                node.attr == "modules" and source.dotted(node) == "sys.modules")):
            found.append(source.finding(node, f".{node.attr}"))
        elif isinstance(node, ast.Attribute) and node.attr == "__dict__" and _root(node.value) not in plain:
            found.append(source.finding(node, f"{ast.unparse(node)} (a module's namespace)"))
        elif isinstance(node, ast.Call) and any(k.arg == "weights_only" and not (
                isinstance(k.value, ast.Constant) and k.value.value is True) for k in node.keywords):
            found.append(source.finding(node, f"{ast.unparse(node)[:80]} (unpickles any class it names)"))
        elif isinstance(node, ast.Call) and _callee(node) in _GETTERS and len(node.args) >= 2 \
                and source.fold(node.args[1]) is None and _root(node.args[0]) not in plain:
            found.append(source.finding(node, f"{ast.unparse(node)[:80]} (a name the grader cannot compute)"))
    return found


def _own_modules(module: str, level: int, member: str | None, present: set[str]) -> list[str]:
    """The package's own modules (file stems) that importing ``member`` from ``module`` (``level`` dots)
    loads: ``__init__`` and the module named, and ``member`` where it is a module file itself."""
    parts = module.split(".") if module else []
    if level == 0:
        if not parts or parts[0] != PACKAGE:
            return []
        parts = parts[1:]
    elif level > 1:
        return []
    if parts:
        return ["__init__", parts[0]]
    return ["__init__"] + ([member] if member in present else [])


def _parse(folder: Path, name: str) -> Source | Finding:
    path = folder / f"{name}.py"
    try:
        return Source(path.read_text(errors="replace"), path.name)
    except (SyntaxError, ValueError) as exc:
        return Finding(path.name, getattr(exc, "lineno", 0) or 0, f"does not parse ({exc})")


def package(folder: Path, entry: str, init: bool = True) -> tuple[list[Source], list[Finding]]:
    """``entry``'s module of the submission in ``folder``, ``__init__``, and every module of the package
    they import, transitively; with findings for files that do not parse and for imports of package
    modules that are not files of the submission (written at run time, perhaps).

    ``init``: ``__init__`` is read as what importing any module of the package runs (P5: all that runs in
    its worker); else only where a module takes names from the package itself (P3: what the entry's
    functions reach)."""
    present = {path.stem for path in folder.glob("*.py")}
    parsed = {name: _parse(folder, name) for name in present}
    init_source = parsed.get("__init__")
    bound = _top_level_names(init_source.tree) if isinstance(init_source, Source) else set()
    todo, seen, sources, problems = [entry, "__init__"] if init else [entry], set(), [], []
    while todo:
        name = todo.pop(0)
        if name in seen or name not in present:
            continue
        seen.add(name)
        if isinstance(parsed[name], Finding):
            problems.append(parsed[name])
            continue
        source = parsed[name]
        sources.append(source)
        for node in ast.walk(source.tree):
            if isinstance(node, ast.Import):
                imported = [(a.name, 0, None) for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                imported = [(node.module or "", node.level, a.name) for a in node.names]
            else:
                continue
            for module, level, member in imported:
                own = _own_modules(module, level, member, present)
                missing = [m for m in own if m not in present and m != "__init__"]
                if own == ["__init__"] and member not in bound | present | {None, "*"}:
                    missing.append(member)
                problems += [source.finding(node, f"imports {PACKAGE}.{m}, which is not a file of the submission")
                             for m in missing]
                todo += own if init or own == ["__init__"] else [m for m in own if m != "__init__"]
    return sources, problems


def _top_level_names(tree: ast.Module) -> set[str]:
    """Names bound at the top level of a module (definitions, assignments, imports)."""
    names = set()
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            names |= {(a.asname or a.name).split(".")[0] for a in node.names}
        else:
            names |= {n.id for n in ast.walk(node) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)}
    return names
