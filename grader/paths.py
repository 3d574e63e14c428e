"""The kit's own paths, named once: its root (the checkout or the unpacked bundle) and its parts."""

from __future__ import annotations

import os
from pathlib import Path

GRADER = Path(__file__).resolve().parent
KIT_ROOT = GRADER.parent
HIDDEN = GRADER / "judge" / "hidden"
SOLUTIONS = KIT_ROOT / "solutions"
PACKAGE = "assignment"  # the package a submission is staged as and the worker imports (confined/dispatch.py says it again)
ASSIGNMENT = KIT_ROOT / PACKAGE


def kit_pythonpath(environ: dict[str, str] | None = None) -> dict[str, str]:
    """``environ`` (default: this process's) with the kit's root first on ``PYTHONPATH`` (once, however often
    applied), so that a child ``python -m grader`` or judge imports this kit."""
    environ = dict(os.environ if environ is None else environ)
    others = [path for path in environ.get("PYTHONPATH", "").split(os.pathsep) if path and path != str(KIT_ROOT)]
    environ["PYTHONPATH"] = os.pathsep.join([str(KIT_ROOT), *others])
    return environ
