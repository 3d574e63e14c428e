"""What a worker does on the GPU, read by the judge from outside it: the NVIDIA driver (NVML) and the
kernel's view of the worker's mappings, never a figure the worker reports about itself.

Seen on an H200 (driver 580.159, torch 2.11, ``python -m grader.bench.gpu_readings``):

- the device memory NVML lists for a process follows its CUDA allocations (1 GiB allocated:
  +1 GiB; emptied cache: back), for the host pid the judge knows;
- the board's energy counter separates work from waiting: back-to-back 8192^3 bf16 products drew
  about 690 W, a process that ran one product and slept about 120 W (the idle board, 78 W);
  device utilization polled every 10 ms read 89% and 0.5%;
- a pinned host buffer (``pin_memory()``, ``cudaHostAlloc``) appears as a new shared mapping of
  ``/dev/zero`` in the process's ``/proc/<pid>/maps`` (a 4 KiB batch: a 2 MiB mapping); a copy from
  pageable memory adds none.

What a worker's processes hold (``usage``: device memory, pinned host memory) reaches the judge
through its backend (``Backend.measure_gpu``), which knows the worker's processes; the board's own
readings (``idle_watts``, ``activity``) are the judge's to take, asked through its handle
(``Submission.gpu_idle_watts``, ``Submission.gpu_activity``). Every reading returns None where
NVML (``nvidia-ml-py``) cannot answer, with the reason kept (``unavailable``): a GPU runner is
accepted (``grader selfcheck --gpu``) only where they answer.
"""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any, Callable

from ..backend import GpuActivity, GpuUsage
from .sampler import Schedule, sampled

POLL_SECONDS = 0.01


_FOUND: dict[int, tuple[Any, str]] = {}  # this process's lookup, by pid (a forked child looks again)


def _lookup() -> tuple[Any, str]:
    """NVML and the handle of device 0, or None and why NVML cannot be used here."""
    try:
        import pynvml

        pynvml.nvmlInit()
        return (pynvml, pynvml.nvmlDeviceGetHandleByIndex(0)), ""
    except ImportError:
        return None, "nvidia-ml-py (pynvml) is not installed in the judge's Python"
    except Exception as exc:  # noqa: BLE001 - no driver, no device: one answer, unavailable
        return None, f"NVML failed: {exc}"


def _device():
    """NVML and the handle of device 0, or None when NVML cannot be used here: looked up (``nvmlInit``)
    once per process, its failure kept for ``unavailable``."""
    pid = os.getpid()
    if pid not in _FOUND:
        _FOUND.clear()
        _FOUND[pid] = _lookup()
    return _FOUND[pid][0]


def unavailable() -> str | None:
    """Why NVML cannot read the GPU from outside here (None when it can)."""
    _device()
    return _FOUND[os.getpid()][1] or None


def device_bytes(pids: set[int]) -> int | None:
    """The device memory the NVIDIA driver lists for ``pids`` (their CUDA contexts and allocations),
    summed; 0 when none of them has a context; None when NVML cannot say."""
    found = _device()
    if found is None:
        return None
    nvml, handle = found
    try:
        listed = nvml.nvmlDeviceGetComputeRunningProcesses(handle)
    except nvml.NVMLError:
        return None
    return sum(p.usedGpuMemory or 0 for p in listed if p.pid in pids)


def pinned_host_bytes(pids: set[int]) -> int:
    """The bytes of the shared ``/dev/zero`` mappings of ``pids``: where CUDA maps the page-locked
    host memory it hands out (``cudaHostAlloc``, torch's ``pin_memory``), read from /proc."""
    total = 0
    for pid in pids:
        try:
            lines = Path(f"/proc/{pid}/maps").read_text().splitlines()
        except OSError:
            continue
        for line in lines:
            fields = line.split(maxsplit=5)
            if len(fields) == 6 and fields[1].endswith("s") and fields[5].startswith("/dev/zero"):
                start, end = (int(v, 16) for v in fields[0].split("-"))
                total += end - start
    return total


def usage(pids: set[int]) -> GpuUsage:
    """What the processes ``pids`` hold for the GPU, read from outside them: how a backend answers
    ``measure_gpu`` for its worker's processes."""
    return GpuUsage(device_bytes=device_bytes(pids), pinned_host_bytes=pinned_host_bytes(pids),
                    unavailable=unavailable() or "")


def idle_watts(seconds: float = 0.5) -> float | None:
    """The board's draw while nothing runs on it (None without an energy counter)."""
    found = _device()
    if found is None:
        return None
    nvml, handle = found
    try:
        before = nvml.nvmlDeviceGetTotalEnergyConsumption(handle)
        time.sleep(seconds)
        return (nvml.nvmlDeviceGetTotalEnergyConsumption(handle) - before) / 1000 / seconds
    except nvml.NVMLError:
        return None


def activity(run: Callable[[], object], idle: float | None) -> tuple[object, GpuActivity | None]:
    """``run()``'s result and what the GPU did meanwhile (None when NVML cannot say); ``idle``: the
    board's idle draw in watts, subtracted from the energy. Utilization is polled every POLL_SECONDS
    (``sampler``), until the call ends or NVML refuses a reading."""
    found = _device()
    if found is None:
        return run(), None
    nvml, handle = found
    polled: list[int] = []

    def utilization() -> Schedule:
        try:
            while True:
                polled.append(nvml.nvmlDeviceGetUtilizationRates(handle).gpu)
                yield POLL_SECONDS
        except nvml.NVMLError:
            return

    try:
        before = nvml.nvmlDeviceGetTotalEnergyConsumption(handle)
    except nvml.NVMLError:
        before = None
    begin = time.perf_counter()
    result = sampled(run, utilization())
    seconds = time.perf_counter() - begin
    joules = None
    if before is not None and idle is not None:
        joules = (nvml.nvmlDeviceGetTotalEnergyConsumption(handle) - before) / 1000 - idle * seconds
    return result, GpuActivity(seconds, joules, sum(polled) / len(polled) if polled else 0.0)
