"""A judge session's process (``grader.judge.session``) ends with pytest's exit status, its output and exit
handlers complete, without the interpreter's teardown."""

from __future__ import annotations

import subprocess
import sys

from grader.grading.grade import judge_command
from grader.options import GradingOptions
from grader.paths import HIDDEN, kit_pythonpath

SUITE = """
import atexit, os, pathlib

def _mark():
    pathlib.Path(os.environ["KIT_TEST_MARK"]).write_text("removed")

atexit.register(_mark)

def test_passes():
    pass

def test_fails():
    assert False, "the judged failure"
"""


def test_the_session_ends_with_pytests_status_after_its_exit_handlers(tmp_path):
    (tmp_path / "test_suite.py").write_text(SUITE)
    mark = tmp_path / "mark"
    run = subprocess.run([sys.executable, "-m", "grader.judge.session", str(tmp_path / "test_suite.py"), "-q",
                          "-p", "no:cacheprovider", "--rootdir", str(tmp_path)],
                         cwd=tmp_path, env={**kit_pythonpath(), "KIT_TEST_MARK": str(mark)}, capture_output=True, text=True, timeout=120)
    assert run.returncode == 1, run.stdout + run.stderr  # pytest's TESTS_FAILED
    assert "1 failed, 1 passed" in run.stdout and "the judged failure" in run.stdout
    assert mark.read_text() == "removed"


def test_a_judge_runs_as_a_session_without_pytests_unraisableexception(tmp_path):
    command = judge_command([HIDDEN / "test_p3_einsum.py"], tmp_path, tmp_path / "judge-report.json", GradingOptions(), 60.0)
    assert command[1:3] == ["-m", "grader.judge.session"]
    assert ["-p", "no:unraisableexception"] in [command[i:i + 2] for i in range(len(command) - 1)]
