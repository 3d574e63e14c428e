"""The judge fails closed: a judge session that stops early (interrupted, killed) earns nothing.

The first P1 test waits on a slow call; the judge session running it (with ``jobs=2``, forked from the
grading's own warm judge where sessions can fork) is sent a signal while the call is in flight. Its problems must come back as errors ("grading failed, regrade"), never
as the points of the tests it did not run, while the other session's problem keeps its score.
"""

from __future__ import annotations

import shutil
import signal
import threading
import time
from pathlib import Path

import psutil
import pytest

from grader.grading import judges
from grader.grading.grade import grade
from grader.paths import KIT_ROOT as KIT

SUITES = Path(__file__).resolve().parents[1] / "fixtures" / "interrupted"
NAP = "\n\ndef nap(seconds):\n    import time\n    time.sleep(seconds)\n"


@pytest.fixture(scope="module")
def slow(tmp_path_factory) -> Path:
    """The reference with a ``memory.nap`` that sleeps, and the miniature suites beside the real conftest."""
    root = tmp_path_factory.mktemp("fail-closed")
    shutil.copytree(KIT / "solutions", root / "sub" / "assignment", ignore=shutil.ignore_patterns("__pycache__"))
    with open(root / "sub" / "assignment" / "memory.py", "a") as stream:
        stream.write(NAP)
    shutil.copytree(SUITES, root / "hidden")
    shutil.copy(KIT / "grader" / "judge" / "hidden" / "conftest.py", root / "hidden" / "conftest.py")
    return root


def _judge_of_p1(started: list[tuple[list[str], judges.Session]]) -> psutil.Process | None:
    """The judge session running the P1 suite (a process of its own, or forked from the grading's warm judge,
    whose command line is the zygote's), once its worker is up."""
    for command, session in started:
        try:
            if any(a.endswith("test_p1_memory.py") for a in command) and psutil.Process(session.pid).children():
                return psutil.Process(session.pid)
        except psutil.Error:
            continue
    return None


def _grade_and_signal(root: Path, signum: int, monkeypatch: pytest.MonkeyPatch):
    found: dict = {}
    started: list[tuple[list[str], judges.Session]] = []
    start = judges.start

    def recorded(command: list[str], *rest) -> judges.Session:
        session = start(command, *rest)
        started.append((command, session))
        return session

    monkeypatch.setattr(judges, "start", recorded)
    # A background job of a shell ignores SIGINT, and its children inherit that: give the judges
    # the default disposition, as an interactive terminal would.
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        thread = threading.Thread(target=lambda: found.update(result=grade(
            root / "sub", hidden=root / "hidden", jobs=2, call_seconds=120, profile="ci")))
        thread.start()
        deadline = time.monotonic() + 120
        while (judge := _judge_of_p1(started)) is None and thread.is_alive() and time.monotonic() < deadline:
            time.sleep(0.2)
        assert judge is not None, "the P1 judge session never started its worker"
        time.sleep(1.0)  # the slow call is in flight
        judge.send_signal(signum)
        thread.join(timeout=120)
    finally:
        signal.signal(signal.SIGINT, previous)
    return found["result"]


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM, signal.SIGKILL], ids=["SIGINT", "SIGTERM", "SIGKILL"])
def test_a_stopped_judge_session_earns_nothing(slow, signum, monkeypatch):
    result = _grade_and_signal(slow, signum, monkeypatch)
    p1 = [t for t in result.tests if t.problem == "P1"]
    assert p1 and all(t.status == "error" for t in p1), [(t.name, t.status) for t in p1]
    assert sum(t.score for t in p1) == 0
    assert sum(t.points for t in p1) >= 1
    assert "P1" in result.error and "regrade" in result.error, result.error
    p3 = [t for t in result.tests if t.problem == "P3"]
    assert [t.status for t in p3] == ["passed"], "the session that ended normally keeps its points"
