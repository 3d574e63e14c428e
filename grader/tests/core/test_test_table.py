"""``grader/tests/README.md`` keeps its table of test files true: a row for every test file, and no
row for a file that is gone."""

from __future__ import annotations

import re
from pathlib import Path

TESTS = Path(__file__).resolve().parents[1]
ROW = re.compile(r"^\| `([\w/]+\.py)` \|", re.M)


def listed(readme: str) -> set[str]:
    return set(ROW.findall(readme))


def files_under(root: Path = TESTS) -> set[str]:
    return {str(p.relative_to(root)) for p in root.rglob("test_*.py") if "fixtures" not in p.relative_to(root).parts}


def test_every_test_file_has_a_row_and_every_row_a_file():
    table = listed((TESTS / "README.md").read_text())
    files = files_under()
    assert not files - table, f"test files without a row in grader/tests/README.md: {sorted(files - table)}"
    assert not table - files, f"rows of grader/tests/README.md naming no test file: {sorted(table - files)}"


def test_a_missing_row_and_a_stale_row_are_both_seen(tmp_path):
    (tmp_path / "core").mkdir()
    (tmp_path / "core" / "test_a.py").write_text("")
    (tmp_path / "core" / "test_b.py").write_text("")
    table = listed("| `core/test_a.py` | a | |\n| `core/test_gone.py` | gone | |\n")
    files = files_under(tmp_path)
    assert files - table == {"core/test_b.py"} and table - files == {"core/test_gone.py"}
