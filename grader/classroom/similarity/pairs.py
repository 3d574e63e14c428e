"""The pairs as a CSV (``similarity.csv``), and the pairs to review read back from it.

Columns: a, b, score, a_in_b, b_in_a, lines, to_review. A pair is to review when its score
reaches the threshold and at least ``min_lines`` lines match: a prompt to look, never a grade.
"""

from __future__ import annotations

import csv
import io
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .compare import Pair

CSV_NAME = "similarity.csv"
COLUMNS = ("a", "b", "score", "a_in_b", "b_in_a", "lines", "to_review")


class SimilarityError(ValueError):
    """Nothing can be compared (no such folder, an unreadable archive, too few submissions), or an
    output cannot be read back."""


@dataclass(frozen=True)
class Criteria:
    """When a pair is to review: ``score >= threshold`` and ``lines >= min_lines``."""

    threshold: float = 0.5
    min_lines: int = 150

    def flags(self, pair: Pair) -> bool:
        return pair.score >= self.threshold and pair.lines >= self.min_lines


@dataclass(frozen=True)
class Review:
    """A pair to review, as the gradebook and the class report show it."""

    a: str
    b: str
    score: float
    lines: int


def csv_text(pairs: list[Pair], criteria: Criteria) -> str:
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(COLUMNS)
    writer.writerows([p.a, p.b, f"{p.score:.3f}", f"{p.a_in_b:.3f}", f"{p.b_in_a:.3f}", p.lines,
                      "yes" if criteria.flags(p) else ""] for p in pairs)
    return buffer.getvalue()


def to_review(folder: Path) -> list[Review]:
    """The pairs flagged in ``folder/similarity.csv`` (a ``grader similarity`` output), best first."""
    path = folder / CSV_NAME
    try:
        with open(path, newline="", encoding="utf-8") as stream:
            reader = csv.DictReader(stream)
            if tuple(reader.fieldnames or ()) != COLUMNS:
                raise SimilarityError(f"{path}: not a grader similarity output (columns {', '.join(COLUMNS)})")
            return [Review(row["a"], row["b"], float(row["score"]), int(row["lines"]))
                    for row in reader if row["to_review"] == "yes"]
    except (OSError, ValueError, csv.Error) as exc:
        raise SimilarityError(f"{path}: cannot read it ({exc.__class__.__name__}: {exc})") from None
