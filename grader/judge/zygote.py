"""A warm judge: ``python -m grader.judge.zygote`` imports what every judge session needs (torch, numpy,
pytest, hypothesis, the kit's plugin and drivers, the fingerprints of torch's optimizer modules), then
forks one session per request. A session then starts in milliseconds instead of importing all of that
again (``grading.judges.warm``: for a process, or a batch of processes, that grades many submissions).

It serves on the listening Unix socket whose file descriptor is its one argument (bound by whoever
started it, in a folder only that user may enter). Each connection sends requests, one JSON line each: ``{"argv": [...],
"cwd": ..., "log": ..., "interrupt": ..., "env": {...}}`` (the arguments of ``grader.judge.session``, the
folder it runs in, the file its output goes to, whether Ctrl-C reaches it as it would a process started
from the grader, and the environment it would have had). Replies go back on the same connection, one JSON
line each: ``{"started": PID}`` or ``{"refused": WHY}`` per request, in order, and ``{"ended": PID,
"status": S}`` when that session ends (S as ``subprocess.Popen.returncode``: the exit status, or minus the
signal that ended it). A request whose environment is not the zygote's own is refused (torch and OpenMP
read theirs as they load, so a session could not take another). A connection that closes takes its
sessions still running with it (SIGKILL): a grader that died leaves no judge behind. At the end of stdin
the zygote stops listening, refuses what comes, waits for its sessions and exits; a session is killed if
the zygote dies first. The zygote itself ignores Ctrl-C: its sessions and the grader decide what it stops.

No submission code runs in a judge (the kit's rule), so a session forked from here shares nothing a
submission wrote. Its generators are as fresh as a new process's: Python reseeds ``random`` in a forked
child, and numpy makes its global generator (from the OS's entropy) at its first use, which is in the
session, since the zygote draws nothing. The zygote runs no torch operation before forking (a fork after
OpenMP's threads have started is unsafe).
"""

from __future__ import annotations

import contextlib
import ctypes
import importlib
import json
import os
import pkgutil
import selectors
import signal
import socket
import sys
import traceback
from typing import Any, NoReturn

from .. import eager

PR_SET_PDEATHSIG = 1
FAILED = 70  # a session that could not start (EX_SOFTWARE); its log says why


def warm() -> None:
    """Import what every judge session imports, in the order a session would."""
    eager.install()
    import _hypothesis_pytestplugin  # noqa: F401
    import hypothesis  # noqa: F401
    import numpy  # noqa: F401
    import pytest  # noqa: F401
    import torch.fx.experimental.symbolic_shapes  # noqa: F401 - sympy: P4's meta kernels import it on their first call

    from . import drivers, plugin  # noqa: F401
    from .drivers import optim_source

    for module in pkgutil.iter_modules(drivers.__path__):
        importlib.import_module(f"{drivers.__name__}.{module.name}")
    optim_source._torch_fingerprints()


def _session(request: dict[str, Any], start_folder: str) -> NoReturn:
    """In the forked child: become the judge session ``request`` asks for, and end with its status."""
    from . import session

    status = FAILED
    try:
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
        signal.signal(signal.SIGINT, signal.default_int_handler if request["interrupt"] else signal.SIG_IGN)
        os.chdir(request["cwd"])
        log = os.open(request["log"], os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        quiet = os.open(os.devnull, os.O_RDONLY)
        os.dup2(quiet, 0)
        os.dup2(log, 1)
        os.dup2(log, 2)
        os.close(log)
        os.close(quiet)
        if sys.path and sys.path[0] == start_folder:  # ``python -m`` puts the folder it starts in first
            sys.path[0] = os.getcwd()
        sys.argv = [session.__file__, *request["argv"]]
        if os.getppid() == 1:  # the zygote died before the parent-death signal was set
            os._exit(FAILED)
        status = session.main(request["argv"])
    except BaseException:  # noqa: BLE001 - whatever stopped the session is its log's last word
        traceback.print_exc()
    session.end(status)


class Client:
    """One connection to the zygote and its unread bytes."""

    def __init__(self, sock: socket.socket) -> None:
        self.sock, self.pending = sock, b""

    def reply(self, **fields: Any) -> None:
        try:
            self.sock.sendall((json.dumps(fields) + "\n").encode())
        except OSError:  # the client has gone: its sessions are killed when its end is read
            pass


class Server:
    """The zygote's loop: requests from every connection, sessions ended, the owner's stdin."""

    def __init__(self, listener: socket.socket, environ: dict[str, str]) -> None:
        self.listener, self.environ, self.start_folder = listener, environ, os.getcwd()
        self.selector = selectors.DefaultSelector()
        self.selector.register(0, selectors.EVENT_READ, "owner")
        self.selector.register(listener, selectors.EVENT_READ, "listener")
        self.clients: dict[int, Client] = {}  # by their socket's descriptor
        self.running: dict[int, tuple[int, Client]] = {}  # the sessions: pidfd -> (pid, who asked for it)
        self.open = True

    def serve(self) -> None:
        """Until the owner's stdin ends and every session has ended."""
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

    def _close_listener(self) -> None:
        self.open = False
        self.selector.unregister(0)
        self.selector.unregister(self.listener)
        self.listener.close()

    def _read(self, client: Client) -> None:
        try:
            chunk = client.sock.recv(1 << 16)
        except OSError:  # reset: the client went with replies unread
            chunk = b""
        if not chunk:  # the client has gone: so do the sessions it asked for
            for pidfd, (_, asker) in self.running.items():
                if asker is client:
                    with contextlib.suppress(ProcessLookupError):  # ended already, not yet reaped
                        signal.pidfd_send_signal(pidfd, signal.SIGKILL)
            self.selector.unregister(client.sock)
            del self.clients[client.sock.fileno()]
            client.sock.close()
            return
        client.pending += chunk
        while b"\n" in client.pending:
            line, client.pending = client.pending.split(b"\n", 1)
            request = json.loads(line)
            if not self.open:
                client.reply(refused="the warm judge is stopping")
            elif request.get("env") != self.environ:
                client.reply(refused="another environment than the warm judge's")
            else:
                self._fork(request, client)

    def _fork(self, request: dict[str, Any], client: Client) -> None:
        pid = os.fork()
        if pid == 0:
            self.selector.close()
            for pidfd in self.running:
                os.close(pidfd)
            for other in self.clients.values():
                other.sock.close()
            if self.open:
                self.listener.close()
            _session(request, self.start_folder)
        pidfd = os.pidfd_open(pid)
        self.selector.register(pidfd, selectors.EVENT_READ, pid)
        self.running[pidfd] = pid, client
        client.reply(started=pid)

    def _reap(self, pidfd: int) -> None:
        pid, client = self.running.pop(pidfd)
        _, status = os.waitpid(pid, 0)
        self.selector.unregister(pidfd)
        os.close(pidfd)
        if client.sock.fileno() != -1:  # still connected (a closed socket has no descriptor)
            client.reply(ended=pid, status=os.waitstatus_to_exitcode(status))


def main() -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    listener = socket.socket(fileno=int(sys.argv[1]))
    environ = dict(os.environ)  # as started: what a session started as a process would have had
    warm()
    Server(listener, environ).serve()


if __name__ == "__main__":
    main()
