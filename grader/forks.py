"""Processes a zygote forks on request, followed from the process that asked for them.

A zygote (the warm judge, ``grader.judge.zygote``; the warm worker template, ``grader.confined.template``)
answers each request on a connection, in order, with ``{"started": PID}`` or ``{"refused": WHY}``, and later
reports ``{"ended": PID, "status": S}`` (S as ``subprocess.Popen.returncode``). ``Forks`` is the asking
side's bookkeeping of one connection: each started process becomes a ``Forked`` handle with the part of
``subprocess.Popen`` the kit uses (``wait``, ``poll``, ``kill``, ``returncode``, ``pid``). Signals reach it
through a pidfd, so a pid reused after it ended is never hit; when the connection ends (the zygote died,
or this side hung up, which makes the zygote kill them), its processes still running are killed.
"""

from __future__ import annotations

import contextlib
import os
import queue
import signal
import socket
import subprocess
import threading
from collections.abc import Callable, Iterable


class ZygoteGone(RuntimeError):
    """The zygote ended (or never started): it can fork nothing."""


class Refused(RuntimeError):
    """The zygote would not fork this one."""


class Forked:
    """A process forked by a zygote: not this process's child, so the zygote reports how it ended."""

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


class Forks:
    """One connection to a zygote: a Unix socket of ``kind`` connected to ``path``. ``fork`` sends a request
    and hands back the process started; a thread reads ``replies(sock)`` (the zygote's messages, decoded)
    until the connection ends."""

    def __init__(self, path: str, kind: socket.SocketKind, replies: Callable[[socket.socket], Iterable[dict]]) -> None:
        self.sock = socket.socket(socket.AF_UNIX, kind)
        try:
            self.sock.connect(path)
        except OSError:
            self.sock.close()
            raise
        self._answers: queue.Queue[dict | None] = queue.Queue()
        self._running: dict[int, Forked] = {}
        self._early: dict[int, int] = {}  # processes that ended before their handle was made
        self._lock, self._request = threading.Lock(), threading.Lock()
        self.alive, self.served = True, 0
        threading.Thread(target=self._read, args=(replies(self.sock),), daemon=True).start()

    def fork(self, send: Callable[[], None], args: list[str]) -> Forked:
        """``send`` one request; the process it started (``args``: how to name it in errors)."""
        with self._request:  # one request at a time: the next "started" or "refused" answers it
            try:
                send()
            except OSError:
                raise ZygoteGone("the zygote has ended") from None
            answer = self._answers.get()
            if answer is None:
                raise ZygoteGone("the zygote has ended")
            if "refused" in answer:
                raise Refused(answer["refused"])
            pid = answer["started"]
            self.served += 1
            forked = Forked(pid, args)
            with self._lock:
                if pid in self._early:
                    forked.ended(self._early.pop(pid))
                elif not self.alive:  # the zygote died since: so did this process
                    forked.kill()
                    forked.ended(-signal.SIGKILL)
                else:
                    self._running[pid] = forked
        return forked

    def close(self) -> None:
        """Hang up: the zygote kills the processes of this connection still running."""
        with contextlib.suppress(OSError):
            self.sock.shutdown(socket.SHUT_RDWR)

    def _read(self, replies: Iterable[dict]) -> None:
        with contextlib.suppress(OSError):
            for reply in replies:
                if "ended" not in reply:
                    self._answers.put(reply)
                    continue
                with self._lock:
                    forked = self._running.pop(reply["ended"], None)
                    if forked is None:
                        self._early[reply["ended"]] = reply["status"]
                if forked is not None:
                    forked.ended(reply["status"])
        self._answers.put(None)
        with self._lock:
            self.alive = False
            orphans, self._running = list(self._running.values()), {}
        for forked in orphans:  # killed with the zygote (their parent-death signal) or with this connection
            forked.kill()
            forked.ended(-signal.SIGKILL)
