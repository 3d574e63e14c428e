"""The problem set's plain types, and what is graded when an argument has the wrong type.

Answers are compared with ``drivers/answers.py``: ``same(got, want)`` with the same type all the way
down, so that ``(12.0, 4.0, 1.0)``, ``torch.Size([3, 2])`` or ``np.int64(6)`` do not pass for
``(12, 4, 1)``, ``(3, 2)`` or ``6``. The public tests apply the same rule (``tests/_kit.py``,
``check_equal``).

``refused_or_as_for(sub, target, args, like)`` is the one check for an argument of the wrong
type (a float or a bool where an int is asked, a string where a number is, a number where a
sequence is): the contract grades no particular behaviour there, so raising ValueError or
TypeError passes, and so does answering what the submission answers for ``like``, the same
call spelled in the right type (``(2, 3)`` for ``(2, 3.0)``). Value errors (a negative count,
2.5 as a count, an unsupported dtype) are graded with ``sub.raises``.
"""

from __future__ import annotations

from typing import Any

from grader import wire
from grader.judge.drivers.answers import same_value
from grader.judge.handle import StudentError, describe

WRONG_TYPE_ERRORS: tuple[type[BaseException], ...] = (ValueError, TypeError)


def type_tree(value: Any) -> str:
    """The types inside a value, for messages: ``tuple[float, float]``."""
    if isinstance(value, (tuple, list)):
        return f"{type(value).__name__}[{', '.join(type_tree(v) for v in value)}]"
    return type(value).__name__


def refused_or_as_for(sub, target: str, args: tuple, like: tuple | None = None,
                      errors: tuple[type[BaseException], ...] = WRONG_TYPE_ERRORS) -> None:
    """``target(*args)`` with an argument of the wrong type raises one of ``errors``, or answers what
    ``target(*like)`` answers (``like``: the same arguments in the right type; None where there is none)."""
    got = sub.attempt(target, *args)
    accepted = " or ".join(error.__name__ for error in errors)
    alternative = f", or the answer to {describe(target, like)}" if like is not None else ""
    what = describe(target, args)
    if isinstance(got, wire.Raised):
        if not any(got.is_a(error) for error in errors):
            raise StudentError(f"{what} raised {got}, expected {accepted}{alternative} (a wrong type: either is accepted)")
        return
    if like is None:
        raise StudentError(f"{what} returned {got!r:.200}, expected it to raise {accepted}")
    want = sub.attempt(target, *like)
    if isinstance(want, wire.Raised) or not same_value(got, want):
        raise StudentError(f"{what} returned {got!r:.200}, expected {accepted}{alternative} "
                           f"({'which raised ' + str(want) if isinstance(want, wire.Raised) else repr(want)[:200]})")


def answers(sub, target: str, args: tuple, want: Any, kwargs: dict | None = None) -> None:
    """Error paths count only beside working code: ``target(*args)``, a valid call, answers ``want``
    (as a value: ``same_value``) in the same test as the error cases, so a function that always
    raises, whatever its exception's classes, earns no error-path points."""
    what = describe(target, args, kwargs or {})
    got = sub.attempt(target, *args, **(kwargs or {}))
    if isinstance(got, wire.Raised) or not same_value(got, want):
        raise StudentError(f"{what} {'raised ' if isinstance(got, wire.Raised) else 'returned '}{got!r}, expected "
                           f"{want!r}: a function earns its error-path points only when it also answers a valid call")
