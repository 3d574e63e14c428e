"""The hostile corpus: submissions that try to cheat or to harm the grader, each the reference
with one attack added.

``attacks.toml`` lists ``[[attack]]`` tables. Each names a module of the reference and edits it:
``prepend`` (code placed after the module's docstring and ``__future__`` import), ``append``,
and ``function`` + ``replace`` (a top-level function's whole definition swapped for new code).
``files`` places extra files beside or inside the package, stored inert under ``files/`` with a
``.txt`` suffix (``conftest.py``, ``sitecustomize.py`` and ``.pth`` files only come alive in the
temporary submission). ``@MARKER@``, ``@PORT@`` and ``@CALL_SECONDS@`` in code and files are
filled in when a submission is written.

``expect`` says what grading the attack must produce, as per-test outcomes of a control:

- ``reference``: exactly the reference's (the attack harms nothing and gains nothing);
- ``wrong``: exactly those of the reference whose ``function`` returns ``None`` (a cheat's value
  counts for no more than a wrong one);
- ``raises``: exactly those of the reference whose ``function`` raises ``NotImplementedError``
  (a function that hangs, crashes or floods is no more than an unimplemented one);
- ``import-fails``: exactly those of the reference whose module raises at import;
- ``budget``: no test passes that the reference fails, and the report says the time budget ran out;
- ``sabotaged``: the attack is added to the problem's *stub* (every public function raises
  ``NotImplementedError``), and the outcomes must be exactly the stub's: whatever the trick earns
  on top of what the stub earns (purely static checks) is a gain from the trick alone.

``fails`` lists tests that must not pass whatever the control says (an attack on one test's
check: ``expect = "reference"`` with the one test it cheats on). ``gpu = true`` marks an attack on a
GPU test: it runs only where CUDA does (``python -m grader.selfproof.hostile --gpu`` on a GPU
runner, ``grader/bench/gpu_runner.sh``) and is reported as not run elsewhere.

``graded_beside`` lists problems graded in the same session before the attack's own (their tests
import their modules into the session's worker first); such an attack may edit their modules,
and its control and reference are graded on the same problems.
"""

from __future__ import annotations

import ast
import threading
from dataclasses import dataclass, field
from pathlib import Path

from ...toml_catalogs import CatalogError, read_toml
from ...paths import ASSIGNMENT as STUBS
from ...paths import SOLUTIONS
from ...problems import PROBLEMS
from ...submission import stage

CATALOG = Path(__file__).parent / "attacks.toml"
FILES = Path(__file__).parent / "files"
EXPECTATIONS = ("reference", "wrong", "raises", "import-fails", "budget", "sabotaged")


@dataclass(frozen=True)
class Attack:
    id: str
    problem: str
    module: str
    description: str
    expect: str
    quick: bool = False
    gpu: bool = False  # proved only where CUDA runs (``--gpu``): it cheats on a GPU test
    function: str = ""
    prepend: str = ""
    append: str = ""
    replace: str = ""
    files: dict[str, str] = field(default_factory=dict)
    fails: list[str] = field(default_factory=list)
    graded_beside: list[str] = field(default_factory=list)
    options: dict[str, float] = field(default_factory=dict)  # call_seconds, budget_seconds, memory_mb

    @property
    def graded(self) -> str:
        """The problems its grading runs, in the form ``grading.grade`` takes: "P5", "P1,P5"."""
        return ",".join(sorted({*self.graded_beside, self.problem}))

    @property
    def control(self) -> tuple[str, str, str, str]:
        """What this attack's grading is compared with: (kind, module, function, problems graded)."""
        if self.expect in ("wrong", "raises"):
            return self.expect, self.module, self.function, self.graded
        if self.expect in ("import-fails", "sabotaged"):  # the problem's own module, whichever the attack edits
            return self.expect, PROBLEMS[self.problem].module, "", self.graded
        return reference(self.graded)


def reference(problems: str) -> tuple[str, str, str, str]:
    """The control key of the plain reference graded on ``problems`` (see ``Attack.graded``)."""
    return "reference", "", "", problems


def defaults(catalog: Path = CATALOG) -> dict[str, float]:
    """The grading options every attack starts from (call_seconds, budget_seconds, memory_mb)."""
    return dict(read_toml(catalog).get("defaults", {}))


def load(catalog: Path = CATALOG) -> list[Attack]:
    data = read_toml(catalog)
    defaults = dict(data.get("defaults", {}))
    attacks = []
    for entry in data.get("attack", []):
        entry = dict(entry)
        options = {**defaults, **entry.pop("options", {})}
        attack = Attack(**entry, options=options)
        if attack.expect not in EXPECTATIONS:
            raise CatalogError(f"attack {attack.id}: expect must be one of {', '.join(EXPECTATIONS)}")
        graded = [attack.problem, *attack.graded_beside]
        if any(problem not in PROBLEMS for problem in graded) or attack.module not in (
                "__init__", *(PROBLEMS[problem].module for problem in graded)):
            raise CatalogError(f"attack {attack.id}: {attack.module}.py is not the module of a problem it grades")
        if attack.expect in ("wrong", "raises") and not attack.function:
            raise CatalogError(f"attack {attack.id}: expect = {attack.expect!r} needs the function it is about")
        missing = [name for name in attack.files.values() if not (FILES / name).is_file()]
        if missing:
            raise CatalogError(f"attack {attack.id}: no stored file {', '.join(missing)} in {FILES}")
        attacks.append(attack)
    ids = [a.id for a in attacks]
    if len(ids) != len(set(ids)):
        raise CatalogError(f"duplicate attack ids: {sorted({i for i in ids if ids.count(i) > 1})}")
    return attacks


# -- editing the reference ----------------------------------------------------------------------

def _after_header(tree: ast.Module) -> int:
    """The line after the module docstring and the ``__future__`` imports (0 if neither)."""
    line = 0
    for node in tree.body:
        if isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant) and isinstance(node.value.value, str) \
                and node is tree.body[0]:
            line = node.end_lineno
        elif isinstance(node, ast.ImportFrom) and node.module == "__future__":
            line = node.end_lineno
        else:
            break
    return line


def _function_span(tree: ast.Module, name: str, module: str) -> tuple[int, int]:
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name == name:
            first = min([node.lineno, *(d.lineno for d in node.decorator_list)])
            return first, node.end_lineno
    raise CatalogError(f"{module}.py has no top-level function {name!r}")


# Attacks are built in threads. CPython's AST builder counts its recursion depth per interpreter,
# not per thread: two ast.parse calls interleaved (a finalizer run by the garbage collector can
# hand the GIL over mid-parse) fail with "SystemError: AST constructor recursion depth mismatch".
_PARSING = threading.Lock()


def edit(source: str, module: str, *, prepend: str = "", append: str = "", function: str = "",
         replace: str = "") -> str:
    """``source`` with ``replace`` swapped for ``function``'s definition, ``prepend`` after the header
    and ``append`` at the end."""
    lines = source.splitlines()
    with _PARSING:
        tree = ast.parse(source)
    if function and replace:
        first, last = _function_span(tree, function, module)
        lines[first - 1: last] = replace.rstrip("\n").splitlines()
    if prepend:
        at = _after_header(tree)
        lines[at:at] = ["", *prepend.rstrip("\n").splitlines(), ""]
    if append:
        lines += ["", *append.rstrip("\n").splitlines()]
    return "\n".join(lines) + "\n"


def _fill(text: str, values: dict[str, str]) -> str:
    for key, value in values.items():
        text = text.replace(f"@{key}@", value)
    return text


def materialize(attack: Attack, dest: Path, values: dict[str, str], solutions: Path = SOLUTIONS) -> Path:
    """Write ``dest/assignment/`` (the reference with the attack) and its extra files; returns ``dest``."""
    package = stage(solutions, dest)
    if attack.expect == "sabotaged":
        _sabotage(package, PROBLEMS[attack.problem].module)
    target = package / f"{attack.module}.py"
    target.write_text(edit(target.read_text(), attack.module, prepend=_fill(attack.prepend, values),
                           append=_fill(attack.append, values), function=attack.function,
                           replace=_fill(attack.replace, values)))
    for where, stored in attack.files.items():
        path = dest / where
        if dest.resolve() not in path.resolve().parents:
            raise CatalogError(f"attack {attack.id}: {where} is outside the submission")
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(_fill((FILES / stored).read_text(), values))
    return dest


def materialize_control(kind: str, module: str, function: str, dest: Path, solutions: Path = SOLUTIONS) -> Path:
    """Write the control submission an attack is compared with; returns ``dest``."""
    package = stage(solutions, dest)
    target = package / f"{module}.py"
    if kind == "wrong":
        body = f"def {function}(*args, **kwargs):\n    return None\n"
        target.write_text(edit(target.read_text(), module, function=function, replace=body))
    elif kind == "raises":
        body = f"def {function}(*args, **kwargs):\n    raise NotImplementedError('{function}')\n"
        target.write_text(edit(target.read_text(), module, function=function, replace=body))
    elif kind == "import-fails":
        target.write_text(edit(target.read_text(), module, append="raise ImportError('this module fails at import')"))
    elif kind == "sabotaged":
        _sabotage(package, module)
    return dest


def _sabotage(package: Path, module: str) -> None:
    """Replace ``module`` of a staged reference with its stub: every public function raises."""
    (package / f"{module}.py").write_text((STUBS / f"{module}.py").read_text())
