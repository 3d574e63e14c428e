"""Stopping a worker's whole process tree, and watching its memory where no cgroup caps it.

The judge becomes a child subreaper, so that a worker's escaped descendants (double-forked,
``setsid``) are re-parented to it and can be found and killed. Killing a worker kills its
process group, its tree, its cgroup and, with a dedicated uid, every process of that uid.
"""

from __future__ import annotations

import ctypes
import os
import signal
import subprocess
import threading
import time
from typing import Callable

from . import tree
from .cgroup import Cgroup
from .running import RUNNING

PR_SET_CHILD_SUBREAPER = 36


def become_subreaper() -> None:
    """Orphans of a worker (double-forked, setsid) are re-parented to the judge, so they can be found."""
    ctypes.CDLL(None).prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)


def _kill(pids: set[int]) -> None:
    for pid in pids:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass


def kill_tree(root: int, uid: int | None, cgroup: Cgroup | None) -> None:
    """Kill the worker started as ``root``: its group, its tree, its uid's processes, its cgroup."""
    doomed = tree.pids(root) | (tree.owned_by(uid) if uid is not None else set())
    try:
        os.killpg(root, signal.SIGKILL)
    except ProcessLookupError:
        pass
    _kill(doomed)
    if cgroup is not None:
        cgroup.kill()


def reap_orphans(seconds: float = 10.0) -> None:
    """Kill and reap processes re-parented to the judge (a worker's escaped descendants), sparing
    the judge's other running workers. Reaped in any order, as they end: a PID namespace's first process
    ends only once every process of its namespace has been reaped, and one of them may be an orphan here."""
    for _ in range(3):
        orphans = tree.children(os.getpid()) - RUNNING
        orphans |= {d for pid in orphans for d in tree.pids(pid)}
        if not orphans:
            return
        _kill(orphans)
        deadline = time.monotonic() + seconds
        while orphans and time.monotonic() < deadline:
            for pid in list(orphans):
                try:
                    if os.waitpid(pid, os.WNOHANG)[0] == 0:
                        continue
                except ChildProcessError:
                    pass
                orphans.discard(pid)
            if orphans:
                time.sleep(0.005)


class MemoryWatch:
    """Kills a worker whose tree holds more than ``cap`` bytes (where no cgroup does: the kernel's
    count is exact, a sum of resident sets counts shared pages once per process)."""

    def __init__(self, proc: subprocess.Popen, cap: int, uid: int | None, kill: Callable[[], None]) -> None:
        self.proc, self.cap, self.uid, self.kill = proc, cap, uid, kill
        self.killed = False

    def thread(self) -> threading.Thread:
        return threading.Thread(target=self.watch, daemon=True)

    def watch(self) -> None:
        """Sample the tree ten times a second (finding its processes once a second) until the worker ends."""
        beat, pids = 0, {self.proc.pid}
        while self.proc.poll() is None:
            if beat % 10 == 0:
                pids = tree.pids(self.proc.pid)
            if self.stopped_over(pids):
                return
            beat += 1
            time.sleep(0.1)

    def stopped_over(self, pids: set[int] | None = None) -> bool:
        """Kill the worker if the tree ``pids`` (default: as it is now) holds more than the cap; whether it did."""
        if tree.memory_bytes(pids or tree.pids(self.proc.pid), self.uid) <= self.cap:
            return False
        self.killed = True
        self.kill()
        return True
