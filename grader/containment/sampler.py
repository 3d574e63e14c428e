"""One sampler for the readings containment takes while a call runs: ``sampled`` runs the call while a daemon
thread follows a schedule beside it (the GPU's utilization polled, ``gpu.activity``; the worker stopped and
continued, ``pauses.paused``)."""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable, Generator
from typing import TypeVar

T = TypeVar("T")

# A schedule's step samples (or acts), then yields the seconds to wait before its next step; it is closed as
# the call ends, so that its ``finally`` blocks undo what a step left half done.
Schedule = Generator[float, None, None]


def sampled(run: Callable[[], T], schedule: Schedule) -> T:
    """``run()``'s value while a daemon thread steps ``schedule``, waiting what each step yields or less: as
    ``run`` returns or raises, the thread stops waiting and closes ``schedule``, and only then does ``sampled``
    return. What ``schedule`` raised (a step, or its closing) is raised here once ``run`` has returned; what
    ``run`` raised comes first."""
    done = threading.Event()
    failed: list[BaseException] = []

    def follow() -> None:
        try:
            with contextlib.closing(schedule):
                for seconds in schedule:
                    if done.wait(seconds):
                        break
        except BaseException as exc:  # noqa: BLE001 - raised in the caller's thread
            failed.append(exc)

    thread = threading.Thread(target=follow, daemon=True)
    thread.start()
    try:
        value = run()
    finally:
        done.set()
        thread.join()
    if failed:
        raise failed[0]
    return value
