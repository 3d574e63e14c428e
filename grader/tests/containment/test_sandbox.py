"""Isolation of the worker (grader/containment, grader/confined): what it can see and reach.

Each test drives a real worker (``_workers``) and checks what confinement it reports and obtains:
namespaces, its own root, its identity, the syscall filter, under every confinement mode.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from grader.backend import WorkerFailure
from grader.confined.rootfs import SYSTEM
from grader.containment import bubblewrap, syscalls
from grader.containment.limits import Limits, interpreter_paths
from grader.paths import GRADER
from grader.containment.worker import Worker
from _workers import call
from _workers import package, worker  # noqa: F401 - fixtures

pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="the sandbox's containment is Linux's")


def test_isolation_is_reported_and_real(worker):
    check_isolation(worker, "bubblewrap" if not bubblewrap.why_not_usable() else "hand-written namespaces")


def test_hand_written_namespaces_still_confine_where_bubblewrap_runs(package):
    if bubblewrap.why_not_usable():
        pytest.skip(bubblewrap.why_not_usable())
    worker = Worker(package, Limits(memory_bytes=1536 << 20, processes=64, bubblewrap=False))
    try:
        check_isolation(worker, "hand-written namespaces")
    finally:
        worker.close()


def check_isolation(worker: Worker, confinement: str) -> None:
    seen = call(worker, "look", str(GRADER))
    assert worker.isolation["mechanism"].startswith(confinement), worker.isolation
    assert seen["network"] != "connected"
    assert not seen["kit_visible"] and "wrote" not in seen
    assert seen["cwd"] == "/tmp/work" and seen["home"] == "/tmp/work"
    # Only system folders and the interpreter's own folders (a venv may live anywhere) are visible.
    interpreter = {Path(p).parts[1] for p in interpreter_paths()}
    assert set(seen["root"]) <= set(SYSTEM) | interpreter | {".old-root", "dev", "proc", "tmp", "var"}, seen["root"]
    assert len(seen["processes"]) <= 3, seen["processes"]  # its own PID namespace
    if os.geteuid() == 0:
        assert seen["uid"] != 0 and "dropped from root" in worker.isolation["user"]
    assert {"network", "filesystem", "processes", "user", "limits", "signals"} <= set(worker.isolation)
    assert worker.isolation["signals"].startswith("cannot")


def test_without_namespaces_the_worker_still_works_and_says_so(package):
    """A host that refuses namespaces (a container without CAP_SYS_ADMIN) gets the fallback."""
    worker = Worker(package, Limits(memory_bytes=1536 << 20, processes=64, namespaces=False))
    try:
        assert call(worker, "ok", 7) == 7
        with pytest.raises(WorkerFailure, match="SIGSEGV"):
            call(worker, "crash", timeout=3)
        assert call(worker, "ok", 8) == 8
        assert "host network" in worker.isolation["network"] and "not hidden" in worker.isolation["filesystem"]
        if os.geteuid() == 0 and "not dropped" not in worker.isolation["user"]:
            assert call(worker, "whoami") != 0 and "dropped from root" in worker.isolation["user"]
            assert worker.isolation["signals"].startswith("cannot signal the judge")
        elif os.geteuid() == 0:  # e.g. an interpreter under /root: said, not hidden
            assert call(worker, "whoami") == 0
    finally:
        worker.close()


@pytest.mark.parametrize("limits", [{}, {"bubblewrap": False}, {"namespaces": False}],
                         ids=["default", "hand-written", "no namespaces"])
def test_the_worker_has_a_user_name_and_writable_caches_under_any_uid(package, limits):
    """The worker's uid has no passwd entry: the user name, home and caches come from its
    environment, inside its private folder, in every mode (torch 2.11 fails to build an optimizer
    otherwise)."""
    worker = Worker(package, Limits(memory_bytes=1536 << 20, processes=64, **limits))
    try:
        found = call(worker, "identity", timeout=20)
    finally:
        worker.close()
    assert found["user"] == "worker" and found["home"] == found["cwd"], found
    assert all(folder.startswith(found["home"] + os.sep) for folder in found["caches"]), found


def test_openmp_threads_sleep_when_idle_unless_the_environment_says_otherwise(package, monkeypatch):
    """Spinning OpenMP threads burn the CPU time of a grading (a third of P8's): the worker's
    waiting threads sleep, unless OMP_WAIT_POLICY is given, which is passed on."""
    for given, expected in ((None, "PASSIVE"), ("ACTIVE", "ACTIVE")):
        if given is None:
            monkeypatch.delenv("OMP_WAIT_POLICY", raising=False)
        else:
            monkeypatch.setenv("OMP_WAIT_POLICY", given)
        worker = Worker(package, Limits(memory_bytes=1536 << 20, processes=64))
        try:
            assert call(worker, "getenv", "OMP_WAIT_POLICY", timeout=20) == expected
        finally:
            worker.close()


def test_kernel_surface_is_filtered(package):
    worker = Worker(package, Limits(memory_bytes=1536 << 20, processes=64, code_by_name=False))  # ctypes probes
    try:
        call(worker, "ok")
        if not worker.isolation["syscalls"].startswith("seccomp"):
            pytest.skip(worker.isolation["syscalls"])
        import errno
        numbers = syscalls.numbers(("io_setup", "io_uring_setup"))
        assert call(worker, "kernel_surface", numbers) == dict.fromkeys(
            ["unshare user", "unshare user, then mount", "mount tmpfs", "ptrace attach parent", "io_setup",
             "io_uring_setup", "flock", "fcntl F_OFD_SETLK", "fcntl F_SETLK", "inotify_init1", "execve"], errno.EPERM)
    finally:
        worker.close()


@pytest.mark.parametrize("confinement", ["", "namespaces"], ids=["default", "hand-written"])
def test_a_virtual_environment_reached_through_a_link_runs_the_worker(tmp_path, confinement):
    """The interpreter runs from the link's path (pyvenv.cfg beside it) while its files resolve
    elsewhere: the worker must see both, in every mode."""
    if sys.prefix == sys.base_prefix:
        pytest.skip("not running in a virtual environment")
    link = GRADER / ".kit-out" / f"linked-venv-{os.getpid()}"  # not under /tmp, which the worker gets privately
    link.parent.mkdir(exist_ok=True)
    link.symlink_to(sys.prefix, target_is_directory=True)
    try:
        out = tmp_path / "results.json"
        done = subprocess.run([str(link / "bin" / "python"), "-m", "grader", "grade", "solutions", "--problems", "P3",
                               "--profile", "ci", "--out", str(out)], cwd=GRADER, capture_output=True, text=True,
                              timeout=300, env={**os.environ, "GRADER_CONFINEMENT": confinement})
        assert done.returncode == 0 and json.loads(out.read_text())["score"] == 12, done.stdout[-1500:]
    finally:
        link.unlink()
