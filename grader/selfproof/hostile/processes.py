"""The processes an attack leaves behind: the check is the subreaper of everything it starts, so
that an escapee is re-parented to it, and a process carrying the attack's marker is found wherever
it runs. Processes are read through psutil (``grader.containment.tree``), never parsed from /proc here."""

from __future__ import annotations

import ctypes
import os
import signal
import threading

import psutil

from ...containment import tree

PR_SET_CHILD_SUBREAPER = 36


def _live(processes) -> list[tuple[psutil.Process, str]]:
    """Each of ``processes`` that still runs (not a zombie), with its command line."""
    found = []
    for process in processes:
        try:
            if process.status() != psutil.STATUS_ZOMBIE:
                found.append((process, " ".join(process.cmdline())))
        except psutil.Error:
            continue
    return found


class Reaper:
    """Makes this process the subreaper of everything it starts, and finds (and reaps) escapees."""

    def __init__(self) -> None:
        self.tracked: set[int] = set()
        self.lock = threading.Lock()
        ctypes.CDLL(None).prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)

    def close(self) -> None:
        self.orphans()
        ctypes.CDLL(None).prctl(PR_SET_CHILD_SUBREAPER, 0, 0, 0, 0)

    def orphans(self) -> list[str]:
        """Children of this process that it did not start itself: killed, reaped and described."""
        me, found = os.getpid(), []
        live = _live(tree.processes(me)[1:])
        with self.lock:  # after the walk: a grading it found was started, and tracked, before (one lock holds both)
            tracked = set(self.tracked)
        for process, cmdline in live:
            if process.pid not in tracked and _parent(process) == me:
                found.append(f"{process.pid}: {cmdline[:100]}")
                try:
                    os.kill(process.pid, signal.SIGKILL)
                    os.waitpid(process.pid, 0)
                except (OSError, ChildProcessError):
                    pass
        return found


def _parent(process: psutil.Process) -> int | None:
    try:
        return process.ppid()
    except psutil.Error:
        return None


def _tagged(tags: list[str]) -> list[tuple[psutil.Process, str]]:
    """Every process of the host but this one whose command line carries one of ``tags``."""
    return [(process, cmdline) for process, cmdline in _live(psutil.process_iter())
            if process.pid != os.getpid() and any(tag in cmdline for tag in tags)]


def left_behind(tags: list[str]) -> list[str]:
    """Processes whose command line carries one of ``tags`` (the attack's marker; the grading's
    folder, which every worker's command line names, and its forks inherit)."""
    found = []
    for process, cmdline in _tagged(tags):
        try:
            uid = process.uids().real
        except psutil.Error:
            continue
        found.append(f"{process.pid} (uid {uid}): {cmdline[:100]}")
    return found


def kill_left_behind(tags: list[str]) -> None:
    for process, _ in _tagged(tags):
        try:
            os.kill(process.pid, signal.SIGKILL)
        except OSError:
            pass
