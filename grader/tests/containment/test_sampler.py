"""Containment's one sampler (``grader/containment/sampler.py``) and the pauses it keeps
(``grader/containment/pauses.py``), with a stand-in for the worker's stop and continue."""

from __future__ import annotations

import time

import pytest

from grader.containment.pauses import paused
from grader.containment.sampler import Schedule, sampled


def test_a_schedule_steps_while_the_call_runs_and_is_closed_before_it_returns():
    steps, closed = [], []

    def every_10ms() -> Schedule:
        try:
            while True:
                steps.append(time.perf_counter())
                yield 0.01
        finally:
            closed.append(len(steps))

    assert sampled(lambda: time.sleep(0.2) or "value", every_10ms()) == "value"
    assert closed == [len(steps)] and len(steps) >= 3, steps


def test_what_a_schedule_raises_is_raised_once_the_call_returned():
    returned = []

    def failing() -> Schedule:
        yield 0.0
        raise RuntimeError("the reading failed")

    with pytest.raises(RuntimeError, match="the reading failed"):
        sampled(lambda: returned.append(time.sleep(0.05)), failing())
    assert returned == [None]


def test_what_the_call_raises_comes_first():
    def failing() -> Schedule:
        raise RuntimeError("the reading failed")
        yield 0.0

    def call() -> None:
        time.sleep(0.05)
        raise ValueError("the call failed")

    with pytest.raises(ValueError, match="the call failed"):
        sampled(call, failing())


def test_pauses_keep_the_running_share_and_end_continued():
    """Stopped 29 ms at a time, running 8% of the call: stopped about 92% of it (the sampler's thread waking late
    stretches a stop, never the running share), and the last word is a continue."""
    sent: list[bool] = []
    value, share = paused(lambda: time.sleep(0.5) or 7, sent.append, 0.029, 0.08)
    assert value == 7 and 0.85 <= share <= 0.99, share
    assert sent and sent == [True, False] * (len(sent) // 2), sent
