"""docs/authoring.md's "Add a problem", done in a copy of the kit: a ninth problem (``units.gibibytes``) with every
part gets its stub from ``grader stubs``, passes the registry check, the rule map and its public tests, its mistakes
are killed and the reference's grade holds its points; the copy without one part (its handout section) fails the
check."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from grader.paths import KIT_ROOT

pytestmark = pytest.mark.slow

ENTRY = '    "P9": Problem("units", "bytes in GiB", 2, 1.0, diagnosed=False),\n'
REFERENCE = '''"""P9 · units.py: bytes in the unit memory is counted in."""

from __future__ import annotations

from ._counts import as_count


def gibibytes(num_bytes: int) -> float:
    """``num_bytes`` in GiB (2**30 bytes). Raises ValueError for a count that is negative or not whole."""
    # BEGIN SOLUTION
    return as_count(num_bytes, "num_bytes") / 2**30
    # END SOLUTION
'''
PUBLIC = '''"""Public tests for P9 (units.py): bytes in GiB."""

import pytest
from _kit import check_equal, check_raises


def test_gibibytes(units):
    check_equal(units.gibibytes, 3 * 2**30, expected=3.0)


@pytest.mark.rule("P9.negative-bytes")
def test_gibibytes_refuses_a_negative_count(units):
    check_raises(ValueError, units.gibibytes, -1)
'''
HIDDEN = '''"""Hidden suite for P9 (units.py): bytes in GiB, against the definition 1 GiB = 2**30 bytes."""

import pytest


@pytest.mark.points(1)
def test_gibibytes(sub):
    """gibibytes divides by 2**30"""
    for count in (0, 1, 2**30, 3 * 2**30 + 7):
        got = sub.call("units.gibibytes", count)
        assert got == count / 2**30, f"units.gibibytes({count}) returned {got!r}, expected {count / 2**30!r}"


@pytest.mark.points(1)
@pytest.mark.rule("P9.negative-bytes")
def test_gibibytes_refuses_a_negative_count(sub):
    """gibibytes refuses a negative count"""
    sub.raises(ValueError, "units.gibibytes", -1)
'''
MISTAKES = '''[[mutant]]
id = "p9-gib-as-gb"
description = "divides by 10**9 (a GB) instead of 2**30 (a GiB)"
find = """/ 2**30"""
replace = """/ 10**9"""

[[mutant]]
id = "p9-negative-bytes"
description = "takes a negative count as it comes"
find = """as_count(num_bytes, "num_bytes")"""
replace = """num_bytes"""
rules = ["P9.negative-bytes"]
'''
HANDOUT = '''
## P9 · units.py — bytes in GiB (2 points)

A GiB is 2**30 bytes, a GB 10**9:

    >>> gibibytes(3 * 2**30)
    3.0
    >>> gibibytes(2**29)
    0.5
    >>> gibibytes(0)
    0.0

### units.gibibytes

`gibibytes(num_bytes)` is `num_bytes / 2**30`. A negative count raises `ValueError`. <sup>[P9.negative-bytes]</sup>

### What is graded

Hidden tests (2 points): counts from 0 to a few GiB, and a negative count.
'''
CONTRACT = '''
## P9 `units.py` — bytes in GiB (2 pts)

- `gibibytes(num_bytes: int) -> float` — `num_bytes / 2**30`; a negative count: ValueError.
'''


def _copy_of_the_kit(dest: Path) -> Path:
    """The kit's files as git sees them (tracked, and new files not ignored), copied to ``dest``."""
    listed = subprocess.run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"], cwd=KIT_ROOT,
                            capture_output=True, text=True, check=True).stdout.split("\0")
    for name in filter(None, listed):
        if (KIT_ROOT / name).is_file():
            (dest / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(KIT_ROOT / name, dest / name)
    return dest


def _edit(path: Path, old: str, new: str) -> None:
    text = path.read_text(encoding="utf-8")
    assert text.count(old) == 1, f"{path}: {old!r} occurs {text.count(old)} times"
    path.write_text(text.replace(old, new), encoding="utf-8")


def _add_the_ninth_problem(kit: Path) -> None:
    """docs/authoring.md's steps 1 to 6, but for ``grader stubs``, which the test runs."""
    last = '    "P8": Problem("amp", "mixed precision training loop", 12, 4.2),\n'
    _edit(kit / "grader" / "problems.py", last, last + ENTRY)
    (kit / "solutions" / "units.py").write_text(REFERENCE)
    _edit(kit / "tests" / "conftest.py", '"checkpoint", "amp")', '"checkpoint", "amp", "units")')
    (kit / "tests" / "test_p9_units.py").write_text(PUBLIC)
    (kit / "grader" / "judge" / "hidden" / "test_p9_units.py").write_text(HIDDEN)
    (kit / "grader" / "mistakes" / "p9_units.toml").write_text(MISTAKES)
    for page, section in ((kit / "handout.md", HANDOUT), (kit / "docs" / "PROBLEMS.md", CONTRACT)):
        page.write_text(page.read_text(encoding="utf-8").rstrip("\n") + "\n" + section, encoding="utf-8")


def _run(kit: Path, *command: str) -> subprocess.CompletedProcess:
    """``python command...`` in the copy, which imports its own grader."""
    return subprocess.run([sys.executable, *command], cwd=kit, capture_output=True, text=True, timeout=300,
                          env={**os.environ, "PYTHONPATH": str(kit)})


def test_a_ninth_problem_added_as_docs_authoring_says_is_checked_stubbed_and_graded(tmp_path):
    kit = _copy_of_the_kit(tmp_path / "kit")
    _add_the_ninth_problem(kit)
    stubs = _run(kit, "-m", "grader", "stubs")
    assert stubs.returncode == 0 and "wrote assignment/units.py" in stubs.stdout, stubs.stdout + stubs.stderr
    stub = (kit / "assignment" / "units.py").read_text()
    assert 'raise NotImplementedError("units.gibibytes is not implemented yet' in stub, stub
    check = _run(kit, "-m", "pytest", "grader/tests/selfproof/test_problemset.py", "-q", "-p", "no:cacheprovider")
    assert check.returncode == 0, check.stdout[-3000:]
    rules = _run(kit, "-c", "from grader.selfproof.rulemap import RuleMap; print(RuleMap.of_kit().gaps(['P9']))")
    assert rules.returncode == 0 and rules.stdout == "[]\n", rules.stdout + rules.stderr  # its rule: tested, broken
    public = _run(kit, "-m", "pytest", "tests/test_p9_units.py", "--impl", "solutions", "-q")
    assert public.returncode == 0 and "P9 units             2       0" in public.stdout, public.stdout[-3000:]
    killed = _run(kit, "-m", "grader.mistakes", "P9")
    assert killed.returncode == 0 and killed.stdout.count("killed ") == 2, killed.stdout + killed.stderr
    graded = _run(kit, "-m", "grader", "grade", "solutions", "--problems", "P9", "--gpu", "off", "--profile", "ci",
                  "--out", str(tmp_path / "results.json"))
    assert graded.returncode == 0, graded.stdout + graded.stderr
    results = json.loads((tmp_path / "results.json").read_text())
    ninth = results["extra_data"]["problems"]["P9"]
    assert results["score"] == ninth["score"] == ninth["max_score"] == 2, results

    handout = kit / "handout.md"
    handout.write_text(handout.read_text(encoding="utf-8").replace(HANDOUT, ""), encoding="utf-8")
    check = _run(kit, "-m", "pytest", "grader/tests/selfproof/test_problemset.py", "-q", "-p", "no:cacheprovider",
                 "-k", "every_problem_has_all_its_parts")
    missing = "P9: handout.md has no section '## P9 · units.py — bytes in GiB (2 points)'"
    assert check.returncode == 1 and missing in check.stdout, check.stdout[-3000:]
