"""The problem registry and the kit agree: every entry of ``PROBLEMS`` (``grader/problems.py``) has each of its
parts, named after it, and no part names a problem the registry lacks (``docs/authoring.md``).

Problem ``P<N>`` with module ``<module>`` has: the reference ``solutions/<module>.py`` and its stub
``assignment/<module>.py``; the public tests ``tests/test_p<N>_<module>.py``, its module in their ``MODULES``
(``tests/conftest.py``, which ships without the grader); the hidden suite ``grader/judge/hidden/test_p<N>_<module>.py``,
its tests marked with the entry's points in all and importing the driver ``grader/judge/drivers/<module>.py`` where
one exists; known mistakes in ``grader/mistakes/p<N>_<module>.toml``; its section of handout.md
(``## P<N> · <module>.py — <title> (<points> points)``) and of docs/PROBLEMS.md (``## P<N> `<module>.py` — <title>
(<points> pts)``); at least one handout rule ``[P<N>.name]``; and, where the entry is ``diagnosed``, a measurement of
its diagnosis (a ``diagnosis`` record in ``docs/benchmarks/records/`` with a row for it). Attacks, mistakes files and
rule ids name registered problems only, and no grader module writes the keys' range by hand (``problems.RANGE``).
"""

from __future__ import annotations

import ast
import json
import re
from collections.abc import Mapping
from pathlib import Path

from .. import mistakes
from ..paths import KIT_ROOT
from ..problems import PROBLEMS, Problem, suite_file
from ..rules import reader
from ..toml_catalogs import CatalogError
from . import hostile
from .rulemap import marks, test_marks


def range_by_hand(problems: Mapping[str, Problem]) -> re.Pattern:
    """The keys' whole range as text would type it (first..last, first-last, first to last)."""
    first, last = (re.escape(key) for key in (list(problems)[0], list(problems)[-1]))
    return re.compile(rf"\b{first} ?(?:\.\.\.?|-|–|—| to ){last}\b")


def handout_heading(key: str, problem: Problem) -> str:
    return f"## {key} · {problem.module}.py — {problem.title} ({problem.points} points)"


def contract_heading(key: str, problem: Problem) -> str:
    return f"## {key} `{problem.module}.py` — {problem.title} ({problem.points} pts)"


def marked_points(suite: Path) -> float:
    """The points a hidden suite's tests are marked with, in all (each test's closest ``points`` mark)."""
    total = 0.0
    for _, decorators in test_marks(suite):
        found = marks(decorators, "points")
        if found and found[-1].args and isinstance(found[-1].args[0], ast.Constant):
            total += found[-1].args[0].value
    return total


def imports_driver(suite: Path, module: str) -> bool:
    """Whether the hidden suite imports ``grader.judge.drivers.<module>`` (or names from it)."""
    for node in ast.walk(ast.parse(suite.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and (node.module == f"grader.judge.drivers.{module}" or (
                node.module == "grader.judge.drivers" and any(a.name == module for a in node.names))):
            return True
    return False


def public_modules(conftest: Path) -> tuple[str, ...]:
    """The public tests' ``MODULES`` (their own list: the public tests ship without the grader)."""
    for node in ast.parse(conftest.read_text(encoding="utf-8")).body:
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "MODULES" for t in node.targets):
            return tuple(ast.literal_eval(node.value))
    return ()


def measured(records: Path) -> set[str]:
    """The problems a ``diagnosis`` bench record has a row for."""
    rows: set[str] = set()
    for path in sorted(records.glob("*.json")):
        record = json.loads(path.read_text(encoding="utf-8"))
        if record.get("bench") == "diagnosis":
            rows |= set(record.get("rows", {}))
    return rows


def _files(key: str, problem: Problem) -> dict[str, str]:
    """The files every problem has, by what they are, relative to the kit."""
    suite = suite_file(key, problem)
    return {"reference": f"solutions/{problem.module}.py", "stub": f"assignment/{problem.module}.py",
            "public tests": f"tests/{suite}", "hidden suite": f"grader/judge/hidden/{suite}",
            "mistakes": f"grader/mistakes/{key.lower()}_{problem.module}.toml"}


def disagreements(problems: Mapping[str, Problem] = PROBLEMS, kit: Path = KIT_ROOT) -> list[str]:
    """What the kit lacks or says otherwise than ``problems``, one line each (empty: every part agrees)."""
    lines = []
    handout = (kit / "handout.md").read_text(encoding="utf-8").splitlines()
    contract = (kit / "docs" / "PROBLEMS.md").read_text(encoding="utf-8").splitlines()
    rules = reader().read(kit / "handout.md")
    diagnosed = measured(kit / "docs" / "benchmarks" / "records")
    for key, problem in problems.items():
        files = _files(key, problem)
        lines += [f"{key}: no {what} ({name})" for what, name in files.items() if not (kit / name).is_file()]
        suite, driver = kit / files["hidden suite"], kit / "grader" / "judge" / "drivers" / f"{problem.module}.py"
        if suite.is_file() and marked_points(suite) != problem.points:
            lines.append(f"{key}: the tests of {files['hidden suite']} are marked with {marked_points(suite):g} "
                         f"points in all, the registry gives {problem.points}")
        if suite.is_file() and driver.is_file() and not imports_driver(suite, problem.module):
            lines.append(f"{key}: {files['hidden suite']} does not import its driver grader/judge/drivers/{driver.name}")
        for where, text, heading in (("handout.md", handout, handout_heading(key, problem)),
                                     ("docs/PROBLEMS.md", contract, contract_heading(key, problem))):
            if heading not in text:
                lines.append(f"{key}: {where} has no section {heading!r}")
        if not any(rule.split(".", 1)[0] == key for rule in rules):
            lines.append(f"{key}: handout.md states no rule [{key}.name]")
        if problem.diagnosed and key not in diagnosed:
            lines.append(f"{key}: diagnosed, but no diagnosis record measures it (python -m grader.bench.diagnosis "
                         f"--problems {key}; or diagnosed=False in its entry)")
    return lines + _strays(problems, kit, [*handout, *contract], rules)


def _strays(problems: Mapping[str, Problem], kit: Path, headings: list[str], rules: Mapping[str, object]) -> list[str]:
    """The parts that name a problem the registry lacks, and the range of keys typed by hand."""
    known = {_files(key, p)["mistakes"].rsplit("/", 1)[1] for key, p in problems.items()}
    lines = [f"grader/mistakes/{path.name} is no problem's mistakes file"
             for path in sorted((kit / "grader" / "mistakes").glob("p*.toml")) if path.name not in known]
    try:
        mistakes.load(kit / "grader" / "mistakes")
        attacks = hostile.load(kit / "grader" / "selfproof" / "hostile" / "attacks.toml")
    except CatalogError as exc:
        return [*lines, f"catalog: {exc}"]
    lines += [f"attack {a.id} grades {p}, not in the registry" for a in attacks
              for p in (a.problem, *a.graded_beside) if p not in problems]
    lines += [f"handout.md's rule [{rule}] names no problem of the registry" for rule in rules
              if rule.split(".", 1)[0] not in (*problems, "ALL")]
    lines += [f"a section {line!r} names no problem of the registry" for line in headings
              if (found := re.match(r"## (P\d+)[ ·`]", line)) and found.group(1) not in problems]
    if public_modules(kit / "tests" / "conftest.py") != tuple(p.module for p in problems.values()):
        lines.append(f"tests/conftest.py's MODULES {public_modules(kit / 'tests' / 'conftest.py')} are not the "
                     f"registry's modules, in order")
    typed = range_by_hand(problems)
    for path in sorted((kit / "grader").rglob("*.py")):
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
            if typed.search(line):
                lines.append(f"{path.relative_to(kit)}:{number} writes the problems' range by hand "
                             f"(say it with grader.problems.RANGE)")
    return lines
