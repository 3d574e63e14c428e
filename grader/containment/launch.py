"""Starting one worker process: its staging folder, its configuration, its confinement.

``launch`` copies the submission package and the worker files (``grader/confined``, the
wire format and ``deferred_dynamo``) into a private temporary folder, starts ``confine.py`` there in a new session with
a scrubbed environment (inside bubblewrap where it runs; ``confine.py`` builds the worker's root,
namespaces and identity by hand elsewhere), with a dedicated uid as root and a cgroup where the
host gives one, and hands back the running process with the judge's ends of its two pipes. Where this
process may fork workers from a warm template (``template.connection``) and the worker runs with the whole
library, bubblewrap builds the same sandbox around a holder and the template forks the worker into it
(``_forked``); where that fails, the worker starts as above.
"""

from __future__ import annotations

import contextlib
import functools
import os
import shutil
import socket
import subprocess
import sys
import tempfile
from dataclasses import dataclass, replace
from pathlib import Path
from typing import IO

from ..confined.config import Withheld, WorkerConfig
from ..forks import Forked, Refused, ZygoteGone
from . import bubblewrap, syscalls, template, tree, uids
from . import cgroup as cgroups
from ..paths import PACKAGE
from .limits import Limits, environment, interpreter_paths
from .running import RUNNING

EXCHANGE = "exchange"  # in the worker's working folder: see confine.py
BOOT = "import sys; sys.path.insert(0, '_kit'); import confine; confine.main()"
SYSCALL_FILTER = "syscalls.bpf"  # in the worker's _kit folder


@dataclass
class Launched:
    """A started worker process and what the judge holds of it."""

    proc: subprocess.Popen | Forked  # forked: the template's process whose child in the sandbox is the worker
    base: Path  # the staging folder: ``work`` (the working copy) and ``root``
    request_w: int  # the judge's end of the request pipe (non-blocking)
    response_r: int  # the judge's end of the answer pipe
    claim: uids.Claim | None  # the dedicated uid, as root
    cgroup: cgroups.Cgroup | None
    wrapped: bool  # inside bubblewrap
    output: IO[bytes]  # what the worker prints
    holder: subprocess.Popen | None = None  # forked: bubblewrap, holding the worker's sandbox

    @property
    def uid(self) -> int | None:
        return self.claim.uid if self.claim else None


@functools.cache
def syscall_filter() -> bytes | None:
    """The filter the worker loads itself, which also refuses to start a program."""
    return syscalls.deny_filter(start_programs=False)


def worker_folders(package: Path, uid: int | None) -> Path:
    """``base/work`` (the package and the worker files: copied into the worker's /tmp/work),
    ``base/root`` (where confine.py mounts the worker's root) and ``base/covers`` (``stage_covers``)."""
    base = Path(tempfile.mkdtemp(prefix="kit-worker-"))
    workdir = base / "work"
    shutil.copytree(package, workdir / PACKAGE, symlinks=False,
                    ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    kit = template.stage_kit(workdir)
    (workdir / EXCHANGE).mkdir()
    if syscall_filter() is not None:
        (kit / SYSCALL_FILTER).write_bytes(syscall_filter())
    (base / "root").mkdir()
    if uid is not None:  # used as is by bubblewrap, or where no namespace can be made
        for path in [workdir, *workdir.rglob("*")]:
            os.chown(path, uid, uid, follow_symlinks=False)
        workdir.chmod(0o700)
        base.chmod(0o711)
    return base


def stage_covers(base: Path, withheld: Withheld | None) -> dict[str, str]:
    """The texts of ``withheld.covers`` written into ``base/covers`` (readable by the worker's uid): the
    path each covers -> the file written for it."""
    if withheld is None or not withheld.covers:
        return {}
    folder = base / "covers"
    folder.mkdir(mode=0o755)
    staged = {}
    for number, (path, text) in enumerate(sorted(withheld.covers.items())):
        written = folder / f"{number}{Path(path).suffix}"
        written.write_text(text)
        written.chmod(0o644)
        staged[path] = str(written)
    return staged


def _seccomp_fd(wrapped: bool) -> int | None:
    """A memfd holding the syscall filter, for bubblewrap to load around what it starts (None where it does not)."""
    program = syscalls.deny_filter()
    if not wrapped or program is None:
        return None
    fd = os.memfd_create("seccomp")
    os.write(fd, program)
    os.lseek(fd, 0, os.SEEK_SET)
    return fd


def _config(base: Path, limits: Limits, masks: list[str], readonly: list[str], uid: int | None,
            fds: tuple[int, int, int | None], wrapped: bool, withheld: Withheld | None) -> WorkerConfig:
    expose = interpreter_paths()
    program = syscall_filter()
    return WorkerConfig(
        workdir=str(base / "work"), root=str(base / "root"), masks=masks, readonly=readonly, expose=expose,
        uid=uid, gid=uid, request_fd=fds[0], response_fd=fds[1], placement_fd=fds[2],
        file_bytes=limits.file_bytes, disk_bytes=limits.disk_bytes, processes=limits.processes,
        namespaces=limits.namespaces, reachable=all(bubblewrap.open_to_others(p) for p in expose), bubblewrap=wrapped,
        syscall_filter=f"_kit/{SYSCALL_FILTER}" if program else None,
        syscalls=syscalls.describe(program is not None), syscall_numbers=syscalls.numbers(syscalls.BY_NUMBER),
        covers=stage_covers(base, withheld), withheld_kernels=list(withheld.kernels) if withheld else [],
        withheld_rule=withheld.rule if withheld else "", code_by_name=limits.code_by_name)


def launch(package: Path, limits: Limits, masks: list[str], readonly: list[str],
           withheld: Withheld | None = None) -> Launched:
    """Stage and start one worker (without the library code ``withheld`` names, if any); it is placed in
    its cgroup (where there is one) before it goes on."""
    claim = uids.claim() if os.geteuid() == 0 else None
    uid = claim.uid if claim else None
    cgroup = cgroups.create(limits.memory_bytes, limits.processes)
    wrapped = limits.namespaces and limits.bubblewrap and not bubblewrap.why_not_usable()
    base = worker_folders(package, uid)
    forks = template.connection() if wrapped and withheld is None and claim and cgroup else None
    if forks is not None:
        with contextlib.suppress(ZygoteGone, Refused, OSError, TimeoutError):  # then it starts cold
            return _forked(forks, base, limits, masks, readonly, claim, cgroup)
    request_r, request_w = os.pipe()
    response_r, response_w = os.pipe()
    placement, placement_w = socket.socketpair() if cgroup else (None, None)
    seccomp_fd = _seccomp_fd(wrapped)
    config = _config(base, limits, masks, readonly, uid,
                     (request_r, response_w, placement_w.fileno() if placement_w else None), wrapped, withheld)
    command = [sys.executable, "-I", "-c", BOOT]
    if wrapped:
        command = bubblewrap.command(config, seccomp_fd=seccomp_fd) + command
        config = replace(config, workdir=bubblewrap.SOURCE)
    passed = [fd for fd in (request_r, response_w, config.placement_fd, seccomp_fd) if fd is not None]
    proc = subprocess.Popen([*command, config.to_json()], cwd=base / "work", env=environment(base / "work"),
                            pass_fds=passed, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, start_new_session=True)
    RUNNING.add(proc.pid)
    for fd in (request_r, response_w, seccomp_fd):
        if fd is not None:
            os.close(fd)
    if placement is not None:
        placement_w.close()
        _place(placement, proc.pid, cgroup, limits.start_seconds)
    os.set_blocking(request_w, False)
    return Launched(proc, base, request_w, response_r, claim, cgroup, wrapped, proc.stdout)


def _forked(forks: template.Connection, base: Path, limits: Limits, masks: list[str], readonly: list[str],
            claim: uids.Claim, cgroup: cgroups.Cgroup) -> Launched:
    """Start bubblewrap's sandbox around a holder, then have the template fork the worker into it."""
    request_r, request_w = os.pipe()
    response_r, response_w = os.pipe()
    output_r, output_w = os.pipe()
    info_r, info_w = os.pipe()
    seccomp_fd = _seccomp_fd(True)
    config = _config(base, limits, masks, readonly, claim.uid, (request_r, response_w, None), True, None)
    command = [*bubblewrap.command(config, seccomp_fd=seccomp_fd, holder=True), "--info-fd", str(info_w),
               *template.HOLDER]
    passed = [fd for fd in (info_w, seccomp_fd) if fd is not None]
    holder = subprocess.Popen(command, cwd=base / "work", env=environment(base / "work"), pass_fds=passed,
                              stdin=subprocess.DEVNULL, stdout=output_w, stderr=subprocess.STDOUT,
                              start_new_session=True)
    RUNNING.add(holder.pid)
    for fd in (info_w, seccomp_fd):
        if fd is not None:
            os.close(fd)
    pidfd = None
    try:
        pid, pidfd = template.holder(info_r, limits.start_seconds)
        request = {"holder": pid, "cgroup": [str(folder) for folder in cgroup.folders],
                   "config": replace(config, workdir=bubblewrap.SOURCE).to_json(),
                   "filter": (syscall_filter() or b"").hex()}  # none where libseccomp is missing, as cold
        proc = forks.start(request, [request_r, response_w, output_w, pidfd])
    except BaseException:
        for fd in (request_w, response_r, output_r):
            os.close(fd)
        holder.kill()
        holder.wait()
        RUNNING.discard(holder.pid)
        raise
    finally:
        for fd in (request_r, response_w, output_w, info_r, pidfd):
            if fd is not None:
                os.close(fd)
    os.set_blocking(request_w, False)
    return Launched(proc, base, request_w, response_r, claim, cgroup, True, os.fdopen(output_r, "rb"), holder)


def _place(placement: socket.socket, pid: int, cgroup: cgroups.Cgroup, seconds: float) -> None:
    """Move the worker's tree into its cgroup when it asks, before any student code runs (all
    it starts later is born inside; short of memory, the kernel ends it before the judge), then let it go on."""
    placement.settimeout(seconds)
    try:
        asked = placement.recv(1)
    except OSError:
        asked = b""
    if asked:
        placed = tree.pids(pid)
        cgroup.place(placed)
        tree.ends_first(placed)
        placement.sendall(b"g")
    placement.close()
