"""Generate the student stubs (``assignment/``) from the reference (``solutions/``).

A solution region is the lines between ``# BEGIN SOLUTION`` and ``# END SOLUTION``. Inside a
function it becomes ``raise NotImplementedError(...)`` pointing at the handout section named
after the enclosing top-level function or class; at module or class level it is dropped.
Signatures, type hints, docstrings and imports stay, so stubs and reference cannot drift.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass
from pathlib import Path

from ..paths import ASSIGNMENT, KIT_ROOT, SOLUTIONS

BEGIN = "# BEGIN SOLUTION"
END = "# END SOLUTION"


class MarkerError(ValueError):
    """Unbalanced or misplaced solution markers."""


@dataclass(frozen=True)
class Region:
    begin: int  # 1-based line of the BEGIN marker
    end: int  # 1-based line of the END marker
    indent: str
    owner: str | None  # top-level function/class name, None at module level
    in_function: bool


def section(module: str, owner: str) -> str:
    """The handout heading that explains ``module.owner``."""
    return f"{module}.{owner}"


def stub_message(module: str, owner: str) -> str:
    return f"{section(module, owner)} is not implemented yet: see handout.md, section '{section(module, owner)}'"


def find_regions(source: str, filename: str = "<source>") -> list[Region]:
    lines = source.splitlines()
    tree = ast.parse(source, filename)
    regions: list[Region] = []
    open_at: int | None = None
    for number, line in enumerate(lines, start=1):
        stripped = line.strip()
        if stripped == BEGIN:
            if open_at is not None:
                raise MarkerError(f"{filename}:{number}: {BEGIN} inside another region (opened at line {open_at})")
            open_at = number
        elif stripped == END:
            if open_at is None:
                raise MarkerError(f"{filename}:{number}: {END} without {BEGIN}")
            begin_line = lines[open_at - 1]
            indent = begin_line[: len(begin_line) - len(begin_line.lstrip())]
            owner, in_function = _owner(tree, open_at)
            regions.append(Region(open_at, number, indent, owner, in_function))
            open_at = None
    if open_at is not None:
        raise MarkerError(f"{filename}:{open_at}: {BEGIN} never closed")
    return regions


def _owner(tree: ast.Module, line: int) -> tuple[str | None, bool]:
    """Top-level name enclosing ``line`` and whether the innermost enclosing node is a function."""
    top: str | None = None
    innermost_is_function = False
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and node.end_lineno is not None:
            if node.lineno <= line <= node.end_lineno:
                if node in tree.body:
                    top = node.name
                innermost_is_function = isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))
    return top, innermost_is_function


def stub_source(source: str, module: str, filename: str = "<source>") -> str:
    """The stub version of a solution module's source."""
    lines = source.splitlines(keepends=True)
    out: list[str] = []
    cursor = 0
    for region in find_regions(source, filename):
        out.extend(lines[cursor: region.begin - 1])
        if region.in_function and region.owner is not None:
            out.append(f"{region.indent}raise NotImplementedError({stub_message(module, region.owner)!r})\n")
        cursor = region.end
    out.extend(lines[cursor:])
    text = re.sub(r"\n{4,}", "\n\n\n", "".join(out))  # a dropped region leaves no gap wider than PEP 8's
    ast.parse(text, filename)  # a stub must stay importable Python
    return text


def expected_stubs(solutions_dir: Path) -> dict[str, str]:
    """File name -> stub text for every module of the reference package."""
    return {path.name: stub_source(path.read_text(), path.stem, str(path))
            for path in sorted(solutions_dir.glob("*.py"))}


def write_stubs(solutions_dir: Path, assignment_dir: Path) -> list[Path]:
    """(Re)write ``assignment_dir`` from ``solutions_dir``; returns the files written."""
    assignment_dir.mkdir(parents=True, exist_ok=True)
    written = []
    for name, text in expected_stubs(solutions_dir).items():
        target = assignment_dir / name
        if not target.exists() or target.read_text() != text:
            target.write_text(text)
            written.append(target)
    return written


def stale_stubs(solutions_dir: Path, assignment_dir: Path) -> list[str]:
    """Names of stub files missing from, or different in, ``assignment_dir``."""
    return [name for name, text in expected_stubs(solutions_dir).items()
            if not (assignment_dir / name).exists() or (assignment_dir / name).read_text() != text]


def sections(solutions_dir: Path) -> set[str]:
    """Every handout section a stub points at."""
    return {section(path.stem, region.owner)
            for path in sorted(solutions_dir.glob("*.py"))
            for region in find_regions(path.read_text(), str(path))
            if region.in_function and region.owner is not None}


def main(*, check: bool = False) -> int:
    """``grader stubs``: rewrite assignment/ from solutions/, or with ``check`` report staleness."""
    solutions, assignment = SOLUTIONS, ASSIGNMENT
    if check:
        stale = stale_stubs(solutions, assignment)
        for name in stale:
            print(f"stale: assignment/{name} differs from the stub of solutions/{name} (run: grader stubs)")
        return 1 if stale else 0
    for path in write_stubs(solutions, assignment):
        print(f"wrote {path.relative_to(KIT_ROOT)}")
    return 0
