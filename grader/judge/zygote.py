"""A warm judge: ``python -m grader.judge.zygote`` imports what every judge session needs (torch, numpy,
pytest, hypothesis, the kit's plugin and drivers, the fingerprints of torch's optimizer modules), then
forks one session per request. A session then starts in milliseconds instead of importing all of that
again (``grading.judges.warm``: for a process that grades many submissions).

Requests come on stdin, one JSON line each: ``{"argv": [...], "cwd": ..., "log": ..., "interrupt": ...}``
(the arguments of ``grader.judge.session``, the folder it runs in, the file its output goes to, and
whether Ctrl-C reaches it, as it would a process started from the grader). Replies go to stdout, one JSON
line each: ``{"started": PID}`` per request, in order, and ``{"ended": PID, "status": S}`` when that
session ends (S as ``subprocess.Popen.returncode``: the exit status, or minus the signal that ended it).
At the end of stdin the zygote waits for its sessions, reports them and exits; a session is killed if the
zygote dies first. The zygote itself ignores Ctrl-C: its sessions and the grader decide what it stops.

No submission code runs in a judge (the kit's rule), so a session forked from here shares nothing a
submission wrote. Its generators are as fresh as a new process's: Python reseeds ``random`` in a forked
child, and numpy makes its global generator (from the OS's entropy) at its first use, which is in the
session, since the zygote draws nothing. The zygote runs no torch operation before forking (a fork after
OpenMP's threads have started is unsafe).
"""

from __future__ import annotations

import ctypes
import importlib
import json
import os
import pkgutil
import selectors
import signal
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


def _reply(**fields: Any) -> None:
    os.write(1, (json.dumps(fields) + "\n").encode())


def serve() -> None:
    """Fork a session per request line on stdin until it ends, then wait for the sessions still running."""
    start_folder = os.getcwd()
    selector = selectors.DefaultSelector()
    selector.register(0, selectors.EVENT_READ)
    pending, reading, sessions = b"", True, 0
    while reading or sessions:
        for key, _ in selector.select():
            if key.data is None:
                chunk = os.read(0, 1 << 16)
                if not chunk:
                    reading = False
                    selector.unregister(0)
                pending += chunk
                while b"\n" in pending:
                    line, pending = pending.split(b"\n", 1)
                    request = json.loads(line)
                    pid = os.fork()
                    if pid == 0:
                        selector.close()
                        _session(request, start_folder)
                    selector.register(os.pidfd_open(pid), selectors.EVENT_READ, pid)
                    sessions += 1
                    _reply(started=pid)
            else:
                _, status = os.waitpid(key.data, 0)
                selector.unregister(key.fd)
                os.close(key.fd)
                sessions -= 1
                _reply(ended=key.data, status=os.waitstatus_to_exitcode(status))


def main() -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    warm()
    serve()


if __name__ == "__main__":
    main()
