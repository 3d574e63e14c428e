"""Processes a zygote forks on request: the zygote's loop, and their handles in the process that asked.

A zygote (the warm judge, ``grader.judge.zygote``; the warm worker template, ``grader.confined.template``)
answers each request on a connection, in order, with ``{"started": PID}`` or ``{"refused": WHY}``, and later
reports ``{"ended": PID, "status": S}`` (S as ``subprocess.Popen.returncode``). ``Server`` is that loop,
less how a request reads and what its child becomes. ``Forks`` is the asking side's bookkeeping of one
connection: each started process becomes a ``Forked`` handle with the part of ``subprocess.Popen`` the kit
uses (``wait``, ``poll``, ``kill``, ``returncode``, ``pid``). Signals reach it through a pidfd, so a pid
reused after it ended is never hit; when the connection ends (the zygote died, or this side hung up, which
makes the zygote kill them), its processes still running are killed.

Standard library only: the template runs it from the worker's staged modules.
"""

from __future__ import annotations

import contextlib
import os
import queue
import selectors
import signal
import socket
import subprocess
import threading
from collections.abc import Callable, Iterable
from typing import Any, NoReturn

FAILED = 70  # EX_SOFTWARE: a child that could not become what its request asked (its output says why)


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


class Client:
    """One connection to a zygote, and the bytes it sent that are not yet a whole request."""

    def __init__(self, sock: socket.socket) -> None:
        self.sock, self.pending = sock, b""


class Server:
    """A zygote's loop: requests from every connection to ``listener``, each answered with a forked child or
    a refusal; children ended, reported to their asker while it is connected; the owner's stdin, whose end
    stops the listening (what comes later is refused) and, once every child has ended, the loop. A connection
    that closes takes its children with it (SIGKILL). Subclasses say how a request reads (``receive``), what
    refuses it (``refusal``), how a reply is sent (``reply``) and what the child becomes (``child``)."""

    stopping = "the zygote is stopping"  # the refusal once stdin has ended

    def __init__(self, listener: socket.socket) -> None:
        self.listener = listener
        self.selector = selectors.DefaultSelector()
        self.selector.register(0, selectors.EVENT_READ, "owner")
        self.selector.register(listener, selectors.EVENT_READ, "listener")
        self.clients: dict[int, Client] = {}  # by their socket's descriptor
        self.running: dict[int, tuple[int, Client]] = {}  # the children: pidfd -> (pid, who asked for it)
        self.open = True

    def serve(self) -> None:
        """Until the owner's stdin ends and every child has ended."""
        while self.open or self.running:
            for key, _ in self.selector.select():
                if key.data == "owner":
                    if not os.read(0, 1 << 16):
                        self._close_listener()
                elif key.data == "listener":
                    sock, _ = self.listener.accept()
                    self.clients[sock.fileno()] = Client(sock)
                    self.selector.register(sock, selectors.EVENT_READ, "client")
                elif key.data == "client":
                    self._read(self.clients[key.fd])
                else:
                    self._reap(key.fd)

    def receive(self, client: Client) -> list[tuple[dict[str, Any], list[int]]] | None:
        """The whole requests ``client`` sent (each with the descriptors it carried), or None where it has gone."""
        raise NotImplementedError

    def refusal(self, request: dict[str, Any], fds: list[int]) -> str | None:
        """Why ``request`` is refused while the zygote listens, or None."""
        return None

    def reply(self, client: Client, **fields: Any) -> None:
        """Send ``client`` one reply (a client that has gone is dropped when its end is read)."""
        raise NotImplementedError

    def child(self, request: dict[str, Any], fds: list[int]) -> NoReturn:
        """In the forked child, holding only ``fds`` of the zygote's descriptors: become what ``request`` asks."""
        raise NotImplementedError

    def _close_listener(self) -> None:
        self.open = False
        self.selector.unregister(0)
        self.selector.unregister(self.listener)
        self.listener.close()

    def _read(self, client: Client) -> None:
        requests = self.receive(client)
        if requests is None:  # the client has gone: so do the children it asked for
            for pidfd, (_, asker) in self.running.items():
                if asker is client:
                    with contextlib.suppress(ProcessLookupError):  # ended already, not yet reaped
                        signal.pidfd_send_signal(pidfd, signal.SIGKILL)
            self.selector.unregister(client.sock)
            del self.clients[client.sock.fileno()]
            client.sock.close()
            return
        for request, fds in requests:
            why = self.stopping if not self.open else self.refusal(request, fds)
            if why is None:
                self._fork(request, fds, client)
            else:
                self.reply(client, refused=why)
            for fd in fds:
                os.close(fd)

    def _fork(self, request: dict[str, Any], fds: list[int], client: Client) -> None:
        pid = os.fork()
        if pid == 0:
            try:
                self.selector.close()
                for pidfd in self.running:
                    os.close(pidfd)
                for other in self.clients.values():
                    other.sock.close()
                if self.open:
                    self.listener.close()
                self.child(request, fds)
            finally:  # never back into this loop
                os._exit(FAILED)
        pidfd = os.pidfd_open(pid)
        self.selector.register(pidfd, selectors.EVENT_READ, pid)
        self.running[pidfd] = pid, client
        self.reply(client, started=pid)

    def _reap(self, pidfd: int) -> None:
        pid, client = self.running.pop(pidfd)
        _, status = os.waitpid(pid, 0)
        self.selector.unregister(pidfd)
        os.close(pidfd)
        if client.sock.fileno() != -1:  # still connected (a closed socket has no descriptor)
            self.reply(client, ended=pid, status=os.waitstatus_to_exitcode(status))
