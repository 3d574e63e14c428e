"""The contract between the judge and a worker backend (the contained worker, or in process).

A backend runs one submission's code: it answers request frames (``request``), is started
explicitly (``start``: the package imported, on the clock given) or by its first request, and
is measured (``measure``, and on a GPU ``measure_gpu``; what a file of the judge's lost to the page cache:
``page_cache_bytes``; a call run while the worker is stopped and continued: ``paused_call``) and shares a
folder with the judge from outside the worker.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Protocol, TypeVar

from . import wire

T = TypeVar("T")


@dataclass(frozen=True)
class Usage:
    """One reading of a worker's tree, all of it since the worker started unless said otherwise."""

    cpu_seconds: float  # user + system time of every process of the tree, exited ones included
    memory_bytes: int  # memory the tree holds now
    peak_bytes: int  # the most it held since the last reading with ``reset_peak`` (at least ``memory_bytes``)
    read_bytes: int  # bytes read through read(2) and the like (rchar), exited children included
    written_bytes: int  # bytes written through write(2) and the like (wchar, O_DIRECT too), exited children included
    page_faults: int  # page faults, minor and major, of every process of the tree, exited ones included
    source: str  # what counted CPU time and memory: "cgroup v1", "cgroup v2" or "process tree"
    waited_seconds: float | None = None  # how long the live threads of the tree were ready to run but waited for
    # a CPU (/proc/<pid>/task/<tid>/schedstat); None where the kernel does not keep it


@dataclass(frozen=True)
class GpuUsage:
    """What a worker's processes hold for the GPU now, read from outside them (``containment.gpu``)."""

    device_bytes: int | None  # device memory the NVIDIA driver (NVML) lists for them; None when NVML cannot say
    pinned_host_bytes: int  # their shared /dev/zero mappings: where CUDA maps page-locked host memory
    unavailable: str  # why NVML cannot say ("" when it can)


@dataclass(frozen=True)
class GpuActivity:
    """What the GPU did while a call ran (``containment.gpu``): the energy the board drew above its idle draw
    (None where the board has no energy counter) and the mean utilization polled every 10 ms."""

    seconds: float
    joules: float | None
    utilization: float


class WorkerFailure(Exception):
    """The worker timed out, crashed, broke the protocol or used too much memory."""


OnCallback = Callable[[dict], dict]


@dataclass(frozen=True)
class Exchange:
    """A folder both sides see: ``host`` is its path in the judge, ``inside`` the path to give
    student code (relative to the worker's working folder, or absolute in process)."""

    host: Path
    inside: str

    def path(self, name: str) -> str:
        """The path of ``name`` in the exchange folder as the worker sees it."""
        return f"{self.inside}/{name}"


class Backend(Protocol):
    isolation: dict[str, str]
    import_error: wire.Raised | None
    restarts: int

    def start(self, timeout: float) -> None:
        """Have the worker running, its package imported (within ``timeout`` seconds); raises WorkerFailure."""

    def request(self, message: dict, timeout: float, on_callback: OnCallback | None = None) -> dict: ...

    def worker_pid(self) -> int | None: ...

    def measure(self, reset_peak: bool = False) -> Usage | None: ...

    def measure_files(self) -> int | None:
        """Bytes on disk of the files the worker wrote where it may write to disk, read from outside it; None
        when not running."""

    def measure_gpu(self) -> GpuUsage | None:
        """What the worker's processes hold for the GPU, read from outside them; None when not running."""

    def evict_page_cache(self, fd: int) -> None:
        """Drop the clean pages of the judge's file behind ``fd`` from the page cache (``containment.pagecache``)."""

    def page_cache_bytes(self, fd: int) -> int:
        """How many bytes of the judge's file behind ``fd`` are in the page cache now, whoever brought them in."""

    def paused_call(self, call: Callable[[], T], stop_seconds: float, running_share: float) -> tuple[T, float]:
        """``call()``'s value (a request of the judge's) while every process of the worker's tree is stopped
        ``stop_seconds`` at a time and continued, from outside it, so that it runs ``running_share`` of the
        call's wall time (``containment.pauses``), and the share of that wall time it stood still; raises
        WorkerFailure where the worker cannot be stopped."""

    def exchange(self) -> Exchange: ...

    def sibling(self, withheld: Any = None) -> Backend:
        """A separate worker of the same submission; ``withheld`` (a ``confined.config.Withheld``): library code it runs without."""

    def close(self) -> None: ...
