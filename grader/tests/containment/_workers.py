"""A real worker over a small package whose functions misbehave, for the containment tests
(``test_sandbox.py``, ``test_sandbox_limits.py``)."""

from __future__ import annotations

import os
import secrets
import time
from pathlib import Path

import pytest

from grader import wire
from grader.containment.limits import Limits
from grader.containment.worker import Worker

MARKER = f"kit-sandbox-test-{secrets.token_hex(4)}"
MODULE = '''
import os
import signal
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
    os.kill(os.getpid(), signal.SIGSEGV)


def leave(status=3):
    os._exit(status)


def hog(gib=6):
    import torch
    hoard = [torch.ones(256 << 20, dtype=torch.uint8) for _ in range(4 * gib)]
    return len(hoard)


def oom_score_adj(lower_to=None):
    """This process's oom_score_adj, after trying to lower it to ``lower_to`` (the error's name if refused)."""
    path = "/proc/self/oom_score_adj"
    refused = None
    if lower_to is not None:
        try:
            with open(path, "w") as stream:
                stream.write(str(lower_to))
        except OSError as exc:
            refused = type(exc).__name__
    with open(path) as stream:
        return int(stream.read()), refused


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


PARKED = []


def park(kind="pipes", mib=48):
    """Hold about ``mib`` MiB in kernel buffers: pipes filled to their size, or Unix socket pairs filled
    until the sender would block; kept until ``unpark``."""
    import socket
    held = 0
    while held < mib << 20:
        if kind == "pipes":
            reader, writer = os.pipe()
            os.set_blocking(writer, False)
            PARKED.extend((reader, writer))
            send = lambda chunk: os.write(writer, chunk)  # noqa: E731
        else:
            one, other = socket.socketpair()
            one.setblocking(False)
            PARKED.extend((one, other))
            send = one.send
        try:
            while True:
                held += send(b"x" * 65536)
        except BlockingIOError:
            pass
    return held


def unpark():
    for end in PARKED:
        end.close() if hasattr(end, "close") else os.close(end)
    PARKED.clear()


def mapped_file(named=True, mib=32):
    """Write ``mib`` MiB into a file of the exchange folder through a shared mapping only, unmapped: a named
    file left there (closed), or an unnamed one held open."""
    import mmap
    if named:
        fd = os.open(os.path.join("exchange", "mapped-" + MARKER), os.O_CREAT | os.O_RDWR | os.O_TRUNC, 0o600)
    else:
        fd = os.open("exchange", os.O_TMPFILE | os.O_RDWR, 0o600)
        PARKED.append(fd)
    os.ftruncate(fd, mib << 20)
    with mmap.mmap(fd, mib << 20, mmap.MAP_SHARED) as mapping:
        for start in range(0, mib << 20, 1 << 20):
            mapping[start:start + (1 << 20)] = b"y" * (1 << 20)
    if named:
        os.close(fd)
    return mib


PINNED = []


def pin(mib=4):
    """Map ``mib`` MiB of /dev/zero shared, as CUDA maps page-locked host memory, and keep it mapped."""
    import mmap
    with open("/dev/zero", "r+b") as zero:
        PINNED.append(mmap.mmap(zero.fileno(), mib << 20, flags=mmap.MAP_SHARED))
    return len(PINNED)


def busy_child(mib=64, seconds=0.3):
    """A forked child spins for ``seconds`` of CPU time, fills ``mib`` MiB of a memfd, reads as
    many from /dev/zero and as many of a sparse file through 1 MiB mappings each unmapped at once
    (one byte a page), then exits (reaped here): nothing of it stays in this process."""
    import mmap
    import tempfile
    child = os.fork()
    if child == 0:
        end = time.process_time() + seconds
        while time.process_time() < end:
            pass
        os.write(os.memfd_create("child"), bytes(mib << 20))
        with open("/dev/zero", "rb") as zero:
            zero.read(mib << 20)
        with tempfile.TemporaryFile() as sparse:
            sparse.truncate(mib << 20)
            for offset in range(0, mib << 20, 1 << 20):
                view = mmap.mmap(sparse.fileno(), 1 << 20, prot=mmap.PROT_READ, offset=offset)
                sum(memoryview(view)[::4096])
                view.close()
        os._exit(0)
    os.waitpid(child, 0)
    return "done"


def kernel_surface(numbers):
    """What each call reaching past the sandbox returned: 0 (it worked) or its errno. ``numbers``: this
    architecture's numbers of ``io_setup`` and ``io_uring_setup``. Run where ctypes is allowed (the worker's
    audit hook off)."""
    import ctypes
    import fcntl
    libc = ctypes.CDLL(None, use_errno=True)
    shared = os.open(sys.executable, os.O_RDONLY)  # a file every sandbox reads
    libc.syscall.restype = ctypes.c_long
    context, params = ctypes.c_ulong(0), (ctypes.c_char * 120)()


    def in_a_child(attempt):  # one thread (the worker has several): unshare(CLONE_NEWUSER) demands it
        child = os.fork()
        if child == 0:
            os._exit(0 if attempt() == 0 else ctypes.get_errno())
        return os.waitstatus_to_exitcode(os.waitpid(child, 0)[1])

    calls = {"unshare user": lambda: in_a_child(lambda: libc.unshare(0x10000000)),
             "unshare user, then mount": lambda: in_a_child(lambda: libc.unshare(0x10000000 | 0x00020000) or libc.mount(
                 b"none", b"/tmp", b"tmpfs", 0, None)),
             "mount tmpfs": lambda: libc.mount(b"none", b"/tmp", b"tmpfs", 0, None),
             "ptrace attach parent": lambda: libc.ptrace(16, os.getppid(), None, None),
             "io_setup": lambda: libc.syscall(numbers["io_setup"], 1, ctypes.byref(context)),
             "io_uring_setup": lambda: min(0, libc.syscall(numbers["io_uring_setup"], 1, params)),
             "flock": lambda: libc.flock(shared, fcntl.LOCK_SH),
             "fcntl F_OFD_SETLK": lambda: libc.fcntl(shared, fcntl.F_OFD_SETLK, (ctypes.c_char * 32)()),
             "fcntl F_SETLK": lambda: libc.fcntl(shared, fcntl.F_SETLK, (ctypes.c_char * 32)()),
             "inotify_init1": lambda: min(0, libc.inotify_init1(0)),
             "execve": lambda: in_a_child(lambda: libc.execve(sys.executable.encode(), None, None))}
    found = {}
    for name, attempt in calls.items():
        ctypes.set_errno(0)
        result = attempt()
        found[name] = result if name.startswith("unshare") or name == "execve" else 0 if result == 0 else ctypes.get_errno()
    return found


def flood(megabytes=200):
    chunk = "x" * (1 << 20)
    for _ in range(megabytes):
        sys.stdout.write(chunk)
    os.write(2, chunk.encode())
    return "done"


def sleepers():
    """A child in a session of its own and a double-forked one, both ignoring SIGHUP, SIGINT and SIGTERM (forked:
    the worker may start no program), each named by the marker."""
    def sleep_here():
        for number in (signal.SIGHUP, signal.SIGINT, signal.SIGTERM):
            signal.signal(number, signal.SIG_IGN)
        held = open(f"/tmp/{MARKER}", "a")  # noqa: F841, SIM115 - what marked_processes() finds it by
        time.sleep(120)
        os._exit(0)

    if os.fork() == 0:
        os.setsid()
        sleep_here()
    if os.fork() == 0:
        os.setsid()
        if os.fork() == 0:
            sleep_here()
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
    text = json.dumps({"v": 2, "$type": "result", "id": 10**6, "value": 1}).encode()
    body = len(text).to_bytes(4, "big") + text + (0).to_bytes(4, "little")  # a wire frame without byte payloads
    for fd in range(3, 32):
        try:
            os.write(fd, len(body).to_bytes(4, "big") + body)
        except OSError:
            pass
    return 2


class AlwaysEqual(int):
    def __eq__(self, other):
        return True

    __hash__ = int.__hash__


def liar():
    return AlwaysEqual(3)


def getenv(name):
    return os.environ.get(name)


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
    worker = Worker(package, Limits(memory_bytes=1536 << 20, processes=64))
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
            if entry.isdigit() and (MARKER.encode() in Path(f"/proc/{entry}/cmdline").read_bytes()
                                    or any(MARKER in os.readlink(link) for link in Path(f"/proc/{entry}/fd").iterdir())):
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
