"""The seccomp deny-list every worker runs under, generated with libseccomp (``pyseccomp``).

Denied (EPERM): new namespaces (``unshare``, ``setns``, ``clone`` with a namespace flag; ``clone3``
answers ENOSYS, so the C library falls back to ``clone``, whose flags can be inspected), every
mount call, ``ptrace`` and cross-process memory access, ``bpf``, the key store, ``perf_event_open``,
kernel modules, ``kexec``, ``reboot``, swap, ``userfaultfd``, and asynchronous I/O (Linux AIO, ``io_setup``
and its calls, and io_uring): no problem needs it, and the file bytes it moves pass no counter the judge reads
(``rchar``, page cache, page faults). Nor do they need file locks (``flock``, ``fcntl``'s record and
open-file-description locks, taking or testing one) or file watches (inotify, fanotify): kernel state on an
inode that every sandbox can read, so two workers would signal through a file of the interpreter.

The worker loads the filter itself once its interpreter runs (``start_programs=False``): then it also refuses to
start a program (``execve``, ``execveat``), since a fresh interpreter would run text without the worker's audit
hook (``tests/_by_name.py``). Bubblewrap loads the filter without that part around what it starts itself. Another architecture's calls (32-bit calls on a 64-bit host) kill the
process: libseccomp's default for a foreign ABI.

The filter is exported as BPF: bubblewrap loads it with ``--seccomp FD``; the fallback worker
loads the same bytes itself with ``prctl`` before it imports the submission.
"""

from __future__ import annotations

import errno
import tempfile

DENIED = ("unshare", "setns", "mount", "umount", "umount2", "pivot_root", "chroot", "move_mount", "open_tree",
          "fsopen", "fsconfig", "fsmount", "fspick", "mount_setattr", "ptrace", "process_vm_readv",
          "process_vm_writev", "bpf", "keyctl", "add_key", "request_key", "perf_event_open", "init_module",
          "finit_module", "delete_module", "kexec_load", "kexec_file_load", "reboot", "swapon", "swapoff",
          "userfaultfd", "io_setup", "io_destroy", "io_submit", "io_cancel", "io_getevents", "io_pgetevents",
          "io_uring_setup", "io_uring_enter", "io_uring_register", "flock", "inotify_init", "inotify_init1",
          "inotify_add_watch", "fanotify_init", "fanotify_mark")
PROGRAMS = ("execve", "execveat")
# fcntl's lock commands: F_GETLK, F_SETLK, F_SETLKW, F_GETLK64 .. F_SETLKW64 (32-bit ABIs), F_OFD_GETLK ..
LOCK_COMMANDS = (5, 6, 7, 12, 13, 14, 36, 37, 38)
NAMESPACE_FLAGS = {"CLONE_NEWNS": 0x00020000, "CLONE_NEWCGROUP": 0x02000000, "CLONE_NEWUTS": 0x04000000,
                   "CLONE_NEWIPC": 0x08000000, "CLONE_NEWUSER": 0x10000000, "CLONE_NEWPID": 0x20000000,
                   "CLONE_NEWNET": 0x40000000}
BY_NUMBER = ("pivot_root", "capset", "mount_setattr")  # what the hand-written confinement calls through syscall(2)
SUMMARY = ("seccomp deny-list: namespaces, mounts, ptrace, bpf, keys, perf events, kernel modules, kexec, reboot, "
           "userfaultfd, asynchronous I/O (AIO, io_uring), file locks and watches, starting programs")


def _bindings():
    """The libseccomp bindings, or ``None`` where the module or the C library is missing."""
    try:
        import pyseccomp
    except Exception:  # noqa: BLE001 - ImportError, or the C library not found as it loads
        return None
    return pyseccomp


def deny_filter(start_programs: bool = True) -> bytes | None:
    """The filter as BPF (a ``struct sock_filter`` array), or ``None`` without libseccomp; refusing ``PROGRAMS``
    too where ``start_programs`` is False."""
    seccomp = _bindings()
    if seccomp is None:
        return None
    refuse = seccomp.ERRNO(errno.EPERM)
    rules = seccomp.SyscallFilter(seccomp.ALLOW)
    for name in DENIED + (() if start_programs else PROGRAMS):
        try:
            rules.add_rule(refuse, name)
        except (OSError, ValueError):  # a call this architecture does not have
            continue
    for flag in NAMESPACE_FLAGS.values():
        rules.add_rule(refuse, "clone", seccomp.Arg(0, seccomp.MASKED_EQ, flag, flag))
    for command in LOCK_COMMANDS:
        rules.add_rule(refuse, "fcntl", seccomp.Arg(1, seccomp.EQ, command))
    rules.add_rule(seccomp.ERRNO(errno.ENOSYS), "clone3")
    with tempfile.TemporaryFile() as stream:
        rules.export_bpf(stream)
        stream.seek(0)
        return stream.read()


def numbers(names: tuple[str, ...]) -> dict[str, int]:
    """This architecture's numbers of ``names``, as libseccomp knows them ({} without it); a call it
    does not know is left out. For the hand-written confinement, which calls them through syscall(2)."""
    seccomp = _bindings()
    if seccomp is None:
        return {}
    found = {}
    for name in names:
        try:
            number = seccomp.resolve_syscall(seccomp.Arch.NATIVE, name)
        except (OSError, ValueError):
            continue
        if number >= 0:
            found[name] = number
    return found


def describe(available: bool) -> str:
    return SUMMARY if available else "no syscall filter (libseccomp or its Python bindings are missing)"
