"""Judge sessions forked from the warm judge (grader/grading/judges.py, grader/judge/zygote.py) end as a
process of their own would: pytest's status, their output in their log, a kill seen as SIGKILL, fresh
generators; a zygote that dies takes its sessions with it and the next session gets a new one; where no
zygote can start, the session runs as a process of its own. A grading in a process started inside the
block forks from the same warm judge, its sessions die with its connection (even one reset with replies
unread, which leaves the warm judge serving), and a session asked for in another environment starts as a
process."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

from grader.grading import judges
from grader.paths import KIT_ROOT, kit_pythonpath

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


def _command(folder: Path, suite: str = "test_suite.py") -> list[str]:
    return [sys.executable, "-m", judges.SESSION, str(folder / suite), "-q", "-s", "-p", "no:cacheprovider",
            "--rootdir", str(folder)]


def _start(folder: Path, log: str = "log", **env: str) -> judges.Session:
    return judges.start(_command(folder), folder, folder / log, {**kit_pythonpath(), "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1", **env})


# A grading in another process: starts one session as a grading would, says how it started and its pid.
GRADING = """
import sys
from pathlib import Path
from grader.grading import judges
folder, suite = Path(sys.argv[1]), sys.argv[2]
command = [sys.executable, "-m", judges.SESSION, str(folder / suite), "-q", "-s", "-p", "no:cacheprovider",
           "--rootdir", str(folder)]
session = judges.start(command, folder, folder / (suite + ".log"), judges.judge_environment())
print(type(session).__name__, session.pid, flush=True)
print("status", session.wait(120), flush=True)
"""


def _grading(folder: Path, suite: str = "test_suite.py", **env: str) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-c", GRADING, str(folder), suite], stdout=subprocess.PIPE, text=True,
                            env={**os.environ, **env}, cwd=KIT_ROOT)


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


NAP = "import time\n\n\ndef test_naps():\n    time.sleep(120)\n"


def test_a_grading_in_a_process_started_inside_the_block_forks_from_the_same_warm_judge(suite):
    with judges.warm():
        grading = _grading(suite)
        out, _ = grading.communicate(timeout=120)
        assert out.split()[0] == "Forked" and out.splitlines()[-1] == "status 1"
        assert "1 failed, 1 passed" in (suite / "test_suite.py.log").read_text()
        assert isinstance(_start(suite), judges.Forked)  # and this process's own sessions still fork


def test_a_grading_that_dies_takes_its_forked_sessions_with_it(suite):
    (suite / "test_nap.py").write_text(NAP)
    with judges.warm():
        grading = _grading(suite, "test_nap.py")
        started = grading.stdout.readline().split()
        assert started[0] == "Forked"
        session = psutil.Process(int(started[1]))
        assert session.ppid() == judges._zygote.process.pid
        grading.kill()
        grading.wait()
        session.wait(30)  # psutil.TimeoutExpired if the session outlived its grading


def test_a_grading_in_another_environment_starts_its_session_as_a_process(suite):
    with judges.warm():
        grading = _grading(suite, KIT_TEST_ELSEWHERE="1")
        out, _ = grading.communicate(timeout=120)
        assert out.split()[0] == "Popen" and out.splitlines()[-1] == "status 1"


def test_the_warm_judges_address_reaches_no_judge():
    outer = {judges.SHARED: "/somewhere/socket", "PYTEST_CURRENT_TEST": "t.py::test (call)", "PATH": "/bin"}
    assert judges.judge_environment(outer).keys() == judges.judge_environment({"PATH": "/bin"}).keys()
    twice = kit_pythonpath(kit_pythonpath({"PYTHONPATH": "/elsewhere"}))
    assert twice["PYTHONPATH"] == os.pathsep.join([str(KIT_ROOT), "/elsewhere"])  # so a child's judge env is its parent's


FREED = """
import torch
def anon():
    return int(next(line for line in open("/proc/self/status") if line.startswith("RssAnon")).split()[1]) >> 10
before = anon()
torch.ones(4 << 20).sum()  # a 16 MiB block, mapped on its own and freed: glibc would raise its bound to 16 MiB
kept = [torch.ones(1 << 19) for _ in range(32)]  # 64 MiB in 2 MiB blocks, as the activations of a forward
del kept
print(anon() - before)
"""


def test_a_judge_hands_back_the_large_blocks_it_frees():
    """What a judge's own forwards freed (P8's activations) leaves its memory (glibc's own bound kept 32 MiB here)."""
    kept = subprocess.run([sys.executable, "-c", FREED], env=judges.judge_environment(), capture_output=True,
                          text=True, timeout=120, check=True)
    assert int(kept.stdout) < 8, f"{kept.stdout.strip()} MiB still held after the blocks were freed"


def test_a_client_gone_with_replies_unread_leaves_the_warm_judge_serving(suite):
    """Its socket is reset rather than closed: the warm judge drops that client and serves the next."""
    with judges.warm():
        client = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        client.connect(os.environ[judges.SHARED])
        request = {"argv": _command(suite)[3:], "cwd": str(suite), "log": str(suite / "unread"),
                   "env": judges.judge_environment(), "interrupt": False}
        client.sendall((json.dumps(request) + "\n").encode())
        deadline = time.monotonic() + 120
        log = suite / "unread"
        while not (log.exists() and "1 failed" in log.read_text()) and time.monotonic() < deadline:
            time.sleep(0.1)
        time.sleep(0.5)  # its "ended" reply sent, and never read
        client.close()
        session = judges.start(_command(suite), suite, suite / "next", judges.judge_environment())
        assert isinstance(session, judges.Forked) and session.wait(120) == 1
