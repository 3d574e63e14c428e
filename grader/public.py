"""Modules of the public tests the grader shares, loaded by their path (the public tests are not a package).

One file each, so the student's run and the grade read a rule and refuse a route in the same words: the
handout's reader (``tests/_rules.py``), the "code is reached by its name" hook (``tests/_by_name.py``), P1's
source reader for its decode-from-the-layout rule (``tests/_layout_reader.py``) and P3's reader for its form
rules (``tests/_einops_reader.py``).
"""

from __future__ import annotations

import functools
import importlib.util
import sys
from types import ModuleType

from .paths import KIT_ROOT

PUBLIC_TESTS = KIT_ROOT / "tests"


@functools.cache
def public_module(filename: str) -> ModuleType:
    """``tests/<filename>``, loaded by its path under the name ``_kit_public_<stem>``."""
    path = PUBLIC_TESTS / filename
    spec = importlib.util.spec_from_file_location(f"_kit_public{path.stem}", path)
    if spec is None or spec.loader is None:
        raise ImportError(f"cannot load {path}")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up there
    spec.loader.exec_module(module)
    return module
