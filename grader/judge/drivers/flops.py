"""P4: time the submission's matmul timer against a timing the judge takes itself.

The reference timing runs in the judge process; the submission's ``time_matmul`` /
``matmul_mfu`` run in the worker, and the judge also takes, from outside, the wall time around
each of those calls (a timer that reports products it never ran cannot have taken less wall time
than they need) and the CPU time the worker's whole process tree spent over the rounds (a timer
that sleeps instead of computing spends none; ``Submission.measure``). Rounds interleave the two, so that load on the machine affects them alike.
On CUDA the GPU's work is read from outside too (``gpu_work``): the energy the board draws above
idle while the judge runs products and while the submission's timer runs the same number (NVML),
so that a timer that reports a CUDA-event time for one product and sleeps through the rest draws
next to nothing. CPU timings run on one thread on both sides: on a busy grading machine a multi-threaded matmul
waits for a descheduled sibling thread and its time jumps by 10-30x from one call to the next,
while a single thread only slows down with the load.
"""

from __future__ import annotations

import contextlib
import math
import time
from collections.abc import Iterator
from dataclasses import dataclass, field

import torch

from ...containment import gpu
from .local import JUDGE, one_thread

WARMUP = 3
GPU_BUSY_SECONDS = 1.0  # long enough for the board's energy counter and a 10 ms utilization poll


def reference_seconds(m: int, k: int, n: int, dtype: torch.dtype, device: str, repeats: int) -> tuple[float, float]:
    """Mean seconds of one (m x k) @ (k x n) product, timed in the judge, and the CPU time this
    thread spent per product meanwhile.

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
        cpu = time.thread_time()
        start.record()
        for _ in range(repeats):
            torch.mm(a, b)
        end.record()
        end.synchronize()
        return start.elapsed_time(end) / 1000 / repeats, (time.thread_time() - cpu) / repeats
    begin, cpu = time.perf_counter(), time.thread_time()
    for _ in range(repeats):
        torch.mm(a, b)
    return (time.perf_counter() - begin) / repeats, (time.thread_time() - cpu) / repeats


@contextlib.contextmanager
def cpu_timing(sub, device: str) -> Iterator[None]:
    """One intra-op thread in the judge and in the worker while timing on the CPU (restored after)."""
    if torch.device(device).type != "cpu":
        yield
        return
    with one_thread(JUDGE), one_thread(sub):
        yield


@dataclass
class Rounds:
    """Per round: the judge's reference seconds per product, the submission's answer, and the
    wall time the judge measured around the submission's call; the judge's CPU time per product
    in each round, and the CPU time the worker's whole tree spent over all the rounds."""

    reference: list[float] = field(default_factory=list)
    student: list = field(default_factory=list)
    wall: list[float] = field(default_factory=list)
    reference_cpu: list[float] = field(default_factory=list)
    cpu: float = 0.0


def timed_rounds(sub, target: str, args: tuple, reference_repeats: int, rounds: int = 5, timeout: float = 60,
                 **kwargs) -> Rounds:
    """``rounds`` rounds of (reference timing in the judge, ``sub.call(target, *args)`` timed from outside)."""
    m, k, n, dtype, device = args[:5]
    found = Rounds()
    with cpu_timing(sub, device):
        spent = sub.measure().cpu_seconds
        for _ in range(rounds):
            seconds, cpu = reference_seconds(m, k, n, dtype, device, reference_repeats)
            found.reference.append(seconds)
            found.reference_cpu.append(cpu)
            begin = time.perf_counter()
            found.student.append(sub.call(target, *args, timeout=timeout, **kwargs))
            found.wall.append(time.perf_counter() - begin)
        found.cpu = sub.measure().cpu_seconds - spent
    return found


@dataclass(frozen=True)
class GpuWork:
    """What the GPU did, read from outside (NVML), while the judge ran ``repeats`` products and while
    the submission's ``time_matmul`` ran as many; None where NVML could not say (``why``)."""

    repeats: int
    judge: gpu.Activity | None
    student: gpu.Activity | None
    why: str


def gpu_work(sub, n: int, dtype: torch.dtype, seconds_per_product: float) -> GpuWork:
    """``time_matmul(n, n, n, dtype, "cuda", repeats=R)`` beside R products in the judge, R chosen so
    that each lasts about ``GPU_BUSY_SECONDS``, with the GPU's activity during each."""
    repeats = max(10, math.ceil(GPU_BUSY_SECONDS / seconds_per_product))
    idle = gpu.idle_watts()
    _, judge = gpu.activity(lambda: reference_seconds(n, n, n, dtype, "cuda", repeats), idle)
    _, student = gpu.activity(
        lambda: sub.call("flops.time_matmul", n, n, n, dtype, "cuda", repeats=repeats, timeout=120), idle)
    return GpuWork(repeats, judge, student, gpu.unavailable() or "")
