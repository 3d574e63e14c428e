"""How a judge session shares its time budget among its problems, so that none can starve another.

A judge session grades its problems one after another. When the first test of a problem starts,
the problem gets a slice: an equal share of the time left before the session's deadline among the
problems not started yet, itself included. A problem that needs less hands what it leaves on to
the later ones (their shares are taken from the time then left); the last one gets all that is
left. A problem that stalls spends its own slice and no more: its call in flight is cut off at the
slice's end, and its tests not judged by then fail with "P1 used up its time budget" (those that
finished keep their verdicts).
"""

from __future__ import annotations

import math
import time


class Budget:
    """The time of one judge session: ``seconds`` from now (None: no limit), shared among its problems."""

    def __init__(self, seconds: float | None = None) -> None:
        self.end = None if seconds is None else time.monotonic() + seconds
        self.problem = ""
        self.deadline: float | None = None  # the current problem's
        self.slice = 0.0

    def start(self, problem: str, later: int) -> None:
        """Give ``problem`` its slice, with ``later`` problems still to come after it in this session;
        nothing when it already has one (call it as each of its tests starts)."""
        if problem == self.problem:
            return
        self.problem = problem
        if self.end is not None:
            self.slice = max(0.0, self.end - time.monotonic()) / (1 + later)
            self.deadline = time.monotonic() + self.slice

    def left(self) -> float:
        """Seconds left to the current problem (infinite: no limit)."""
        return math.inf if self.deadline is None else self.deadline - time.monotonic()

    def spent(self) -> bool:
        """Whether the current problem has used up its slice."""
        return self.left() <= 0

    def why(self) -> str:
        """The reason a test of the current problem was not judged once its slice is spent."""
        return f"{self.problem} used up its time budget ({self.slice:.0f} s)"

    def give_back(self, seconds: float) -> None:
        """Time the judge spent on its own work inside a problem (naming a known mistake after a
        failure) goes back to that problem's slice, never past the session's end."""
        if self.deadline is not None and self.end is not None:
            self.deadline = min(self.end, self.deadline + seconds)
