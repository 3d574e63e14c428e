"""Limits of the worker (grader/containment, grader/confined): each misbehaviour fails alone.

Each test drives a real worker over a small package whose functions misbehave (``_workers``): a timeout, a
crash, an exit, too much memory, an output flood, detached processes, ignored signals, forged
frames. Each must fail only its own call, leave nothing behind, and the next call must work.
"""

from __future__ import annotations

import os
import sys
import time

import psutil
import pytest

from grader import wire
from grader.backend import WorkerFailure
from grader.containment import cgroup as cgroups
from grader.containment.limits import Limits
from grader.containment.watchdog import MemoryWatch
from grader.containment.worker import Worker
from _workers import a_package, call, marked_processes, wait_until
from _workers import package, worker  # noqa: F401 - fixtures

pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="the sandbox's containment is Linux's")


@pytest.mark.parametrize("target, args, why", [
    ("spin", (), "time limit"),
    ("crash", (), "SIGSEGV"),
    ("leave", (3,), "exit status 3"),
    ("stubborn", (), "time limit"),
    ("forge", (), "protocol"),
])
def test_a_misbehaving_call_fails_alone_and_the_next_one_works(worker, target, args, why):
    with pytest.raises(WorkerFailure, match=why):
        call(worker, target, *args, timeout=3)
    assert call(worker, "ok", 7) == 7


def test_memory_cap_stops_the_worker(worker):
    with pytest.raises(WorkerFailure, match="MiB of memory"):
        call(worker, "hog", 6, timeout=60)
    assert call(worker, "ok") == 1


def test_short_of_memory_the_kernel_ends_the_worker_first(worker):
    """Where the judge places the worker (root, a cgroup): its oom_score_adj is the highest, and it cannot lower
    it, so a container short of memory ends a worker, never the judge (which then grades on)."""
    score, refused = call(worker, "oom_score_adj", 0)
    if os.geteuid() != 0 or "cgroup" not in worker.isolation["memory"]:
        pytest.skip("placed only as root, in a cgroup")
    assert (score, refused) == (1000, "PermissionError")


@pytest.mark.parametrize("where", ["memfd", "/tmp", "/dev/shm"])
@pytest.mark.parametrize("cgroup", [True, False], ids=["cgroup", "watchdog"])
def test_memory_outside_the_resident_set_is_capped(package, monkeypatch, where, cgroup):
    if not cgroup:
        monkeypatch.setattr(cgroups, "create", lambda *args: None)
    worker = Worker(package, Limits(memory_bytes=1 << 30, disk_bytes=3 << 30, processes=64))
    try:
        with pytest.raises(WorkerFailure, match="MiB of memory"):
            call(worker, "balloon", where, 2, timeout=60)
        assert cgroup or "no cgroup" in worker.isolation["memory"]
        assert call(worker, "ok") == 1
    finally:
        worker.close()


def test_a_burst_between_two_samples_is_refused_with_the_answer(package, monkeypatch):
    """Without a cgroup, memory filled faster than the watchdog samples is caught before the answer counts."""
    monkeypatch.setattr(cgroups, "create", lambda *args: None)
    monkeypatch.setattr(MemoryWatch, "watch", lambda self: None)  # no sample lands during the call
    worker = Worker(package, Limits(memory_bytes=1 << 30, disk_bytes=3 << 30, processes=64))
    try:
        with pytest.raises(WorkerFailure, match="MiB of memory"):
            call(worker, "balloon", "/dev/shm", 2, timeout=60)
        assert call(worker, "ok") == 1
    finally:
        worker.close()


@pytest.mark.parametrize("cgroup", [True, False], ids=["cgroup", "watchdog"])
def test_measure_counts_what_a_child_spent(package, monkeypatch, cgroup):
    """CPU time, peak memory, bytes written and read and page faults of a forked child that has exited count for its worker."""
    if not cgroup:
        monkeypatch.setattr(cgroups, "create", lambda *args: None)
    worker = Worker(package, Limits(memory_bytes=1 << 30, processes=64))
    try:
        assert worker.measure() is None  # not running
        call(worker, "ok")
        before = worker.measure(reset_peak=True)
        assert call(worker, "busy_child", 64, 0.3) == "done"
        after = worker.measure()
        assert after.source.startswith("cgroup" if cgroup and worker._run.cgroup else "process tree")
        assert after.cpu_seconds - before.cpu_seconds >= 0.25
        assert after.peak_bytes - before.memory_bytes >= 64 << 20
        assert after.read_bytes - before.read_bytes >= 64 << 20
        assert after.written_bytes - before.written_bytes >= 64 << 20  # into its memfd, by write(2)
        # The file alone: 64 mappings of 1 MiB, too small for a huge page, each at least 16 faults of at
        # most 16 pages (fault-around); the worker's own faults during the call are about 150.
        assert after.page_faults - before.page_faults >= 64 * 16
    finally:
        worker.close()


def test_pause_stops_the_worker_until_it_is_continued(worker):
    """``pause`` stops the worker's processes from outside (SIGSTOP) until it is continued; then calls work."""
    call(worker, "ok")
    process = psutil.Process(worker.worker_pid())
    worker.pause(True)
    try:
        assert wait_until(lambda: process.status() == psutil.STATUS_STOPPED), process.status()
    finally:
        worker.pause(False)
    assert wait_until(lambda: process.status() != psutil.STATUS_STOPPED), process.status()
    assert call(worker, "ok", 7) == 7


def test_output_flood_is_drained_and_truncated(worker):
    started = time.monotonic()
    assert call(worker, "flood", 200, timeout=60) == "done"
    assert time.monotonic() - started < 30
    assert len(worker._output.kept) <= worker.limits.output_bytes and worker._output.total > 200 << 20


def test_detached_processes_die_with_the_worker(package):
    worker = Worker(package, Limits())
    try:
        assert call(worker, "sleepers") == "started"
        assert wait_until(lambda: len(marked_processes()) >= 2), "the sleepers did not start"
    finally:
        worker.close()
    assert wait_until(lambda: not marked_processes()), f"left behind: {marked_processes()}"


def test_process_count_is_capped_and_all_die(package):
    # Forked children share their parent's pages; a resident-size sum counts them once per child.
    worker = Worker(package, Limits(processes=48, memory_bytes=16 << 30))
    try:
        started = call(worker, "forks", 100, timeout=30)
        assert 0 < started < 48
    finally:
        worker.close()


def test_an_answer_out_of_turn_restarts_the_worker(worker):
    with pytest.raises(WorkerFailure, match="out of turn"):
        call(worker, "ahead")
    assert call(worker, "ok", 5) == 5


def test_a_lying_value_crosses_as_opaque(worker):
    value = call(worker, "liar")
    assert isinstance(value, wire.Opaque) and value != 3


def test_import_errors_never_pass_for_the_function_s_own_exceptions(tmp_path):
    folder = a_package(tmp_path, tricks="raise ValueError('at import')\n")
    worker = Worker(folder, Limits())
    try:
        raised = call(worker, "ok")
    finally:
        worker.close()
    assert isinstance(raised, wire.Raised) and raised.is_a(ImportError) and not raised.is_a(ValueError)
    assert "importing assignment/tricks.py failed: ValueError: at import" in raised.message


def test_a_slow_package_import_counts_against_the_call(tmp_path):
    folder = a_package(tmp_path, __init__="import time\ntime.sleep(60)\n", tricks="def ok():\n    return 1\n")
    worker = Worker(folder, Limits())
    started = time.monotonic()
    try:
        with pytest.raises(WorkerFailure, match="importing your package"):
            call(worker, "ok", timeout=3)
    finally:
        worker.close()
    assert time.monotonic() - started < 30


def test_a_module_that_ends_the_worker_at_import_is_not_imported_again(tmp_path):
    folder = a_package(tmp_path, tricks="import os\nos._exit(0)\n", other="def ok():\n    return 1\n")
    worker = Worker(folder, Limits())
    try:
        with pytest.raises(WorkerFailure, match="importing tricks.py"):
            call(worker, "ok")
        started = time.monotonic()
        with pytest.raises(WorkerFailure, match="not imported again"):
            call(worker, "ok")
        assert time.monotonic() - started < 0.5 and worker.restarts == 1
        answer = worker.request({"$type": "call", "id": 99, "target": "other.ok", "args": [],
                                 "kwargs": wire.encode({})}, 10)
        assert wire.decode(answer["value"]) == 1  # the other modules are graded as usual
    finally:
        worker.close()
