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
import gc
import importlib
import json
import os
import pkgutil
import signal
import socket
import sys
import traceback
from typing import Any, NoReturn

from .. import deferred_dynamo, forks

PR_SET_PDEATHSIG = 1


def warm() -> None:
    """Import what every judge session imports, in the order a session would."""
    deferred_dynamo.install()
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
    gc.freeze()  # the sessions' collections never walk (so never copy) the pages of what they share


def _session(request: dict[str, Any], start_folder: str) -> NoReturn:
    """In the forked child: become the judge session ``request`` asks for, and end with its status."""
    from . import session

    status = forks.FAILED
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
            os._exit(forks.FAILED)
        status = session.main(request["argv"])
    except BaseException:  # noqa: BLE001 - whatever stopped the session is its log's last word
        traceback.print_exc()
    session.end(status)


class Server(forks.Server):
    """The zygote's loop (``forks.Server``): requests are JSON lines; one whose environment is not the
    zygote's own is refused; a child becomes the judge session it asks for."""

    stopping = "the warm judge is stopping"

    def __init__(self, listener: socket.socket, environ: dict[str, str]) -> None:
        super().__init__(listener)
        self.environ, self.start_folder = environ, os.getcwd()

    def receive(self, client: forks.Client) -> list[tuple[dict[str, Any], list[int]]] | None:
        try:
            chunk = client.sock.recv(1 << 16)
        except OSError:  # reset: the client went with replies unread
            chunk = b""
        if not chunk:
            return None
        *lines, client.pending = (client.pending + chunk).split(b"\n")
        return [(json.loads(line), []) for line in lines]

    def refusal(self, request: dict[str, Any], fds: list[int]) -> str | None:
        return None if request.get("env") == self.environ else "another environment than the warm judge's"

    def reply(self, client: forks.Client, **fields: Any) -> None:
        with contextlib.suppress(OSError):  # the client has gone: its sessions are killed when its end is read
            client.sock.sendall((json.dumps(fields) + "\n").encode())

    def child(self, request: dict[str, Any], fds: list[int]) -> NoReturn:
        _session(request, self.start_folder)


def main() -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    listener = socket.socket(fileno=int(sys.argv[1]))
    environ = dict(os.environ)  # as started: what a session started as a process would have had
    warm()
    Server(listener, environ).serve()


if __name__ == "__main__":
    main()
