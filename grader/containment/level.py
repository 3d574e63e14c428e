"""The isolation this host gives a worker, named as the ``isolation`` record and ``selfcheck`` say it."""

from __future__ import annotations

from dataclasses import dataclass

from . import bubblewrap, cgroup, syscalls

STRONG = ("namespaces", "syscall filter", "memory limit")


@dataclass(frozen=True)
class Level:
    mechanism: str  # e.g. "bubblewrap + seccomp + cgroup v1"
    lacks: tuple[str, ...]  # which of STRONG this host cannot give, each with why

    @property
    def strong(self) -> bool:
        return not self.lacks


def mechanism(confinement: str, filtered: bool, group: cgroup.Cgroup | None) -> str:
    """``confinement``: "bubblewrap", "hand-written namespaces" or "rlimits only"."""
    parts = [confinement] + (["seccomp"] if filtered else []) + ([f"cgroup v{group.version}"] if group else [])
    return " + ".join(parts)


def _namespaces_work() -> str:
    """Empty when the hand-written namespaces can be made here (tried in a throwaway child)."""
    import ctypes
    import os

    flags = 0x00020000 | 0x40000000 | 0x08000000 | 0x20000000 | (0 if os.geteuid() == 0 else 0x10000000)
    child = os.fork()
    if child == 0:
        os._exit(0 if ctypes.CDLL(None, use_errno=True).unshare(flags) == 0 else 1)
    _, status = os.waitpid(child, 0)
    return "" if os.waitstatus_to_exitcode(status) == 0 else "the kernel refuses new namespaces"


def host() -> Level:
    """What a worker started now would get (each mechanism tried, nothing left behind)."""
    lacks = []
    why_not_bwrap = bubblewrap.why_not_usable()
    confinement = "bubblewrap" if not why_not_bwrap else "hand-written namespaces"
    why_not_by_hand = _namespaces_work() if why_not_bwrap else ""
    if why_not_by_hand:
        confinement = "rlimits only"
        lacks.append(f"namespaces ({why_not_bwrap}; {why_not_by_hand})")
    filtered = syscalls.deny_filter() is not None
    if not filtered:
        lacks.append(f"syscall filter ({syscalls.describe(False)})")
    group = cgroup.create(64 << 20, 16)
    if group is None:
        lacks.append("memory limit (no writable cgroup: a watchdog polls the worker's memory instead)")
    else:
        group.remove()
    return Level(mechanism(confinement, filtered, group), tuple(lacks))
