"""Confine the worker process before any student code runs (standard library only).

Started as ``python -I -c "...confine.main()" CONFIG`` by ``sandbox.Worker``; it takes the
strongest isolation the host offers, writes down what it obtained, then serves requests:

- namespaces: as root a new mount and network namespace; otherwise a user namespace that
  gives the same (skipped, and reported, where the host forbids them);
- filesystem: the kit's secret paths (grader, solutions, results, the pristine submission)
  hidden under empty tmpfs mounts, private /tmp, /var/tmp and /dev/shm, the working copy
  bound at /tmp/work, and the listed paths (home, kit root) made read-only;
- identity: as root, a dedicated unprivileged uid/gid; no new privileges; death with the judge;
- limits: core dumps off, file size, open files and (with a dedicated uid) process count.
"""

from __future__ import annotations

import ctypes
import json
import os
import resource
import signal
import sys
from pathlib import Path

CLONE_NEWNS, CLONE_NEWUSER, CLONE_NEWNET = 0x00020000, 0x10000000, 0x40000000
MS_RDONLY, MS_NOSUID, MS_NODEV, MS_REMOUNT, MS_BIND, MS_REC, MS_PRIVATE = 1, 2, 4, 32, 4096, 16384, 1 << 18
PR_SET_PDEATHSIG, PR_SET_NO_NEW_PRIVS = 1, 38
WORK = "/tmp/work"
SCRATCH = ("/tmp", "/var/tmp", "/dev/shm")

_libc = ctypes.CDLL(None, use_errno=True)


def _check(result: int, what: str) -> None:
    if result != 0:
        errno = ctypes.get_errno()
        raise OSError(errno, f"{what}: {os.strerror(errno)}")


def _mount(source: str, target: str, fstype: str | None, flags: int, data: str | None = None) -> None:
    _check(_libc.mount(source.encode(), target.encode(), fstype.encode() if fstype else None, flags,
                       data.encode() if data else None), f"mount {target}")


def _write(path: str, text: str) -> None:
    with open(path, "w") as handle:
        handle.write(text)


def _enter_namespaces() -> str:
    """Unshare mount + network namespaces; returns how (or raises OSError)."""
    if os.geteuid() == 0:
        _check(_libc.unshare(CLONE_NEWNS | CLONE_NEWNET), "unshare")
        return "root"
    uid, gid = os.geteuid(), os.getegid()
    _check(_libc.unshare(CLONE_NEWUSER | CLONE_NEWNS | CLONE_NEWNET), "unshare")
    _write("/proc/self/setgroups", "deny")
    _write("/proc/self/uid_map", f"{uid} {uid} 1")
    _write("/proc/self/gid_map", f"{gid} {gid} 1")
    return "user namespace"


def _blocked_ancestor(path: str) -> str | None:
    """The highest folder on ``path`` that other users cannot traverse (such as /root)."""
    current = ""
    for part in path.strip("/").split("/"):
        current += "/" + part
        if not os.stat(current).st_mode & 0o001:
            return current
    return None


def _expose(paths: list[str]) -> None:
    """Keep ``paths`` (the Python installation) reachable for a dropped uid: replace each blocking
    folder by an empty tmpfs that holds only bind mounts of the needed paths (hiding the rest)."""
    groups: dict[str, list[str]] = {}
    for path in paths:
        blocked = _blocked_ancestor(path)
        if blocked and blocked != path:
            groups.setdefault(blocked, []).append(path)
    for blocked, needed in groups.items():
        handles = [(path, os.open(path, os.O_PATH | os.O_DIRECTORY)) for path in needed]
        _mount("tmpfs", blocked, "tmpfs", MS_NOSUID | MS_NODEV, "size=64k,mode=755")
        for path, handle in handles:
            os.makedirs(path, mode=0o755, exist_ok=True)
            _mount(f"/proc/self/fd/{handle}", path, None, MS_BIND | MS_REC)
            os.close(handle)


def _hide_and_bind(workdir: str, masks: list[str], readonly: list[str], expose: list[str]) -> None:
    _mount("none", "/", None, MS_REC | MS_PRIVATE)
    _expose(expose)
    for path in readonly:
        if os.path.isdir(path):
            _mount(path, path, None, MS_BIND | MS_REC)
            _mount(path, path, None, MS_BIND | MS_REMOUNT | MS_RDONLY)
    for path in masks:
        if os.path.isdir(path):
            _mount("tmpfs", path, "tmpfs", MS_NOSUID | MS_NODEV | MS_RDONLY, "size=4k,mode=000")
        elif os.path.exists(path):
            _mount("/dev/null", path, None, MS_BIND)
    keep = os.open(workdir, os.O_PATH | os.O_DIRECTORY)
    for path in SCRATCH:
        if os.path.isdir(path):
            _mount("tmpfs", path, "tmpfs", MS_NOSUID | MS_NODEV, "size=1g,mode=1777")
    os.makedirs(WORK)
    _mount(f"/proc/self/fd/{keep}", WORK, None, MS_BIND)
    os.close(keep)


def _limits(config: dict) -> None:
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    resource.setrlimit(resource.RLIMIT_FSIZE, (config["file_bytes"], config["file_bytes"]))
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (min(4096, hard), min(4096, hard)))


def confine(config: dict) -> dict[str, str]:
    """Apply every containment the host allows; returns what was obtained."""
    obtained: dict[str, str] = {}
    workdir = config["workdir"]
    try:
        how = _enter_namespaces()
        _hide_and_bind(workdir, config["masks"], config["readonly"], config["expose"] if config["uid"] is not None else [])
        os.chdir(WORK)
        workdir = WORK
        obtained["network"] = f"none (network namespace, {how})"
        obtained["filesystem"] = ("kit paths hidden, private /tmp, working copy only writable place"
                                  if config["uid"] is not None or os.geteuid() != 0 else "kit paths hidden, private /tmp")
        if config["readonly"]:
            obtained["filesystem"] += f"; read-only: {', '.join(config['readonly'])}"
    except OSError as exc:
        os.chdir(workdir)
        obtained["network"] = f"host network (no namespace: {exc.strerror})"
        obtained["filesystem"] = f"not hidden (no mount namespace: {exc.strerror})"
    os.environ.update(HOME=workdir, TMPDIR=workdir)
    _limits(config)
    if config["uid"] is not None:
        os.setgroups([])
        os.setresgid(config["gid"], config["gid"], config["gid"])
        os.setresuid(config["uid"], config["uid"], config["uid"])
        resource.setrlimit(resource.RLIMIT_NPROC, (config["processes"], config["processes"]))
        obtained["user"] = f"uid {config['uid']} (dropped from root, dedicated to this worker)"
    else:
        obtained["user"] = f"uid {os.getuid()} (same user as the judge)"
    _libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0)
    _libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    if os.getppid() != config["judge_pid"]:  # the judge died before the death signal was armed
        os._exit(1)
    obtained["limits"] = (f"wall clock per call, resident memory {config['memory_bytes'] >> 20} MiB (watched), "
                          f"files {config['file_bytes'] >> 20} MiB, output captured and truncated")
    return obtained


def main() -> None:
    config = json.loads(sys.argv[1])
    obtained = confine(config)
    sys.path[:0] = [os.path.join(os.getcwd(), "_kit")]
    import worker  # noqa: E402 - only after confinement: it imports torch and the submission

    worker.serve(config["request_fd"], config["response_fd"], Path(os.getcwd(), worker.PACKAGE), obtained)
