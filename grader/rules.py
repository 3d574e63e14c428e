"""The handout's rules on the grader's side, read with the public tests' own reader (``tests/_rules.py``).

One reader, so the student's run and the grade quote a rule in the same words. The kit's checkout holds both
files at its root; a Gradescope bundle carries them too. Where they are missing (a partial copy of the kit), a
rule is quoted by its id alone.
"""

from __future__ import annotations

import functools
import importlib.util
import sys
from collections.abc import Iterable
from pathlib import Path
from types import ModuleType

from .paths import KIT_ROOT

HANDOUT = KIT_ROOT / "handout.md"
READER = KIT_ROOT / "tests" / "_rules.py"


@functools.cache
def reader(path: Path = READER) -> ModuleType:
    """``tests/_rules.py``, loaded by its path (the public tests are not a package)."""
    spec = importlib.util.spec_from_file_location("_kit_rules_reader", path)
    if spec is None or spec.loader is None:
        raise ImportError(f"cannot load {path}")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


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
