"""The handout's rules on the grader's side, read with the public tests' own reader (``tests/_rules.py``).

One reader, so the student's run and the grade quote a rule in the same words. The kit's checkout holds both
files at its root; a Gradescope bundle carries them too. Where they are missing (a partial copy of the kit), a
rule is quoted by its id alone.
"""

from __future__ import annotations

import functools
from collections.abc import Iterable
from pathlib import Path
from types import ModuleType

from .paths import KIT_ROOT
from .public import public_module

HANDOUT = KIT_ROOT / "handout.md"
READER = KIT_ROOT / "tests" / "_rules.py"


def reader() -> ModuleType:
    """``tests/_rules.py``, loaded by its path (the public tests are not a package)."""
    return public_module(READER.name)


@functools.cache
def handout_rules(handout: Path = HANDOUT) -> dict:
    """Every rule of the handout by id (``tests/_rules.Rule``); empty where the kit holds no handout."""
    if not handout.is_file() or not READER.is_file():
        return {}
    return reader().read(handout)


def quote(ids: Iterable[str]) -> str:
    """The rules ``ids`` as a failure message quotes them, one a line: ``rule: [P5.x] text (handout.md, ...)``."""
    rules = handout_rules()
    return "\n".join(f"rule: {rules[i].quote() if i in rules else f'[{i}] (handout.md)'}" for i in ids)
