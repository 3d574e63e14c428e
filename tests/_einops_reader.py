"""P3's form rules, read from source: what the nine functions of ``einsum.py`` may do, and what produced their values.

One reader for the public test and the grade (which loads this file by its path), so a student's run and the
grade apply the same rule in the same words. It is static: it reads the package's files and runs nothing of
them (a submission's run time cannot be trusted to report on itself). It reads the package as a call
reaches it: the nine functions and every definition they name, transitively, in ``einsum.py`` and in the
package's other modules (``from ._helpers import h``, ``from . import helpers``, names bound in
``__init__.py``); and, for ``__init__.py`` and every module of the package that is imported, the code that
runs when it is imported (anything but imports, definitions and plain ``NAME = ...`` assignments, which count
where they are used).

**[P3.form-no-old-way] is an allowlist.** That code may only: call einops' ``einsum``, ``rearrange``,
``reduce``, ``repeat`` and ``parse_shape``; read a tensor's ``.shape``, ``.ndim``, ``.dtype``, ``.device`` and
call its ``.size()``, ``.dim()``, ``.numel()``; subscript shapes, sizes and other values that are not tensors
(never a tensor: no ``x[...]``); call ``math.*``, the package's own functions and the builtins of
``BUILTINS`` (``len``, ``int``, ``isinstance``, ``range``, ``ValueError``...); do arithmetic other than ``@``
(scaling a tensor by a number is fine); compare, branch, raise; iterate and unpack only what is not a tensor.
Anything else (any other call or attribute of a tensor or of ``torch``, ``torch.nn.functional`` ...: also
those no list names) is refused as not allowed, with its file, line and function.

**[P3.form-einops] follows the returned value.** Each of the nine functions earns it where every value it
returns is produced by an einops call of its own (or by arithmetic with numbers on such a value, or a helper
of the package applied to such a value) whose pattern changes something, applied to the inputs or to values
so produced. A pattern that is an identity once unit axes (``()``, ``1``) are dropped (``"... -> ..."``,
``"... -> ... ()"``) changes nothing; an einops call on a value that something other than einops computed
(a round trip ``rearrange(rearrange(v, "... -> ... ()"), "... () -> ...")`` of a value computed the old way,
or a dead call beside it) produces nothing of the value.
"""

from __future__ import annotations

import ast
import builtins
from dataclasses import dataclass, field
from pathlib import Path

LISTED = ("pairwise_scores", "sum_hidden", "mean_hidden", "split_heads", "merge_heads", "per_head_linear",
          "linear", "attention_scores", "channels_first")
EINOPS_REWRITES = frozenset({"einsum", "rearrange", "reduce", "repeat"})
EINOPS_SCALARS = frozenset({"parse_shape"})
SHAPE_ATTRIBUTES = frozenset({"shape", "ndim", "dtype", "device"})
SHAPE_METHODS = frozenset({"size", "dim", "numel"})
NUMBER_METHODS = frozenset({"is_integer"})  # of Python floats (a tensor has no such method)
SCALAR_MODULES = frozenset({"math"})  # every function of these computes numbers, not tensors
# Builtins that compute no tensor (exceptions are allowed too: raising is fine).
BUILTINS = frozenset({"len", "int", "float", "bool", "str", "repr", "format", "isinstance", "issubclass", "type",
                      "range", "tuple", "list", "dict", "set", "frozenset", "enumerate", "zip", "all", "any", "abs",
                      "min", "max", "round", "divmod", "pow", "callable", "hash", "print"})
EXCEPTIONS = frozenset(name for name, value in vars(builtins).items()
                       if isinstance(value, type) and issubclass(value, BaseException))
ALLOWED = ("allowed: einops.einsum/rearrange/reduce/repeat/parse_shape; a tensor's .shape, .ndim, .dtype, .device, "
           ".size(), .dim(), .numel(); subscripts of shapes and sizes (not of tensors); math.*, builtins that "
           "compute no tensor (len, int, float, isinstance, range, ...), the package's own functions; arithmetic "
           "other than @ (a tensor scaled by a number is fine), comparisons, if, raise")

REWRITE = ("an einops call of the function's own (einsum, rearrange, reduce or repeat, with a pattern written in the "
           "code that changes something once unit axes are dropped) must produce each returned value from the inputs "
           "or from values einops produced (a number may scale it): an identity, a round trip such as '... -> ... ()' "
           "then '... () -> ...', an einops call on a value computed another way or beside the value, or a call to "
           "another function that calls einops does not count")

# What a value is, as far as the form is concerned.
SCALAR = "scalar"  # a number, shape, string...: never a tensor
INPUT = "input"  # an argument (or a value made from arguments without einops)
EINOPS = "einops"  # produced by an einops rewrite here, from inputs and such values
OTHER = "other"  # computed some other way (a refused operation, a call the reader cannot follow)
_RANK = {OTHER: 0, INPUT: 1, EINOPS: 2, SCALAR: 3}


@dataclass(frozen=True)
class Value:
    kind: str  # SCALAR, INPUT, EINOPS, OTHER, or "module", "external", "functions", "builtin"
    data: object = None


def _plain(kind: str) -> Value:
    return Value(kind)


def _tensorish(value: Value) -> str:
    """The provenance of a value used as data (a function or module used as data is OTHER, a name of an
    external library too)."""
    return value.kind if value.kind in _RANK else SCALAR if value.kind == "builtin" else OTHER


def _merge(*values: Value) -> Value:
    """Branches joined: the weakest provenance."""
    kinds = [_tensorish(v) for v in values] or [SCALAR]
    return Value(min(kinds, key=_RANK.__getitem__))


def _arith(*values: Value) -> Value:
    """Arithmetic: a number does not change what a tensor is; otherwise the weakest of the tensors."""
    kinds = [_tensorish(v) for v in values]
    tensors = [k for k in kinds if k != SCALAR]
    return Value(min(tensors, key=_RANK.__getitem__) if tensors else SCALAR)


def _unit_free(side: str) -> list[str]:
    """One side of a pattern, unit axes (``()``, ``1``) dropped: ``"a () (b c) 1"`` -> ``["a", "(b c)"]``."""
    groups, depth, current = [], 0, []
    for token in side.replace("(", " ( ").replace(")", " ) ").split():
        if token == "(":
            depth, current = depth + 1, []
        elif token == ")":
            depth -= 1
            inner = [t for t in current if t != "1"]
            if inner:
                groups.append("(" + " ".join(inner) + ")" if len(inner) > 1 else inner[0])
        elif depth:
            current.append(token)
        elif token != "1":
            groups.append(token)
    return groups


def changes_something(pattern: str | None, operands: int = 1) -> bool:
    """Whether an einops pattern rewrites anything once unit axes are dropped (an einsum of two tensors always does)."""
    if pattern is None or "->" not in pattern:
        return False
    if operands > 1:
        return True
    left, _, right = pattern.partition("->")
    return _unit_free(left) != _unit_free(right)


@dataclass
class Module:
    name: str
    file: str
    tree: ast.Module
    aliases: dict[str, str] = field(default_factory=dict)  # local name -> import target (relative: leading dots)
    bindings: dict[str, list[ast.AST]] = field(default_factory=dict)  # top-level name -> its binding statements
    stars: list[str] = field(default_factory=list)  # targets of ``from X import *``


def _top_statements(body: list[ast.stmt]):
    """Top-level statements, those in top-level if/try/with blocks included."""
    for stmt in body:
        yield stmt
        if isinstance(stmt, (ast.If, ast.With, ast.Try)) or type(stmt).__name__ == "TryStar":
            for part in ("body", "orelse", "finalbody"):
                yield from _top_statements(getattr(stmt, part, []))
            for handler in getattr(stmt, "handlers", []):
                yield from _top_statements(handler.body)


def _names(target: ast.AST) -> list[str]:
    return [n.id for n in ast.walk(target) if isinstance(n, ast.Name)]


def _parse(name: str, path: Path) -> Module:
    module = Module(name, path.name, ast.parse(path.read_text(errors="replace")))
    for stmt in _top_statements(module.tree.body):
        if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            module.bindings.setdefault(stmt.name, []).append(stmt)
        elif isinstance(stmt, (ast.Assign, ast.AnnAssign, ast.AugAssign)):
            for target in stmt.targets if isinstance(stmt, ast.Assign) else [stmt.target]:
                for name in _names(target) if isinstance(target, (ast.Name, ast.Tuple, ast.List, ast.Starred)) else []:
                    module.bindings.setdefault(name, []).append(stmt)
        elif isinstance(stmt, (ast.For, ast.AsyncFor)):
            for name in _names(stmt.target):
                module.bindings.setdefault(name, []).append(stmt)
    for node in ast.walk(module.tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                root = alias.name.split(".")[0]
                module.aliases[alias.asname or root] = alias.name if alias.asname else root
        elif isinstance(node, ast.ImportFrom):
            base = "." * node.level + (node.module or "")
            for alias in node.names:
                if alias.name == "*":
                    module.stars.append(base)
                else:
                    module.aliases[alias.asname or alias.name] = (f"{base}.{alias.name}" if node.module
                                                                  else base + alias.name)
    return module


class Reader:
    """The form of one package (a folder of modules), read once."""

    def __init__(self, package: Path) -> None:
        self.package = Path(package)
        self.modules: dict[str, Module] = {}
        self.refused: dict[tuple[str, int, str], str] = {}
        self._returns: dict[tuple, Value] = {}
        self._globals: dict[tuple[str, str], Value] = {}
        self._loaded: list[str] = []
        self.rebound: set[tuple[str, str]] = set()  # (module, name) assigned from outside: module.name = ...

    # --- modules and names ---------------------------------------------------------------------

    def module(self, name: str) -> Module | None:
        if name not in self.modules:
            path = self.package / f"{name}.py"
            if not path.is_file():
                return None
            try:
                self.modules[name] = _parse(name, path)
            except (SyntaxError, ValueError) as exc:
                self.refused.setdefault((path.name, 0, "parse"), f"{path.name}: does not parse ({exc})")
                return None
            self._loaded.append(name)
        return self.modules[name]

    def _package_target(self, target: str) -> str | None:
        """``.helpers.h`` / ``assignment.helpers.h`` -> ``helpers.h`` ("" for the package itself); None outside."""
        if target.startswith(".."):
            return None
        if target.startswith("."):
            return target[1:]
        root, _, rest = target.partition(".")
        return rest if root == self.package.name else None

    def resolve_import(self, target: str) -> Value:
        inside = self._package_target(target)
        if inside is None:
            return Value("external", target)
        if not inside:
            return Value("module", "__init__")
        first, _, rest = inside.partition(".")
        if self.module(first) is not None:
            return Value("module", first) if not rest else self.attribute(Value("module", first), rest.split(".")[0])
        return self.global_(self.module("__init__"), first) if self.module("__init__") else Value(OTHER)

    def global_(self, module: Module, name: str) -> Value:
        """What a module-level name of ``module`` is (every binding of it, merged)."""
        key = (module.name, name)
        if key in self._globals:
            return self._globals[key]
        self._globals[key] = Value(OTHER)  # a name defined through itself is nothing the reader can follow
        if name in module.bindings:
            found = []
            for stmt in module.bindings[name]:
                if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef)):
                    found.append(Value("functions", ((module.name, stmt),)))
                elif isinstance(stmt, (ast.Assign, ast.AnnAssign)) and stmt.value is not None and all(
                        isinstance(t, ast.Name) for t in (stmt.targets if isinstance(stmt, ast.Assign) else [stmt.target])):
                    found.append(Scope(self, module, None, {}).expression(stmt.value))
                else:  # a class, an unpacking, an augmented assignment, a loop variable
                    if not isinstance(stmt, ast.ClassDef):
                        Scope(self, module, None, {}).statement(stmt)
                    found.append(Value(OTHER))
            value = found[0] if len(found) == 1 else (
                Value("functions", tuple(f for v in found for f in v.data))
                if all(v.kind == "functions" for v in found) else _merge(*found))
        elif name in module.aliases:
            value = self.resolve_import(module.aliases[name])
        elif name in EXCEPTIONS or name in BUILTINS or hasattr(builtins, name):
            value = Value("builtin", name)
        else:
            value = Value(OTHER)
            for star in module.stars:
                inside = self._package_target(star)
                if inside is not None and inside and self.module(inside.split(".")[0]) is not None:
                    value = self.global_(self.module(inside.split(".")[0]), name)
                elif inside is None:
                    value = Value("external", f"{star}.{name}")
        self._globals[key] = value
        return value

    def attribute(self, owner: Value, name: str) -> Value:
        if owner.kind == "module":
            if self.module(name) is not None and name not in self.module(owner.data).bindings:
                return Value("module", name)  # a submodule
            return self.global_(self.module(owner.data), name)
        return Value("external", f"{owner.data}.{name}")

    # --- functions -------------------------------------------------------------------------------

    def returns(self, module: str, node: ast.AST, arguments: tuple[str, ...] | None = None) -> Value:
        """What ``node`` (a function or lambda of ``module``) returns, its parameters being ``arguments``
        (provenances in order; all INPUT when not given); its body is checked on the way."""
        key = (module, id(node), arguments)
        if key in self._returns:
            return self._returns[key]
        self._returns[key] = Value(OTHER)  # recursion: nothing the reader can follow
        params = node.args
        positional = [*params.posonlyargs, *params.args]
        env = {}
        for i, arg in enumerate(positional):
            env[arg.arg] = Value(arguments[i]) if arguments and i < len(arguments) else Value(INPUT)
        for arg in [*params.kwonlyargs, params.vararg, params.kwarg]:
            if arg is not None:
                env[arg.arg] = Value(INPUT)
        scope = Scope(self, self.modules[module], node, env)
        for default in [*params.defaults, *params.kw_defaults]:
            if default is not None:
                scope.expression(default)
        if isinstance(node, ast.Lambda):
            value = scope.expression(node.body)
        else:
            for decorator in node.decorator_list:
                scope.expression(decorator)
            scope.block(node.body)
            value = _merge(*scope.returned) if scope.returned else Value(SCALAR)  # None
        self._returns[key] = value
        return value

    def refuse(self, module: Module, node: ast.AST, function: ast.AST | None, what: str) -> None:
        where = f", in {function.name}" if isinstance(function, (ast.FunctionDef, ast.AsyncFunctionDef)) else ""
        line = getattr(node, "lineno", 0)
        self.refused.setdefault((module.file, line, what), f"{module.file} line {line}{where}: {what}")

    # --- the package as the nine functions reach it ----------------------------------------------

    def read(self) -> tuple[list[str], list[str]]:
        """(one message per listed function whose value no einops rewrite of its own produces, one message
        per refused operation)."""
        entry = self.module("einsum")
        if entry is None:
            return [f"einsum.{name} is not defined (no einsum.py)" for name in LISTED], []
        self.module("__init__")  # importing einsum runs the package's __init__ first
        done = set()
        while len(done) < len(self._loaded):  # what runs when each module read is imported
            for name in [n for n in self._loaded if n not in done]:
                done.add(name)
                self._import_time(self.modules[name])
        missing = []
        for name in LISTED:
            bindings = entry.bindings.get(name, [])
            if not bindings:
                missing.append(f"einsum.{name} is not defined at the top level of einsum.py")
                continue
            good = ("einsum", name) not in self.rebound
            for stmt in bindings:
                if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef)) and not stmt.decorator_list:
                    good &= self.returns("einsum", stmt).kind == EINOPS
                else:  # bound to something else: checked, and no form point (the value is not its own rewrite)
                    value = self.global_(entry, name)
                    if value.kind == "functions":
                        for module, node in value.data:
                            self.returns(module, node)
                    good = False
            if not good:
                missing.append(f"einsum.{name} does not return a value that an einops rewrite of its own produced")
        return missing, list(self.refused.values())

    def _import_time(self, module: Module) -> None:
        for node in ast.walk(module.tree):  # a module the package imports runs when imported
            if isinstance(node, (ast.Import, ast.ImportFrom)) and node.col_offset == 0:
                for alias in node.names:
                    target = ("." * node.level + (node.module or "")) if isinstance(node, ast.ImportFrom) else alias.name
                    inside = self._package_target(target)
                    if inside is not None:
                        self.module(inside.split(".")[0] if inside else "__init__")
                        if isinstance(node, ast.ImportFrom) and not node.module and alias.name != "*":
                            self.module(alias.name)
        scope = Scope(self, module, None, {})
        for stmt in module.tree.body:
            scope.import_time(stmt)


class Scope:
    """One function's body (or a module's top level), walked in order: what each name holds, what is returned,
    and every operation checked against the allowlist."""

    def __init__(self, reader: Reader, module: Module, function: ast.AST | None, env: dict[str, Value]) -> None:
        self.reader, self.module, self.function, self.env = reader, module, function, env
        self.returned: list[Value] = []

    def refuse(self, node: ast.AST, what: str) -> None:
        self.reader.refuse(self.module, node, self.function, what)

    # --- statements ------------------------------------------------------------------------------

    def block(self, body: list[ast.stmt]) -> None:
        for stmt in body:
            self.statement(stmt)

    def import_time(self, stmt: ast.stmt) -> None:
        """A module's top-level statement as importing it runs it: definitions and plain assignments count
        where they are used."""
        if isinstance(stmt, (ast.Import, ast.ImportFrom, ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Pass)):
            for decorator in getattr(stmt, "decorator_list", []):  # a package function it calls runs now
                callee = decorator.func if isinstance(decorator, ast.Call) else decorator
                if isinstance(callee, (ast.Name, ast.Attribute)):
                    value = self.expression(callee) if isinstance(callee, ast.Name) else self.reader.attribute(
                        self.expression(callee.value), callee.attr) if isinstance(callee.value, ast.Name) else None
                    if value is not None and value.kind == "functions":
                        self.call(decorator) if isinstance(decorator, ast.Call) else [
                            self.reader.returns(m, f) for m, f in value.data]
            return
        if isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Constant):
            return
        if isinstance(stmt, (ast.Assign, ast.AnnAssign)) and all(
                isinstance(t, ast.Name) for t in (stmt.targets if isinstance(stmt, ast.Assign) else [stmt.target])):
            return
        if isinstance(stmt, (ast.If, ast.Try, ast.With)) or type(stmt).__name__ == "TryStar":
            if isinstance(stmt, ast.If):
                self.expression(stmt.test)
            if isinstance(stmt, ast.With):
                for item in stmt.items:
                    self.expression(item.context_expr)
            for part in ("body", "orelse", "finalbody"):
                for inner in getattr(stmt, part, []):
                    self.import_time(inner)
            for handler in getattr(stmt, "handlers", []):
                for inner in handler.body:
                    self.import_time(inner)
            return
        self.statement(stmt)

    def statement(self, stmt: ast.stmt) -> None:
        if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef)):
            for decorator in stmt.decorator_list:
                self.expression(decorator)
            self.reader.returns(self.module.name, stmt)  # its body is checked
            self.env[stmt.name] = Value(OTHER) if stmt.decorator_list else Value("functions", ((self.module.name, stmt),))
        elif isinstance(stmt, ast.Return):
            self.returned.append(self.expression(stmt.value) if stmt.value is not None else Value(SCALAR))
        elif isinstance(stmt, ast.Assign):
            value = self.expression(stmt.value)
            for target in stmt.targets:
                self.assign(target, value, stmt.value)
        elif isinstance(stmt, ast.AnnAssign):
            if stmt.value is not None:
                self.assign(stmt.target, self.expression(stmt.value), stmt.value)
        elif isinstance(stmt, ast.AugAssign):
            if isinstance(stmt.op, ast.MatMult):
                self.refuse(stmt, "the @= operator (use einops.einsum)")
            value = self.expression(stmt.value)
            if isinstance(stmt.target, ast.Name):
                self.env[stmt.target.id] = _arith(self.name(stmt.target), value)
            else:
                self.assign(stmt.target, value, stmt.value)
        elif isinstance(stmt, ast.Expr):
            if not isinstance(stmt.value, ast.Constant):
                self.expression(stmt.value)
        elif isinstance(stmt, ast.If):
            self.expression(stmt.test)
            self.branches([stmt.body, stmt.orelse])
        elif isinstance(stmt, ast.Raise):
            for part in (stmt.exc, stmt.cause):
                if part is not None:
                    self.expression(part)
        elif isinstance(stmt, ast.Assert):
            self.expression(stmt.test)
            if stmt.msg is not None:
                self.expression(stmt.msg)
        elif isinstance(stmt, (ast.Pass, ast.Break, ast.Continue, ast.Global, ast.Nonlocal, ast.Import, ast.ImportFrom)):
            if isinstance(stmt, (ast.Import, ast.ImportFrom)):
                for alias in stmt.names:
                    if alias.name != "*":
                        local = alias.asname or alias.name.split(".")[0]
                        target = self.module.aliases.get(local)
                        self.env[local] = self.reader.resolve_import(target) if target else Value(OTHER)
        elif isinstance(stmt, (ast.For, ast.AsyncFor)):
            self.assign(stmt.target, self.iterated(self.expression(stmt.iter), stmt.iter), stmt.iter)
            self.branches([stmt.body, stmt.body, stmt.orelse])
        elif isinstance(stmt, ast.While):
            self.expression(stmt.test)
            self.branches([stmt.body, stmt.body, stmt.orelse])
        elif isinstance(stmt, ast.Try) or type(stmt).__name__ == "TryStar":
            self.block(stmt.body)
            for handler in stmt.handlers:
                if handler.type is not None:
                    self.expression(handler.type)
                if handler.name:
                    self.env[handler.name] = Value(SCALAR)
                self.block(handler.body)
            self.block(stmt.orelse)
            self.block(stmt.finalbody)
        else:  # with, class, del, match, yield, ...
            self.refuse(stmt, f"a {type(stmt).__name__.lower()} statement")

    def branches(self, bodies: list[list[ast.stmt]]) -> None:
        before = dict(self.env)
        ends = []
        for body in bodies:
            self.block(body)
            ends.append(self.env)
            self.env = {**self.env}
        joined = dict(before)
        for name in {n for end in ends for n in end}:
            values = [end.get(name, before.get(name, Value(SCALAR))) for end in ends] + (
                [before[name]] if name in before else [])
            joined[name] = values[0] if all(v == values[0] for v in values) else _merge(*values)
        self.env = joined

    def assign(self, target: ast.AST, value: Value, source: ast.AST) -> None:
        if isinstance(target, ast.Name):
            self.env[target.id] = value
        elif isinstance(target, ast.Starred):
            self.assign(target.value, value, source)
        elif isinstance(target, (ast.Tuple, ast.List)):
            item = self.iterated(value, source)
            for element in target.elts:
                self.assign(element, item, source)
        else:
            if isinstance(target, ast.Attribute):
                owner = self.expression(target.value)
                if owner.kind == "module":
                    self.reader.rebound.add((str(owner.data), target.attr))
            self.refuse(target, f"assigns to {ast.unparse(target)[:60]} (assign to names only)")

    def iterated(self, value: Value, node: ast.AST) -> Value:
        """An element of ``value`` iterated or unpacked: a tensor made here is not taken apart."""
        kind = _tensorish(value)
        if kind in (EINOPS, OTHER) and value.kind not in ("module", "external", "functions"):
            self.refuse(node, f"iterates over or unpacks a tensor ({ast.unparse(node)[:60]})")
            return Value(OTHER)
        return Value(kind)

    # --- expressions -----------------------------------------------------------------------------

    def name(self, node: ast.Name) -> Value:
        if node.id in self.env:
            return self.env[node.id]
        return self.reader.global_(self.module, node.id)

    def expression(self, node: ast.AST) -> Value:  # noqa: C901 (one case per node type)
        if isinstance(node, ast.Constant):
            return Value(SCALAR)
        if isinstance(node, ast.Name):
            return self.name(node)
        if isinstance(node, ast.JoinedStr):
            for part in node.values:
                if isinstance(part, ast.FormattedValue):
                    self.expression(part.value)
                    if part.format_spec is not None:
                        self.expression(part.format_spec)
            return Value(SCALAR)
        if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
            return _merge(*(self.expression(e) for e in node.elts)) if node.elts else Value(SCALAR)
        if isinstance(node, ast.Dict):
            return _merge(*(self.expression(e) for e in [*node.keys, *node.values] if e is not None))
        if isinstance(node, ast.Starred):
            return self.expression(node.value)
        if isinstance(node, ast.BinOp):
            if isinstance(node.op, ast.MatMult):
                self.refuse(node, "the @ operator (use einops.einsum)")
                self.expression(node.left), self.expression(node.right)
                return Value(OTHER)
            return _arith(self.expression(node.left), self.expression(node.right))
        if isinstance(node, ast.UnaryOp):
            return _arith(self.expression(node.operand))
        if isinstance(node, (ast.BoolOp, ast.Compare)):
            for part in node.values if isinstance(node, ast.BoolOp) else [node.left, *node.comparators]:
                self.expression(part)
            return Value(SCALAR) if isinstance(node, ast.Compare) else _merge(*(self.expression(v) for v in node.values))
        if isinstance(node, ast.IfExp):
            self.expression(node.test)
            return _merge(self.expression(node.body), self.expression(node.orelse))
        if isinstance(node, ast.NamedExpr):
            value = self.expression(node.value)
            self.env[node.target.id] = value
            return value
        if isinstance(node, ast.Attribute):
            return self.attribute(node)
        if isinstance(node, ast.Subscript):
            owner = self.expression(node.value)
            self.expression(node.slice)
            if _tensorish(owner) != SCALAR and owner.kind not in ("module", "external", "builtin"):
                self.refuse(node, f"indexes a value that may be a tensor ({ast.unparse(node)[:60]}): only shapes "
                                  "and sizes may be subscripted (use einops)")
                return Value(OTHER)
            return Value(SCALAR) if owner.kind not in ("external",) else Value("external", f"{owner.data}[]")
        if isinstance(node, ast.Slice):
            for part in (node.lower, node.upper, node.step):
                if part is not None:
                    self.expression(part)
            return Value(SCALAR)
        if isinstance(node, ast.Call):
            return self.call(node)
        if isinstance(node, ast.Lambda):
            self.reader.returns(self.module.name, node)
            return Value("functions", ((self.module.name, node),))
        if isinstance(node, (ast.ListComp, ast.SetComp, ast.GeneratorExp, ast.DictComp)):
            saved = dict(self.env)
            for generator in node.generators:
                self.assign(generator.target, self.iterated(self.expression(generator.iter), generator.iter),
                            generator.iter)
                for condition in generator.ifs:
                    self.expression(condition)
            parts = [node.key, node.value] if isinstance(node, ast.DictComp) else [node.elt]
            value = _merge(*(self.expression(p) for p in parts))
            self.env = saved
            return value
        self.refuse(node, f"{type(node).__name__.lower()} ({ast.unparse(node)[:60]})")
        return Value(OTHER)

    def attribute(self, node: ast.Attribute) -> Value:
        owner = self.expression(node.value)
        if owner.kind in ("module", "external"):
            return self.reader.attribute(owner, node.attr)
        if node.attr in SHAPE_ATTRIBUTES:
            return Value(SCALAR)
        if owner.kind == SCALAR and not isinstance(node.value, ast.Name):
            return Value("method", node.attr)  # of a number or string made here (checked where called)
        self.refuse(node, f"reads .{node.attr} of {ast.unparse(node.value)[:40]}")
        return Value(OTHER)

    def call(self, node: ast.Call) -> Value:
        func = node.func
        arguments = [self.expression(a) for a in node.args]
        keywords = {k.arg: self.expression(k.value) for k in node.keywords}
        if isinstance(func, ast.Attribute):
            owner = self.expression(func.value)
            if owner.kind not in ("module", "external"):
                if func.attr in SHAPE_METHODS:
                    return Value(SCALAR)
                if owner.kind == SCALAR and (func.attr in NUMBER_METHODS or (
                        isinstance(func.value, (ast.Constant, ast.JoinedStr)))):
                    return Value(SCALAR)
                self.refuse(node, f"calls .{func.attr}() on {ast.unparse(func.value)[:40]}")
                return Value(OTHER)
            callee = self.reader.attribute(owner, func.attr)
        else:
            callee = self.expression(func)
        return self.apply(node, callee, arguments, keywords)

    def apply(self, node: ast.Call, callee: Value, arguments: list[Value], keywords: dict) -> Value:
        if callee.kind == "external":
            dotted = str(callee.data)
            root, last = dotted.split(".")[0], dotted.split(".")[-1]
            if root == "einops" and last in EINOPS_REWRITES and dotted.count(".") == 1:
                return self.einops(node, last, arguments, keywords)
            if root == "einops" and last in EINOPS_SCALARS and dotted.count(".") == 1:
                return Value(SCALAR)
            if root in SCALAR_MODULES:
                return Value(SCALAR)
            self.refuse(node, f"calls {dotted}")
            return Value(OTHER)
        if callee.kind == "builtin":
            name = str(callee.data)
            if name in EXCEPTIONS:
                return Value(SCALAR)
            if name not in BUILTINS:
                named = _fold(node.args[1], self.module) if len(node.args) > 1 else None
                self.refuse(node, f"calls {name}(..., {named!r})" if name in ("getattr", "hasattr", "setattr")
                            and named is not None else f"calls {name}()")
                return Value(OTHER)
            if name in ("list", "tuple", "set", "frozenset", "enumerate", "zip", "dict") and arguments:
                return _merge(*(self.iterated(a, n) for a, n in zip(arguments, node.args)))
            if name in ("abs", "min", "max", "round", "divmod", "pow"):
                return _arith(*arguments)
            return Value(SCALAR)
        if callee.kind == "functions":
            given = tuple(_tensorish(a) for a in arguments)
            results = [self.reader.returns(module, function, given) for module, function in callee.data]
            value = _merge(*results)
            if value.kind == EINOPS and EINOPS not in given:  # the rewrite is the helper's, not this function's
                return Value(INPUT)
            return value
        self.refuse(node, f"calls {ast.unparse(node.func)[:60]}")
        return Value(OTHER)

    def einops(self, node: ast.Call, name: str, arguments: list[Value], keywords: dict) -> Value:
        pattern_node = next((k.value for k in node.keywords if k.arg == "pattern"), None)
        tensors = list(arguments)
        if pattern_node is None and node.args:
            pattern_node = node.args[-1] if name == "einsum" else node.args[1] if len(node.args) > 1 else None
        if pattern_node is not None and pattern_node in node.args:
            index = node.args.index(pattern_node)
            tensors = arguments[:index] + (arguments[index + 1:] if name != "einsum" else [])
            if name == "reduce" and len(node.args) > 2:
                tensors = arguments[:1]
        elif name in ("rearrange", "reduce", "repeat") and arguments:
            tensors = arguments[:1]
        pattern = _fold(pattern_node, self.module) if pattern_node is not None else None
        operands = len([a for a in node.args if a is not pattern_node]) if name == "einsum" else 1
        sources = {_tensorish(a) for a in tensors}
        if not changes_something(pattern, operands) or OTHER in sources or not tensors:
            return _merge(*tensors) if tensors and OTHER in sources else Value(INPUT)
        return Value(EINOPS)


def _fold(node: ast.AST, module: Module, depth: int = 0) -> str | None:
    """The string an expression always is (literals, ``+``, f-strings of such, module-level names bound once to one)."""
    if isinstance(node, ast.Constant):
        return node.value if isinstance(node.value, str) else None
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        left, right = _fold(node.left, module, depth), _fold(node.right, module, depth)
        return None if left is None or right is None else left + right
    if isinstance(node, ast.JoinedStr):
        parts = [_fold(v.value if isinstance(v, ast.FormattedValue) else v, module, depth) for v in node.values]
        return None if None in parts else "".join(parts)  # type: ignore[arg-type]
    if isinstance(node, ast.Name) and depth < 4:
        bound = module.bindings.get(node.id, [])
        if len(bound) == 1 and isinstance(bound[0], ast.Assign) and len(bound[0].targets) == 1 and isinstance(
                bound[0].targets[0], ast.Name):
            return _fold(bound[0].value, module, depth + 1)
    return None


def form(package: Path) -> tuple[list[str], list[str]]:
    """(listed functions without an einops rewrite producing their value, operations outside the allowlist) of the
    package in ``package``: see the module docstring."""
    return Reader(package).read()
