"""Step: the handout."""

from __future__ import annotations

import shutil

from ._context import ReleaseContext, ReleaseError


def copy_handout(context: ReleaseContext) -> None:
    handout = context.kit / "handout.md"
    if not handout.exists():
        raise ReleaseError(f"{handout} is missing")
    shutil.copyfile(handout, context.out / "handout.md")
