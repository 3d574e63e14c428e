"""A call run while its worker is stopped and continued from outside, over and over (``paused``): work timed
inside the call stretches with the time the worker stood still, at moments it cannot foresee. The schedule (how
long each stop lasts, the share of the call the worker runs) is the judge's to choose and is passed in (P4's
driver, ``grader/judge/drivers/flops.py``); keeping to it and measuring what it did are containment's."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TypeVar

from .sampler import Schedule, sampled

T = TypeVar("T")


def paused(run: Callable[[], T], pause: Callable[[bool], None], stop_seconds: float,
           running_share: float) -> tuple[T, float]:
    """``run()``'s value while ``pause`` stops the worker ``stop_seconds`` at a time and lets it run in between
    for as long as keeps its running share of the wall time at ``running_share`` (running counted from each
    continue's sending to the next stop's delivery: whatever a stop or a continue takes to send and however late
    the sampler's thread wakes, the share holds, however the machine is loaded), and the share of ``run``'s
    wall time the worker stood still (at most 0.99). The worker is continued before ``paused`` returns."""
    stopped = 0.0

    def running_left() -> float:  # before the next stop: the running share after it is running_share
        running = time.perf_counter() - begin - stopped
        return max(0.0, running_share / (1 - running_share) * (stopped + stop_seconds) - running)

    def stop_and_go() -> Schedule:  # counts only the time between the stop's delivery and the continue's sending
        nonlocal stopped
        while True:
            yield running_left()
            pause(True)
            stop = time.perf_counter()
            try:
                yield stop_seconds
            finally:
                stopped += time.perf_counter() - stop
                pause(False)

    begin = time.perf_counter()
    value = sampled(run, stop_and_go())
    return value, min(stopped / max(time.perf_counter() - begin, 1e-9), 0.99)
