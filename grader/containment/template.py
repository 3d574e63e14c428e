"""Workers forked from a warm template (``grader.confined.template``) instead of importing torch again.

A process that grades many submissions (inside ``grading.judges.warm``) starts one ``Template``: a process
that imports what a worker imports before its submission (torch, numpy, einops, the worker's modules),
with a worker's scrubbed environment, and never runs submission code. Its address, in ``KIT_WARM_WORKERS``,
reaches the judges of the gradings started there (never a worker: a worker's environment holds only
``limits.PASSED_ENV``). A judge launches a worker there (``launch.launch``) when it can: bubblewrap
builds the worker's sandbox exactly as for a cold worker, around a holder that keeps no capability; the
template forks a process that enters that sandbox and forks the worker into it, which then confines itself
as a cold worker is confined (its dedicated uid, cgroup, limits, working copy and syscall filter), and
shares torch's pages with the template and its siblings. Where it cannot (not root, no bubblewrap or
cgroup, library code withheld: P5's worker must import a torch without its optimizers), or the template
is gone, the worker starts cold. A judge session with no such template starts one of its own on first need
(``own``), so that a single grading's workers share torch's pages too.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import secrets
import select
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path

from ..forks import Forked, Forks
from ..paths import GRADER
from ..public import PUBLIC_TESTS
from .limits import environment
from .running import RUNNING

ADDRESS = "KIT_WARM_WORKERS"  # the socket of the template the gradings a process starts may fork workers from
BESIDE = ("wire.py", "deferred_dynamo.py", "forks.py")  # the core modules the worker holds beside grader/confined's
SHARED = ("_by_name.py",)  # the public tests' modules it holds too: one "code is reached by its name" hook for both
HOLDER = ("sleep", "infinity")  # what bubblewrap runs in a sandbox a worker is forked into
STOP_SECONDS = 10.0


def stage_kit(folder: Path) -> Path:
    """``folder/_kit``: the worker's modules (``grader/confined``'s, those ``BESIDE`` and the public tests'
    ``SHARED``), as a worker holds them."""
    kit = folder / "_kit"
    kit.mkdir()
    for source in [*(GRADER / name for name in BESIDE), *(PUBLIC_TESTS / name for name in SHARED),
                   *(GRADER / "confined").glob("*.py")]:
        if source.name != "__init__.py":
            shutil.copy2(source, kit / source.name)
    return kit


def usable() -> bool:
    """Whether workers can be forked into their sandboxes here: as root, with bubblewrap, pidfds and a holder."""
    from . import bubblewrap
    from .limits import Limits

    limits = Limits()
    return (sys.platform == "linux" and os.geteuid() == 0 and hasattr(os, "pidfd_open") and limits.bubblewrap
            and limits.namespaces and not bubblewrap.why_not_usable() and shutil.which(HOLDER[0]) is not None)


class Template:
    """A template process this process started, listening at ``folder/socket``."""

    def __init__(self, folder: Path) -> None:
        folder.mkdir(mode=0o700)
        kit = stage_kit(folder)
        self.path = str(folder / "socket")
        boot = f"import sys; sys.path.insert(0, {str(kit)!r}); import template; template.main()"
        with socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET) as listener:
            listener.bind(self.path)
            listener.listen(64)
            self.process = subprocess.Popen(
                [sys.executable, "-I", "-c", boot, str(listener.fileno())], cwd=folder, env=environment(folder),
                stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                pass_fds=(listener.fileno(),), start_new_session=True)
        RUNNING.add(self.process.pid)  # not a worker's orphan, should a worker stop in this process

    def stop(self) -> None:
        """No more workers: the template ends once those running have."""
        with contextlib.suppress(OSError):
            self.process.stdin.close()
        try:
            self.process.wait(STOP_SECONDS)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        RUNNING.discard(self.process.pid)


class Connection(Forks):
    """A judge's connection to the template: the workers forked through it."""

    def __init__(self, path: str) -> None:
        super().__init__(path, socket.SOCK_SEQPACKET, _messages)

    def start(self, request: dict, fds: list[int]) -> Forked:
        """Fork a worker (``grader.confined.template``'s request, with its four descriptors)."""
        message = json.dumps(request).encode()
        return self.fork(lambda: socket.send_fds(self.sock, [message], fds), [sys.executable, "-I", "(forked)"])


def _messages(sock: socket.socket) -> Iterator[dict]:
    try:
        while message := sock.recv(1 << 16):
            yield json.loads(message)
    finally:
        sock.close()


_lock = threading.Lock()  # one connection, and one own template, for the threads that start workers at once
_connection: Connection | None = None
_tried = False
_owning = False  # inside ``own``
_owned: Template | None = None  # the template ``own`` let this process start


def connection() -> Connection | None:
    """This process's connection (made once) to the template of ``KIT_WARM_WORKERS``, else, inside ``own``,
    to one this process starts now; None where there is none, or it no longer serves. Threads that ask at once
    (P7's fresh loader starts beside the shared worker) get the same one."""
    global _connection, _tried
    with _lock:
        if not _tried and (address := os.environ.get(ADDRESS) or _start_own()):
            _tried = True
            with contextlib.suppress(OSError):
                _connection = Connection(address)
        return _connection if _connection is not None and _connection.alive else None


@contextlib.contextmanager
def own() -> Iterator[None]:
    """Within: where no template of ``KIT_WARM_WORKERS`` serves this process, the first worker that could fork
    (``launch``) starts a template of this process's own, which the later ones fork from too (a single
    grading's shared worker, P7's fresh loader, restarts, the diagnosis's reference: torch imported once,
    its pages shared); it stops at the block's end. It starts on first need, not before: a worker graded
    alone before it (P5's, whose torch lacks its optimizers) has ended by then, so two imports of torch
    are never held at once."""
    global _owning, _owned, _connection, _tried
    _owning = True
    try:
        yield
    finally:
        with _lock:
            _owning = False
            owned, _owned = _owned, None
            if owned is not None:
                if _connection is not None:
                    _connection.close()
                _connection, _tried = None, False
        if owned is not None:
            owned.stop()
            shutil.rmtree(Path(owned.path).parent, ignore_errors=True)  # where it was killed before removing it


def _start_own() -> str | None:
    """Inside ``own``, where workers can fork: start this process's template; its address."""
    global _owned
    if not _owning or not usable():
        return None
    folder = Path(tempfile.gettempdir(), f"kit-template-{secrets.token_hex(8)}")  # made 0700, or refused if it exists
    try:
        _owned = Template(folder)
    except OSError:
        return None
    return _owned.path


def holder(info_fd: int, seconds: float) -> tuple[int, int]:
    """The holder of a sandbox bubblewrap is building, once built: its pid and a pidfd. ``info_fd``:
    bubblewrap's ``--info-fd``, which names the sandbox's first process as soon as it exists (before its
    root is built); the holder is that process's child once it runs ``HOLDER`` (bubblewrap's last step)."""
    deadline, info = time.monotonic() + seconds, b""
    while not (named := re.search(rb'"child-pid": *(\d+)', info)):
        if not select.select([info_fd], [], [], max(0.0, deadline - time.monotonic()))[0]:
            raise TimeoutError("bubblewrap did not start")
        chunk = os.read(info_fd, 1 << 16)
        if not chunk:
            raise OSError("bubblewrap ended before its sandbox existed")
        info += chunk
    first = int(named.group(1))
    while time.monotonic() < deadline:
        with contextlib.suppress(OSError):
            for child in Path(f"/proc/{first}/task/{first}/children").read_text().split():
                pidfd = os.pidfd_open(int(child))
                if Path(f"/proc/{child}/comm").read_text().strip() == HOLDER[0]:
                    return int(child), pidfd
                os.close(pidfd)
        time.sleep(0.002)
    raise TimeoutError("bubblewrap did not finish the sandbox")
