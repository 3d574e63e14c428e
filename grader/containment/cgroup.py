"""A kernel-enforced memory and process limit for one worker: a child of the grader's own cgroup.

Where the host mounts cgroup v2 with the memory controller delegated to the grader, one folder
holds ``memory.max`` (swap off), ``pids.max`` and ``cgroup.kill``. Where it mounts v1 (root in
a container, as on these machines), the memory controller's folder holds the memory limit
(``memory.memsw.limit_in_bytes`` too where swap accounting exists) and the pids controller's
the process limit. Pages of tmpfs files and memfds are charged to the cgroup of the process
that wrote them, so the limit counts what a resident-set watchdog cannot see.

``create`` returns ``None`` where the host gives no writable cgroup (then the watchdog is all).
"""

from __future__ import annotations

import itertools
import os
import signal
import time
from dataclasses import dataclass
from pathlib import Path

_names = itertools.count()


def _mounts() -> dict[str, tuple[Path, str]]:
    """controller ("memory", "pids", "cpu", "cpuacct", or "" for v2) -> (mount point, the mount's own root)."""
    found: dict[str, tuple[Path, str]] = {}
    with open("/proc/self/mountinfo") as handle:
        for line in handle:
            fields = line.split()
            fstype, options = fields[fields.index("-") + 1], fields[-1].split(",")
            if fstype == "cgroup2":
                found.setdefault("", (Path(fields[4]), fields[3]))
            elif fstype == "cgroup":
                for controller in ("memory", "pids", "cpu", "cpuacct"):
                    if controller in options:
                        found.setdefault(controller, (Path(fields[4]), fields[3]))
    return found


def _own_folder(controller: str, mounts: dict[str, tuple[Path, str]]) -> Path | None:
    """The folder of this process's cgroup for ``controller`` ("" for v2), if mounted."""
    if controller not in mounts:
        return None
    point, root = mounts[controller]
    for line in Path("/proc/self/cgroup").read_text().splitlines():
        _, controllers, path = line.split(":", 2)
        if (controller == "" and controllers == "") or controller in controllers.split(","):
            relative = os.path.relpath(path, root) if path.startswith(root) else path.lstrip("/")
            return (point / relative).resolve()
    return None


def own_folder(controller: str) -> Path | None:
    """This process's cgroup folder for a v1 ``controller`` (or v2's, for ""), if the host mounts it."""
    return _own_folder(controller, _mounts())


def _write(folder: Path, name: str, value: str) -> None:
    (folder / name).write_text(value)


@dataclass
class Cgroup:
    """One worker's cgroup: its folders (one for v2; memory, then pids and cpuacct where mounted, for v1)."""

    version: int
    folders: list[Path]
    memory_bytes: int
    processes: int  # 0: no pids controller
    swap: str  # how swap is handled
    cpu_folder: Path | None = None  # where CPU time is counted (v1: the cpuacct folder; None: not counted)

    def place(self, pids: set[int]) -> None:
        """Move ``pids`` (the worker's whole tree, before any of it runs student code) into the cgroup."""
        for folder in self.folders:
            for pid in sorted(pids):
                try:
                    _write(folder, "cgroup.procs", str(pid))
                except ProcessLookupError:
                    pass

    def pids(self) -> set[int]:
        found: set[int] = set()
        for folder in self.folders:
            try:
                found |= {int(p) for p in (folder / "cgroup.procs").read_text().split()}
            except OSError:
                pass
        return found

    def oom_killed(self) -> bool:
        """Whether the kernel killed a process of this cgroup for passing its memory limit."""
        name = "memory.events" if self.version == 2 else "memory.oom_control"
        try:
            lines = (self.folders[0] / name).read_text().splitlines()
        except OSError:
            return False
        counts = dict(line.split() for line in lines if len(line.split()) == 2)
        return int(counts.get("oom_kill", 0)) > 0

    def held_bytes(self) -> int:
        """Bytes charged to the cgroup now (anonymous memory, shared memory, tmpfs files, memfds, kernel
        memory, page cache its processes map), less the page cache none of them maps: read-ahead
        (8 MiB around each page fault on some hosts) and files read and closed, which the kernel drops
        at will. A mapped shared-memory page may count twice (an overcount only)."""
        folder = self.folders[0]
        if self.version == 2:
            usage, cache, shmem, mapped = "memory.current", "file", "shmem", "file_mapped"
        else:
            usage, cache, shmem, mapped = "memory.usage_in_bytes", "total_cache", "total_shmem", "total_mapped_file"
        stat = self._memory_stat()
        unmapped = int(stat[cache]) - int(stat[shmem]) - int(stat[mapped])
        return int((folder / usage).read_text()) - max(unmapped, 0)

    def _memory_stat(self) -> dict[str, str]:
        return dict(line.split() for line in (self.folders[0] / "memory.stat").read_text().splitlines())

    def page_faults(self) -> int | None:
        """Page faults, minor and major, of every task that ever ran in the cgroup (None where not counted)."""
        name = "pgfault" if self.version == 2 else "total_pgfault"
        try:
            return int(self._memory_stat()[name])
        except (OSError, KeyError, ValueError):
            return None

    def cpu_seconds(self) -> float | None:
        """User + system time of every task that ever ran in the cgroup (None where not counted)."""
        try:
            if self.version == 2:
                stat = dict(line.split() for line in (self.folders[0] / "cpu.stat").read_text().splitlines())
                return int(stat["usage_usec"]) / 1e6
            return int((self.cpu_folder / "cpuacct.usage").read_text()) / 1e9 if self.cpu_folder else None
        except (OSError, KeyError, ValueError):
            return None

    def kill(self) -> None:
        """SIGKILL every process in the cgroup, until none is left (forks racing the kill included)."""
        if self.version == 2:
            try:
                _write(self.folders[0], "cgroup.kill", "1")
            except OSError:
                pass
        for _ in range(50):
            pids = self.pids()
            if not pids:
                return
            for pid in pids:
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
            time.sleep(0.01)

    def remove(self) -> None:
        self.kill()
        for folder in self.folders:
            for _ in range(100):  # a killed process leaves its cgroup a moment after it is reaped
                try:
                    folder.rmdir()
                    break
                except FileNotFoundError:
                    break
                except OSError:
                    time.sleep(0.02)

    def describe(self) -> str:
        tasks = f", at most {self.processes} tasks" if self.processes else ", no task limit"
        return (f"cgroup v{self.version}: memory {self.memory_bytes >> 20} MiB counting shared memory and tmpfs, "
                f"{self.swap}{tasks}")


def _make(parent: Path, name: str) -> Path:
    """``parent/name``, after removing the empty cgroups left by graders that died without removing theirs."""
    for stale in parent.glob("grader-worker-*-*"):
        if not Path(f"/proc/{stale.name.split('-')[2]}").exists():
            try:
                stale.rmdir()
            except OSError:  # not empty yet, or already gone
                pass
    folder = parent / name
    folder.mkdir()
    return folder


def _accounting(parent: Path | None, name: str, made: list[Path]) -> Path | None:
    """A v1 cpuacct cgroup ``parent/name`` (added to ``made``) where the host lets the grader make one:
    it only counts CPU time, so without it the worker is still contained (and its time counted by /proc)."""
    if parent is None:
        return None
    try:
        made.append(_make(parent, name))
    except OSError:
        return None
    return made[-1]


def create(memory_bytes: int, processes: int) -> Cgroup | None:
    """A new cgroup for one worker under the grader's own, with its limits set; ``None`` if the host gives none."""
    mounts = _mounts()
    name = f"grader-worker-{os.getpid()}-{next(_names)}"
    made: list[Path] = []
    try:
        v1_memory = _own_folder("memory", mounts)
        if v1_memory is not None:
            made.append(_make(v1_memory, name))
            _write(made[0], "memory.limit_in_bytes", str(memory_bytes))
            swap = "swap not counted"
            if (made[0] / "memory.memsw.limit_in_bytes").exists():
                _write(made[0], "memory.memsw.limit_in_bytes", str(memory_bytes))
                swap = "swap counted"
            pids = _own_folder("pids", mounts)
            if pids is not None:
                made.append(_make(pids, name))
                _write(made[-1], "pids.max", str(processes))
            return Cgroup(1, made, memory_bytes, processes if pids is not None else 0, swap,
                          _accounting(_own_folder("cpuacct", mounts), name, made))
        v2 = _own_folder("", mounts)
        if v2 is None:
            return None
        made.append(_make(v2, name))
        if not (made[0] / "memory.max").exists():
            _write(v2, "cgroup.subtree_control", "+memory +pids")
        _write(made[0], "memory.max", str(memory_bytes))
        _write(made[0], "memory.swap.max", "0")
        _write(made[0], "memory.oom.group", "1")
        _write(made[0], "pids.max", str(processes))
        return Cgroup(2, made, memory_bytes, processes, "no swap", made[0])
    except OSError:
        for folder in reversed(made):
            try:
                folder.rmdir()
            except OSError:
                pass
        return None
