"""Judge sessions forked from the warm judge (grader/grading/judges.py, grader/judge/zygote.py) end as a
process of their own would: pytest's status, their output in their log, a kill seen as SIGKILL, fresh
generators; a zygote that dies takes its sessions with it and the next session gets a new one; where no
zygote can start, the session runs as a process of its own."""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from grader.grading import judges
from grader.paths import kit_pythonpath

pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="the warm judge forks on Linux only")

SUITE = """
import os, random, time
import numpy

DRAWN = random.random(), numpy.random.random()  # at collection, before any plugin's own seeding


def test_passes():
    print("drawn", *DRAWN, "in", os.getcwd())


def test_fails():
    assert os.environ.get("KIT_TEST_NAP") is None or time.sleep(float(os.environ["KIT_TEST_NAP"])) is None
    assert False, "the judged failure"
"""


@pytest.fixture
def suite(tmp_path: Path) -> Path:
    (tmp_path / "test_suite.py").write_text(SUITE)
    return tmp_path


@pytest.fixture
def warm():
    with judges.warm():
        yield


def _start(folder: Path, log: str = "log", **env: str) -> judges.Session:
    command = [sys.executable, "-m", judges.SESSION, str(folder / "test_suite.py"), "-q", "-s", "-p", "no:cacheprovider",
               "--rootdir", str(folder)]
    return judges.start(command, folder, folder / log, {**kit_pythonpath(), "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1", **env})


def test_a_forked_session_ends_with_pytests_status_and_its_output_in_its_log(suite, warm):
    session = _start(suite)
    assert isinstance(session, judges.Forked)
    assert session.wait(120) == 1  # pytest's TESTS_FAILED
    log = (suite / "log").read_text()
    assert "1 failed, 1 passed" in log and "the judged failure" in log
    assert f"in {suite}" in log  # run in the folder asked for


def test_each_session_draws_fresh_numbers_as_a_new_process_would(suite, warm):
    first, second = _start(suite, "first"), _start(suite, "second")
    assert first.wait(120) == second.wait(120) == 1
    drawn = [next(line for line in (suite / name).read_text().splitlines() if line.startswith("drawn"))
             for name in ("first", "second")]
    assert drawn[0] != drawn[1]


def test_a_killed_session_ends_by_sigkill(suite, warm):
    session = _start(suite, KIT_TEST_NAP="60")
    with pytest.raises(subprocess.TimeoutExpired):
        session.wait(1.0)
    assert session.poll() is None
    session.kill()
    assert session.wait(30) == -signal.SIGKILL
    session.kill()  # once ended, a kill reaches nothing


def test_a_dead_zygote_takes_its_sessions_and_the_next_session_gets_a_new_one(suite, warm):
    session = _start(suite, KIT_TEST_NAP="60")
    zygote = judges._zygote
    zygote.process.kill()
    assert session.wait(30) == -signal.SIGKILL
    deadline = time.monotonic() + 30
    while zygote.alive and time.monotonic() < deadline:
        time.sleep(0.05)
    again = _start(suite, KIT_TEST_NAP="60", KIT_TEST_AGAIN="1")
    assert judges._zygote is not zygote
    again.kill()
    assert again.wait(30) == -signal.SIGKILL


def test_where_no_zygote_starts_the_session_runs_as_a_process(suite, warm, monkeypatch):
    monkeypatch.setattr(judges, "ZYGOTE", "grader.judge.no_such_module")
    session = _start(suite, KIT_TEST_COLD="1")
    assert isinstance(session, subprocess.Popen)
    assert session.wait(120) == 1
    assert "1 failed, 1 passed" in (suite / "log").read_text()
    failed = judges._zygote
    assert isinstance(_start(suite, "again", KIT_TEST_COLD="1"), subprocess.Popen)
    assert judges._zygote is failed  # not started again for every session of the block


def test_without_pidfds_sessions_start_as_processes(suite, warm, monkeypatch):
    monkeypatch.setattr(judges, "_can_fork", lambda: False)
    session = _start(suite)
    assert isinstance(session, subprocess.Popen) and session.wait(120) == 1


def test_outside_warm_a_session_is_a_process_and_the_zygote_ends_with_the_block(suite):
    cold = _start(suite)
    assert isinstance(cold, subprocess.Popen) and cold.wait(120) == 1
    with judges.warm():
        assert isinstance(_start(suite), judges.Forked)
        zygote = judges._zygote
    assert judges._zygote is None and zygote.process.poll() is not None
