"""Checks of the ``grader`` command's option values, one function per kind of value.

Each is an argparse ``type``: it returns the parsed value or raises ``ArgumentTypeError`` with
a message that names what is wrong, so that every option is refused before any work starts.
"""

from __future__ import annotations

import argparse
import math
import os
import re
from pathlib import Path
from typing import Callable

from .problems import PROBLEMS, RANGE
from .rules import reader

MIN_MEMORY_MB = 64  # below this not even an empty interpreter starts


def _number(text: str, kind: type) -> float:
    try:
        value = kind(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected {'an integer' if kind is int else 'a number'}, "
                                         f"got {text!r}") from None
    if kind is float and not math.isfinite(value):
        raise argparse.ArgumentTypeError(f"expected a finite number, got {text!r}")
    return value


def jobs(text: str) -> int:
    """How many things run at once: a whole number, at least 1."""
    value = int(_number(text, int))
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {value}")
    return value


def seconds_value(value: float) -> float:
    """A time limit: a finite number of seconds above 0 (ValueError otherwise)."""
    if not math.isfinite(value) or value <= 0:
        raise ValueError(f"must be more than 0 seconds, got {value:g}")
    return value


def seed_value(value: int) -> int:
    """A hypothesis seed: a whole number from 0 to 2**63 - 1 (ValueError otherwise)."""
    if not 0 <= value < 2**63:
        raise ValueError(f"must be a whole number from 0 to 2**63 - 1, got {value}")
    return value


def memory_mb_value(value: int) -> int:
    """A memory cap in MiB: a whole number, at least MIN_MEMORY_MB (ValueError otherwise)."""
    if value < MIN_MEMORY_MB:
        raise ValueError(f"must be at least {MIN_MEMORY_MB} MB, got {value}")
    return value


def one_of(*allowed: str) -> Callable[[str], str]:
    """A check that a value is one of ``allowed`` (ValueError otherwise)."""
    def check(value: str) -> str:
        if value not in allowed:
            raise ValueError(f"invalid choice {value!r} (choose from {', '.join(allowed)})")
        return value
    return check


def problems_value(keys: list[str] | tuple[str, ...]) -> list[str]:
    """Problem keys: at least one, each a key of ``PROBLEMS`` (ValueError otherwise)."""
    bad = [k for k in keys if k not in PROBLEMS]
    if bad or not keys:
        what = f"unknown problem(s) {', '.join(bad)}" if bad else "no problem given"
        raise ValueError(f"{what}: use {RANGE}, comma-separated")
    return list(keys)


def rule_ids(ids: list[str] | tuple[str, ...]) -> list[str]:
    """Handout rule ids: at least one, each shaped as ``P5.skip-none-grad`` (ValueError otherwise)."""
    shape = reader().ID  # the handout's reader's (tests/_rules.py)
    bad = [i for i in ids if not isinstance(i, str) or not re.fullmatch(shape, i)]
    if bad or not ids:
        raise ValueError(f"{'not a rule id: ' + ', '.join(map(repr, bad)) if bad else 'no rule given'} "
                         "(ids look like P5.skip-none-grad)")
    return list(ids)


def _checked(check, value):
    """``check(value)`` as an argparse type does it: its ValueError becomes ArgumentTypeError."""
    try:
        return check(value)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def seconds(text: str) -> float:
    """A time limit: a finite number of seconds above 0."""
    return _checked(seconds_value, _number(text, float))


def share(text: str) -> float:
    """A share: a number from 0 to 1."""
    value = _number(text, float)
    if not 0 <= value <= 1:
        raise argparse.ArgumentTypeError(f"must be from 0 to 1, got {text}")
    return value


def seed(text: str) -> int:
    """A hypothesis seed: a whole number from 0 to 2**63 - 1."""
    return _checked(seed_value, int(_number(text, int)))


def memory_mb(text: str) -> int:
    """A memory cap in MiB: a whole number, at least MIN_MEMORY_MB."""
    return _checked(memory_mb_value, int(_number(text, int)))


def problems(text: str) -> list[str]:
    """Problem keys, comma-separated (``P1,P3``): at least one, each a key of ``PROBLEMS``."""
    return _checked(problems_value, [part.strip().upper() for part in text.split(",") if part.strip()])


def students(text: str) -> list[str]:
    """Student ids (submission names, less ``.zip``), comma-separated: at least one, none a path."""
    names = [part.strip() for part in text.split(",") if part.strip()]
    bad = [n for n in names if "/" in n or n.startswith(".")]
    if bad or not names:
        raise argparse.ArgumentTypeError(f"not a student id: {bad[0]!r}" if bad else "no student given")
    return sorted(set(names))


def parse_shard(text: str) -> tuple[int, int]:
    """``"I/N"`` (1 <= I <= N) as ``(I, N)``; ValueError with a usable message otherwise."""
    try:
        index, count = (int(part) for part in text.split("/"))
    except ValueError:
        raise ValueError(f"--shard {text!r}: expected I/N, e.g. 2/4") from None
    if not 1 <= index <= count:
        raise ValueError(f"--shard {text!r}: I must be between 1 and N")
    return index, count


def shard(text: str) -> str:
    """``I/N`` with 1 <= I <= N."""
    try:
        parse_shard(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc).split(": ", 1)[-1]) from None
    return text


def _writable_parent(path: Path) -> None:
    ancestor = path.parent
    while not ancestor.exists() and ancestor != ancestor.parent:
        ancestor = ancestor.parent
    if not ancestor.is_dir():
        raise argparse.ArgumentTypeError(f"{path}: {ancestor} is not a folder")
    if not os.access(ancestor, os.W_OK | os.X_OK):
        raise argparse.ArgumentTypeError(f"{path}: {ancestor} is not writable")


def output_file(text: str) -> Path:
    """A file to write: not a folder, in a folder that exists (or can be made) and is writable."""
    path = Path(text)
    if not text or path.is_dir() or text.endswith(os.sep):
        raise argparse.ArgumentTypeError(f"{text!r} is a folder: give a file path")
    _writable_parent(path)
    return path


def output_folder(text: str) -> Path:
    """A folder to write into: a folder, or nothing yet (made when needed) in a writable place."""
    path = Path(text)
    if path.exists() and not path.is_dir():
        raise argparse.ArgumentTypeError(f"{text} exists and is not a folder")
    if path.is_dir():
        if not os.access(path, os.W_OK | os.X_OK):
            raise argparse.ArgumentTypeError(f"{text} is not writable")
    else:
        _writable_parent(path)
    return path


def existing_folder(text: str) -> Path:
    path = Path(text)
    if not path.is_dir():
        raise argparse.ArgumentTypeError(f"no such folder: {text}")
    return path


def zip_file(text: str) -> Path:
    """A .zip file to write."""
    path = output_file(text)
    if path.suffix != ".zip":
        raise argparse.ArgumentTypeError(f"{text}: the bundle is a .zip file")
    return path


def csv_file(text: str) -> Path:
    """A .csv file to write (its .md and .png siblings are written beside it)."""
    path = output_file(text)
    if path.suffix != ".csv":
        raise argparse.ArgumentTypeError(f"{text}: expected a .csv file name")
    return path


def readable_csv(text: str) -> Path:
    path = Path(text)
    if not path.is_file() or not os.access(path, os.R_OK):
        raise argparse.ArgumentTypeError(f"no readable file {text}")
    return path


SECTIONS = ("independence", "reference", "stubs", "mutants", "rules", "attacks", "release")


def sections(text: str) -> list[str]:
    """selfcheck sections, comma-separated: at least one, each known."""
    names = [part.strip() for part in text.split(",") if part.strip()]
    bad = [n for n in names if n not in SECTIONS]
    if bad or not names:
        raise argparse.ArgumentTypeError(f"unknown section(s) {', '.join(bad) or '(none given)'}: "
                                         f"use {','.join(SECTIONS)}")
    return names
