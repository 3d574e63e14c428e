"""CPU-seconds (user + system) of a whole process tree, counted by the kernel.

A fresh cgroup (v1 ``cpuacct``, or v2 with ``cpu.stat``) holds the command started in it and
everything it starts, so processes that leave their parent (a worker behind bubblewrap's PID
namespace, a daemonized child) are still counted. Where no writable cgroup exists it falls back
to RUSAGE_CHILDREN, which counts only descendants reaped through this process, and says so.
"""

from __future__ import annotations

import os
import resource
import secrets
import subprocess
import time
from pathlib import Path

V1 = Path("/sys/fs/cgroup/cpuacct")


def _v2_root() -> Path | None:
    for line in Path("/proc/self/cgroup").read_text().splitlines():
        if line.startswith("0::"):
            folder = Path("/sys/fs/cgroup") / line[3:].lstrip("/")
            return folder if (folder / "cpu.stat").exists() and os.access(folder, os.W_OK) else None
    return None


class TreeCPU:
    """Commands started with ``popen`` are counted in ``used()``; ``how`` says what counted them."""

    def __init__(self) -> None:
        name = f"kit-bench-{os.getpid()}-{secrets.token_hex(3)}"
        parent = V1 if (V1 / "cpuacct.usage").exists() and os.access(V1, os.W_OK) else _v2_root()
        self.folder = parent / name if parent else None
        if self.folder:
            try:
                self.folder.mkdir()
            except OSError:
                self.folder = None
        self.how = (f"cgroup {self.folder} (the whole tree)" if self.folder else
                    "RUSAGE_CHILDREN (no writable cgroup: processes not reaped through this one are missed)")

    def used(self) -> float:
        if self.folder is None:
            usage = resource.getrusage(resource.RUSAGE_CHILDREN)
            return usage.ru_utime + usage.ru_stime
        if (self.folder / "cpuacct.usage").exists():
            return int((self.folder / "cpuacct.usage").read_text()) / 1e9
        stat = dict(line.split() for line in (self.folder / "cpu.stat").read_text().splitlines())
        return int(stat["usage_usec"]) / 1e6

    def _enter(self) -> None:
        (self.folder / "cgroup.procs").write_text("0")

    def popen(self, argv: list[str], **kwargs) -> subprocess.Popen:
        """Start ``argv`` inside the cgroup (read ``used()`` before and after it)."""
        return subprocess.Popen(argv, preexec_fn=self._enter if self.folder else None, **kwargs)

    def close(self) -> None:
        """Remove the cgroup, once its last process (a moment after it is reaped) has left it."""
        for _ in range(100):
            try:
                if self.folder:
                    self.folder.rmdir()
                return
            except OSError:
                time.sleep(0.05)
