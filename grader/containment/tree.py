"""What a worker's whole process tree has used, read by the judge from outside it.

Figures come from the kernel, never from inside the worker (whatever it patches or forks):

- from the worker's cgroup where the host gives one (``containment.cgroup``): CPU time of every
  task that ever ran in it, and memory as the kernel charges it (anonymous pages, shared memory,
  memfds, tmpfs files, kernel memory and mapped page cache; not the page cache no process maps,
  such as read-ahead, which depends on the host's disk settings);
- else from a walk of the tree under the worker's first process: CPU time of the live processes
  plus what each has collected from its reaped children (``cutime``/``cstime``), and memory as
  the watchdog counts it (resident sets, memfds, private tmpfs files), with each process's
  high-water mark.

A peak is watched from a reading with ``reset_peak`` to the next: samples every millisecond (an
exited child's copy of anything large lasts longer than that), and the high-water marks.

Bytes read and written (``rchar`` and ``wchar``: read(2), write(2) and the like, pipes and
``O_DIRECT`` included) always come from the tree walk: the kernel adds a reaped child's count to
its parent's, so exited children are included. What the tree writes to a file is memory that
left the process (page cache no process maps, or the disk itself): the memory tests count it. Page
faults (a mapped page touched for the first time: what reading a file through mmap costs, which
rchar does not see) come from the cgroup (``pgfault``: every task that ever ran in it), else from
the tree walk (``minflt`` + ``majflt`` of each process with ``cminflt`` + ``cmajflt`` of its
reaped children, from /proc/<pid>/stat). How long the tree's threads were ready to run but waited for a
CPU comes from each live thread's /proc/<pid>/task/<tid>/schedstat (kernels with ``CONFIG_SCHED_INFO``).

Files the tree wrote where it may write to disk (the exchange folder) are read apart, when asked
(``held_files_bytes``): a file written through a shared mapping passes no write(2), and once unmapped its
pages are page cache no process maps, which the memory figures leave out.
"""

from __future__ import annotations

import contextlib
import os
import stat
import threading
from pathlib import Path

import psutil

from ..backend import Usage
from .cgroup import Cgroup

SAMPLE_SECONDS = 0.001
SCHEDSTAT = os.path.exists("/proc/self/schedstat")  # whether the kernel keeps each thread's wait for a CPU
OOM_FIRST = 1000  # the highest oom_score_adj: the first process the kernel ends when memory runs out
_HOST_SCRATCH = ("/tmp", "/dev/shm")


def processes(root: int) -> list[psutil.Process]:
    """``root`` and its live descendants (empty when ``root`` is gone)."""
    try:
        process = psutil.Process(root)
        return [process, *process.children(recursive=True)]
    except psutil.Error:
        return []


def pids(root: int) -> set[int]:
    """``root`` (even when gone) and the pids of its live descendants."""
    return {root} | {process.pid for process in processes(root)}


def ends_first(pids: set[int]) -> None:
    """Short of memory, the kernel ends these processes before any other (``oom_score_adj`` 1000; written
    as root, the floor they may lower it to is 1000 too): a worker, never the judge. Processes gone are skipped."""
    for pid in pids:
        with contextlib.suppress(OSError):
            Path(f"/proc/{pid}/oom_score_adj").write_text(str(OOM_FIRST))


def children(pid: int) -> set[int]:
    """The pids of ``pid``'s live children."""
    try:
        return {child.pid for child in psutil.Process(pid).children()}
    except psutil.Error:
        return set()


def owned_by(uid: int) -> set[int]:
    """The live processes whose real uid is ``uid``."""
    return {process.pid for process in psutil.process_iter(["uids"])
            if process.info["uids"] is not None and process.info["uids"].real == uid}


def resident_bytes(pids: set[int]) -> int:
    """The sum of the resident sets of ``pids`` (shared pages counted once per process)."""
    total = 0
    for pid in pids:
        try:
            total += psutil.Process(pid).memory_info().rss
        except psutil.Error:
            continue
    return total


def hidden_bytes(pids: set[int], uid: int | None) -> int:
    """Memory outside the resident set that the tree holds: its memfds (each counted once), its
    private tmpfs mounts (/tmp and /dev/shm of its own root) and, with a dedicated uid and no
    private root, that uid's files in the host's /dev/shm."""
    files: dict[tuple[int, int], int] = {}
    mounts: dict[int, int] = {}
    host = {os.stat(p).st_dev for p in _HOST_SCRATCH if os.path.isdir(p)}
    for pid in pids:
        try:
            fds = os.listdir(f"/proc/{pid}/fd")
        except OSError:
            continue
        for fd in fds:
            try:
                if os.readlink(f"/proc/{pid}/fd/{fd}").startswith("/memfd:"):
                    info = os.stat(f"/proc/{pid}/fd/{fd}")
                    files[(info.st_dev, info.st_ino)] = info.st_blocks * 512
            except OSError:
                continue
        for scratch in _HOST_SCRATCH:
            try:
                info, usage = os.stat(f"/proc/{pid}/root{scratch}"), os.statvfs(f"/proc/{pid}/root{scratch}")
            except OSError:
                continue
            if info.st_dev not in host:
                mounts[info.st_dev] = (usage.f_blocks - usage.f_bfree) * usage.f_frsize
    total = sum(files.values()) + sum(mounts.values())
    if uid is not None and not mounts:
        total += sum(f.stat().st_blocks * 512 for f in owned_files(Path("/dev/shm"), uid))
    return total


def owned_files(folder: Path, uid: int) -> list[Path]:
    """The files under ``folder`` that ``uid`` owns."""
    found = []
    for top, _, names in os.walk(folder):
        for name in names:
            path = Path(top, name)
            try:
                if path.lstat().st_uid == uid:
                    found.append(path)
            except OSError:
                continue
    return found


def memory_bytes(pids: set[int], uid: int | None) -> int:
    """What the tree ``pids`` holds, as the watchdog counts it where no cgroup does."""
    return resident_bytes(pids) + hidden_bytes(pids, uid)


def held_files_bytes(pids: set[int], folder: Path, uid: int | None) -> int:
    """Bytes on disk of the files the tree wrote on ``folder``'s filesystem (the one place it may write to
    disk): those under ``folder`` that ``uid`` owns, and those it holds open or maps (/proc/<pid>/fd and
    /proc/<pid>/map_files, the latter readable by root) that ``uid`` owns, named or not; with no dedicated
    ``uid``, only the unnamed ones it holds. Each file once."""
    try:
        device = folder.stat().st_dev
    except OSError:
        return 0
    found: dict[int, int] = {}

    def take(info: os.stat_result) -> None:
        if info.st_dev == device and stat.S_ISREG(info.st_mode) and (
                info.st_uid == uid if uid is not None else info.st_nlink == 0):
            found[info.st_ino] = info.st_blocks * 512

    for path in owned_files(folder, uid) if uid is not None else ():
        with contextlib.suppress(OSError):
            take(path.lstat())
    for pid in pids:
        for kind in ("fd", "map_files"):
            try:
                names = os.listdir(f"/proc/{pid}/{kind}")
            except OSError:
                continue
            for name in names:
                with contextlib.suppress(OSError):
                    take(os.stat(f"/proc/{pid}/{kind}/{name}"))
    return sum(found.values())


def _high_water_bytes(pid: int) -> int:
    with open(f"/proc/{pid}/status") as status:
        return next(int(line.split()[1]) * 1024 for line in status if line.startswith("VmHWM:"))


def _reset_high_water(pid: int) -> None:
    with open(f"/proc/{pid}/clear_refs", "w") as refs:
        refs.write("5")  # VmHWM := VmRSS


def _summed(tree: list[psutil.Process], figure) -> float:
    total = 0.0
    for process in tree:
        try:
            total += figure(process)
        except (psutil.Error, OSError, StopIteration):
            continue  # exited meanwhile: its parent has collected its share, or will
    return total


def _faults(process: psutil.Process) -> int:
    """Minor and major page faults of ``process`` and of its reaped children (/proc/<pid>/stat)."""
    with open(f"/proc/{process.pid}/stat") as stat:
        fields = stat.read().rpartition(")")[2].split()  # after the command name, which may hold spaces
    return sum(int(fields[i]) for i in (7, 8, 9, 10))  # minflt cminflt majflt cmajflt


def _waited(process: psutil.Process) -> float:
    """Seconds the live threads of ``process`` waited on a run queue (/proc/<pid>/task/<tid>/schedstat)."""
    total = 0
    for task in os.listdir(f"/proc/{process.pid}/task"):
        with contextlib.suppress(FileNotFoundError):  # a thread that ended meanwhile
            total += int(Path(f"/proc/{process.pid}/task/{task}/schedstat").read_text().split()[1])
    return total / 1e9


def _cpu(process: psutil.Process) -> float:
    times = process.cpu_times()
    return times.user + times.system + times.children_user + times.children_system


class Meter:
    """Readings of the tree under ``root``: through ``cgroup`` where given, else by walking it."""

    def __init__(self, root: int, cgroup: Cgroup | None = None, uid: int | None = None) -> None:
        self.root, self.cgroup, self.uid = root, cgroup, uid
        self._watch: threading.Event | None = None
        self._thread: threading.Thread | None = None
        self._highest = 0

    def read(self, reset_peak: bool = False) -> Usage:
        """The tree's usage now; a peak watch running since the last ``reset_peak`` ends here and
        gives ``peak_bytes``. ``reset_peak``: a new watch starts."""
        tree = processes(self.root)
        pids = {process.pid for process in tree}
        read = int(_summed(tree, lambda p: p.io_counters().read_chars))
        written = int(_summed(tree, lambda p: p.io_counters().write_chars))
        faults = self.cgroup.page_faults() if self.cgroup is not None else None
        if faults is None:
            faults = int(_summed(tree, _faults))
        cpu = self.cgroup.cpu_seconds() if self.cgroup is not None else None
        source = f"cgroup v{self.cgroup.version}" if self.cgroup is not None else "process tree"
        if cpu is None:
            cpu = _summed(tree, _cpu)
            source += " (CPU time: process tree)" if self.cgroup is not None else ""
        if self.cgroup is not None:
            memory = peak = self.cgroup.held_bytes()
        else:
            memory = memory_bytes(pids, self.uid)
            peak = int(_summed(tree, lambda p: _high_water_bytes(p.pid))) + hidden_bytes(pids, self.uid)
        peak = max(memory, peak, self._stop_watch())
        if reset_peak:
            self._start_watch(tree, memory)
        return Usage(cpu_seconds=cpu, memory_bytes=memory, peak_bytes=peak, read_bytes=read, written_bytes=written,
                     page_faults=faults, source=source,
                     waited_seconds=_summed(tree, _waited) if SCHEDSTAT else None)

    def close(self) -> None:
        self._stop_watch()

    def _start_watch(self, tree: list[psutil.Process], memory: int) -> None:
        self._highest = memory
        for process in tree:
            try:
                _reset_high_water(process.pid)
            except OSError:
                pass
        self._watch = threading.Event()
        self._thread = threading.Thread(target=self._sample, args=(self._watch,), daemon=True)
        self._thread.start()

    def _sample(self, watch: threading.Event) -> None:
        while not watch.wait(SAMPLE_SECONDS):
            try:
                used = self.cgroup.held_bytes() if self.cgroup is not None else \
                    memory_bytes({p.pid for p in processes(self.root)}, self.uid)
            except OSError:  # the worker's cgroup is gone: it was stopped
                return
            self._highest = max(self._highest, used)

    def _stop_watch(self) -> int:
        """End a sampled watch; the highest it saw (0 when none ran)."""
        if self._thread is None:
            return 0
        self._watch.set()
        self._thread.join()
        self._watch = self._thread = None
        return self._highest
