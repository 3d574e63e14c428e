"""Where judge sessions start: as processes of their own, or, inside ``warm()``, forked from a warm judge
(``grader.judge.zygote``) on Linux with pidfds (kernel 5.3 or later).

A process that grades many submissions (``grader selfcheck``'s kill matrix) grades inside ``warm()``: one
zygote, started at the first session and stopped at the end, forks every session, which then skips
importing torch, pytest and hypothesis again (about a CPU-second and a half each). A single grading
(``grader grade``, a batch's grade commands, Gradescope) starts its sessions as processes: a zygote would
cost it the same start, and its forked session, copying the pages it writes, more memory beside it.
Either way a session is a handle with the part of ``subprocess.Popen`` that grading uses (``wait``,
``poll``, ``kill``, ``returncode``); signals reach a forked session through a pidfd, so a pid reused
after it ended is never hit; where no zygote can start, sessions start as processes.
"""
from __future__ import annotations

import contextlib
import functools
import json
import os
import queue
import signal
import subprocess
import sys
import threading
from pathlib import Path
from collections.abc import Iterator
from typing import IO, Protocol

SESSION, ZYGOTE = "grader.judge.session", "grader.judge.zygote"
STOP_SECONDS = 10.0  # a zygote asked to stop is given this long to end (its sessions have ended by then)


class Session(Protocol):
    returncode: int | None

    def wait(self, timeout: float | None = None) -> int: ...

    def poll(self) -> int | None: ...

    def kill(self) -> None: ...


class ZygoteGone(RuntimeError):
    """The zygote ended (or never started): it can fork no session."""


class Forked:
    """A session forked by a zygote: not this process's child, so the zygote reports how it ended."""

    def __init__(self, pid: int, args: list[str]) -> None:
        self.pid, self.args, self.returncode = pid, args, None
        self._ended, self._lock = threading.Event(), threading.Lock()
        try:
            self._pidfd: int | None = os.pidfd_open(pid)
        except OSError:  # ended already (the zygote's report follows), or no descriptor left: kill by pid
            self._pidfd = None

    def ended(self, status: int) -> None:
        with self._lock:
            self.returncode = status
            if self._pidfd is not None:
                os.close(self._pidfd)
                self._pidfd = None
        self._ended.set()

    def wait(self, timeout: float | None = None) -> int:
        if not self._ended.wait(timeout):
            raise subprocess.TimeoutExpired(self.args, timeout or 0)
        return self.returncode

    def poll(self) -> int | None:
        return self.returncode

    def kill(self) -> None:
        with self._lock:
            if self.returncode is not None:
                return
            try:
                if self._pidfd is not None:
                    signal.pidfd_send_signal(self._pidfd, signal.SIGKILL)
                else:
                    os.kill(self.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass


class Zygote:
    """One ``grader.judge.zygote`` process and the sessions it forked for this process."""

    def __init__(self, env: dict[str, str]) -> None:
        self.env = env
        self.process = subprocess.Popen([sys.executable, "-m", ZYGOTE], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                        stderr=subprocess.DEVNULL, env=env, cwd="/")
        self._started: queue.Queue[int | None] = queue.Queue()
        self._sessions: dict[int, Forked] = {}
        self._early: dict[int, int] = {}  # sessions that ended before their handle was made
        self._lock, self._request = threading.Lock(), threading.Lock()
        self.alive, self.served = True, 0
        threading.Thread(target=self._read, args=(self.process.stdout,), daemon=True).start()

    def start(self, args: list[str], cwd: Path, log: Path) -> Forked:
        request = {"argv": args, "cwd": str(cwd), "log": str(log),
                   "interrupt": signal.getsignal(signal.SIGINT) is not signal.SIG_IGN}
        with self._request:  # one request at a time: the next "started" line answers it
            try:
                self.process.stdin.write((json.dumps(request) + "\n").encode())
                self.process.stdin.flush()
            except (BrokenPipeError, ValueError):
                raise ZygoteGone("the warm judge has ended") from None
            pid = self._started.get()
            if pid is None:
                raise ZygoteGone("the warm judge has ended")
            self.served += 1
            session = Forked(pid, [sys.executable, "-m", SESSION, *args])
            with self._lock:
                if pid in self._early:
                    session.ended(self._early.pop(pid))
                elif not self.alive:  # the zygote died since: so did this session
                    session.kill()
                    session.ended(-signal.SIGKILL)
                else:
                    self._sessions[pid] = session
        return session

    def stop(self) -> None:
        """No more sessions: the zygote ends once those running have."""
        try:
            self.process.stdin.close()
        except OSError:
            pass

    def _read(self, stream: IO[bytes]) -> None:
        for line in stream:
            reply = json.loads(line)
            if "started" in reply:
                self._started.put(reply["started"])
                continue
            with self._lock:
                session = self._sessions.pop(reply["ended"], None)
                if session is None:
                    self._early[reply["ended"]] = reply["status"]
            if session is not None:
                session.ended(reply["status"])
        self._started.put(None)
        with self._lock:
            self.alive = False
            orphans, self._sessions = list(self._sessions.values()), {}
        for session in orphans:  # killed with the zygote (their parent-death signal)
            session.kill()
            session.ended(-signal.SIGKILL)
        self.process.wait()


_zygote: Zygote | None = None
_warm = 0  # how many warm() blocks are open
_choosing = threading.Lock()


@contextlib.contextmanager
def warm() -> Iterator[None]:
    """Within: judge sessions fork from a zygote (one for the whole block; blocks may nest or overlap
    across threads); at the end of the last open block it stops."""
    global _warm, _zygote
    with _choosing:
        _warm += 1
    try:
        yield
    finally:
        with _choosing:
            _warm -= 1
            done, _zygote = (_zygote, None) if _warm == 0 else (None, _zygote)
        if done is not None:
            done.stop()
            try:
                done.process.wait(STOP_SECONDS)
            except subprocess.TimeoutExpired:
                done.process.kill()


def _zygote_for(env: dict[str, str]) -> Zygote | None:
    """Inside ``warm()``, the zygote for ``env``: the current one, or a new one (the old one stops once its
    sessions end); None outside, or where this block's zygote could not start."""
    global _zygote
    with _choosing:
        if not _warm:
            return None
        if _zygote is not None and not _zygote.alive and not _zygote.served and _zygote.env == env:
            return None  # it could not start: this block's sessions start as processes
        if _zygote is None or not _zygote.alive or _zygote.env != env:
            if _zygote is not None:
                _zygote.stop()
            _zygote = Zygote(env)
        return _zygote


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
            zygote = _zygote_for(env)
            if zygote is not None:
                return zygote.start(command[3:], cwd, log)
        except (ZygoteGone, OSError):
            pass
    with open(log, "wb") as stream:
        return subprocess.Popen(command, stdout=stream, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, cwd=cwd,
                                env=env)
