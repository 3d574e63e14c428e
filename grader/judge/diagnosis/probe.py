"""What the probes of stateful problems share (``checkpoint`` for P7, ``amp`` for P8).

A probe is one fixed sequence of calls the judge makes on the student's functions, in fresh workers
of the submission (``of_student``), and on each known variant's module, IN THE JUDGE (kit code,
called through ``attempt``). Its ``Signature`` maps each observation's name to what the judge itself
observed. A variant is named on a failed test when its signature is the student's (``alike``), the
reference's is not, and the student's differs from the reference's in an observation that bears on
that test (``bears_on``).
"""

from __future__ import annotations

from typing import Any, Callable

from ... import wire
from ..budget import Budget
from ..drivers.answers import same
from ..drivers.sides import copy, unwrap
from ..handle import OutOfTime, Submission

Signature = dict[str, Any]  # observation -> what was observed
UNMEASURED = "unmeasured"  # an observation the judge could not make of this side: evidence of nothing


def attempt(function: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    """What ``function`` returned (as it would cross the wire), or the ``wire.Raised`` of what it raised."""
    try:
        return copy(function(*unwrap(args), **unwrap(kwargs)))
    except Exception as exc:  # noqa: BLE001 - the exception's type is the observation
        return wire.decode(wire.encode_exception(exc))


def raised(value: Any) -> str:
    """The qualified name of the exception ``value`` carries ("" for a value)."""
    return value.types[0] if isinstance(value, wire.Raised) else ""


def alike(a: Any, b: Any) -> bool:
    """Two observations (or signatures, observation by observation) are the same behaviour: ``same`` with
    floats and tensors close (a mistake written another way may round differently); an observation
    ``UNMEASURED`` on either side is alike to anything."""
    if type(a) is dict and type(b) is dict and a.keys() == b.keys():
        return all(alike(a[key], b[key]) for key in a)
    return _unmeasured(a) or _unmeasured(b) or same(a, b, close=True)


def _unmeasured(value: Any) -> bool:
    return type(value) is str and value == UNMEASURED


def bears_on(test: str, observed: Signature, reference: Signature, observed_by: dict[str, tuple[str, ...]]) -> bool:
    """Whether ``observed`` differs from ``reference`` in an observation that bears on the hidden test ``test``
    (``observed_by[test]``; any observation for a test not listed)."""
    return any(not alike(observed.get(key), reference.get(key)) for key in observed_by.get(test, observed.keys()))


def of_student(submission: Submission, seconds: float, problem: str, workers: int,
               probe: Callable[..., Signature]) -> Signature | None:
    """``probe(*fresh)`` on ``workers`` fresh workers of the submission, every call cut off after ``seconds``;
    None when they fail, run out of time, or answer anything the probe cannot read (nothing is known then)."""
    budget = Budget(seconds)
    budget.start(problem, later=0)
    fresh = [Submission(submission.backend.sibling(), submission.source_dir, budget, submission.call_seconds)
             for _ in range(workers)]
    try:
        return probe(*fresh)
    except (Exception, OutOfTime):  # noqa: BLE001 - StudentError included: whatever the workers did
        return None
    finally:
        for worker in fresh:
            worker.close()
