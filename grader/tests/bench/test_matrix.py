"""``python -m grader.bench.matrix``: bad arguments are refused up front, and a cell's public-test
counts and verdict come from pytest's own report."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from grader.bench import matrix


@pytest.mark.parametrize("argv, message", [
    (["--python", "2.x", "--torch", "2.6.0"], "--python 2.x: neither an interpreter's path nor a version"),
    (["--python", "/no/such/python", "--torch", "2.6.0"], "--python /no/such/python: no such interpreter"),
    (["--python", sys.executable, "--torch", "latest"], "--torch latest: expected a release number"),
    (["--python", sys.executable, "--torch", "2.6.0", "--kit", "/"], "--kit /: not a kit checkout"),
])
def test_bad_arguments_are_refused_before_anything_is_installed(argv, message, tmp_path, capsys):
    venvs = tmp_path / "venvs"
    assert matrix.main([*argv, "--venvs", str(venvs)]) == 2
    assert message in capsys.readouterr().err
    assert not venvs.exists()


def test_public_test_counts_include_errors_and_skips(tmp_path):
    (tmp_path / "tests").mkdir()
    (tmp_path / "tests" / "conftest.py").write_text(
        "import pytest\n\ndef pytest_addoption(parser):\n    parser.addoption('--impl')\n\n"
        "@pytest.fixture\ndef broken():\n    raise RuntimeError('fixture')\n")
    (tmp_path / "tests" / "test_some.py").write_text(
        "import pytest\n\ndef test_ok():\n    pass\n\ndef test_bad():\n    assert False\n\n"
        "def test_error(broken):\n    pass\n\n@pytest.mark.skip\ndef test_skipped():\n    pass\n")
    counts, ok = matrix.public_tests(Path(sys.executable), tmp_path)
    assert (counts, ok) == ("1 passed, 2 failed (test_bad, test_error), 1 skipped", False)
    (tmp_path / "tests" / "test_some.py").write_text("def test_ok():\n    pass\n")
    assert matrix.public_tests(Path(sys.executable), tmp_path) == ("1 passed, 0 failed, 0 skipped", True)
