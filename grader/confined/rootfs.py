"""The worker's own root filesystem, built by hand where bubblewrap cannot run (standard library only).

A new root on a tmpfs holding only the system folders, ``/dev``, ``/sys``, the Python
installation and the listed read-only paths, all read-only, with stubs bound over the library files
the worker runs without (``WorkerConfig.covers``); a size-capped private ``/tmp``
whose ``/tmp/work`` holds a copy of the working folder (the only writable place besides
``/dev/shm``); masks over secret paths inside what is visible; then its own ``/proc`` and a
``pivot_root`` into it (``enter_root``, in the new PID namespace).
"""

from __future__ import annotations

import ctypes
import os
import shutil

if __package__:
    from .config import WorkerConfig
else:  # inside the sandbox, where config.py is copied beside this file
    from config import WorkerConfig

MS_RDONLY, MS_NOSUID, MS_NODEV, MS_NOEXEC, MS_REMOUNT, MS_BIND, MS_REC, MS_PRIVATE = (1, 2, 4, 8, 32, 4096, 16384,
                                                                                      1 << 18)
MNT_DETACH, AT_FDCWD, AT_RECURSIVE = 2, -100, 0x8000
MOUNT_ATTR_RDONLY, MOUNT_ATTR_NOSUID, MOUNT_ATTR_NODEV = 1, 2, 4
# Calls the C library does not wrap, by number: the judge resolves them with libseccomp for this
# architecture (config.syscall_numbers); one it could not resolve answers ENOSYS.
numbers: dict[str, int] = {}
SYSTEM = ("usr", "bin", "sbin", "lib", "lib32", "lib64", "libx32", "etc", "sys")
WORK = "/tmp/work"
EXCHANGE = "exchange"  # the one folder the judge and the worker both see: inputs in, files out
SHARED_EXCHANGE = "/tmp/.exchange"  # where bubblewrap binds it (grader/containment/bubblewrap.py)
OLD_ROOT = ".old-root"

libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long


def check(result: int, what: str) -> None:
    if result != 0:
        errno = ctypes.get_errno()
        raise OSError(errno, f"{what}: {os.strerror(errno)}")


def _mount(source: str, target: str, fstype: str | None, flags: int, data: str | None = None) -> None:
    check(libc.mount(source.encode(), target.encode(), fstype.encode() if fstype else None, flags,
                       data.encode() if data else None), f"mount {target}")


def syscall(name: str, *args) -> int:
    number = numbers.get(name)
    if number is None:
        ctypes.set_errno(38)  # ENOSYS
        return -1
    return libc.syscall(number, *args)


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
    result = syscall("mount_setattr", AT_FDCWD, target.encode(), AT_RECURSIVE, ctypes.byref(attr),
                      ctypes.sizeof(attr))
    if result == 0:
        return
    if ctypes.get_errno() != 38:  # anything but "no such system call" is a real failure
        check(-1, f"read-only {target}")
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


def give(folder: str, uid: int | None) -> None:
    """Make ``folder`` (and all it holds) the worker's own, and nobody else's."""
    if uid is not None:
        for top, dirs, files in os.walk(folder):
            for name in [top, *(os.path.join(top, n) for n in dirs + files)]:
                os.chown(name, uid, uid, follow_symlinks=False)
    os.chmod(folder, 0o700)


def copy_work(source: str, dest: str, uid: int | None) -> None:
    shutil.copytree(source, dest, symlinks=True)
    give(dest, uid)


def build_root(config: WorkerConfig) -> str:
    """Assemble the worker's root filesystem under ``config.root`` (not entered yet)."""
    root, uid = config.root, config.uid
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
    scratch = f"size={config.disk_bytes},nr_inodes=65536,mode=1777"
    os.makedirs(root + "/tmp")  # before the binds: an interpreter or kit living under /tmp stays visible
    _mount("worker-tmp", root + "/tmp", "tmpfs", MS_NOSUID | MS_NODEV, scratch)
    for path in sorted(set(config.expose + config.readonly)):  # absolute, each in every spelling it is used by
        if path != "/" and os.path.exists(path) and not any(_inside(path, b) for b in bound):
            _bind(path, root + path)
            bound.append(path)
    for path in ("/dev/shm", "/dev/pts", "/dev/mqueue"):
        if os.path.isdir(root + path):
            _mount("worker-tmp", root + path, "tmpfs", MS_NOSUID | MS_NODEV, scratch if path == "/dev/shm" else
                   "size=4k,mode=755")
    copy_work(config.workdir, root + WORK, uid)
    _mount(os.path.join(config.workdir, EXCHANGE), f"{root}{WORK}/{EXCHANGE}", None, MS_BIND)  # shared with the judge
    os.makedirs(root + "/var", exist_ok=True)
    if not os.path.lexists(root + "/var/tmp"):
        os.symlink("../tmp", root + "/var/tmp")
    for path in config.masks:
        if any(_inside(path, b) for b in bound) and os.path.lexists(root + path):
            if os.path.isdir(root + path):
                _mount("masked", root + path, "tmpfs", MS_NOSUID | MS_NODEV | MS_RDONLY, "size=4k,mode=000")
            else:
                _mount("/dev/null", root + path, None, MS_BIND)
    for path, stub in config.covers.items():  # the library code this worker runs without
        if any(_inside(path, b) for b in bound) and os.path.isfile(root + path):
            _mount(stub, root + path, None, MS_BIND)
            _read_only(root + path)
    os.makedirs(root + "/proc")
    os.makedirs(root + "/" + OLD_ROOT)
    _mount("none", root, None, MS_REMOUNT | MS_RDONLY | MS_NOSUID | MS_NODEV)
    return root


def enter_root(root: str) -> str:
    """In the new PID namespace: mount its /proc, switch to the new root, detach the host's."""
    try:
        _mount("proc", root + "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC)
        proc = "own /proc (sees only its own processes)"
    except OSError as exc:  # a host whose own /proc is partly covered forbids a new one
        _mount("no-proc", root + "/proc", "tmpfs", MS_NOSUID | MS_NODEV | MS_RDONLY, "size=4k,mode=555")
        proc = f"no /proc ({exc.strerror})"
    check(syscall("pivot_root", root.encode(), (root + "/" + OLD_ROOT).encode()), "pivot_root")
    os.chdir("/")
    check(libc.umount2(("/" + OLD_ROOT).encode(), MNT_DETACH), "detach the host root")
    os.chdir(WORK)
    return proc
