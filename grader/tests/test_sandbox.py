"""Containment of the worker (grader/sandbox.py, confine.py, worker.py): limits and isolation.

Each test drives a real worker over a small package whose functions misbehave: a timeout, a
crash, an exit, too much memory, an output flood, detached processes, ignored signals, forged
frames. Each must fail only its own call, leave nothing behind, and the next call must work.
"""

from __future__ import annotations

import json
import os
import secrets
import subprocess
import sys
import time
from pathlib import Path

import pytest

from grader import wire
from grader.containment import bubblewrap
from grader.containment import cgroup as cgroups
from grader.confined.confine import SYSTEM
from grader.sandbox import KIT, Limits, Worker, interpreter_paths
from grader.session import WorkerFailure

pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="the sandbox's containment is Linux's")

MARKER = f"kit-sandbox-test-{secrets.token_hex(4)}"
MODULE = '''
import os
import signal
import subprocess
import sys
import time

MARKER = "@MARKER@"


def ok(value=1):
    return value


def spin():
    while True:
        pass


def whoami():
    return os.getuid()


def crash():
    import ctypes
    ctypes.string_at(0)


def leave(status=3):
    os._exit(status)


def hog(gib=6):
    import torch
    hoard = [torch.ones(256 << 20, dtype=torch.uint8) for _ in range(4 * gib)]
    return len(hoard)


def balloon(where="memfd", gib=3):
    """Hold ``gib`` GiB outside the resident set: in a memfd, or in a file on a tmpfs."""
    if where == "memfd":
        fd = os.memfd_create("balloon")
    else:
        fd = os.open(os.path.join(where, "balloon-" + MARKER), os.O_WRONLY | os.O_CREAT, 0o600)
    chunk = b"x" * (64 << 20)
    for _ in range(16 * gib):
        os.write(fd, chunk)
    return "held"


def busy_child(mib=64, seconds=0.3):
    """A forked child spins for ``seconds`` of CPU time, fills ``mib`` MiB of a memfd and reads as
    many from /dev/zero, then exits (reaped here): nothing of it stays in this process."""
    child = os.fork()
    if child == 0:
        end = time.process_time() + seconds
        while time.process_time() < end:
            pass
        os.write(os.memfd_create("child"), bytes(mib << 20))
        with open("/dev/zero", "rb") as zero:
            zero.read(mib << 20)
        os._exit(0)
    os.waitpid(child, 0)
    return "done"


def kernel_surface():
    """What each call reaching past the sandbox returned: 0 (it worked) or its errno."""
    import ctypes
    libc = ctypes.CDLL(None, use_errno=True)
    libc.syscall.restype = ctypes.c_long


    def in_a_child(attempt):  # one thread (the worker has several): unshare(CLONE_NEWUSER) demands it
        child = os.fork()
        if child == 0:
            os._exit(0 if attempt() == 0 else ctypes.get_errno())
        return os.waitstatus_to_exitcode(os.waitpid(child, 0)[1])

    calls = {"unshare user": lambda: in_a_child(lambda: libc.unshare(0x10000000)),
             "unshare user, then mount": lambda: in_a_child(lambda: libc.unshare(0x10000000 | 0x00020000) or libc.mount(
                 b"none", b"/tmp", b"tmpfs", 0, None)),
             "mount tmpfs": lambda: libc.mount(b"none", b"/tmp", b"tmpfs", 0, None),
             "ptrace attach parent": lambda: libc.ptrace(16, os.getppid(), None, None)}
    found = {}
    for name, attempt in calls.items():
        ctypes.set_errno(0)
        result = attempt()
        found[name] = result if name.startswith("unshare") else 0 if result == 0 else ctypes.get_errno()
    return found


def flood(megabytes=200):
    chunk = "x" * (1 << 20)
    for _ in range(megabytes):
        sys.stdout.write(chunk)
    os.write(2, chunk.encode())
    return "done"


def sleepers():
    quiet = dict(stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    code = "import signal, time; [signal.signal(s, signal.SIG_IGN) for s in (1, 2, 15)]; time.sleep(120)"
    subprocess.Popen([sys.executable, "-c", code, MARKER], start_new_session=True, **quiet)
    if os.fork() == 0:
        os.setsid()
        if os.fork() == 0:
            os.execv(sys.executable, [sys.executable, "-c", code, MARKER])
        os._exit(0)
    return "started"


def stubborn():
    for number in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(number, signal.SIG_IGN)
    while True:
        try:
            time.sleep(1)
        except BaseException:
            pass


def forks(count=100):
    started = 0
    for _ in range(count):
        try:
            if os.fork() == 0:
                time.sleep(60)
                os._exit(0)
            started += 1
        except OSError:
            break
    return started


def forge():
    for fd in range(3, 32):
        try:
            os.write(fd, (12).to_bytes(4, "big") + b"not json at")
        except OSError:
            pass
    return 1


def ahead():
    import json
    frame = json.dumps({"v": 1, "$type": "result", "id": 10**6, "value": 1}).encode()
    for fd in range(3, 32):
        try:
            os.write(fd, len(frame).to_bytes(4, "big") + frame)
        except OSError:
            pass
    return 2


class AlwaysEqual(int):
    def __eq__(self, other):
        return True

    __hash__ = int.__hash__


def liar():
    return AlwaysEqual(3)


def identity():
    """What a library asking for the user and its caches finds (torch 2.11 asks when an optimizer is built)."""
    import getpass
    import torch
    torch.optim.SGD([torch.nn.Parameter(torch.zeros(3))], lr=0.1)
    caches = [os.environ[key] for key in ("XDG_CACHE_HOME", "TORCHINDUCTOR_CACHE_DIR", "TRITON_CACHE_DIR")]
    for folder in caches:
        os.makedirs(folder, exist_ok=True)
        open(os.path.join(folder, "probe"), "w").close()
    return {"user": getpass.getuser(), "home": os.environ["HOME"], "cwd": os.getcwd(), "caches": caches}


def look(kit):
    import socket
    seen = {"uid": os.getuid(), "root": sorted(os.listdir("/")), "cwd": os.getcwd(),
            "kit_visible": os.path.exists(kit), "processes": [p for p in os.listdir("/proc") if p.isdigit()],
            "home": os.environ.get("HOME")}
    try:
        socket.create_connection(("127.0.0.1", 9), timeout=1)
        seen["network"] = "connected"
    except OSError as exc:
        seen["network"] = type(exc).__name__
    for path in ("/usr/kit-test", "/etc/kit-test", os.path.join(os.path.dirname(sys.executable), "kit-test")):
        try:
            open(path, "w").close()
            seen.setdefault("wrote", []).append(path)
        except OSError:
            pass
    with open("/tmp/work/mine.txt", "w") as stream:
        stream.write("the working copy is writable")
    return seen
'''


@pytest.fixture(scope="module")
def package(tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("sandbox") / "assignment"
    folder.mkdir()
    (folder / "__init__.py").write_text("")
    (folder / "tricks.py").write_text(MODULE.replace("@MARKER@", MARKER))
    return folder


@pytest.fixture(scope="module")
def worker(package):
    worker = Worker(package, Limits(call_seconds=5, memory_bytes=1536 << 20, processes=64))
    yield worker
    worker.close()


def a_package(tmp_path: Path, **modules: str) -> Path:
    """An ``assignment`` package holding the given modules (name -> source)."""
    folder = tmp_path / "assignment"
    folder.mkdir()
    for name, source in {"__init__": "", **modules}.items():
        (folder / f"{name}.py").write_text(source)
    return folder


def call(worker: Worker, target: str, *args, timeout: float = 10):
    call.id = getattr(call, "id", 0) + 1
    answer = worker.request({"$type": "call", "id": call.id, "target": f"tricks.{target}",
                             "args": wire.encode(list(args)), "kwargs": wire.encode({})}, timeout)
    assert answer["id"] == call.id
    return wire.decode(answer["raised"] if "raised" in answer else answer["value"])


def marked_processes() -> list[int]:
    found = []
    for entry in os.listdir("/proc"):
        try:
            if entry.isdigit() and MARKER.encode() in Path(f"/proc/{entry}/cmdline").read_bytes():
                found.append(int(entry))
        except OSError:
            pass
    return found


def wait_until(condition, seconds: float = 10) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.2)
    return condition()


def test_isolation_is_reported_and_real(worker):
    check_isolation(worker, "bubblewrap" if not bubblewrap.usable() else "hand-written namespaces")


def test_hand_written_namespaces_still_confine_where_bubblewrap_runs(package):
    if bubblewrap.usable():
        pytest.skip(bubblewrap.usable())
    worker = Worker(package, Limits(call_seconds=5, memory_bytes=1536 << 20, processes=64, bubblewrap=False))
    try:
        check_isolation(worker, "hand-written namespaces")
    finally:
        worker.close()


def check_isolation(worker: Worker, confinement: str) -> None:
    seen = call(worker, "look", str(KIT))
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
    worker = Worker(package, Limits(call_seconds=5, memory_bytes=1536 << 20, processes=64, namespaces=False))
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
    worker = Worker(package, Limits(call_seconds=20, memory_bytes=1536 << 20, processes=64, **limits))
    try:
        found = call(worker, "identity", timeout=20)
    finally:
        worker.close()
    assert found["user"] == "worker" and found["home"] == found["cwd"], found
    assert all(folder.startswith(found["home"] + os.sep) for folder in found["caches"]), found


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


@pytest.mark.parametrize("where", ["memfd", "/tmp", "/dev/shm"])
@pytest.mark.parametrize("cgroup", [True, False], ids=["cgroup", "watchdog"])
def test_memory_outside_the_resident_set_is_capped(package, monkeypatch, where, cgroup):
    if not cgroup:
        monkeypatch.setattr(cgroups, "create", lambda *args: None)
    worker = Worker(package, Limits(call_seconds=30, memory_bytes=1 << 30, disk_bytes=3 << 30, processes=64))
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
    monkeypatch.setattr(Worker, "_watch_memory", lambda self, proc: None)  # no sample lands during the call
    worker = Worker(package, Limits(call_seconds=30, memory_bytes=1 << 30, disk_bytes=3 << 30, processes=64))
    try:
        with pytest.raises(WorkerFailure, match="MiB of memory"):
            call(worker, "balloon", "/dev/shm", 2, timeout=60)
        assert call(worker, "ok") == 1
    finally:
        worker.close()


@pytest.mark.parametrize("cgroup", [True, False], ids=["cgroup", "watchdog"])
def test_measure_counts_what_a_child_spent(package, monkeypatch, cgroup):
    """CPU time, peak memory and bytes read of a forked child that has exited count for its worker."""
    if not cgroup:
        monkeypatch.setattr(cgroups, "create", lambda *args: None)
    worker = Worker(package, Limits(call_seconds=30, memory_bytes=1 << 30, processes=64))
    try:
        assert worker.measure() is None  # not running
        call(worker, "ok")
        before = worker.measure(reset_peak=True)
        assert call(worker, "busy_child", 64, 0.3) == "done"
        after = worker.measure()
        assert after.source.startswith("cgroup" if cgroup and worker._cgroup else "process tree")
        assert after.cpu_seconds - before.cpu_seconds >= 0.25
        assert after.peak_bytes - before.memory_bytes >= 64 << 20
        assert after.read_bytes - before.read_bytes >= 64 << 20
    finally:
        worker.close()


def test_kernel_surface_is_filtered(worker):
    if not worker.isolation.get("syscalls", "").startswith("seccomp"):
        call(worker, "ok")
    if not worker.isolation["syscalls"].startswith("seccomp"):
        pytest.skip(worker.isolation["syscalls"])
    import errno
    assert call(worker, "kernel_surface") == dict.fromkeys(
        ["unshare user", "unshare user, then mount", "mount tmpfs", "ptrace attach parent"], errno.EPERM)


def test_output_flood_is_drained_and_truncated(worker):
    started = time.monotonic()
    assert call(worker, "flood", 200, timeout=60) == "done"
    assert time.monotonic() - started < 30
    assert len(worker._output.kept) <= worker.limits.output_bytes and worker._output.total > 200 << 20


def test_detached_processes_die_with_the_worker(package):
    worker = Worker(package, Limits(call_seconds=5))
    try:
        assert call(worker, "sleepers") == "started"
        assert wait_until(lambda: len(marked_processes()) >= 2), "the sleepers did not start"
    finally:
        worker.close()
    assert wait_until(lambda: not marked_processes()), f"left behind: {marked_processes()}"


def test_process_count_is_capped_and_all_die(package):
    # Forked children share their parent's pages; a resident-size sum counts them once per child.
    worker = Worker(package, Limits(call_seconds=20, processes=48, memory_bytes=16 << 30))
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
    worker = Worker(folder, Limits(call_seconds=5))
    try:
        raised = call(worker, "ok")
    finally:
        worker.close()
    assert isinstance(raised, wire.Raised) and raised.is_a(ImportError) and not raised.is_a(ValueError)
    assert "importing assignment/tricks.py failed: ValueError: at import" in raised.message


def test_a_slow_package_import_counts_against_the_call(tmp_path):
    folder = a_package(tmp_path, __init__="import time\ntime.sleep(60)\n", tricks="def ok():\n    return 1\n")
    worker = Worker(folder, Limits(call_seconds=3))
    started = time.monotonic()
    try:
        with pytest.raises(WorkerFailure, match="importing your package"):
            call(worker, "ok", timeout=3)
    finally:
        worker.close()
    assert time.monotonic() - started < 30


def test_a_module_that_ends_the_worker_at_import_is_not_imported_again(tmp_path):
    folder = a_package(tmp_path, tricks="import os\nos._exit(0)\n", other="def ok():\n    return 1\n")
    worker = Worker(folder, Limits(call_seconds=5))
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


@pytest.mark.parametrize("confinement", ["", "namespaces"], ids=["default", "hand-written"])
def test_a_virtual_environment_reached_through_a_link_runs_the_worker(tmp_path, confinement):
    """The interpreter runs from the link's path (pyvenv.cfg beside it) while its files resolve
    elsewhere: the worker must see both, in every mode."""
    if sys.prefix == sys.base_prefix:
        pytest.skip("not running in a virtual environment")
    link = KIT / ".kit-out" / f"linked-venv-{os.getpid()}"  # not under /tmp, which the worker gets privately
    link.parent.mkdir(exist_ok=True)
    link.symlink_to(sys.prefix, target_is_directory=True)
    try:
        out = tmp_path / "results.json"
        done = subprocess.run([str(link / "bin" / "python"), "-m", "grader", "grade", "solutions", "--problems", "P3",
                               "--profile", "ci", "--out", str(out)], cwd=KIT, capture_output=True, text=True,
                              timeout=300, env={**os.environ, "GRADER_CONFINEMENT": confinement})
        assert done.returncode == 0 and json.loads(out.read_text())["score"] == 12, done.stdout[-1500:]
    finally:
        link.unlink()
