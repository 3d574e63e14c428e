"""A warm worker template: imports what a worker imports before the submission (torch, numpy, einops, the
worker's own modules), then forks each worker into a sandbox bubblewrap has built, so that a worker starts
in milliseconds and shares those pages with its siblings (``grader.containment.template``, the grader's side).

Started as ``python -I -c "...template.main()" FD`` (FD: a listening ``SOCK_SEQPACKET`` Unix socket, bound
by the grader in a folder only its user may enter) with a worker's scrubbed environment, as root, with
stdin a pipe from the grader (its end stops the template). It never runs submission code, nor any torch
operation (a fork after OpenMP's threads have started is unsafe).

Each request is one message: a JSON object (``holder``: the host pid of a process bubblewrap runs in the
worker's finished sandbox; ``cgroup``: the worker's cgroup folders; ``config``: its ``WorkerConfig``;
``filter``: the syscall filter, hex) with four descriptors: the worker's request pipe, answer pipe and
output pipe, and a pidfd of the holder. The template forks a process that enters the holder's namespaces
and root (``_enter``: setns, chroot; refused when the holder has ended or its namespaces are the template's
own) and forks the worker there (a child of that process, in the sandbox's PID namespace), places it in
the cgroup and lets it go on: it becomes what bubblewrap and ``confine.py`` make of a cold worker
(``confine.forked``) and serves. Replies, one message each:
``{"started": PID}`` or ``{"refused": WHY}`` per request, in order, and ``{"ended": PID, "status": S}``
when that process ends (with its worker's status, ``subprocess.Popen.returncode``'s way). A connection
that closes takes its workers with it (SIGKILL).
"""

from __future__ import annotations

import contextlib
import ctypes
import gc
import json
import os
import select
import shutil
import signal
import socket
import sys
import traceback
from pathlib import Path
from typing import Any, NoReturn

if __package__:
    from .. import forks
    from . import confine
    from .config import WorkerConfig
else:  # run from the staged copy of grader/confined, beside wire.py, deferred_dynamo.py and forks.py
    import confine
    import forks
    from config import WorkerConfig

FAILED = forks.FAILED  # a worker that could not be placed in its sandbox; its output says why
PR_SET_PDEATHSIG = 1
OOM_FIRST = 1000  # containment.tree.OOM_FIRST (this module runs staged, without the grader's package)
# The holder's namespaces, entered in this order: the mount namespace last (its root becomes this one's).
NAMESPACES = {"ipc": 0x08000000, "uts": 0x04000000, "net": 0x40000000, "cgroup": 0x02000000, "pid": 0x20000000,
              "mnt": 0x00020000}
MUST_DIFFER = ("mnt", "pid", "net")  # a holder sharing one of these with the template is no sandbox
MESSAGE_BYTES = 1 << 20
_libc = ctypes.CDLL(None, use_errno=True)


def preload() -> None:
    """Import what a worker imports before its submission (its ``import worker``), and einops."""
    import einops  # noqa: F401
    import worker  # noqa: F401 - torch, numpy, wire, dispatch, deferred_dynamo, kernels

    gc.freeze()  # the workers' collections never walk (so never copy) the pages of what they share


def _enter(holder: int, holder_pidfd: int) -> None:
    """Join the namespaces and root of ``holder`` (alive, per its pidfd, after they were opened)."""
    spaces = {name: os.open(f"/proc/{holder}/ns/{name}", os.O_RDONLY | os.O_CLOEXEC) for name in NAMESPACES}
    root = os.open(f"/proc/{holder}/root", os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    if select.select([holder_pidfd], [], [], 0)[0]:
        raise OSError("the sandbox's holder has ended")
    for name in MUST_DIFFER:
        if os.fstat(spaces[name]).st_ino == os.stat(f"/proc/self/ns/{name}").st_ino:
            raise OSError(f"the holder shares the template's {name} namespace")
    for name, kind in NAMESPACES.items():
        if _libc.setns(spaces[name], kind) != 0:
            raise OSError(ctypes.get_errno(), f"setns {name}: {os.strerror(ctypes.get_errno())}")
        os.close(spaces[name])
    os.fchdir(root)
    os.chroot(".")
    os.chdir("/")
    os.close(root)


def _worker(request: dict[str, Any], fds: list[int]) -> NoReturn:
    """In the forked child (root, outside any sandbox): enter the worker's sandbox, fork the worker into it
    (process 1's child there), and end as it ends."""
    status = FAILED
    try:
        _libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
        # Short of memory, the kernel ends the worker (which inherits this) before the judge or the template;
        # written as root, it is also the floor the worker may lower it to.
        Path("/proc/self/oom_score_adj").write_text(str(OOM_FIRST))
        request_fd, response_fd, output_fd, holder_pidfd = fds
        quiet = os.open(os.devnull, os.O_RDONLY)
        os.dup2(quiet, 0)
        os.dup2(output_fd, 1)
        os.dup2(output_fd, 2)
        for fd in map(int, os.listdir("/proc/self/fd")):  # nothing of the template reaches the worker but these
            if fd > 2 and fd not in fds:
                with contextlib.suppress(OSError):  # the listing's own descriptor
                    os.close(fd)
        if os.getppid() == 1:  # the template died before the parent-death signal was set
            os._exit(FAILED)
        cgroups = [os.open(Path(folder, "cgroup.procs"), os.O_WRONLY | os.O_CLOEXEC) for folder in request["cgroup"]]
        _enter(int(request["holder"]), holder_pidfd)  # the cgroups' folders are not in the sandbox: opened before
        os.close(holder_pidfd)
        go_r, go_w = os.pipe()
        child = os.fork()
        if child == 0:
            for fd in (go_w, output_fd, *cgroups):  # its output is on 1 and 2; its cgroup is not its to change
                os.close(fd)
            _serve(request, request_fd, response_fd, go_r)
        os.close(go_r)
        for fd in (request_fd, response_fd, output_fd):
            os.close(fd)
        # The worker waits, running nothing, until it is in its cgroup: all it starts is born inside. This
        # process stays out of it, so that the grader, killing what the cgroup holds, leaves it to reap the worker.
        for fd in cgroups:
            os.write(fd, str(child).encode())
            os.close(fd)
        os.write(go_w, b"g")
        os.close(go_w)
        os.close(1)
        os.close(2)
        confine.wait_and_mirror(child)
    except BaseException:  # noqa: BLE001 - whatever stopped it is the worker's last output
        with contextlib.suppress(OSError):
            traceback.print_exc()
    os._exit(status)


def _serve(request: dict[str, Any], request_fd: int, response_fd: int, go: int) -> NoReturn:
    """The worker, in its sandbox: confined as a cold one is, then serving until the judge hangs up; it ends
    as a cold worker ends (1 on an error, its traceback its last output)."""
    status = 1
    try:
        import worker

        config = WorkerConfig.from_json(request["config"])
        obtained = confine.forked(config, bytes.fromhex(request["filter"]), go)
        worker.serve(request_fd, response_fd, Path(os.getcwd(), worker.PACKAGE), obtained,
                     code_by_name=config.code_by_name)
        status = 0
    except BaseException:  # noqa: BLE001
        with contextlib.suppress(OSError):
            traceback.print_exc()
    os._exit(status)


class Server(forks.Server):
    """The template's loop (``forks.Server``): a request is one message with four descriptors; a child
    forks the worker it asks for into its sandbox."""

    stopping = "the worker template is stopping"

    def receive(self, client: forks.Client) -> list[tuple[dict[str, Any], list[int]]] | None:
        try:
            message, fds, _, _ = socket.recv_fds(client.sock, MESSAGE_BYTES, 4)
        except OSError:
            message, fds = b"", []
        if not message:
            for fd in fds:
                os.close(fd)
            return None
        return [(json.loads(message), fds)]

    def refusal(self, request: dict[str, Any], fds: list[int]) -> str | None:
        return None if len(fds) == 4 else "a request carries 4 descriptors"

    def reply(self, client: forks.Client, **fields: Any) -> None:
        with contextlib.suppress(OSError):  # the client has gone: its workers are killed when its end is read
            client.sock.send(json.dumps(fields).encode())

    def child(self, request: dict[str, Any], fds: list[int]) -> NoReturn:
        _worker(request, fds)


def main() -> None:
    """Serve until the owner's stdin ends and every worker has ended, then remove this template's folder (its
    socket and its modules), also when the owner was killed."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    listener = socket.socket(fileno=int(sys.argv[1]))
    kit = os.path.dirname(os.path.abspath(__file__))
    preload()
    Server(listener).serve()
    shutil.rmtree(os.path.dirname(kit), ignore_errors=True)
