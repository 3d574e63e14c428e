"""Probes for P4 (flops.py): time the student's matmul timer against an independent timing.

Both timings run in the same worker process, on the same machine, interleaved round by round,
so that load on the machine affects them alike. The judge compares what comes back. CPU
timings run on one thread: on a busy grading machine a multi-threaded matmul waits for a
descheduled sibling thread and its time jumps by 10-30x from one call to the next, while a
single thread only slows down with the load, alike on both sides.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator
from types import ModuleType

import torch

WARMUP = 3


def reference_seconds(m: int, k: int, n: int, dtype: torch.dtype, device: str, repeats: int) -> float:
    """Mean seconds of one (m x k) @ (k x n) product, timed independently of the student's code.

    On CUDA with CUDA events recorded on the stream around the products (they measure GPU time,
    whatever the host does); on the CPU with ``time.perf_counter``. Warm-up first in both cases.
    """
    device = torch.device(device)
    a = torch.randn(m, k, dtype=dtype, device=device)
    b = torch.randn(k, n, dtype=dtype, device=device)
    for _ in range(WARMUP):
        torch.mm(a, b)
    if device.type == "cuda":
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        torch.cuda.synchronize(device)
        start.record()
        for _ in range(repeats):
            torch.mm(a, b)
        end.record()
        end.synchronize()
        return start.elapsed_time(end) / 1000 / repeats
    begin = time.perf_counter()
    for _ in range(repeats):
        torch.mm(a, b)
    return (time.perf_counter() - begin) / repeats


@contextlib.contextmanager
def steady_threads(device: str) -> Iterator[None]:
    """One intra-op thread while timing on the CPU (restored afterwards); nothing changes on CUDA."""
    if torch.device(device).type != "cpu":
        yield
        return
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(threads)


def time_matmul_rounds(flops: ModuleType, m: int, k: int, n: int, dtype: torch.dtype, device: str,
                       repeats: int | float, rounds: int = 5) -> dict:
    """``rounds`` rounds of (independent timing, ``flops.time_matmul(..., repeats=repeats)``)."""
    reference, student = [], []
    with steady_threads(device):
        for _ in range(rounds):
            reference.append(reference_seconds(m, k, n, dtype, device, int(repeats)))
            student.append(flops.time_matmul(m, k, n, dtype, device, repeats=repeats))
    return {"reference": reference, "student": student}


def matmul_mfu_rounds(flops: ModuleType, m: int, k: int, n: int, dtype: torch.dtype, device: str,
                      peak_flops_per_second: float, rounds: int = 5) -> dict:
    """``rounds`` rounds of (independent timing with 10 repeats, ``flops.matmul_mfu(...)``)."""
    reference, student = [], []
    with steady_threads(device):
        for _ in range(rounds):
            reference.append(reference_seconds(m, k, n, dtype, device, 10))
            student.append(flops.matmul_mfu(m, k, n, dtype, device, peak_flops_per_second))
    return {"reference": reference, "student": student}
