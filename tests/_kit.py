"""Helpers for the public tests: call a student function and fail like a teacher's comment.

Every failure names the call, what came back, what was expected and the handout section
to read (``module.function``, the heading used in handout.md).
"""

from __future__ import annotations

import functools
import math
import os
import sys
import textwrap
import traceback
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Callable, NoReturn

import pytest
import torch

import _rules
from _by_name import described


def section_of(fn: Callable[..., Any]) -> str:
    """The handout section of a student function: ``module.qualname`` (``optim.SGD``)."""
    module = getattr(fn, "__module__", "") or ""
    qualname = getattr(fn, "__qualname__", getattr(fn, "__name__", repr(fn)))
    return f"{module.rsplit('.', 1)[-1]}.{qualname.split('.')[0]}"


class NotImplementedYet(pytest.fail.Exception):
    """The failure of a test that reached a stub (counted as "not implemented", not shown one by one)."""


RULES_CHECKED: list[str] = []  # the ids of the handout rules the running test checks (conftest.py sets them)
HANDOUT = Path(__file__).resolve().parents[1] / "handout.md"


@functools.cache
def handout_rules() -> dict[str, _rules.Rule]:
    """The rules of the handout beside ``tests/`` (none where it is missing)."""
    return _rules.read(HANDOUT) if HANDOUT.is_file() else {}


def quoted(ids: Sequence[str]) -> list[str]:
    """The rules ``ids`` as a failure quotes them: ``[P5.x] <the handout's words> (handout.md, section ...)``."""
    return [handout_rules()[i].quote() if i in handout_rules() else f"[{i}]" for i in ids]

SHOWN_IN_FULL = 16  # a tensor of at most this many elements is shown as a literal that rebuilds it


def show_tensor(value: torch.Tensor) -> str:
    """A small tensor as the ``torch.tensor(...)`` call that rebuilds it exactly; a larger one as its
    dtype, shape and first values (then "...")."""
    device = "" if value.device.type == "cpu" else f", device='{value.device}'"
    data = value.detach().cpu()
    if data.is_floating_point() and data.dtype != torch.float64:
        data = data.float()  # every float16/bfloat16 value is a float32: its shortest repr round-trips
    if value.numel() <= SHOWN_IN_FULL:
        return f"torch.tensor({_literal(data)}, dtype={value.dtype}{device})"
    if bool((data == data.flatten()[0]).all()):
        return f"torch.full({tuple(value.shape)}, {_number(data.flatten()[0].item(), data.dtype)}, dtype={value.dtype}{device})"
    first = ", ".join(_number(x, data.dtype) for x in data.flatten()[:6].tolist())
    return f"tensor(dtype={value.dtype}, shape={tuple(value.shape)}{device}, values=[{first}, ...])"


def _literal(data: torch.Tensor) -> str:
    if data.dim() == 0:
        return _number(data.item(), data.dtype)
    return "[" + ", ".join(_literal(row) for row in data) + "]"


def _number(x: Any, dtype: torch.dtype | None = None) -> str:
    """The shortest text that gives ``x`` back in ``dtype`` (float32's shortest repr, not float64's)."""
    if dtype == torch.float32 and isinstance(x, float) and math.isfinite(x):
        for digits in range(1, 10):
            text = f"{x:.{digits}g}"
            if torch.tensor(float(text), dtype=torch.float32).item() == x:
                return repr(float(text))
    if isinstance(x, float) and not math.isfinite(x):
        return f"float('{x}')"
    return repr(x)


def show(value: Any, limit: int = 300) -> str:
    """A short, readable one-line repr (small tensors as the literal that rebuilds them, larger ones as
    dtype, shape and a few values); "..." only where something was left out."""
    if isinstance(value, torch.Tensor):
        return show_tensor(value)
    text = repr(value)
    one_line = " ".join(text.split())
    if len(one_line) <= limit:
        return one_line
    shortened = textwrap.shorten(one_line, limit, placeholder=" ...")
    return shortened if len(shortened) > 4 else one_line[: limit - 3] + "..."


def called_name(fn: Callable[..., Any]) -> str:
    """What was called, as the student wrote it: ``optim.AdaGrad.step`` for a method, not the class."""
    module = (getattr(fn, "__module__", "") or "").rsplit(".", 1)[-1]
    qualname = getattr(fn, "__qualname__", getattr(fn, "__name__", repr(fn)))
    return f"{module}.{qualname}"


def describe_call(fn: Callable[..., Any], args: tuple = (), kwargs: dict | None = None) -> str:
    parts = [show(a, 80) for a in args] + [f"{k}={show(v, 80)}" for k, v in (kwargs or {}).items()]
    return f"{called_name(fn)}({', '.join(parts)})"


def package_folder(fn: Callable[..., Any]) -> str:
    """The folder of the student's module that defines ``fn`` ("" when unknown)."""
    module = sys.modules.get(getattr(fn, "__module__", "") or "")
    return os.path.dirname(os.path.abspath(getattr(module, "__file__", "") or "")) if module else ""


def unwritten(exc: BaseException, folder: str | os.PathLike) -> bool:
    """Whether ``exc``, a NotImplementedError, was raised by a ``raise`` of the student's own code in ``folder`` (a
    stub or a part not written yet), not by a library it called: torch raises NotImplementedError for an operation
    a dtype or a device lacks (from C, so the innermost frame is the student's call), a failure to explain."""
    frames = traceback.extract_tb(exc.__traceback__)
    if not frames:
        return True
    innermost = frames[-1]
    return (os.path.dirname(os.path.abspath(innermost.filename)) == os.path.abspath(folder)
            and (innermost.line or "raise").lstrip().startswith("raise"))


def student_frames(fn: Callable[..., Any], exc: BaseException) -> str:
    """The frames of ``exc``'s traceback that lie in the student's package (file, line, source
    line), innermost last; the kit's and the libraries' frames are left out."""
    folder = package_folder(fn)
    if not folder:
        return ""
    mine = [frame for frame in traceback.extract_tb(exc.__traceback__)
            if os.path.dirname(os.path.abspath(frame.filename)) == folder]
    return "\n".join(f'  File "{shown_path(frame.filename)}", line {frame.lineno}, in {frame.name}'
                     + (f"\n    {frame.line.strip()}" if frame.line else "") for frame in mine)


def shown_path(path: str | os.PathLike) -> str:
    """A path as the student would type it: relative to the current folder when inside it."""
    try:
        relative = os.path.relpath(path)
    except ValueError:  # another drive on Windows
        return str(path)
    return str(path) if relative.startswith("..") else relative.replace(os.sep, "/")


def complain(call: str, got: Any, expected: str, section: str, why: str = "", hint: str = "",
             where: str = "", rules: Sequence[str] | None = None) -> NoReturn:
    """Fail the test with the standard message: called, returned, expected, [why], [hint], [where], the handout
    rules broken (``rules``, default: those the running test checks), read."""
    lines = [f"called:   {call}", f"returned: {got}", f"expected: {expected}"]
    if why:
        lines.append(f"why:      {why}")
    if hint:
        lines.append(f"hint:     {hint}")
    if where:
        lines.append(f"where:    your code raised it here (innermost last):\n{where}")
    lines += [f"rule:     {rule}" for rule in quoted(RULES_CHECKED if rules is None else rules)]
    lines.append(f"read:     handout.md, section '{section}'")
    raise pytest.fail.Exception("\n".join(lines), pytrace=False) from None  # no chained copy of a caught error


def not_implemented(fn: Callable[..., Any], args: tuple, kwargs: dict, exc: NotImplementedError,
                    expected: str = "a value, no exception") -> NoReturn:
    """Report a stub reached as work left to do; a NotImplementedError a library raised as the failure it is."""
    folder = package_folder(fn)
    if not folder or unwritten(exc, folder):  # a function of no known module: a stub, as before
        raise NotImplementedYet(f"{describe_call(fn, args, kwargs)}: {exc}", pytrace=False) from None
    complain(describe_call(fn, args, kwargs), f"raised {described(exc)} (in a library your code called)", expected,
             section_of(fn), where=student_frames(fn, exc))


def call(fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    """Call a student function; an exception becomes a readable failure (without the chained traceback)."""
    try:
        return fn(*args, **kwargs)
    except NotImplementedError as exc:
        not_implemented(fn, args, kwargs, exc)
    except Exception as exc:  # noqa: BLE001 - any student exception becomes a failure message
        complain(describe_call(fn, args, kwargs), f"raised {described(exc)}", "a value, no exception",
                 section_of(fn), where=student_frames(fn, exc))


def call_interrupted_in_rename(module: Any, fn: Callable[..., Any], *args: Any) -> tuple[BaseException | None, int]:
    """Call ``fn(*args)`` while ``os.replace``, ``os.rename`` and every global of ``module`` bound to one of them
    (``from os import replace``) raise KeyboardInterrupt, as Ctrl-C would as the temporary file is renamed: what
    it raised (None if it returned) and how many renames it tried (0: it moved the file some other way)."""
    renames: list[tuple] = []

    def interrupt(*rename_args: Any, **kwargs: Any) -> None:
        renames.append(rename_args)
        raise KeyboardInterrupt("Ctrl-C as the temporary file is renamed")

    originals = {(os, name): getattr(os, name) for name in ("replace", "rename")}
    renaming = list(originals.values())
    originals |= {(module, name): value for name, value in vars(module).items()
                  if any(value is function for function in renaming)}
    try:
        for owner, name in originals:
            setattr(owner, name, interrupt)
        fn(*args)
    except NotImplementedError as exc:
        not_implemented(fn, args, {}, exc)
    except BaseException as exc:  # noqa: BLE001 - the interrupt, or whatever replaced it
        return exc, len(renames)
    finally:
        for (owner, name), original in originals.items():
            setattr(owner, name, original)
    return None, len(renames)


def largest_difference(got: torch.Tensor, want: torch.Tensor) -> tuple[tuple[int, ...], float, float]:
    """Where two same-shaped tensors differ most: (index, got there, wanted there), as plain numbers."""
    difference = (got.detach().cpu().double() - want.detach().cpu().double()).abs()
    difference = torch.where(torch.isnan(difference), torch.full_like(difference, math.inf), difference)
    flat = int(difference.flatten().argmax()) if difference.numel() else 0
    index = tuple(int(i) for i in torch.unravel_index(torch.tensor(flat), got.shape)) if got.dim() else ()
    return index, got.detach().cpu()[index].item(), want.detach().cpu()[index].item()


def int_overflow_hint(got: Any, expected: Any) -> str:
    """A hint when two ints differ by a multiple of 2**32: a count that wrapped around in int32."""
    if type(got) is int and type(expected) is int and got != expected and (got - expected) % 2**32 == 0:
        return ("the difference is a multiple of 2**32: a count computed in int32 (a torch or numpy integer) "
                "wrapped around; compute with Python ints")
    return ""


def same_value(got: Any, expected: Any) -> bool:
    """Equal, with the same types all the way down: an int is a Python int (not a float, a bool or a
    numpy integer), a tuple a tuple (not a list or a torch.Size); NaN equals NaN and 0.0 is not -0.0."""
    if type(got) is not type(expected):
        return False
    if isinstance(expected, (tuple, list)):
        return len(got) == len(expected) and all(map(same_value, got, expected))
    if isinstance(expected, dict):
        return got.keys() == expected.keys() and all(same_value(got[k], expected[k]) for k in expected)
    if isinstance(expected, float) and (math.isnan(expected) or expected == 0):
        return (math.isnan(got) == math.isnan(expected) and (math.isnan(got) or got == 0)
                and math.copysign(1, got) == math.copysign(1, expected))
    return bool(got == expected)


def type_names(value: Any) -> str:
    """The types inside a value: ``tuple[float, float]``."""
    if isinstance(value, (tuple, list)):
        return f"{type(value).__name__}[{', '.join(map(type_names, value))}]"
    return type(value).__name__


def check_equal(fn: Callable[..., Any], *args: Any, expected: Any, why: str = "", **kwargs: Any) -> Any:
    """``fn(*args, **kwargs) == expected`` with the same types inside (an int is not a float, a tuple not a list)."""
    got = call(fn, *args, **kwargs)
    if not same_value(got, expected):
        complain(describe_call(fn, args, kwargs), f"{show(got)} ({type_names(got)})",
                 f"{show(expected)} ({type_names(expected)})", section_of(fn), why, int_overflow_hint(got, expected))
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
        not_implemented(fn, args, kwargs, exc, f"raises {exc_type.__name__}")
    except exc_type:
        return
    except Exception as exc:  # noqa: BLE001
        complain(describe_call(fn, args, kwargs), f"raised {described(exc)}",
                 f"raises {exc_type.__name__}", section_of(fn), why, where=student_frames(fn, exc))
    complain(describe_call(fn, args, kwargs), show(got), f"raises {exc_type.__name__}", section_of(fn), why)


def check_true(condition: bool, call_text: str, got: Any, expected: str, section: str, why: str = "",
               hint: str = "") -> None:
    """A free-form check for properties (stateful code, tensors compared in a custom way); a ``got``
    that is a string describes what happened and is shown as it is, not quoted."""
    if not condition:
        complain(call_text, " ".join(got.split()) if isinstance(got, str) else show(got), expected, section, why, hint)
