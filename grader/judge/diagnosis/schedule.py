"""When a judge session names known mistakes, and within what time: the plugin reports each failed test
here (``failed``) and the end of the suite (``finish``); this decides when the diagnosis runs.

A failed test is diagnosed at once from its recording (a replay on the catalog's variants), except for
the problems a probe diagnoses (P7, P8: ``PROBES``), whose failures wait for the end of the suite: a
probe starts fresh workers of the submission, and by then the suite's own workers are closed. Each
diagnosis gets at most ``DIAGNOSIS_SECONDS`` (per test, and in all) and a quarter of what is left of
the submission's budget, and the time it takes is given back to the problem it diagnosed.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from ...record import TestRecord
from ..budget import Budget
from ..handle import Recording, Submission

DIAGNOSIS_SECONDS = (60.0, 240.0)  # at most per failed test, and in all, for naming known mistakes


def diagnosis_seconds(deadline: float | None, spent: float) -> float:
    """How long the next diagnosis may take: ``DIAGNOSIS_SECONDS`` less what was ``spent``, and at most a
    quarter of what is left of the submission's time budget."""
    most = min(DIAGNOSIS_SECONDS[0], DIAGNOSIS_SECONDS[1] - spent)
    return most if deadline is None else min(most, (deadline - time.monotonic()) / 4)


class Schedule:
    """Names the known mistakes of one judge session's failed tests, each within its time.
    ``reword`` cleans a message as the plugin cleans every failure's."""

    def __init__(self, budget: Budget, reword: Callable[[str], str]) -> None:
        self.budget = budget
        self.reword = reword
        self.spent = 0.0
        self.probed: list[TestRecord] = []  # failed tests of the problems a probe diagnoses, for ``finish``
        self.diagnoser = None  # made at the first failure: it imports the catalog of known mistakes

    def failed(self, record: TestRecord, submission: Submission) -> None:
        """A test failed in its call: name its mistakes now, or after the suite where a probe diagnoses them."""
        from . import PROBES

        if record.problem in PROBES:
            self.probed.append(record)
            return
        seconds, started = diagnosis_seconds(self.budget.end, self.spent), time.monotonic()
        self._name(record, self._diagnoser().diagnose(record.problem, submission.recording, seconds)
                   if seconds > 0 else [])
        elapsed = time.monotonic() - started
        self.spent += elapsed
        self.budget.give_back(elapsed)  # the judge's own work costs the student's problem nothing

    def finish(self, submission: Submission) -> None:
        """The suite is over: the failed tests a probe diagnoses, each problem probed once."""
        for record in self.probed:
            seconds, started = diagnosis_seconds(self.budget.end, self.spent), time.monotonic()
            test = record.nodeid.rsplit("::", 1)[-1].split("[", 1)[0]
            self._name(record, self._diagnoser().diagnose(record.problem, Recording(), seconds, submission, test)
                       if seconds > 0 else [])
            self.spent += time.monotonic() - started
        self.probed = []

    def _diagnoser(self):
        from . import Diagnoser

        self.diagnoser = self.diagnoser or Diagnoser()
        return self.diagnoser

    def _name(self, record: TestRecord, mistakes: list) -> None:
        """Put the known ``mistakes`` (``Mistake``) in the failed test's record, and before its message."""
        from . import feedback

        record.mistakes = [mistake.id for mistake in mistakes]
        if mistakes:
            record.message = self.reword(f"{feedback(mistakes)}\n{record.message}")
