"""The judge plugin keeps to pytest's supported API: a hidden suite runs with its deprecations as errors.
A judge session loads the plugins it names, not every pytest plugin installed beside the kit."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys

from grader.grading.grade import grade
from grader.paths import HIDDEN
from grader.paths import KIT_ROOT as KIT
from grader.options import GradingOptions

IN_PROCESS = GradingOptions(in_process=True).to_json()  # the judge runs the submission in process

QUICK_SUITE = KIT / "grader" / "tests" / "fixtures" / "interrupted" / "test_p3_einsum.py"


def test_a_hidden_suite_runs_with_pytest_deprecations_as_errors():
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    run = subprocess.run(
        [sys.executable, "-m", "pytest", "grader/judge/hidden/test_p2_strides.py", "-k", "contiguous_strides", "-q",
         "-p", "grader.judge.plugin", "--submission", "solutions", "--grading-options", IN_PROCESS,
         "-W", "error::pytest.PytestDeprecationWarning",
         "-c", "grader/judge/hidden/pytest.ini", "--rootdir", "grader/judge/hidden", "-p", "no:cacheprovider"],
        cwd=KIT, env=env, capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-2000:]
    assert " passed" in run.stdout and "warning" not in run.stdout


def test_a_judge_session_loads_no_plugin_it_does_not_name(tmp_path, monkeypatch):
    """A pytest plugin installed beside the kit (an entry point) would run inside every judge session:
    here one that stops pytest as it is configured. The judge does not load it, and grades."""
    site, hidden = tmp_path / "site", tmp_path / "hidden"
    (site / "kitprobe-1.0.dist-info").mkdir(parents=True)
    (site / "kitprobe-1.0.dist-info" / "METADATA").write_text("Metadata-Version: 2.1\nName: kitprobe\nVersion: 1.0\n")
    (site / "kitprobe-1.0.dist-info" / "entry_points.txt").write_text("[pytest11]\nkitprobe = kitprobe\n")
    (site / "kitprobe.py").write_text("def pytest_configure(config):\n    raise SystemExit('kitprobe loaded')\n")
    hidden.mkdir()
    shutil.copy(QUICK_SUITE, hidden / QUICK_SUITE.name)
    shutil.copy(HIDDEN / "conftest.py", hidden / "conftest.py")
    monkeypatch.setenv("PYTHONPATH", str(site))
    result = grade(KIT / "solutions", hidden=hidden, profile="ci", gpu="off")
    assert not result.error, result.error
    assert [t.status for t in result.tests] == ["passed"]
