"""Confine the worker process before any student code runs (standard library only).

Started as ``python -I -c "...confine.main()" CONFIG`` by ``sandbox.Worker``. It takes the
strongest isolation the host offers, writes down what it obtained, then serves requests:

- namespaces: new mount, network, IPC and PID namespaces (as root directly; otherwise inside
  a user namespace that maps only the judge's uid). This process stays outside the new PID
  namespace and only waits; its child, process 1 there, runs the worker. When that child
  ends, the kernel kills every process it left behind.
- filesystem: a new root holding only the system folders (``/usr``, ``/etc``, ...), ``/dev``,
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
import json
import os
import resource
import select
import shutil
import signal
import socket
import sys
from pathlib import Path

CLONE_NEWNS, CLONE_NEWIPC, CLONE_NEWUSER, CLONE_NEWPID, CLONE_NEWNET = (0x00020000, 0x08000000, 0x10000000,
                                                                        0x20000000, 0x40000000)
MS_RDONLY, MS_NOSUID, MS_NODEV, MS_NOEXEC, MS_REMOUNT, MS_BIND, MS_REC, MS_PRIVATE = (1, 2, 4, 8, 32, 4096, 16384,
                                                                                      1 << 18)
MNT_DETACH, AT_FDCWD, AT_RECURSIVE = 2, -100, 0x8000
MOUNT_ATTR_RDONLY, MOUNT_ATTR_NOSUID, MOUNT_ATTR_NODEV = 1, 2, 4
# Calls the C library does not wrap, by number: the judge resolves them with libseccomp for this
# architecture (config["syscall_numbers"]); one it could not resolve answers ENOSYS.
_numbers: dict[str, int] = {}
PR_SET_PDEATHSIG, PR_SET_SECCOMP, PR_CAPBSET_DROP, PR_SET_NO_NEW_PRIVS = 1, 22, 24, 38
SECCOMP_MODE_FILTER = 2
SYSTEM = ("usr", "bin", "sbin", "lib", "lib32", "lib64", "libx32", "etc", "sys")
WORK = "/tmp/work"
EXCHANGE = "exchange"  # the one folder the judge and the worker both see: inputs in, files out
SHARED_EXCHANGE = "/tmp/.exchange"  # where bubblewrap binds it (grader/containment/bubblewrap.py)
OLD_ROOT = ".old-root"

_libc = ctypes.CDLL(None, use_errno=True)
_libc.syscall.restype = ctypes.c_long


def _check(result: int, what: str) -> None:
    if result != 0:
        errno = ctypes.get_errno()
        raise OSError(errno, f"{what}: {os.strerror(errno)}")


def _mount(source: str, target: str, fstype: str | None, flags: int, data: str | None = None) -> None:
    _check(_libc.mount(source.encode(), target.encode(), fstype.encode() if fstype else None, flags,
                       data.encode() if data else None), f"mount {target}")


def _syscall(name: str, *args) -> int:
    number = _numbers.get(name)
    if number is None:
        ctypes.set_errno(38)  # ENOSYS
        return -1
    return _libc.syscall(number, *args)


def _write(path: str, text: str) -> None:
    with open(path, "w") as handle:
        handle.write(text)


# -- namespaces ---------------------------------------------------------------------------------

def _enter_namespaces() -> str:
    """Unshare mount, network, IPC and PID namespaces (in a user namespace unless root)."""
    flags = CLONE_NEWNS | CLONE_NEWNET | CLONE_NEWIPC | CLONE_NEWPID
    if os.geteuid() == 0:
        _check(_libc.unshare(flags), "unshare")
        return "root"
    uid, gid = os.geteuid(), os.getegid()
    _check(_libc.unshare(CLONE_NEWUSER | flags), "unshare")
    _write("/proc/self/setgroups", "deny")
    _write("/proc/self/uid_map", f"{uid} {uid} 1")
    _write("/proc/self/gid_map", f"{gid} {gid} 1")
    return "user namespace"


# -- the new root -------------------------------------------------------------------------------

class _MountAttr(ctypes.Structure):
    _fields_ = [("attr_set", ctypes.c_uint64), ("attr_clr", ctypes.c_uint64), ("propagation", ctypes.c_uint64),
                ("userns_fd", ctypes.c_uint64)]


_ST_FLAGS = {os.ST_NOSUID: MS_NOSUID, os.ST_NODEV: MS_NODEV, os.ST_NOEXEC: MS_NOEXEC,
             os.ST_NOATIME: 1024, os.ST_NODIRATIME: 2048, os.ST_RELATIME: 1 << 21}


def _mount_points(under: str) -> list[str]:
    points = []
    with open("/proc/self/mountinfo") as handle:
        for line in handle:
            point = line.split()[4].encode().decode("unicode_escape")
            if point == under or point.startswith(under.rstrip("/") + "/"):
                points.append(point)
    return points


def _read_only(target: str, device: bool = False) -> None:
    """Make the mount at ``target`` and every mount below it read-only (and nosuid, nodev)."""
    attr = _MountAttr(MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID | (0 if device else MOUNT_ATTR_NODEV), 0, 0, 0)
    result = _syscall("mount_setattr", AT_FDCWD, target.encode(), AT_RECURSIVE, ctypes.byref(attr),
                      ctypes.sizeof(attr))
    if result == 0:
        return
    if ctypes.get_errno() != 38:  # anything but "no such system call" is a real failure
        _check(-1, f"read-only {target}")
    for point in _mount_points(target):  # older kernels: one remount per mount, keeping locked flags
        kept = sum(flag for st, flag in _ST_FLAGS.items() if os.statvfs(point).f_flag & st)
        _mount("none", point, None, MS_BIND | MS_REMOUNT | MS_RDONLY | MS_NOSUID | kept)


def _bind(source: str, target: str, device: bool = False) -> None:
    """Bind ``source`` (with everything mounted below it) at ``target``, read-only."""
    if os.path.isdir(source):
        os.makedirs(target, mode=0o755, exist_ok=True)
    else:
        os.makedirs(os.path.dirname(target), mode=0o755, exist_ok=True)
        open(target, "a").close()
    _mount(source, target, None, MS_BIND | MS_REC)
    _read_only(target, device)


def _inside(path: str, folder: str) -> bool:
    return path == folder or path.startswith(folder.rstrip("/") + "/")


def _give(folder: str, uid: int | None) -> None:
    """Make ``folder`` (and all it holds) the worker's own, and nobody else's."""
    if uid is not None:
        for top, dirs, files in os.walk(folder):
            for name in [top, *(os.path.join(top, n) for n in dirs + files)]:
                os.chown(name, uid, uid, follow_symlinks=False)
    os.chmod(folder, 0o700)


def _copy_work(source: str, dest: str, uid: int | None) -> None:
    shutil.copytree(source, dest, symlinks=True)
    _give(dest, uid)


def _build_root(config: dict) -> str:
    """Assemble the worker's root filesystem under ``config['root']`` (not entered yet)."""
    root, uid = config["root"], config["uid"]
    _mount("none", "/", None, MS_REC | MS_PRIVATE)
    _mount("worker-root", root, "tmpfs", MS_NOSUID | MS_NODEV, "size=1m,mode=755")
    bound = []
    for name in SYSTEM:
        host = "/" + name
        if os.path.islink(host):
            os.symlink(os.readlink(host), root + host)
        elif os.path.isdir(host):
            _bind(host, root + host)
            bound.append(host)
    _bind("/dev", root + "/dev", device=True)
    scratch = f"size={config['disk_bytes']},nr_inodes=65536,mode=1777"
    os.makedirs(root + "/tmp")  # before the binds: an interpreter or kit living under /tmp stays visible
    _mount("worker-tmp", root + "/tmp", "tmpfs", MS_NOSUID | MS_NODEV, scratch)
    for path in sorted(set(config["expose"] + config["readonly"])):  # absolute, each in every spelling it is used by
        if path != "/" and os.path.exists(path) and not any(_inside(path, b) for b in bound):
            _bind(path, root + path)
            bound.append(path)
    for path in ("/dev/shm", "/dev/pts", "/dev/mqueue"):
        if os.path.isdir(root + path):
            _mount("worker-tmp", root + path, "tmpfs", MS_NOSUID | MS_NODEV, scratch if path == "/dev/shm" else
                   "size=4k,mode=755")
    _copy_work(config["workdir"], root + WORK, uid)
    _mount(os.path.join(config["workdir"], EXCHANGE), f"{root}{WORK}/{EXCHANGE}", None, MS_BIND)  # shared with the judge
    os.makedirs(root + "/var", exist_ok=True)
    if not os.path.lexists(root + "/var/tmp"):
        os.symlink("../tmp", root + "/var/tmp")
    for path in config["masks"]:
        if any(_inside(path, b) for b in bound) and os.path.lexists(root + path):
            if os.path.isdir(root + path):
                _mount("masked", root + path, "tmpfs", MS_NOSUID | MS_NODEV | MS_RDONLY, "size=4k,mode=000")
            else:
                _mount("/dev/null", root + path, None, MS_BIND)
    os.makedirs(root + "/proc")
    os.makedirs(root + "/" + OLD_ROOT)
    _mount("none", root, None, MS_REMOUNT | MS_RDONLY | MS_NOSUID | MS_NODEV)
    return root


def _enter_root(root: str) -> str:
    """In the new PID namespace: mount its /proc, switch to the new root, detach the host's."""
    try:
        _mount("proc", root + "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC)
        proc = "own /proc (sees only its own processes)"
    except OSError as exc:  # a host whose own /proc is partly covered forbids a new one
        _mount("no-proc", root + "/proc", "tmpfs", MS_NOSUID | MS_NODEV | MS_RDONLY, "size=4k,mode=555")
        proc = f"no /proc ({exc.strerror})"
    _check(_syscall("pivot_root", root.encode(), (root + "/" + OLD_ROOT).encode()), "pivot_root")
    os.chdir("/")
    _check(_libc.umount2(("/" + OLD_ROOT).encode(), MNT_DETACH), "detach the host root")
    os.chdir(WORK)
    return proc


# -- identity and limits ------------------------------------------------------------------------

def _drop_capabilities() -> None:
    """Give up every capability held in the user namespace (no remounting, no unmounting)."""
    for cap in range(64):
        if _libc.prctl(PR_CAPBSET_DROP, cap, 0, 0, 0) != 0 and ctypes.get_errno() == 22:  # EINVAL: no such cap
            break
    header = (ctypes.c_uint32 * 2)(0x20080522, 0)
    data = (ctypes.c_uint32 * 6)()
    _check(_syscall("capset", header, data), "capset")


def _limits(config: dict) -> None:
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    resource.setrlimit(resource.RLIMIT_FSIZE, (config["file_bytes"], config["file_bytes"]))
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (min(4096, hard), min(4096, hard)))


def _become_worker(config: dict, how: str, parent_alive: int) -> dict[str, str]:
    """In the child (process 1 of the new PID namespace): finish confinement, return what was obtained."""
    obtained = {"network": f"none (own network namespace, {how})"}
    obtained["processes"] = _enter_root(config["root"])
    obtained["filesystem"] = (f"own root: system folders, Python{' and listed paths' if config['readonly'] else ''} "
                              f"read-only; no home, kit or submission folders; writable: private /tmp "
                              f"({config['disk_bytes'] >> 20} MiB) holding the working copy")
    _limits(config)
    resource.setrlimit(resource.RLIMIT_NPROC, (config["processes"], config["processes"]))
    if config["uid"] is not None:
        _drop_to(config)
        obtained["user"] = f"uid {config['uid']} (dropped from root, dedicated to this worker)"
    else:
        _drop_capabilities()
        obtained["user"] = f"uid {os.getuid()} (the judge's, in a user namespace, no capabilities)"
    obtained["processes"] += f", own PID namespace (its processes die with it), at most {config['processes']}"
    obtained["signals"] = "cannot reach the judge (own PID namespace)"
    _libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0)
    _libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    if select.select([parent_alive], [], [], 0)[0]:  # end of file: the waiting parent died before the signal was armed
        os._exit(1)
    os.close(parent_alive)
    return obtained


def _wait_and_mirror(child: int) -> None:
    """The parent outside the PID namespace: wait for the worker, then end the same way."""
    _, status = os.waitpid(child, 0)
    if os.WIFSIGNALED(status):
        signal.signal(os.WTERMSIG(status), signal.SIG_DFL)
        os.kill(os.getpid(), os.WTERMSIG(status))
    os._exit(os.waitstatus_to_exitcode(status) if os.WIFEXITED(status) else 1)


def _unconfined(config: dict, why: str, parent: int) -> dict[str, str]:
    if config["uid"] is not None and not config["reachable"]:
        why += "; the interpreter is not readable by other users, so the uid is not dropped"
        config = {**config, "uid": None}
    _give(config["workdir"], config["uid"] if config["uid"] is not None else os.getuid())  # the dropped uid works in the staging copy itself,
    os.chmod(os.path.dirname(config["workdir"]), 0o711)  # reached through its (unlistable) parent
    os.chdir(config["workdir"])
    _limits(config)
    if config["uid"] is not None:
        _drop_to(config)
        resource.setrlimit(resource.RLIMIT_NPROC, (config["processes"], config["processes"]))
    _libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0)
    if config["uid"] is None and os.geteuid() == 0:  # root that could not be dropped keeps no capability
        _drop_capabilities()
    _die_with(parent)
    dropped = config["uid"] is not None
    return {"network": f"host network (no namespaces: {why})", "filesystem": f"host filesystem, not hidden ({why})",
            "processes": "host processes visible", "user": f"uid {os.getuid()}" + (
                " (dropped from root, dedicated to this worker)" if dropped else f" (same user as the judge: {why})"),
            "signals": "cannot signal the judge: another uid, no capabilities" if dropped else
            "can signal the judge: same uid, no PID namespace"}


def _die_with(parent: int) -> None:
    """Die with the judge: arm the death signal, then make sure the judge did not die before it was armed
    (the parent read at start, ``parent``, would then have been replaced by a reaper)."""
    _libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    if os.getppid() != parent:
        os._exit(1)


class _Program(ctypes.Structure):
    _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]


def _filter_syscalls(program: bytes) -> None:
    """Load the judge's seccomp filter (BPF, generated with libseccomp) for this process and all it starts."""
    code = ctypes.create_string_buffer(program, len(program))
    _libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0)
    _check(_libc.prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, ctypes.byref(_Program(len(program) // 8,
                                                                                   ctypes.addressof(code))), 0, 0),
           "seccomp")


def _bubblewrapped(config: dict) -> dict[str, str]:
    """Inside bubblewrap (which made the namespaces and the root, and loaded the syscall filter):
    drop to the dedicated uid (as root), copy the working folder into the private /tmp, set the limits."""
    if config["uid"] is not None:
        _drop_to(config)
    _copy_work(config["workdir"], WORK, None)
    shutil.rmtree(os.path.join(WORK, EXCHANGE))  # a read-only copy: the shared folder is bound elsewhere
    os.symlink(SHARED_EXCHANGE, os.path.join(WORK, EXCHANGE))
    os.chdir(WORK)
    _limits(config)
    resource.setrlimit(resource.RLIMIT_NPROC, (config["processes"], config["processes"]))
    _libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0)
    user = (f"uid {os.getuid()} (dropped from root, dedicated to this worker)" if config["uid"] is not None else
            f"uid {os.getuid()} (the judge's, in a user namespace, no capabilities)")
    return {"network": "none (own network namespace, bubblewrap)",
            "processes": f"own /proc and PID namespace (its processes die with it), at most {config['processes']}",
            "filesystem": f"own root (bubblewrap): system folders, Python{' and listed paths' if config['readonly'] else ''}"
                          f" read-only; no home, kit or submission folders; writable: private /tmp "
                          f"({config['disk_bytes'] >> 20} MiB) holding the working copy",
            "user": user, "signals": "cannot reach the judge (own PID namespace)"}


def _drop_to(config: dict) -> None:
    os.setgroups([])
    os.setresgid(config["gid"], config["gid"], config["gid"])
    os.setresuid(config["uid"], config["uid"], config["uid"])


def _await_placement(fd: int | None) -> None:
    """Ask the judge to move this process into the worker's cgroup, and wait until it has: all
    that starts later (student code included) is born inside it."""
    if fd is None:
        return
    with socket.socket(fileno=fd) as placement:
        placement.sendall(b"p")
        if placement.recv(1) != b"g":
            os._exit(1)


def _by_hand(config: dict, parent: int) -> dict[str, str]:
    """Namespaces, root and identity built here (where bubblewrap cannot run), or the unconfined fallback."""
    try:
        if not config["namespaces"]:
            raise OSError(0, "namespaces turned off")
        how = _enter_namespaces()
        _die_with(parent)
        _build_root(config)
    except OSError as exc:
        return _unconfined(config, exc.strerror or str(exc), parent)
    alive_r, alive_w = os.pipe()
    child = os.fork()
    if child:
        os.close(alive_r)
        for fd in (config["request_fd"], config["response_fd"]):
            os.close(fd)
        _wait_and_mirror(child)
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


def confine(config: dict) -> dict[str, str]:
    """Apply every containment the host allows; returns (in the worker process) what was obtained."""
    parent = os.getppid()
    _numbers.update(config["syscall_numbers"])
    _await_placement(config["placement_fd"])
    program = Path(config["syscall_filter"]).read_bytes() if config["syscall_filter"] else b""  # while it can
    os.umask(0o022)
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    if config["bubblewrap"]:  # which loaded the syscall filter itself
        obtained = _bubblewrapped(config)
        _die_with(parent)
    else:
        obtained = _by_hand(config, parent)
    obtained["limits"] = (f"wall clock per call, files {config['file_bytes'] >> 20} MiB, output captured and "
                          f"truncated")
    os.environ.update(_identity(os.getcwd()))
    if program:
        _filter_syscalls(program)
    obtained["syscalls"] = config["syscalls"]
    return obtained


def main() -> None:
    config = json.loads(sys.argv[1])
    obtained = confine(config)
    sys.path[:0] = [os.path.join(os.getcwd(), "_kit")]
    import worker  # noqa: E402 - only after confinement: it imports torch and the submission

    worker.serve(config["request_fd"], config["response_fd"], Path(os.getcwd(), worker.PACKAGE), obtained)
