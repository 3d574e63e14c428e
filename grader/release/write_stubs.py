"""Step: the student's ``assignment/`` package, generated from ``solutions/``."""

from __future__ import annotations

from .stubs import write_stubs as generate
from ._context import ReleaseContext


def write_stubs(context: ReleaseContext) -> None:
    generate(context.kit / "solutions", context.out / "assignment")
