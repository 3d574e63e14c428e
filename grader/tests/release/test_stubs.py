"""Stubs are generated from the reference, point at real handout sections, and never go stale."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

from grader.release.stubs import MarkerError, expected_stubs, sections, stale_stubs, stub_source, write_stubs

KIT = Path(__file__).resolve().parents[3]

SOURCE = '''import torch

# BEGIN SOLUTION
_TABLE = {1: 2}
# END SOLUTION


def lookup(x: int) -> int:
    """Doc stays."""
    # BEGIN SOLUTION
    return _TABLE[x]
    # END SOLUTION


class Opt(torch.optim.Optimizer):
    def step(self, closure=None):
        """Step doc."""
        # BEGIN SOLUTION
        return None
        # END SOLUTION
'''


def test_regions_become_pointers_and_helpers_disappear():
    stub = stub_source(SOURCE, "optim")
    assert "_TABLE" not in stub and "return None" not in stub
    assert "Doc stays." in stub and "Step doc." in stub and "import torch" in stub
    assert stub.count("raise NotImplementedError") == 2
    assert "see handout.md, section 'optim.lookup'" in stub and "section 'optim.Opt'" in stub
    ast.parse(stub)


@pytest.mark.parametrize("broken", [
    "def f():\n    # BEGIN SOLUTION\n    return 1\n",
    "def f():\n    return 1\n    # END SOLUTION\n",
    "def f():\n    # BEGIN SOLUTION\n    # BEGIN SOLUTION\n    return 1\n    # END SOLUTION\n",
])
def test_unbalanced_markers_are_refused(broken):
    with pytest.raises(MarkerError):
        stub_source(broken, "m")


def test_stale_stub_is_detected(tmp_path):
    solutions, assignment = tmp_path / "solutions", tmp_path / "assignment"
    solutions.mkdir()
    (solutions / "optim.py").write_text(SOURCE)
    write_stubs(solutions, assignment)
    assert stale_stubs(solutions, assignment) == []
    (solutions / "optim.py").write_text(SOURCE.replace("Doc stays.", "Doc changed."))
    assert stale_stubs(solutions, assignment) == ["optim.py"]


def test_the_kits_assignment_folder_is_current():
    stale = stale_stubs(KIT / "solutions", KIT / "assignment")
    assert not stale, f"assignment/ is out of date with solutions/ for {stale}: run `grader stubs`"


def test_every_stub_points_at_a_section_of_the_handout():
    headings = set(re.findall(r"^### (\S+)\s*$", (KIT / "handout.md").read_text(), flags=re.MULTILINE))
    missing = sections(KIT / "solutions") - headings
    assert not missing, f"handout.md lacks the sections the stubs point at: {sorted(missing)}"


def test_every_module_has_regions_and_every_stub_imports():
    for name, text in expected_stubs(KIT / "solutions").items():
        if not name.startswith("_"):
            assert "raise NotImplementedError" in text, f"{name} has no solution region"
        compile(text, name, "exec")
