"""Confine the worker process before any student code runs (standard library only).

Started as ``python -I -c "...confine.main()" CONFIG`` (a ``WorkerConfig`` as JSON) by
``grader.containment.worker.Worker``. It takes the strongest isolation the host offers, writes
down what it obtained, then serves requests:

- namespaces: new mount, network, IPC and PID namespaces (as root directly; otherwise inside
  a user namespace that maps only the judge's uid). This process stays outside the new PID
  namespace and only waits; its child, process 1 there, runs the worker. When that child
  ends, the kernel kills every process it left behind.
- filesystem (``rootfs``): a new root holding only the system folders (``/usr``, ``/etc``, ...), ``/dev``,
  ``/sys``, the Python installation and the listed read-only paths, all read-only; its own
  ``/proc``; a size-capped private ``/tmp`` whose ``/tmp/work`` holds a copy of the working
  folder (the only writable place besides ``/dev/shm``). Home folders, the kit, the results and
  the pristine submission are simply absent; masked paths inside what is visible are covered.
- identity: as root, a dedicated unprivileged uid/gid; otherwise the judge's uid with every
  capability dropped. No new privileges; death with the judge.
- limits: core dumps off, file size, open files and process count.

Where the host forbids namespaces the worker still runs (same user, host filesystem), and the
isolation it reports says so.
"""

from __future__ import annotations

import ctypes
import os
import resource
import select
import shutil
import signal
import socket
import sys
from dataclasses import replace
from pathlib import Path

if __package__:
    from .config import WorkerConfig
    from .rootfs import (EXCHANGE, SHARED_EXCHANGE, WORK, build_root, check, copy_work, enter_root, give, libc,
                         numbers, syscall)
else:  # inside the sandbox, where config.py and rootfs.py are copied beside this file
    from config import WorkerConfig
    from rootfs import (EXCHANGE, SHARED_EXCHANGE, WORK, build_root, check, copy_work, enter_root, give, libc,
                        numbers, syscall)

CLONE_NEWNS, CLONE_NEWIPC, CLONE_NEWUSER, CLONE_NEWPID, CLONE_NEWNET = (0x00020000, 0x08000000, 0x10000000,
                                                                        0x20000000, 0x40000000)
PR_SET_PDEATHSIG, PR_SET_SECCOMP, PR_CAPBSET_DROP, PR_SET_NO_NEW_PRIVS = 1, 22, 24, 38
SECCOMP_MODE_FILTER = 2


def _write(path: str, text: str) -> None:
    with open(path, "w") as handle:
        handle.write(text)


# -- namespaces ---------------------------------------------------------------------------------

def _enter_namespaces() -> str:
    """Unshare mount, network, IPC and PID namespaces (in a user namespace unless root)."""
    flags = CLONE_NEWNS | CLONE_NEWNET | CLONE_NEWIPC | CLONE_NEWPID
    if os.geteuid() == 0:
        check(libc.unshare(flags), "unshare")
        return "root"
    uid, gid = os.geteuid(), os.getegid()
    check(libc.unshare(CLONE_NEWUSER | flags), "unshare")
    _write("/proc/self/setgroups", "deny")
    _write("/proc/self/uid_map", f"{uid} {uid} 1")
    _write("/proc/self/gid_map", f"{gid} {gid} 1")
    return "user namespace"



# -- identity and limits ------------------------------------------------------------------------

def _drop_bounding_set() -> None:
    """No capability can be gained again, by any program this process runs."""
    for cap in range(64):
        if libc.prctl(PR_CAPBSET_DROP, cap, 0, 0, 0) != 0 and ctypes.get_errno() == 22:  # EINVAL: no such cap
            break


def _drop_capabilities() -> None:
    """Give up every capability held in the user namespace (no remounting, no unmounting)."""
    _drop_bounding_set()
    header = (ctypes.c_uint32 * 2)(0x20080522, 0)
    data = (ctypes.c_uint32 * 6)()
    check(syscall("capset", header, data), "capset")


def _limits(config: WorkerConfig) -> None:
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    resource.setrlimit(resource.RLIMIT_FSIZE, (config.file_bytes, config.file_bytes))
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (min(4096, hard), min(4096, hard)))


def _become_worker(config: WorkerConfig, how: str, parent_alive: int) -> dict[str, str]:
    """In the child (process 1 of the new PID namespace): finish confinement, return what was obtained."""
    obtained = {"network": f"none (own network namespace, {how})"}
    obtained["processes"] = enter_root(config.root)
    obtained["filesystem"] = (f"own root: system folders, Python{' and listed paths' if config.readonly else ''} "
                              f"read-only; no home, kit or submission folders; writable: private /tmp "
                              f"({config.disk_bytes >> 20} MiB) holding the working copy")
    _limits(config)
    resource.setrlimit(resource.RLIMIT_NPROC, (config.processes, config.processes))
    if config.uid is not None:
        _drop_to(config)
        obtained["user"] = f"uid {config.uid} (dropped from root, dedicated to this worker)"
    else:
        _drop_capabilities()
        obtained["user"] = f"uid {os.getuid()} (the judge's, in a user namespace, no capabilities)"
    obtained["processes"] += f", own PID namespace (its processes die with it), at most {config.processes}"
    obtained["signals"] = "cannot reach the judge (own PID namespace)"
    libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0)
    libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    if select.select([parent_alive], [], [], 0)[0]:  # end of file: the waiting parent died before the signal was armed
        os._exit(1)
    os.close(parent_alive)
    return obtained


def wait_and_mirror(child: int) -> None:
    """The parent outside the PID namespace: wait for the worker, then end the same way."""
    _, status = os.waitpid(child, 0)
    if os.WIFSIGNALED(status):
        signal.signal(os.WTERMSIG(status), signal.SIG_DFL)
        os.kill(os.getpid(), os.WTERMSIG(status))
    os._exit(os.waitstatus_to_exitcode(status) if os.WIFEXITED(status) else 1)


def _unconfined(config: WorkerConfig, why: str, parent: int) -> dict[str, str]:
    if config.uid is not None and not config.reachable:
        why += "; the interpreter is not readable by other users, so the uid is not dropped"
        config = replace(config, uid=None)
    give(config.workdir, config.uid if config.uid is not None else os.getuid())  # the dropped uid works in the staging copy itself,
    os.chmod(os.path.dirname(config.workdir), 0o711)  # reached through its (unlistable) parent
    os.chdir(config.workdir)
    _limits(config)
    if config.uid is not None:
        _drop_to(config)
        resource.setrlimit(resource.RLIMIT_NPROC, (config.processes, config.processes))
    libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0)
    if config.uid is None and os.geteuid() == 0:  # root that could not be dropped keeps no capability
        _drop_capabilities()
    _die_with(parent)
    dropped = config.uid is not None
    return {"network": f"host network (no namespaces: {why})", "filesystem": f"host filesystem, not hidden ({why})",
            "processes": "host processes visible", "user": f"uid {os.getuid()}" + (
                " (dropped from root, dedicated to this worker)" if dropped else f" (same user as the judge: {why})"),
            "signals": "cannot signal the judge: another uid, no capabilities" if dropped else
            "can signal the judge: same uid, no PID namespace"}


def _die_with(parent: int) -> None:
    """Die with the judge: arm the death signal, then make sure the judge did not die before it was armed
    (the parent read at start, ``parent``, would then have been replaced by a reaper)."""
    libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    if os.getppid() != parent:
        os._exit(1)


class _Program(ctypes.Structure):
    _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]


def _filter_syscalls(program: bytes) -> None:
    """Load the judge's seccomp filter (BPF, generated with libseccomp) for this process and all it starts."""
    code = ctypes.create_string_buffer(program, len(program))
    libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0)
    check(libc.prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, ctypes.byref(_Program(len(program) // 8,
                                                                                   ctypes.addressof(code))), 0, 0),
           "seccomp")


def _bubblewrapped(config: WorkerConfig) -> dict[str, str]:
    """Inside bubblewrap (which made the namespaces and the root, and loaded the syscall filter):
    drop to the dedicated uid (as root), copy the working folder into the private /tmp, set the limits."""
    if config.uid is not None:
        _drop_to(config)
    copy_work(config.workdir, WORK, None)
    shutil.rmtree(os.path.join(WORK, EXCHANGE))  # a read-only copy: the shared folder is bound elsewhere
    os.symlink(SHARED_EXCHANGE, os.path.join(WORK, EXCHANGE))
    os.chdir(WORK)
    _limits(config)
    resource.setrlimit(resource.RLIMIT_NPROC, (config.processes, config.processes))
    libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0)
    user = (f"uid {os.getuid()} (dropped from root, dedicated to this worker)" if config.uid is not None else
            f"uid {os.getuid()} (the judge's, in a user namespace, no capabilities)")
    return {"network": "none (own network namespace, bubblewrap)",
            "processes": f"own /proc and PID namespace (its processes die with it), at most {config.processes}",
            "filesystem": f"own root (bubblewrap): system folders, Python{' and listed paths' if config.readonly else ''}"
                          f" read-only; no home, kit or submission folders; writable: private /tmp "
                          f"({config.disk_bytes >> 20} MiB) holding the working copy",
            "user": user, "signals": "cannot reach the judge (own PID namespace)"}


def _drop_to(config: WorkerConfig) -> None:
    os.setgroups([])
    os.setresgid(config.gid, config.gid, config.gid)
    os.setresuid(config.uid, config.uid, config.uid)


def _await_placement(fd: int | None) -> None:
    """Ask the judge to move this process into the worker's cgroup, and wait until it has: all
    that starts later (student code included) is born inside it."""
    if fd is None:
        return
    with socket.socket(fileno=fd) as placement:
        placement.sendall(b"p")
        if placement.recv(1) != b"g":
            os._exit(1)


def _by_hand(config: WorkerConfig, parent: int) -> dict[str, str]:
    """Namespaces, root and identity built here (where bubblewrap cannot run), or the unconfined fallback."""
    try:
        if not config.namespaces:
            raise OSError(0, "namespaces turned off")
        how = _enter_namespaces()
        _die_with(parent)
        build_root(config)
    except OSError as exc:
        return _unconfined(config, exc.strerror or str(exc), parent)
    alive_r, alive_w = os.pipe()
    child = os.fork()
    if child:
        os.close(alive_r)
        for fd in (config.request_fd, config.response_fd):
            os.close(fd)
        wait_and_mirror(child)
    os.close(alive_w)
    return _become_worker(config, how, alive_r)


WORKER_USER = "worker"  # the name the worker answers to: its uid may have no passwd entry


def _identity(home: str) -> dict[str, str]:
    """The worker's user name, home and caches, all inside its private working folder.

    Its uid may have no passwd entry (a dedicated uid, a container's arbitrary uid), so
    ``getpass.getuser()`` (and torch 2.11, which asks it when the first optimizer is built) must
    find the name in the environment; torch's and Triton's compile caches must be writable.
    """
    cache = os.path.join(home, ".cache")
    return {"HOME": home, "TMPDIR": home, "USER": WORKER_USER, "LOGNAME": WORKER_USER, "XDG_CACHE_HOME": cache,
            "TORCHINDUCTOR_CACHE_DIR": os.path.join(cache, "torchinductor"),
            "TRITON_CACHE_DIR": os.path.join(cache, "triton")}


def confine(config: WorkerConfig) -> dict[str, str]:
    """Apply every containment the host allows; returns (in the worker process) what was obtained."""
    parent = os.getppid()
    numbers.update(config.syscall_numbers)
    _await_placement(config.placement_fd)
    program = Path(config.syscall_filter).read_bytes() if config.syscall_filter else b""  # while it can
    os.umask(0o022)
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    if config.bubblewrap:  # which loaded the sandbox's filter; the worker's own (no new programs) comes on top
        obtained = _bubblewrapped(config)
        _die_with(parent)
    else:
        obtained = _by_hand(config, parent)
    return _finish(config, obtained, program)


def forked(config: WorkerConfig, program: bytes, go: int) -> dict[str, str]:
    """A worker forked by the warm template (``template.py``) into the namespaces and root of a sandbox
    bubblewrap built, still root: once its parent says so on ``go`` (it is in its cgroup), made what
    bubblewrap and ``_bubblewrapped`` make of a cold worker (a new session, death with its parent, no
    capability left in its bounding set, the dedicated uid, the working copy, the limits, the syscall
    filter); returns what was obtained."""
    os.setsid()
    libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    if os.read(go, 1) != b"g":  # end of file: the parent died (before the signal was armed, or placing it)
        os._exit(1)
    os.close(go)
    numbers.update(config.syscall_numbers)
    os.umask(0o022)
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    _drop_bounding_set()
    obtained = _bubblewrapped(config)
    obtained["processes"] += "; forked from a warm template that imported torch, numpy and einops"
    return _finish(config, obtained, program)


def _finish(config: WorkerConfig, obtained: dict[str, str], program: bytes) -> dict[str, str]:
    """The last steps of every confinement: its identity, then the syscall filter (``program``, where this
    process loads it); ``obtained`` completed."""
    obtained["limits"] = (f"wall clock per call, files {config.file_bytes >> 20} MiB, output captured and "
                          f"truncated")
    if config.covers:
        obtained["withheld files"] = (
            f"host filesystem: the {len(config.covers)} library files withheld stay readable as installed"
            if obtained["network"].startswith("host") else
            f"{len(config.covers)} library files covered by stubs, read-only, in its own root")
    os.environ.update(_identity(os.getcwd()))
    if program:
        _filter_syscalls(program)
    obtained["syscalls"] = config.syscalls
    return obtained


def main() -> None:
    config = WorkerConfig.from_json(sys.argv[1])
    obtained = confine(config)
    sys.path[:0] = [os.path.join(os.getcwd(), "_kit")]
    import worker  # noqa: E402 - only after confinement: it imports torch and the submission

    worker.serve(config.request_fd, config.response_fd, Path(os.getcwd(), worker.PACKAGE), obtained,
                 config.withheld_kernels, config.withheld_rule, config.code_by_name)
