"""``grader grade`` on submissions that cannot be graded, or cannot be imported: a clear report,
score 0 with the reason, and never a traceback from the grader."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from grader.grading.grade import hidden_suites
from grader.selfproof.hostile import edit
from grader.paths import KIT_ROOT as KIT
from grader.problems import MODULES, PROBLEMS
from grader.grading.results import GradingResult

GRADED = next((key for key in PROBLEMS if hidden_suites([key])), None)


def grade(submission: Path | str, out: Path, *extra: str) -> tuple[subprocess.CompletedProcess, dict]:
    run = subprocess.run([sys.executable, "-m", "grader", "grade", str(submission), "--out", str(out),
                          "--profile", "ci", "--call-seconds", "10", *extra],
                         cwd=KIT, capture_output=True, text=True, timeout=900)
    assert "Traceback" not in run.stderr + run.stdout, run.stderr[-3000:]
    return run, json.loads(out.read_text())


def reference_copy(root: Path) -> Path:
    package = root / "assignment"
    shutil.copytree(KIT / "solutions", package, ignore=shutil.ignore_patterns("__pycache__"))
    return package


def assert_refused(run: subprocess.CompletedProcess, data: dict, reason: str) -> None:
    assert run.returncode == 2
    assert run.stderr.strip().count("\n") == 0 and reason in run.stderr, run.stderr
    assert data["score"] == 0 and data["tests"][0]["name"] == "Autograder failed" and reason in data["extra_data"]["grader_error"]


def test_missing_path(tmp_path):
    run, data = grade(tmp_path / "nowhere", tmp_path / "results.json")
    assert_refused(run, data, "no such file or folder")


def test_empty_folder(tmp_path):
    (tmp_path / "empty").mkdir()
    run, data = grade(tmp_path / "empty", tmp_path / "results.json")
    assert_refused(run, data, "found no assignment package")


def test_zip_without_a_package(tmp_path):
    with zipfile.ZipFile(tmp_path / "handin.zip", "w") as bundle:
        bundle.writestr("README.txt", "my answers are in my head")
        bundle.writestr("notes/answers.md", "# P1\n")
        bundle.writestr("../../escape.py", "print('outside')")
    run, data = grade(tmp_path / "handin.zip", tmp_path / "results.json")
    assert_refused(run, data, "found no assignment package")
    assert not (tmp_path.parent / "escape.py").exists()


def test_not_a_zip(tmp_path):
    (tmp_path / "handin.zip").write_bytes(b"PK\x03\x04 this is no archive")
    run, data = grade(tmp_path / "handin.zip", tmp_path / "results.json")
    assert_refused(run, data, "not a readable zip")


def test_a_single_file(tmp_path):
    (tmp_path / "memory.py").write_text("x = 1\n")
    run, data = grade(tmp_path / "memory.py", tmp_path / "results.json")
    assert_refused(run, data, "a submission is a folder or a .zip file")


def test_unreadable_zip_member_names(tmp_path):
    with zipfile.ZipFile(tmp_path / "handin.zip", "w") as bundle:
        bundle.writestr("assignment/" + "x" * 300 + ".py", "x = 1\n")
    run, data = grade(tmp_path / "handin.zip", tmp_path / "results.json")
    assert run.returncode == 2 and data["score"] == 0


@pytest.mark.skipif(GRADED is None, reason="no hidden suite yet")
@pytest.mark.parametrize("how, reason", [
    ("def broken(:\n", "SyntaxError"),
    ("raise RuntimeError('missing data file')\n", "RuntimeError: missing data file"),
])
def test_modules_that_do_not_import_fail_every_call_with_the_reason(tmp_path, how, reason):
    package = reference_copy(tmp_path / "submission")
    for module in MODULES:
        path = package / f"{module}.py"
        if path.exists():
            path.write_text(edit(path.read_text(), module, prepend=how))  # after the __future__ import
    run, data = grade(tmp_path / "submission", tmp_path / "results.json", "--problems", GRADED)
    assert run.returncode == 0, run.stderr[-2000:]
    tests = GradingResult.from_gradescope_dict(data).tests
    failed = [t for t in tests if t.status == "failed"]
    explained = [t for t in failed if f"importing assignment/{PROBLEMS[GRADED].module}.py failed: {reason}" in t.message]
    assert explained, [t.message[:200] for t in failed]
    assert data["score"] < data["extra_data"]["problems"][GRADED]["max_score"]
    if reason == "SyntaxError":  # nothing runs and nothing parses: every test fails
        assert data["score"] == 0 and len(failed) == len(tests)


@pytest.mark.skipif(GRADED is None, reason="no hidden suite yet")
def test_a_package_init_that_raises_is_noted(tmp_path):
    package = reference_copy(tmp_path / "submission")
    (package / "__init__.py").write_text("raise ImportError('broken package')\n")
    run, data = grade(tmp_path / "submission", tmp_path / "results.json", "--problems", GRADED)
    assert run.returncode == 0, run.stderr[-2000:]
    assert "Importing your package failed: ImportError: broken package" in data["output"]
