"""Workers forked from the warm template (``grader.containment.template``): the containment tests of a cold
worker, run again on forked ones, and what forking adds (siblings share nothing, a holder outside any sandbox
is refused, a worker's end leaves the template serving)."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from grader import wire
from grader.containment import template
from grader.containment.limits import Limits
from grader.containment.worker import Worker
from grader.forks import Forked
from _workers import call
from _workers import package, worker  # noqa: F401 - fixtures
# The cold worker's tests, collected here again with this module's template running: the same assertions
# about forked workers.
from test_sandbox import test_isolation_is_reported_and_real, test_kernel_surface_is_filtered  # noqa: F401
from test_sandbox_limits import (test_a_misbehaving_call_fails_alone_and_the_next_one_works,  # noqa: F401
                                 test_an_answer_out_of_turn_restarts_the_worker, test_detached_processes_die_with_the_worker,
                                 test_memory_cap_stops_the_worker, test_output_flood_is_drained_and_truncated,
                                 test_process_count_is_capped_and_all_die,
                                 test_short_of_memory_the_kernel_ends_the_worker_first)

pytestmark = pytest.mark.skipif(not template.usable(), reason="workers are forked only as root, with bubblewrap")

LEFT = '''
import os

def leave():
    for where in ("/tmp/left-behind", "/dev/shm/left-behind", "/tmp/work/left-behind"):
        with open(where, "w") as stream:
            stream.write("from the first worker")
    return sorted(os.listdir("/tmp"))

def find():
    return [where for where in ("/tmp/left-behind", "/dev/shm/left-behind", "/tmp/work/left-behind")
            if os.path.exists(where)]

def held():
    found = {}
    for fd in os.listdir("/proc/self/fd"):
        try:
            found[int(fd)] = os.readlink(f"/proc/self/fd/{fd}")
        except OSError:
            pass
    return found
'''


@pytest.fixture(scope="module", autouse=True)
def warm_template(tmp_path_factory):
    """A template for this module's workers, found as a judge finds it (``KIT_WARM_WORKERS``)."""
    started = template.Template(tmp_path_factory.mktemp("template") / "workers")
    os.environ[template.ADDRESS] = started.path
    template._connection, template._tried = None, False
    yield started
    os.environ.pop(template.ADDRESS)
    if template._connection is not None:
        template._connection.close()
    template._connection, template._tried = None, False
    started.stop()


def _call(worker: Worker, target: str, module: str = "tricks"):
    answer = worker.request({"$type": "call", "id": 1, "target": f"{module}.{target}", "args": wire.encode([]),
                             "kwargs": wire.encode({})}, 30)
    return wire.decode(answer["raised"] if "raised" in answer else answer["value"])


def test_a_worker_here_is_forked_and_says_so(worker):
    assert call(worker, "ok", 3) == 3
    assert isinstance(worker._run.proc, Forked) and worker._run.holder is not None
    assert "forked from a warm template" in worker.isolation["processes"]
    assert worker.measure().memory_bytes < 64 << 20  # torch's pages are the template's, shared


def test_a_sibling_sees_nothing_its_sibling_left(tmp_path):
    """The property P7's fresh loader rests on: a second worker of the same package starts from the template,
    not from the first worker, and its /tmp, /dev/shm and working copy are its own."""
    folder = tmp_path / "assignment"
    folder.mkdir()
    (folder / "__init__.py").write_text("")
    (folder / "left.py").write_text(LEFT)
    first = Worker(folder, Limits(memory_bytes=1536 << 20, processes=64))
    second = first.sibling()
    try:
        assert "left-behind" in _call(first, "leave", "left")
        assert _call(second, "find", "left") == []
        assert isinstance(second._run.proc, Forked)
        assert first._run.claim.uid != second._run.claim.uid
    finally:
        first.close()
        second.close()


def test_a_forked_worker_holds_nothing_of_the_template_or_its_placement(tmp_path):
    """What it inherits is what a cold worker holds: its pipes and its output, no socket of the template's, no
    handle on its cgroup (which it could otherwise fill with its own processes from elsewhere)."""
    folder = tmp_path / "assignment"
    folder.mkdir()
    (folder / "__init__.py").write_text("")
    (folder / "left.py").write_text(LEFT)
    worker = Worker(folder, Limits(memory_bytes=1536 << 20, processes=64))
    try:
        held = _call(worker, "held", "left")
        assert isinstance(worker._run.proc, Forked)
    finally:
        worker.close()
    assert not [target for target in held.values() if "cgroup" in target or target.startswith("socket:")], held
    assert len([target for target in held.values() if target.startswith("pipe:")]) <= 4, held  # requests, answers, output


def _fork_around(holder: int, pidfd: int) -> Forked:
    """Ask the template for a worker in the namespaces of ``holder`` (descriptors that lead nowhere)."""
    pipes = [os.pipe() for _ in range(3)]
    try:
        return template.connection().start(
            {"holder": holder, "cgroup": [], "config": "{}", "filter": ""},
            [pipes[0][0], pipes[1][1], pipes[2][1], pidfd])
    finally:
        for read, write in pipes:
            os.close(read)
            os.close(write)


def test_a_holder_outside_any_sandbox_is_refused():
    """Asked to fork into the namespaces of a process on the host (a grader bug, or a pid reused), the
    template's child refuses before anything runs: it would otherwise be a worker with the host's root."""
    host = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    pidfd = os.pidfd_open(host.pid)
    try:
        forked = _fork_around(host.pid, pidfd)
        assert forked.wait(30) == 70  # confined.template.FAILED
    finally:
        os.close(pidfd)
        host.kill()
        host.wait()


def test_a_holder_that_has_ended_is_refused():
    host = subprocess.Popen([sys.executable, "-c", "pass"])
    pidfd = os.pidfd_open(host.pid)
    host.wait()
    try:
        assert _fork_around(host.pid, pidfd).wait(30) == 70
    finally:
        os.close(pidfd)
