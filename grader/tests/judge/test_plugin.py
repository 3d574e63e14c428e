"""The judge plugin keeps to pytest's supported API: a hidden suite runs with its deprecations as errors."""

from __future__ import annotations

import os
import subprocess
import sys

from grader.paths import KIT_ROOT as KIT


def test_a_hidden_suite_runs_with_pytest_deprecations_as_errors():
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    run = subprocess.run(
        [sys.executable, "-m", "pytest", "grader/judge/hidden/test_p2_strides.py", "-k", "contiguous_strides", "-q",
         "-p", "grader.judge.plugin", "--submission", "solutions", "--in-process",
         "-W", "error::pytest.PytestDeprecationWarning",
         "-c", "grader/judge/hidden/pytest.ini", "--rootdir", "grader/judge/hidden", "-p", "no:cacheprovider"],
        cwd=KIT, env=env, capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-2000:]
    assert " passed" in run.stdout and "warning" not in run.stdout
