"""P4: time the submission's matmul timer against a timing the judge takes itself.

The reference timing runs in the judge process; the submission's ``time_matmul`` /
``matmul_mfu`` run in the worker, and the judge also takes, from outside, the wall time around
each of those calls (a timer that reports products it never ran cannot have taken less wall time
than they need) and the CPU time the worker's whole process tree spent over the rounds (a timer
that sleeps instead of computing spends none; ``Submission.measure``). Rounds interleave the two, so that load on the machine affects them alike.
In a few extra rounds placed at random, the judge stops and continues the worker's whole tree over
and over while the call runs (``Submission.paused_call``, on this driver's schedule): a timing of the products
stretches with the time the worker stood still, a forecast made before the call cannot know which
calls those are. On CUDA the GPU's work is read from outside too (``gpu_work``): the energy the
board draws above idle while the judge runs products and while the submission's timer runs the same
number (NVML), so that a timer that reports a CUDA-event time for one product and sleeps through the
rest draws next to nothing. CPU timings run on one thread on both sides: on a busy grading machine a multi-threaded matmul
waits for a descheduled sibling thread and its time jumps by 10-30x from one call to the next,
while a single thread only slows down with the load.
"""

from __future__ import annotations

import contextlib
import functools
import math
import random
import time
from collections.abc import Iterator
from dataclasses import dataclass, field

import torch

from ...backend import GpuActivity
from .sides import JUDGE, one_thread

WARMUP = 3
GPU_BUSY_SECONDS = 1.0  # long enough for the board's energy counter and a 10 ms utilization poll
# The pauses' schedule is a judging decision, passed to containment (``Submission.paused_call``, which keeps
# to it and measures the share stopped): while a paused call runs, the worker stands still STOP_SECONDS at a
# time, over and over, and runs RUNNING_SHARE of the call's wall time (counted from each continue's sending to
# the next stop's delivery), whatever a stop or a continue takes to send (a cold worker's tree has more
# processes than a forked one's) and however late containment's thread wakes: about a twelfth of the call
# however the machine is loaded, which a scheduler that lets a stopped task catch up afterwards cannot give
# back.
RUNNING_SHARE, STOP_SECONDS = 0.08, 0.029


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
    """Per round: the judge's reference seconds per product, the submission's answer, the wall time
    the judge measured around the submission's call, the judge's CPU time per product, the CPU time
    the worker's tree spent in the call and how long its threads waited for a CPU (None where the
    kernel does not say), and the share of the call's wall time the judge kept the worker stopped (0:
    a round not paused)."""

    reference: list[float] = field(default_factory=list)
    student: list = field(default_factory=list)
    wall: list[float] = field(default_factory=list)
    reference_cpu: list[float] = field(default_factory=list)
    spent: list[float] = field(default_factory=list)
    waited: list[float | None] = field(default_factory=list)
    stopped: list[float] = field(default_factory=list)

    @property
    def cpu(self) -> float:
        """The CPU time the worker's whole tree spent in all the calls."""
        return sum(self.spent)

    def free(self) -> list[float]:
        """The answers of the rounds the judge did not pause."""
        return [value for value, share in zip(self.student, self.stopped) if not share]

    def calls(self) -> list[Call]:
        """Every round's call, as measured from outside."""
        return [Call(*row) for row in zip(self.student, self.wall, self.spent, self.waited, self.stopped)]

    def paused(self) -> list[Call]:
        """The paused rounds' calls."""
        return [row for row in self.calls() if row.stopped]


@dataclass(frozen=True)
class Call:
    """A round's call: the submission's answer, the call's wall time, the CPU time the worker's tree
    spent in it and how long it waited for a CPU (None: not known), and the share of the call's wall
    time the judge kept it stopped (0: not paused)."""

    answer: float
    wall: float
    spent: float
    waited: float | None
    stopped: float

    def stretch(self) -> float:
        """How many seconds of wall time a CPU-second of the worker took in this call, measured from
        outside: over the share of the wall time it was not stopped, and over the share of a core it had
        while ready to run (its CPU time over that plus its wait for a CPU; taken as a whole core where
        the kernel does not say), or, where less, the call's wall time over the CPU time it spent (less
        for a call that computed throughout, more for one that also slept)."""
        core = self.spent / (self.spent + self.waited) if self.waited is not None and self.spent > 0 else 1.0
        return min(self.wall / max(self.spent, 1e-9), 1 / (core * (1 - self.stopped)))


def timed_rounds(sub, target: str, args: tuple, reference_repeats: int, rounds: int = 5, timeout: float = 60,
                 paused: int = 0, **kwargs) -> Rounds:
    """``rounds`` rounds of (reference timing in the judge, ``sub.call(target, *args)`` timed from
    outside); ``paused`` more, placed at random among them, where the call runs paused (``Submission.paused_call``)."""
    m, k, n, dtype, device = args[:5]
    found = Rounds()
    order = [False] * rounds + [True] * paused
    random.SystemRandom().shuffle(order)
    with cpu_timing(sub, device):
        for stopping in order:
            seconds, cpu = reference_seconds(m, k, n, dtype, device, reference_repeats)
            found.reference.append(seconds)
            found.reference_cpu.append(cpu)
            call = functools.partial(sub.call, target, *args, timeout=timeout, **kwargs)
            before, begin = sub.measure(), time.perf_counter()
            value, share = sub.paused_call(call, STOP_SECONDS, RUNNING_SHARE) if stopping else (call(), 0.0)
            found.wall.append(time.perf_counter() - begin)
            after = sub.measure()
            found.spent.append(after.cpu_seconds - before.cpu_seconds)
            found.waited.append(None if after.waited_seconds is None or before.waited_seconds is None
                                else max(0.0, after.waited_seconds - before.waited_seconds))
            found.student.append(value)
            found.stopped.append(share)
    return found


@dataclass(frozen=True)
class GpuWork:
    """What the GPU did, read from outside (NVML), while the judge ran ``repeats`` products and while
    the submission's ``time_matmul`` ran as many; None where NVML could not say (``why``)."""

    repeats: int
    judge: GpuActivity | None
    student: GpuActivity | None
    why: str


def gpu_work(sub, n: int, dtype: torch.dtype, seconds_per_product: float) -> GpuWork:
    """``time_matmul(n, n, n, dtype, "cuda", repeats=R)`` beside R products in the judge, R chosen so
    that each lasts about ``GPU_BUSY_SECONDS``, with the GPU's activity during each."""
    repeats = max(10, math.ceil(GPU_BUSY_SECONDS / seconds_per_product))
    idle = sub.gpu_idle_watts()
    _, judge = sub.gpu_activity(lambda: reference_seconds(n, n, n, dtype, "cuda", repeats), idle)
    _, student = sub.gpu_activity(
        lambda: sub.call("flops.time_matmul", n, n, n, dtype, "cuda", repeats=repeats, timeout=120), idle)
    return GpuWork(repeats, judge, student, sub.gpu_unavailable() or "")
