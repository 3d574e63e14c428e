"""What may be mutated in a reference module, and a mutant's identity that survives unrelated edits.

Only code between ``# BEGIN SOLUTION`` and ``# END SOLUTION`` is student work; inside it,
string literals (docstrings, error messages, f-strings and their fields) are text, and type
annotations are never evaluated (every reference module starts with ``from __future__ import
annotations``): neither is behaviour the hidden suites grade, so no mutation may touch them.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass

BEGIN, END = "# BEGIN SOLUTION", "# END SOLUTION"
Position = tuple[int, int]  # (line from 1, column in characters from 0), as the engine reports it


@dataclass(frozen=True, order=True)
class Identity:
    """A mutant's name: module, operator, the mutated line's text and its rank among equal ones."""

    module: str
    operator: str
    line: str
    index: int = 0

    def __str__(self) -> str:
        suffix = f" #{self.index}" if self.index else ""
        return f"{self.module}: {self.operator} on `{self.line}`{suffix}"


def solution_lines(source: str) -> set[int]:
    """Line numbers strictly inside BEGIN/END SOLUTION markers."""
    inside, lines = False, set()
    for number, text in enumerate(source.splitlines(), start=1):
        marker = text.strip()
        if marker == BEGIN:
            inside = True
        elif marker == END:
            inside = False
        elif inside:
            lines.add(number)
    return lines


def inert_spans(source: str) -> list[tuple[Position, Position]]:
    """Where string literals, f-strings and annotations lie, in character columns."""
    lines = source.splitlines()

    def column(line: int, byte_offset: int) -> int:  # ast counts UTF-8 bytes, the engine characters
        return len(lines[line - 1].encode()[:byte_offset].decode(errors="ignore"))

    inert: list[ast.AST] = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.JoinedStr) or (isinstance(node, ast.Constant) and isinstance(node.value, str)):
            inert.append(node)
        elif isinstance(node, (ast.arg, ast.AnnAssign)) and node.annotation is not None:
            inert.append(node.annotation)
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.returns is not None:
            inert.append(node.returns)
    return [((node.lineno, column(node.lineno, node.col_offset)),
             (node.end_lineno, column(node.end_lineno, node.end_col_offset))) for node in inert]


class Eligibility:
    """Decides, for one module's source, whether a mutation at ``start``..``end`` is in scope."""

    def __init__(self, source: str):
        self._lines = solution_lines(source)
        self._inert = inert_spans(source)

    def __call__(self, start: Position, end: Position) -> bool:
        if not all(line in self._lines for line in range(start[0], end[0] + 1)):
            return False
        return not any(low <= start and end <= high for low, high in self._inert)


def identities(module: str, source: str, mutations: list[tuple[str, Position]]) -> list[Identity]:
    """Identities of ``(operator, start)`` mutations of one module, numbered among equal (operator, line) pairs."""
    lines = source.splitlines()
    seen: dict[tuple[str, str], int] = {}
    found = []
    for operator, (line, _) in mutations:
        text = lines[line - 1].strip()
        index = seen.get((operator, text), 0)
        seen[(operator, text)] = index + 1
        found.append(Identity(module, operator, text, index))
    return found
