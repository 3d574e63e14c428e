"""Helpers for the public tests: call a student function and fail like a teacher's comment.

Every failure names the call, what came back, what was expected and the handout section
to read (``module.function``, the heading used in handout.md).
"""

from __future__ import annotations

import math
from typing import Any, Callable

import pytest
import torch


def section_of(fn: Callable[..., Any]) -> str:
    """The handout section of a student function: ``module.qualname`` (``optim.SGD``)."""
    module = getattr(fn, "__module__", "") or ""
    qualname = getattr(fn, "__qualname__", getattr(fn, "__name__", repr(fn)))
    return f"{module.rsplit('.', 1)[-1]}.{qualname.split('.')[0]}"


def show(value: Any, limit: int = 300) -> str:
    """A short, readable repr (tensors show dtype, shape and a few values)."""
    if isinstance(value, torch.Tensor):
        text = f"tensor(dtype={value.dtype}, shape={tuple(value.shape)}, device={value.device}, values={value.detach().flatten()[:6].tolist()}{'...' if value.numel() > 6 else ''})"
    else:
        text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def describe_call(fn: Callable[..., Any], args: tuple = (), kwargs: dict | None = None) -> str:
    parts = [show(a, 80) for a in args] + [f"{k}={show(v, 80)}" for k, v in (kwargs or {}).items()]
    return f"{section_of(fn)}({', '.join(parts)})"


def complain(call: str, got: Any, expected: str, section: str, why: str = "") -> None:
    """Fail the test with the standard four-line message."""
    lines = [f"called:   {call}", f"returned: {got}", f"expected: {expected}"]
    if why:
        lines.append(f"why:      {why}")
    lines.append(f"read:     handout.md, section '{section}'")
    pytest.fail("\n".join(lines), pytrace=False)


def call(fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    """Call a student function; an exception becomes a readable failure."""
    try:
        return fn(*args, **kwargs)
    except NotImplementedError as exc:
        pytest.fail(f"{describe_call(fn, args, kwargs)} is not implemented yet: {exc}", pytrace=False)
    except Exception as exc:  # noqa: BLE001 - any student exception becomes a failure message
        complain(describe_call(fn, args, kwargs), f"raised {type(exc).__name__}: {exc}", "a value, no exception", section_of(fn))


def check_equal(fn: Callable[..., Any], *args: Any, expected: Any, why: str = "", **kwargs: Any) -> Any:
    """``fn(*args, **kwargs) == expected`` with the same type (an int is not a float, a tuple not a list)."""
    got = call(fn, *args, **kwargs)
    same = type(got) is type(expected) and got == expected
    if isinstance(expected, float) and isinstance(got, float) and math.isnan(expected):
        same = math.isnan(got) and math.copysign(1, got) == math.copysign(1, expected)
    elif isinstance(expected, float) and isinstance(got, float) and expected == 0:
        same = got == 0 and math.copysign(1, got) == math.copysign(1, expected)
    if not same:
        complain(describe_call(fn, args, kwargs), f"{show(got)} ({type(got).__name__})",
                 f"{show(expected)} ({type(expected).__name__})", section_of(fn), why)
    return got


def check_close(fn: Callable[..., Any], *args: Any, expected: Any, rtol: float = 1e-6, atol: float = 0.0,
                why: str = "", **kwargs: Any) -> Any:
    """Numbers or tensors within tolerance (tensors must also match shape and dtype)."""
    got = call(fn, *args, **kwargs)
    if isinstance(expected, torch.Tensor):
        ok = (isinstance(got, torch.Tensor) and got.shape == expected.shape and got.dtype == expected.dtype
              and torch.allclose(got.detach().cpu().double(), expected.detach().cpu().double(), rtol=rtol, atol=atol))
    else:
        ok = isinstance(got, (int, float)) and not isinstance(got, bool) and math.isclose(got, expected, rel_tol=rtol, abs_tol=atol)
    if not ok:
        complain(describe_call(fn, args, kwargs), show(got), f"{show(expected)} (rtol={rtol}, atol={atol})",
                 section_of(fn), why)
    return got


def check_raises(exc_type: type[BaseException], fn: Callable[..., Any], *args: Any, why: str = "", **kwargs: Any) -> None:
    """``fn(*args, **kwargs)`` raises ``exc_type`` (or a subclass)."""
    try:
        got = fn(*args, **kwargs)
    except NotImplementedError as exc:
        pytest.fail(f"{describe_call(fn, args, kwargs)} is not implemented yet: {exc}", pytrace=False)
    except exc_type:
        return
    except Exception as exc:  # noqa: BLE001
        complain(describe_call(fn, args, kwargs), f"raised {type(exc).__name__}: {exc}",
                 f"raises {exc_type.__name__}", section_of(fn), why)
    else:
        complain(describe_call(fn, args, kwargs), show(got), f"raises {exc_type.__name__}", section_of(fn), why)


def check_true(condition: bool, call_text: str, got: Any, expected: str, section: str, why: str = "") -> None:
    """A free-form check for properties (stateful code, tensors compared in a custom way)."""
    if not condition:
        complain(call_text, show(got), expected, section, why)
