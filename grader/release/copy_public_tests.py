"""Step: the public tests, exactly as the kit runs them."""

from __future__ import annotations

import shutil

from ._context import ReleaseContext


def copy_public_tests(context: ReleaseContext) -> None:
    shutil.copytree(context.kit / "tests", context.out / "tests",
                    ignore=shutil.ignore_patterns("__pycache__", "*.pyc", ".hypothesis"))
