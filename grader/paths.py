"""The kit's own paths, named once: its root (the checkout or the unpacked bundle) and its parts."""

from __future__ import annotations

import os
from pathlib import Path

from .options import OMP_WAIT_POLICY

GRADER = Path(__file__).resolve().parent
KIT_ROOT = GRADER.parent
HIDDEN = GRADER / "judge" / "hidden"
MUTANTS = GRADER / "selfproof" / "mutants"
SOLUTIONS = KIT_ROOT / "solutions"
ASSIGNMENT = KIT_ROOT / "assignment"


def kit_pythonpath(environ: dict[str, str] | None = None) -> dict[str, str]:
    """``environ`` (default: this process's) with the kit's root first on ``PYTHONPATH``, so that a
    child ``python -m grader`` or judge imports this kit, and ``OMP_WAIT_POLICY`` set unless it is."""
    environ = dict(os.environ if environ is None else environ)
    environ.setdefault("OMP_WAIT_POLICY", OMP_WAIT_POLICY)
    environ["PYTHONPATH"] = os.pathsep.join(filter(None, [str(KIT_ROOT), environ.get("PYTHONPATH")]))
    return environ
