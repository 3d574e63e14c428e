"""The problem registry (``grader/problems.py``) and the kit agree, part for part; and the check fails when a part
is missing or disagrees (its mutants: registries with an entry added, changed or taken away)."""

from __future__ import annotations

import dataclasses
from pathlib import Path

from grader.problems import PROBLEMS, RANGE, Problem
from grader.selfproof.problemset import disagreements, imports_driver, marked_points, range_by_hand


def test_every_problem_has_all_its_parts_and_they_agree_with_its_entry():
    assert disagreements() == []


def test_an_entry_without_its_parts_is_caught():
    lines = disagreements({**PROBLEMS, "P9": Problem("units", "unit conversions", 4, 1.0)})
    expected = ["P9: no reference (solutions/units.py)", "P9: no stub (assignment/units.py)",
                "P9: no public tests (tests/test_p9_units.py)", "P9: no hidden suite (grader/judge/hidden/test_p9_units.py)",
                "P9: no mistakes (grader/mistakes/p9_units.toml)",
                "P9: handout.md has no section '## P9 · units.py — unit conversions (4 points)'",
                "P9: docs/PROBLEMS.md has no section '## P9 `units.py` — unit conversions (4 pts)'",
                "P9: handout.md states no rule [P9.name]"]
    assert [line for line in lines if not line.startswith("P9: diagnosed")] == [
        *expected, "tests/conftest.py's MODULES ('memory', 'strides', 'einsum', 'flops', 'optim', 'data', 'checkpoint', "
                   "'amp') are not the registry's modules, in order"]
    assert any(line.startswith("P9: diagnosed, but no diagnosis record measures it") for line in lines)
    assert not any(line.startswith("P9: diagnosed") for line in disagreements(
        {**PROBLEMS, "P9": Problem("units", "unit conversions", 4, 1.0, diagnosed=False)}))


def test_an_entry_that_says_otherwise_than_its_parts_is_caught():
    lines = disagreements({**PROBLEMS, "P1": dataclasses.replace(PROBLEMS["P1"], points=13)})
    assert lines == ["P1: the tests of grader/judge/hidden/test_p1_memory.py are marked with 12 points in all, the "
                     "registry gives 13",
                     "P1: handout.md has no section '## P1 · memory.py — dtype memory accounting (13 points)'",
                     "P1: docs/PROBLEMS.md has no section '## P1 `memory.py` — dtype memory accounting (13 pts)'"]


def test_parts_of_a_problem_the_registry_lacks_are_caught():
    lines = disagreements({key: problem for key, problem in PROBLEMS.items() if key != "P8"})
    for part in ("grader/mistakes/p8_amp.toml is no problem's mistakes file", "grades P8, not in the registry",
                 "handout.md's rule [P8.", "a section '## P8 · amp.py", "a section '## P8 `amp.py`",
                 "tests/conftest.py's MODULES"):
        assert any(part in line for line in lines), part


def test_a_driver_the_suite_leaves_unused_and_a_typed_range_are_caught(tmp_path: Path):
    suite = tmp_path / "test_p9_units.py"
    suite.write_text("import pytest\npytestmark = [pytest.mark.points(1)]\n\n"
                     "from grader.judge.drivers import answers\n\n"
                     "@pytest.mark.points(0.5)\ndef test_a(sub):\n    pass\n\ndef test_b(sub):\n    pass\n\n"
                     "def helper():\n    pass\n")
    assert marked_points(suite) == 1.5 and imports_driver(suite, "answers") and not imports_driver(suite, "units")
    typed = range_by_hand(PROBLEMS)
    assert typed.search(f"use {RANGE}, comma-separated") and typed.search(f"over {RANGE.replace('..', '-')}")
    assert not typed.search("measured on P1-P4") and not typed.search("P1,P3")
