"""What every release step shares: where the kit is and where the build goes."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path


class ReleaseError(RuntimeError):
    """The release cannot be built, or failed its own verification."""


@dataclass(frozen=True)
class ReleaseContext:
    kit: Path  # the kit's root (solutions/, tests/, handout.md, grader/)
    out: Path  # the build folder

    @staticmethod
    def default_kit() -> Path:
        return Path(__file__).resolve().parents[2]
