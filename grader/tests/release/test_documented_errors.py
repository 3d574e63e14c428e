"""Every error a stub's docstring documents is in the handout, in the same words, and vice versa.

The convention, one for both sides:

- a docstring (of a public function or class in ``solutions/``) ends with a Google-style
  ``Raises:`` section, one entry per exception: ``ValueError: <condition>``, continuation lines
  indented further;
- the function's ``### module.Name`` subsection of handout.md has a ``Raises:`` line followed by
  a list, one item per exception: ``- `ValueError`: <condition>``.

Conditions are compared after dropping backticks and collapsing whitespace; a rule id closing an
entry (``<sup>[P1.x]</sup>`` in the handout, ``[P1.x]`` in the docstring) is part of its words. ValueError,
IndexError and TypeError (the contract's errors) may be named only in those lists, so that an
error documented in prose cannot escape the comparison. The handout's general rules (a negative
or non-whole count raises ValueError) hold on top of these lists.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

KIT = Path(__file__).resolve().parents[3]
MODULES = ("memory", "strides", "einsum", "flops", "optim", "data", "checkpoint", "amp")
_CONTRACT_ERRORS = re.compile(r"\b(?:ValueError|IndexError|TypeError)")
_HANDOUT_ITEM = re.compile(r"- `([\w.]+)`: (.*)")
_DOCSTRING_ITEM = re.compile(r"([\w.]+): (.*)")

Errors = dict[str, str]  # exception name -> condition


class ConventionError(AssertionError):
    """Errors documented outside the Raises convention."""


def _normalized(text: str) -> str:
    """Backticks and the handout's ``<sup>`` around a rule id dropped: ``<sup>[P1.x]</sup>`` reads as ``[P1.x]``."""
    return " ".join(re.sub(r"</?sup>", "", text).replace("`", "").split())


def _entries(lines: list[str], item: re.Pattern, where: str) -> Errors:
    """The ``Name: condition`` entries of a Raises list (continuations are indented further)."""
    errors: Errors = {}
    name = None
    for line in lines:
        if name is not None and line.startswith("  ") and line.strip():
            errors[name] += " " + line.strip()
        elif match := item.fullmatch(line):
            name = match.group(1)
            if name in errors:
                raise ConventionError(f"{where}: {name} listed twice under Raises")
            errors[name] = match.group(2)
        else:
            raise ConventionError(f"{where}: cannot read the Raises entry {line.strip()!r}")
    return {name: _normalized(condition) for name, condition in errors.items()}


def docstring_errors(docstring: str, where: str) -> Errors:
    """The Raises section of a (dedented) docstring: the lines after ``Raises:`` to the end."""
    lines = docstring.splitlines()
    if "Raises:" not in lines:
        body, raises = lines, []
    else:
        start = lines.index("Raises:")
        body, raises = lines[:start], [line[4:] if line.startswith("    ") else line for line in lines[start + 1:]]
        if any(line and not line.startswith("    ") for line in lines[start + 1:]):
            raise ConventionError(f"{where}: the Raises section must end the docstring, its entries indented")
    _no_prose_errors(body, where)
    return _entries(raises, _DOCSTRING_ITEM, where)


def handout_errors(subsection: str, where: str) -> Errors:
    """The list after the subsection's ``Raises:`` line (up to the next blank line)."""
    lines = subsection.splitlines()
    if "Raises:" not in lines:
        _no_prose_errors(lines, where)
        return {}
    start = lines.index("Raises:")
    end = next((i for i in range(start + 1, len(lines)) if not lines[i].strip()), len(lines))
    _no_prose_errors(lines[:start] + lines[end:], where)
    return _entries(lines[start + 1:end], _HANDOUT_ITEM, where)


def _no_prose_errors(lines: list[str], where: str) -> None:
    for line in lines:
        if _CONTRACT_ERRORS.search(line):
            raise ConventionError(f"{where}: an error named outside the Raises list: {line.strip()!r}")


def reference_docstrings() -> dict[str, str]:
    """``module.Name`` -> docstring of every public top-level function and class of the reference."""
    docs = {}
    for module in MODULES:
        tree = ast.parse((KIT / "solutions" / f"{module}.py").read_text())
        for node in tree.body:
            if isinstance(node, (ast.FunctionDef, ast.ClassDef)) and not node.name.startswith("_"):
                docs[f"{module}.{node.name}"] = ast.get_docstring(node) or ""
    return docs


def handout_subsections(text: str) -> dict[str, str]:
    """``module.Name`` -> text of each ``### module.Name`` subsection (to the next heading)."""
    parts = re.split(r"^(#{2,3} .*)$", text, flags=re.MULTILINE)
    return {heading[4:].strip(): body for heading, body in zip(parts[1::2], parts[2::2])
            if re.fullmatch(r"### \w+\.\w+\s*", heading)}


def mismatches(docstring: Errors, handout: Errors) -> list[str]:
    found = []
    for name in sorted(docstring.keys() | handout.keys()):
        if name not in handout:
            found.append(f"{name} in the docstring only: {docstring[name]}")
        elif name not in docstring:
            found.append(f"{name} in handout.md only: {handout[name]}")
        elif docstring[name] != handout[name]:
            found.append(f"{name} differs:\n  docstring: {docstring[name]}\n  handout:   {handout[name]}")
    return found


DOCSTRINGS = reference_docstrings()
SUBSECTIONS = handout_subsections((KIT / "handout.md").read_text())


@pytest.mark.parametrize("name", sorted(DOCSTRINGS))
def test_docstring_and_handout_document_the_same_errors(name):
    assert name in SUBSECTIONS, f"handout.md has no section '### {name}'"
    found = mismatches(docstring_errors(DOCSTRINGS[name], f"solutions {name}"),
                       handout_errors(SUBSECTIONS[name], f"handout.md '### {name}'"))
    assert not found, f"{name}: docstring and handout.md document different errors:\n" + "\n".join(found)


def test_every_handout_function_section_is_a_reference_function():
    assert not SUBSECTIONS.keys() - DOCSTRINGS.keys()


DOC = "Do a thing.\n\nRaises:\n    IndexError: an index out of range.\n    ValueError: mismatched shape\n        and strides.\n"
HANDOUT = "Text.\n\nRaises:\n- `IndexError`: an index out of range.\n- `ValueError`: mismatched `shape`\n  and `strides`.\n\nMore.\n"


def test_both_sides_read_alike():
    assert docstring_errors(DOC, "doc") == handout_errors(HANDOUT, "handout") == {
        "IndexError": "an index out of range.", "ValueError": "mismatched shape and strides."}


@pytest.mark.parametrize("doc, handout", [
    (DOC, HANDOUT.replace("- `ValueError`: mismatched `shape`\n  and `strides`.\n", "")),  # handout lacks one
    (DOC, HANDOUT.replace("out of range", "out of bounds")),  # conditions drift apart
    (DOC.replace("IndexError", "TypeError"), HANDOUT),  # another exception
])
def test_a_difference_is_reported(doc, handout):
    assert mismatches(docstring_errors(doc, "doc"), handout_errors(handout, "handout"))


@pytest.mark.parametrize("doc, handout", [
    ("Mismatched shape and strides: ValueError.\n", ""),  # the docstring's error in prose
    ("", "An entry out of range: `IndexError`.\n"),  # the handout's error in prose
    ("Raises:\n    ValueError: x.\nMore prose.\n", ""),  # Raises does not end the docstring
])
def test_errors_in_prose_are_refused(doc, handout):
    with pytest.raises(ConventionError):
        docstring_errors(doc, "doc")
        handout_errors(handout, "handout")
