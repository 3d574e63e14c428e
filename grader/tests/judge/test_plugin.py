"""The judge plugin keeps to pytest's supported API: a hidden suite runs with its deprecations as errors.
A judge session loads the plugins it names, not every pytest plugin installed beside the kit, and draws
hypothesis's examples with the profile and seed of its grading options record, the one option it gets."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys

from grader.grading.grade import grade
from grader.paths import HIDDEN
from grader.paths import KIT_ROOT as KIT
from grader.options import GradingOptions

IN_PROCESS = GradingOptions(in_process=True, profile="ci").to_json()  # the judge runs the submission in process

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


DRAWING = """
from hypothesis import core, given, settings, strategies as st

DRAWN = []


@given(st.integers(0, 10**9))
def test_draws(x):
    DRAWN.append(x)


def test_seen():
    print(f"SEEN {settings.get_current_profile_name()} {core.global_force_seed} {sum(DRAWN)}")
"""


def _drawn_with(folder, options: GradingOptions) -> list[str]:
    """The profile, seed and sum of the examples drawn in a judge session given ``options``' record alone, on a
    CI runner (``CI`` set: hypothesis then loads its own derandomized profile as it is imported)."""
    run = subprocess.run(
        [sys.executable, "-m", "pytest", str(folder / "test_drawing.py"), "-p", "grader.judge.plugin", "-q", "-s",
         "--grading-options", options.to_json(), "-c", str(HIDDEN / "pytest.ini"), "--rootdir", str(folder),
         "-p", "no:cacheprovider"], cwd=KIT, env={**os.environ, "CI": "true"}, capture_output=True, text=True,
        timeout=300)
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-2000:]
    return re.search(r"SEEN (.*)", run.stdout).group(1).split()


def test_a_judge_session_draws_with_the_profile_and_seed_of_its_record(tmp_path):
    shutil.copy(HIDDEN / "conftest.py", tmp_path / "conftest.py")  # the profiles
    (tmp_path / "test_drawing.py").write_text(DRAWING)
    profile, seed, drawn = _drawn_with(tmp_path, GradingOptions(seed=1234))
    assert (profile, seed) == ("grading", "1234")
    assert _drawn_with(tmp_path, GradingOptions(seed=1234)) == [profile, seed, drawn]  # the same examples again
    assert _drawn_with(tmp_path, GradingOptions(seed=99))[2] != drawn
    assert _drawn_with(tmp_path, GradingOptions(seed=99, profile="ci"))[:2] == ["ci", "99"]
