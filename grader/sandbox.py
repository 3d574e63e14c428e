"""Containment of student code: the one entry point that starts, watches and kills workers.

A ``Worker`` copies the submission package and the worker files into a private temporary
folder, starts ``confine.py`` there in a new session with a scrubbed environment (it builds
the worker's own root filesystem, namespaces and identity: see its docstring), and talks to
it over two pipes (never stdin/stdout: those are captured, truncated and otherwise ignored).
Each request has a wall-clock limit. Memory is capped by a per-worker cgroup where the host
gives one (``containment.cgroup``: it counts memfds and tmpfs files, and limits the process
count), and always by a watchdog that kills a worker whose process tree grows past its cap
(without a cgroup it counts the tree's memfds and private tmpfs files too). On a timeout,
crash, memory kill or protocol violation the whole process tree (its cgroup, and, when dropped
to a dedicated uid, every process of that uid) is killed and the next request starts a fresh
worker from a fresh copy.
"""

from __future__ import annotations

import ctypes
import functools
import json
import socket
import os
import select
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

import psutil

from . import wire
from .containment import cgroup as cgroups
from .containment import bubblewrap, level, syscalls, tree, uids
from .containment.uids import UID_BASE, UID_SPAN  # noqa: F401 - where the attack check finds them
from .session import Exchange, OnCallback, WorkerFailure

KIT = Path(__file__).resolve().parent
CONFINED = KIT / "confined"
EXCHANGE = "exchange"  # in the worker's working folder: see confine.py
PR_SET_CHILD_SUBREAPER = 36
PASSED_ENV = ("PATH", "LANG", "LC_ALL", "LD_LIBRARY_PATH", "CUDA_VISIBLE_DEVICES", "OMP_NUM_THREADS",
              "MKL_NUM_THREADS", "OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE")
BOOT = "import sys; sys.path.insert(0, '_kit'); import confine; confine.main()"
SYSCALL_FILTER = "syscalls.bpf"  # in the worker's _kit folder
_RUNNING: set[int] = set()  # the judge's running workers: one stopping spares the others' trees


@dataclass(frozen=True)
class Limits:
    call_seconds: float = 30.0
    start_seconds: float = 120.0
    memory_bytes: int = 4 << 30
    output_bytes: int = 64 << 10
    file_bytes: int = 1 << 30
    disk_bytes: int = 1 << 30  # the worker's private /tmp (and /dev/shm): memory, not disk
    processes: int = 512  # tasks, threads included
    # GRADER_CONFINEMENT=namespaces (the hand-written ones even where bubblewrap runs) or =none (what a
    # host that refuses namespaces gives: uid drop and limits only) picks a weaker mode, to compare modes.
    namespaces: bool = field(default_factory=lambda: os.environ.get("GRADER_CONFINEMENT") != "none")
    bubblewrap: bool = field(default_factory=lambda: os.environ.get("GRADER_CONFINEMENT") not in ("none", "namespaces"))


@dataclass
class _Output:
    """The worker's stdout and stderr: the first ``limit`` bytes kept, the rest counted."""

    limit: int
    kept: bytearray = field(default_factory=bytearray)
    total: int = 0

    def drain(self, stream) -> None:
        for chunk in iter(lambda: stream.read1(65536), b""):
            self.total += len(chunk)
            room = self.limit - len(self.kept)
            if room > 0:
                self.kept += chunk[:room]

    def tail(self, size: int = 600) -> str:
        text = self.kept.decode(errors="replace")[-size:]
        return text + (f" [{self.total - len(self.kept)} more bytes dropped]" if self.total > len(self.kept) else "")


def _become_subreaper() -> None:
    """Orphans of a worker (double-forked, setsid) are re-parented to the judge, so they can be found."""
    ctypes.CDLL(None).prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)


def _processes() -> dict[int, tuple[int, int]]:
    """pid -> (parent pid, uid) for every process visible in /proc."""
    table = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                status = Path(f"/proc/{entry}/status").read_text()
            except OSError:
                continue
            fields = dict(line.split(":", 1) for line in status.splitlines() if ":" in line)
            table[int(entry)] = (int(fields["PPid"]), int(fields["Uid"].split()[0]))
    return table


def _descendants(root: int, table: dict[int, tuple[int, int]]) -> set[int]:
    found, frontier = set(), {root}
    while frontier:
        frontier = {pid for pid, (ppid, _) in table.items() if ppid in frontier} - found
        found |= frontier
    return found


def _kill(pids: set[int]) -> None:
    for pid in pids:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass


@functools.cache
def _syscall_filter() -> bytes | None:
    return syscalls.deny_filter()


def secret_paths() -> list[Path]:
    """What no worker may see: the grader (hidden suites, drivers), the reference, and
    the kit checkout's history. The worker's root holds none of them unless the Python
    installation does (a kit installed into site-packages); then they are covered."""
    import importlib.util

    paths = [KIT, KIT.parent / ".git"]
    spec = importlib.util.find_spec("solutions")
    if spec is not None and spec.submodule_search_locations:
        paths += [Path(p).resolve() for p in spec.submodule_search_locations]
    return paths


def interpreter_paths() -> list[str]:
    """Folders the worker must see (read-only) to run this interpreter, its packages and libraries."""
    import einops
    import numpy
    import torch

    paths = {sys.base_prefix, sys.prefix, sys.exec_prefix, sys.base_exec_prefix,
             os.path.dirname(os.path.realpath(sys.executable))}
    paths |= {str(Path(module.__file__).resolve().parents[1]) for module in (torch, numpy, einops)}
    paths |= {p for p in os.environ.get("LD_LIBRARY_PATH", "").split(os.pathsep) if os.path.isabs(p)}
    # Both spellings, for both binders (bubblewrap's and the hand-written root): a virtual environment
    # reached through a symbolic link runs as its unresolved path (sys.executable, pyvenv.cfg beside
    # it), while its files live under the resolved one.
    return sorted({q for p in paths if os.path.isdir(p) for q in (os.path.abspath(p), os.path.realpath(p))})


class Worker:
    """A contained worker process for one submission, restarted as needed."""

    def __init__(self, package: Path, limits: Limits = Limits(), masks: list[Path] = (),
                 readonly: list[Path] = ()) -> None:
        self.package = package
        self.limits = limits
        self.masks = list(dict.fromkeys(str(Path(p).resolve()) for p in [*masks, *secret_paths(), package]))
        self.readonly = [str(Path(p).resolve()) for p in readonly]
        self.isolation: dict[str, str] = {}
        self.import_error: wire.Raised | None = None
        self.restarts = 0
        self.fatal_imports: dict[str, str] = {}  # module -> how importing it ended the worker
        self._proc: subprocess.Popen | None = None
        self._uid: int | None = None
        self._claim: uids.Claim | None = None
        self._cgroup: cgroups.Cgroup | None = None
        self._wrapped = False
        _become_subreaper()

    # -- lifecycle -------------------------------------------------------------------------

    def _prepare(self) -> Path:
        """``base/work`` (the package and the worker files: copied into the worker's /tmp/work) and
        ``base/root`` (where confine.py mounts the worker's root)."""
        base = Path(tempfile.mkdtemp(prefix="kit-worker-"))
        workdir = base / "work"
        shutil.copytree(self.package, workdir / "assignment", symlinks=False,
                        ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
        kit = workdir / "_kit"
        kit.mkdir()
        for source in [KIT / "wire.py", *CONFINED.glob("*.py")]:
            if source.name != "__init__.py":
                shutil.copy2(source, kit / source.name)
        (workdir / EXCHANGE).mkdir()
        if _syscall_filter() is not None:
            (kit / SYSCALL_FILTER).write_bytes(_syscall_filter())
        (base / "root").mkdir()
        if self._uid is not None:  # used as is by bubblewrap, or where no namespace can be made
            for path in [workdir, *workdir.rglob("*")]:
                os.chown(path, self._uid, self._uid, follow_symlinks=False)
            workdir.chmod(0o700)
            base.chmod(0o711)
        return base

    def _start(self) -> None:
        self._claim = uids.claim() if os.geteuid() == 0 else None
        self._uid = self._claim.uid if self._claim else None
        self._cgroup = cgroups.create(self.limits.memory_bytes, self.limits.processes)
        expose = interpreter_paths()
        reachable = all(bubblewrap.open_to_others(p) for p in expose)
        wrapped = self._wrapped = self.limits.namespaces and self.limits.bubblewrap and not bubblewrap.usable()
        self._workdir = self._prepare()
        workdir = self._workdir / "work"
        request_r, self._request_w = os.pipe()
        self._response_r, response_w = os.pipe()
        placement, placement_w = socket.socketpair() if self._cgroup else (None, None)
        program = _syscall_filter()
        seccomp_fd = os.memfd_create("seccomp") if wrapped and program else None
        if seccomp_fd is not None:
            os.write(seccomp_fd, program)
            os.lseek(seccomp_fd, 0, os.SEEK_SET)
        passed = [fd for fd in (request_r, response_w, placement_w and placement_w.fileno(), seccomp_fd)
                  if fd is not None]
        config = {"workdir": str(workdir), "root": str(self._workdir / "root"), "masks": self.masks,
                  "readonly": self.readonly, "expose": expose, "uid": self._uid, "gid": self._uid,
                  "request_fd": request_r, "response_fd": response_w,
                  "placement_fd": placement_w.fileno() if placement_w else None,
                  "file_bytes": self.limits.file_bytes, "disk_bytes": self.limits.disk_bytes,
                  "processes": self.limits.processes, "namespaces": self.limits.namespaces, "reachable": reachable,
                  "bubblewrap": wrapped,
                  "syscall_filter": f"_kit/{SYSCALL_FILTER}" if program and not wrapped else None,
                  "syscalls": syscalls.describe(program is not None),
                  "syscall_numbers": syscalls.numbers(syscalls.BY_NUMBER)}
        command = [sys.executable, "-I", "-c", BOOT]
        if wrapped:
            command = bubblewrap.command(config, seccomp_fd=seccomp_fd) + command
            config["workdir"] = bubblewrap.SOURCE
        env = {key: os.environ[key] for key in PASSED_ENV if key in os.environ}
        env.update(HOME=str(workdir), TMPDIR=str(workdir), PYTHONHASHSEED="0", PYTHONUNBUFFERED="1")
        self._proc = subprocess.Popen([*command, json.dumps(config)], cwd=workdir, env=env, pass_fds=passed,
                                      stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                      start_new_session=True)
        _RUNNING.add(self._proc.pid)
        if seccomp_fd is not None:
            os.close(seccomp_fd)
        os.close(request_r)
        os.close(response_w)
        if placement is not None:
            placement_w.close()
            self._place(placement)
        os.set_blocking(self._request_w, False)
        self._output = _Output(self.limits.output_bytes)
        self._meter = tree.Meter(self._proc.pid, self._cgroup, self._uid)
        self._memory_killed = False
        self._threads = [threading.Thread(target=self._output.drain, args=(self._proc.stdout,), daemon=True),
                         threading.Thread(target=self._watch_memory, args=(self._proc,), daemon=True)]
        for thread in self._threads:
            thread.start()
        hello = self._read_frame(time.monotonic() + self.limits.start_seconds, "starting the worker")
        self.isolation = {key: str(value) for key, value in dict(hello.get("isolation", {})).items()}
        confinement = ("bubblewrap" if self._wrapped else "rlimits only"
                       if self.isolation.get("network", "").startswith("host") else "hand-written namespaces")
        self.isolation["mechanism"] = level.mechanism(confinement, _syscall_filter() is not None, self._cgroup)
        self.isolation["memory"] = self._cgroup.describe() if self._cgroup else (
            f"watched ten times a second: resident memory, memfds and private tmpfs files, "
            f"{self.limits.memory_bytes >> 20} MiB (no cgroup on this host)")

    def _place(self, placement: socket.socket) -> None:
        """Move the worker's tree into its cgroup when it asks, before any student code runs (all
        it starts later is born inside), then let it go on."""
        placement.settimeout(self.limits.start_seconds)
        try:
            asked = placement.recv(1)
        except OSError:
            asked = b""
        if asked:
            self._cgroup.place({self._proc.pid} | _descendants(self._proc.pid, _processes()))
            placement.sendall(b"g")
        placement.close()

    def _await_ready(self, deadline: float) -> None:
        """The package's own import is student code: it runs on the first request's clock."""
        ready = self._read_frame(deadline, "importing your package")
        try:
            self.import_error = wire.decode(ready["import_error"]) if "import_error" in ready else None
        except wire.WireError as exc:
            raise self._fail(f"the worker broke the protocol while importing your package ({exc})") from None

    def _watch_memory(self, proc: subprocess.Popen) -> None:
        """Kill the worker when its process tree's resident memory passes the cap (where no cgroup
        does: the kernel's count is exact, a sum of resident sets counts shared pages once per process)."""
        if self._cgroup is not None:
            return
        beat, pids = 0, {proc.pid}
        while proc.poll() is None:
            if beat % 10 == 0:  # the tree is found once a second; what it holds is read ten times a second
                pids = {proc.pid} | _descendants(proc.pid, _processes())
            if self._stopped_over_memory(pids):
                return
            beat += 1
            time.sleep(0.1)

    def _stopped_over_memory(self, pids: set[int]) -> bool:
        """Kill the worker if the tree ``pids`` holds more than the cap; whether it did."""
        if tree.memory_bytes(pids, self._uid) <= self.limits.memory_bytes:
            return False
        self._memory_killed = True
        self._kill_tree()
        return True

    def _kill_tree(self) -> None:
        if self._proc is None:
            return
        table = _processes()
        doomed = _descendants(self._proc.pid, table) | {self._proc.pid}
        if self._uid is not None:
            doomed |= {pid for pid, (_, uid) in table.items() if uid == self._uid}
        try:
            os.killpg(self._proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        _kill(doomed)
        if self._cgroup is not None:
            self._cgroup.kill()

    def _reap_orphans(self) -> None:
        """Kill and reap processes re-parented to the judge (the worker's escaped descendants), sparing
        the judge's other running workers."""
        me = os.getpid()
        for _ in range(3):
            table = _processes()
            orphans = {pid for pid, (ppid, _) in table.items() if ppid == me} - _RUNNING
            orphans |= {d for pid in orphans for d in _descendants(pid, table)}
            if not orphans:
                return
            _kill(orphans)
            for pid in orphans:
                try:
                    os.waitpid(pid, 0)
                except ChildProcessError:
                    pass

    def stop(self) -> None:
        """Kill the worker and everything it started; remove its folder."""
        if self._proc is None:
            return
        self._kill_tree()
        self._proc.wait()
        _RUNNING.discard(self._proc.pid)
        self._reap_orphans()
        for fd in (self._request_w, self._response_r):
            try:
                os.close(fd)
            except OSError:
                pass
        for thread in self._threads:
            thread.join(timeout=5)
        self._meter.close()
        shutil.rmtree(self._workdir, ignore_errors=True)
        if self._uid is not None:  # what it left in the host's shared memory (where it had no private one)
            for path in tree.owned_files(Path("/dev/shm"), self._uid):
                path.unlink(missing_ok=True)
        if self._cgroup is not None:
            self._cgroup.remove()
            self._cgroup = None
        if self._claim is not None:
            self._claim.release()
            self._claim = None
        self._proc = None

    close = stop

    def sibling(self) -> Worker:
        """A second worker for the same package, limits and masks, sharing nothing with this one
        (its own process tree, folder, exchange, uid and cgroup); started on its first request."""
        return Worker(self.package, self.limits, masks=[Path(p) for p in self.masks],
                      readonly=[Path(p) for p in self.readonly])

    # -- protocol --------------------------------------------------------------------------

    def _fail(self, what: str) -> WorkerFailure:
        """Stop the worker and describe why, with the end of what it printed."""
        proc = self._proc
        ended = proc.poll() if proc is not None else None  # how it ended by itself, before it is killed
        if ended is not None and ended > 128 and self._wrapped:  # bubblewrap ends with 128 + the worker's signal
            ended = 128 - ended
        memory = self._memory_killed or (self._cgroup is not None and self._cgroup.oom_killed())
        self.stop()
        self.restarts += 1
        if memory:
            what = f"used more than {self.limits.memory_bytes >> 20} MiB of memory and was stopped"
        elif ended is not None and ended < 0 and "died" in what:
            try:
                what += f" (killed by signal {signal.Signals(-ended).name})"
            except ValueError:
                what += f" (killed by signal {-ended})"
        elif ended is not None and "died" in what:
            what += f" (exit status {ended})"
        output = self._output.tail().strip()
        return WorkerFailure(what + (f"; its last output: {output}" if output else ""))

    def _read_exact(self, size: int, deadline: float, what: str) -> bytes:
        chunks, remaining = [], size
        while remaining:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([self._response_r], [], [], left)[0]:
                raise self._fail(f"no answer within the time limit while {what}; the worker was stopped")
            chunk = os.read(self._response_r, min(remaining, 1 << 20))
            if not chunk:  # it died, or closed its answer channel (then it is killed)
                try:
                    self._proc.wait(timeout=2)
                except subprocess.TimeoutExpired:
                    pass
                raise self._fail(f"the worker process died while {what}")
            chunks.append(chunk)
            remaining -= len(chunk)
        return b"".join(chunks)

    def _read_frame(self, deadline: float, what: str) -> dict:
        try:
            length = wire.frame_length(self._read_exact(4, deadline, what))
            return wire.parse_frame(self._read_exact(length, deadline, what))
        except wire.WireError as exc:
            raise self._fail(f"the worker broke the protocol while {what} ({exc})") from None

    def _write_frame(self, message: dict, deadline: float, what: str) -> None:
        data = memoryview(wire.frame(message))
        while data:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([], [self._request_w], [], left)[1]:
                raise self._fail(f"the worker stopped reading requests while {what}; it was stopped")
            try:
                data = data[os.write(self._request_w, data[: 1 << 16]):]
            except BlockingIOError:
                continue
            except BrokenPipeError:
                raise self._fail(f"the worker process died while {what}") from None

    def exchange(self) -> Exchange:
        """The folder this worker shares with the judge (the worker must be running: a restart
        gives a fresh, empty one)."""
        if self._proc is None:
            raise WorkerFailure("the worker is not running")
        return Exchange(host=self._workdir / "work" / EXCHANGE, inside=EXCHANGE)

    def worker_pid(self) -> int | None:
        """The worker process as the judge sees it (for measuring it from outside through /proc):
        the oldest process of the worker's tree that runs this interpreter and holds the request
        pipe (not bubblewrap, which holds it too); None when not running."""
        if self._proc is None or self._proc.poll() is not None:
            return None
        pipe = f"pipe:[{os.fstat(self._request_w).st_ino}]"
        try:
            root = psutil.Process(self._proc.pid)
            tree = sorted([root, *root.children(recursive=True)], key=lambda process: process.create_time())
        except psutil.Error:
            return None
        for process in tree:
            try:
                if process.cmdline()[:2] != [sys.executable, "-I"]:
                    continue
                if any(os.readlink(f"/proc/{process.pid}/fd/{fd}") == pipe for fd in os.listdir(f"/proc/{process.pid}/fd")):
                    return process.pid
            except (OSError, psutil.Error):
                continue
        return None

    def measure(self, reset_peak: bool = False) -> tree.Usage | None:
        """What the worker's whole tree has used, read from outside it (``containment.tree``); None
        when not running. ``reset_peak``: the next reading's peak starts from this one."""
        if self._proc is None or self._proc.poll() is not None:
            return None
        return self._meter.read(reset_peak)

    def request(self, message: dict, timeout: float, on_callback: OnCallback | None = None) -> dict:
        """Send one request and return its answer (a frame of type "result" with the request's id).

        While it runs, the submission may call a judge callback: ``on_callback`` answers each
        ``callback`` frame with a ``return`` frame (it may send nested requests meanwhile), and
        the request's clock starts again after it.

        A module whose import ended or hung the worker once is not imported again: later
        requests into it fail at once with the same reason (importing is deterministic, and a
        restart per call would spend the submission's whole time budget)."""
        module = str(message.get("target") or "").partition(".")[0]
        for name in (module, "__init__"):
            if name in self.fatal_imports:
                raise WorkerFailure(f"{self.fatal_imports[name]} (not imported again)")
        if self._proc is not None and select.select([self._response_r], [], [], 0)[0]:
            self.stop()  # it spoke out of turn between requests, or died: a fresh one answers
            self.restarts += 1
        if self._proc is None:
            self._start()
            deadline = time.monotonic() + timeout
            try:
                self._await_ready(deadline)
            except WorkerFailure as exc:
                self.fatal_imports["__init__"] = str(exc)
                raise
        else:
            deadline = time.monotonic() + timeout
        what = f"running {message.get('target') or message.get('$type')}"
        self._write_frame(message, deadline, what)
        importing, announced = None, 0
        try:
            answer = self._read_frame(deadline, what)
            while answer.get("$type") in ("importing", "imported") and announced < 2:
                announced += 1
                importing = str(answer.get("module")) if answer["$type"] == "importing" else None
                answer = self._read_frame(deadline, f"importing {importing}.py" if importing else what)
        except WorkerFailure as exc:
            if importing == module:
                self.fatal_imports[module] = str(exc)
            raise
        while answer.get("$type") == "callback" and on_callback is not None:
            reply = on_callback(answer)
            deadline = time.monotonic() + timeout
            self._write_frame(reply, deadline, what)
            answer = self._read_frame(deadline, what)
        if answer.get("$type") != "result" or answer.get("id") != message.get("id"):
            raise self._fail(f"the worker answered out of turn while {what}; it was stopped")
        # Where no cgroup counts memory, the watchdog samples: a burst between two samples is
        # caught here, before the answer counts (a result made over the cap is refused).
        if self._cgroup is None and self._proc is not None and \
                self._stopped_over_memory({self._proc.pid} | _descendants(self._proc.pid, _processes())):
            raise self._fail(what)
        return answer
