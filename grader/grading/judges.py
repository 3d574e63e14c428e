"""Where judge sessions start: as processes of their own, or, inside ``warm()``, forked from a warm judge
(``grader.judge.zygote``) on Linux with pidfds (kernel 5.3 or later).

A process that grades many submissions grades inside ``warm()`` (``grader selfcheck``'s kill matrix,
``grader batch``, ``grader mutate``): one zygote, started with the block and stopped at its end, forks every
session, which then skips importing torch, pytest and hypothesis again (about a CPU-second and a half
each). The zygote listens on a Unix socket in a folder only this user may enter; its address, in
``KIT_WARM_JUDGE``, reaches the processes the block starts (a batch's grade commands, the mutation
engine's verdicts) and never a judge, so their sessions fork from it too, if their judge environment is
the zygote's. A single grading (``grader grade`` on its own, Gradescope, the attack check) starts its
sessions as processes: a zygote would cost it the same start, and its forked session, copying the pages it
writes, more memory beside it. Either way a session is a handle with the part of ``subprocess.Popen``
that grading uses (``wait``, ``poll``, ``kill``, ``returncode``); signals reach a forked session through a
pidfd, so a pid reused after it ended is never hit; a grading that ends takes its forked sessions with it
(the zygote kills the sessions of a closed connection); where no zygote can serve, sessions start as
processes. The block also starts a warm worker template (``grader.containment.template``), whose address,
``KIT_WARM_WORKERS``, judges keep: the workers of their gradings fork from it (outside a block, each judge
session starts a template of its own on first need: ``template.own``).
"""
from __future__ import annotations

import contextlib
import functools
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Protocol

from ..containment import template
from ..forks import Forked, Forks, Refused, ZygoteGone
from ..options import OMP_WAIT_POLICY
from ..paths import kit_pythonpath

SESSION, ZYGOTE = "grader.judge.session", "grader.judge.zygote"
SHARED = "KIT_WARM_JUDGE"  # the socket of the warm judge that the gradings a process starts may fork from
# glibc's malloc maps blocks of this size or more on their own and unmaps them when freed. Left to itself it
# raises that bound up to 32 MiB as such blocks are freed, and keeps what the judge's own forwards freed (P8's
# activations, P4's products) in its heap afterwards: about 50 MiB more at a grading's end, beside its workers.
MMAP_THRESHOLD = str(128 << 10)
STOP_SECONDS = 10.0  # a zygote asked to stop is given this long to end (its sessions have ended by then)


class Session(Protocol):
    returncode: int | None

    def wait(self, timeout: float | None = None) -> int: ...

    def poll(self) -> int | None: ...

    def kill(self) -> None: ...


class Connection(Forks):
    """A connection to a warm judge's socket (JSON lines both ways): the sessions started through it."""

    def __init__(self, path: str) -> None:
        super().__init__(path, socket.SOCK_STREAM, _lines)

    def start(self, args: list[str], cwd: Path, log: Path, env: dict[str, str]) -> Forked:
        request = {"argv": args, "cwd": str(cwd), "log": str(log), "env": env,
                   "interrupt": signal.getsignal(signal.SIGINT) is not signal.SIG_IGN}
        line = (json.dumps(request) + "\n").encode()
        return self.fork(lambda: self.sock.sendall(line), [sys.executable, "-m", SESSION, *args])


def _lines(sock: socket.socket) -> Iterator[dict]:
    """The zygote's replies on ``sock``, until it closes (then so does ``sock``)."""
    stream = sock.makefile("rb")
    try:
        for line in stream:
            yield json.loads(line)
    finally:
        stream.close()
        sock.close()


class Zygote:
    """A ``grader.judge.zygote`` process this process started, listening at ``path``, and this process's
    connection to it."""

    def __init__(self, env: dict[str, str], path: str) -> None:
        self.env = env
        with contextlib.suppress(FileNotFoundError):
            os.unlink(path)  # a zygote before this one, which died
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as listener:
            listener.bind(path)
            listener.listen(64)
            self.process = subprocess.Popen([sys.executable, "-m", ZYGOTE, str(listener.fileno())], stdin=subprocess.PIPE,
                                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env, cwd="/",
                                            pass_fds=(listener.fileno(),))
            self.connection = Connection(path)  # accepted once the zygote serves; requests wait until then

    @property
    def alive(self) -> bool:
        return self.connection.alive

    def stop(self) -> None:
        """No more sessions: the zygote ends once those running have."""
        self.connection.close()
        with contextlib.suppress(OSError):
            self.process.stdin.close()


_zygote: Zygote | None = None
_workers: template.Template | None = None  # this block's warm worker template
_folder: str | None = None  # the private folder of this process's warm judge's socket, while warm
_remote: Connection | None = None  # this process's connection to another process's warm judge
_remote_tried = False
_warm = 0  # how many warm() blocks are open
_choosing = threading.Lock()


def judge_environment(environ: dict[str, str] | None = None) -> dict[str, str]:
    """A judge's environment: ``environ`` (default: this process's) with the kit first on PYTHONPATH, idle
    OpenMP threads asleep unless ``OMP_WAIT_POLICY`` is given, large blocks handed back to the system when freed
    unless ``MALLOC_MMAP_THRESHOLD_`` is given, no plugin loaded it does not name, no warm judge's address, and no
    test of an outer pytest as its current one (a judge is a pytest run of its own)."""
    environ = {key: value for key, value in (os.environ if environ is None else environ).items()
               if key not in (SHARED, "PYTEST_CURRENT_TEST")}
    return {"OMP_WAIT_POLICY": OMP_WAIT_POLICY, "MALLOC_MMAP_THRESHOLD_": MMAP_THRESHOLD, **kit_pythonpath(environ),
            "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1"}


@contextlib.contextmanager
def warm() -> Iterator[None]:
    """Within: judge sessions fork from one zygote, this process's and those of the processes it starts
    (their gradings find it through ``KIT_WARM_JUDGE``), and their workers from one template where workers
    can fork (``template.usable``); blocks may nest or overlap across threads; at the end of the last open
    block both stop. Where sessions cannot fork, this does nothing."""
    global _warm, _zygote, _folder, _workers
    with _choosing:
        _warm += 1
        if _warm == 1 and _can_fork():
            _folder = tempfile.mkdtemp(prefix="kit-warm-judge-")  # 0700: only this user may reach the sockets
            if template.usable():  # first: a judge's environment holds its address
                with contextlib.suppress(OSError):
                    _workers = template.Template(Path(_folder, "workers"))
                    os.environ[template.ADDRESS] = _workers.path
            path = os.path.join(_folder, "socket")
            with contextlib.suppress(OSError):
                _zygote = Zygote(judge_environment(), path)
                os.environ[SHARED] = path
    try:
        yield
    finally:
        with _choosing:
            _warm -= 1
            done, workers, folder = (_zygote, _workers, _folder) if _warm == 0 else (None, None, None)
            if _warm == 0:
                _zygote = _workers = _folder = None
                os.environ.pop(SHARED, None)
                os.environ.pop(template.ADDRESS, None)
        if done is not None:
            done.stop()
            try:
                done.process.wait(STOP_SECONDS)
            except subprocess.TimeoutExpired:
                done.process.kill()
        if workers is not None:  # after the judges, whose workers end with them
            workers.stop()
        if folder is not None:
            shutil.rmtree(folder, ignore_errors=True)


def warm_processes() -> set[int]:
    """The pids of this process's warm judge and worker template, while a block is open."""
    with _choosing:
        return {started.process.pid for started in (_zygote, _workers) if started is not None}


def _connection_for(env: dict[str, str]) -> Connection | None:
    """Where a session for ``env`` may fork: inside ``warm()``, this block's zygote for ``env`` (a new one
    when it differs or died; the old one stops once its sessions end), None where this block's zygote could
    not start; outside, the warm judge of the process that started this one (``KIT_WARM_JUDGE``), if any."""
    global _zygote, _remote, _remote_tried
    with _choosing:
        if not _warm:
            if not _remote_tried and os.environ.get(SHARED):
                _remote_tried = True  # once: a grading whose warm judge went away starts its sessions as processes
                _remote = Connection(os.environ[SHARED])
            return _remote if _remote is not None and _remote.alive else None
        if _folder is None:
            return None
        if _zygote is not None and not _zygote.alive and not _zygote.connection.served and _zygote.env == env:
            return None  # it could not start: this block's sessions start as processes
        if _zygote is None or not _zygote.alive or _zygote.env != env:
            if _zygote is not None:
                _zygote.stop()
            _zygote = Zygote(env, os.path.join(_folder, "socket"))
        return _zygote.connection


@functools.cache
def _can_fork() -> bool:
    """Whether sessions can fork here: Linux, with pidfds (kernel 5.3 or later) to follow them by."""
    if sys.platform != "linux" or not hasattr(os, "pidfd_open"):
        return False
    try:
        os.close(os.pidfd_open(os.getpid()))
    except OSError:
        return False
    return True


def start(command: list[str], cwd: Path, log: Path, env: dict[str, str]) -> Session:
    """Start the judge session ``command`` (``python -m grader.judge.session ARGS``) in ``cwd``, its output
    to ``log``: inside ``warm()``, forked from the zygote for ``env`` where one can serve; else as a process."""
    if command[1:3] == ["-m", SESSION] and _can_fork():
        try:
            connection = _connection_for(env)
            if connection is not None:
                return connection.start(command[3:], cwd, log, env)
        except (ZygoteGone, Refused, OSError):
            pass
    with open(log, "wb") as stream:
        return subprocess.Popen(command, stdout=stream, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, cwd=cwd,
                                env=env)
