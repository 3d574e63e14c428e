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
    key = f"P{len(PROBLEMS) + 1}"
    entry = Problem("absent", "nowhere", 4, 1.0)
    suite = f"test_{key.lower()}_absent.py"
    assert disagreements({**PROBLEMS, key: entry}) == [
        f"{key}: no reference (solutions/absent.py)", f"{key}: no stub (assignment/absent.py)",
        f"{key}: no public tests (tests/{suite})", f"{key}: no hidden suite (grader/judge/hidden/{suite})",
        f"{key}: no mistakes (grader/mistakes/{key.lower()}_absent.toml)",
        f"{key}: handout.md has no section '## {key} · absent.py — nowhere (4 points)'",
        f"{key}: docs/PROBLEMS.md has no section '## {key} `absent.py` — nowhere (4 pts)'",
        f"{key}: handout.md states no rule [{key}.name]",
        f"{key}: diagnosed, but no diagnosis record measures it (python -m grader.bench.diagnosis --problems {key}; "
        f"or diagnosed=False in its entry)",
        f"tests/conftest.py's MODULES {tuple(p.module for p in PROBLEMS.values())} are not the registry's modules, "
        f"in order"]


def test_an_entry_that_says_otherwise_than_its_parts_is_caught():
    lines = disagreements({**PROBLEMS, "P1": dataclasses.replace(PROBLEMS["P1"], points=13)})
    assert lines == ["P1: the tests of grader/judge/hidden/test_p1_memory.py are marked with 12 points in all, the "
                     "registry gives 13",
                     "P1: handout.md has no section '## P1 · memory.py — dtype memory accounting (13 points)'",
                     "P1: docs/PROBLEMS.md has no section '## P1 `memory.py` — dtype memory accounting (13 pts)'"]


def test_parts_of_a_problem_the_registry_lacks_are_caught():
    lines = disagreements({key: problem for key, problem in PROBLEMS.items() if key != "P1"})
    for part in ("grader/mistakes/p1_memory.toml is no problem's mistakes file", "grades P1, not in the registry",
                 "handout.md's rule [P1.", "a section '## P1 · memory.py", "a section '## P1 `memory.py`",
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
