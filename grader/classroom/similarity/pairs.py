"""The pairs as a CSV (``similarity.csv``), and the pairs to review read back from it.

Columns: a, b, score, a_in_b, b_in_a, lines, baseline, to_review, cluster. How alike honest
solutions of one handout are depends on the handout, so a pair is judged against its own class: it
is to review when its score stands ``margin`` above the ``baseline`` (the median score of the class's
other pairs, at most ``ceiling``: a class made mostly of copies cannot hide them), reaches the
``threshold`` and at least ``min_lines`` lines match. A prompt to look,
never a grade. The pairs to review are grouped into clusters (``clusters``), numbered from 1.
"""

from __future__ import annotations

import csv
import io
from bisect import bisect_left
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING

from .clusters import clusters

if TYPE_CHECKING:
    from .compare import Pair

CSV_NAME = "similarity.csv"
COLUMNS = ("a", "b", "score", "a_in_b", "b_in_a", "lines", "baseline", "to_review", "cluster")


class SimilarityError(ValueError):
    """Nothing can be compared (no such folder, an unreadable archive, too few submissions), or an
    output cannot be read back."""


@dataclass(frozen=True)
class Criteria:
    """When a pair is to review: ``score >= threshold``, ``lines >= min_lines`` and ``score >= baseline +
    margin``, the baseline from the class's ``scores`` (``calibrated``)."""

    threshold: float = 0.5
    min_lines: int = 150
    margin: float = 0.15
    ceiling: float = 0.8  # the highest baseline: pairs from ceiling + margin up are always to review
    scores: tuple[float, ...] = ()  # every pair's score, sorted

    def calibrated(self, pairs: list[Pair]) -> Criteria:
        return replace(self, scores=tuple(sorted(p.score for p in pairs)))

    def baseline(self, score: float) -> float:
        """The median score of the class's pairs but one of this ``score`` (0 when there is no other), at most
        ``ceiling``."""
        rest = len(self.scores) - 1
        if rest < 1:
            return 0.0
        gone = bisect_left(self.scores, score)
        at = [self.scores[j if j < gone else j + 1] for j in ((rest - 1) // 2, rest // 2)]
        return min(sum(at) / 2, self.ceiling)

    def flags(self, pair: Pair) -> bool:
        return (pair.score >= self.threshold and pair.lines >= self.min_lines
                and pair.score >= self.baseline(pair.score) + self.margin)

    def clusters(self, pairs: list[Pair]) -> list[list[str]]:
        return clusters((p.a, p.b) for p in pairs if self.flags(p))


@dataclass(frozen=True)
class Review:
    """A pair to review, as the gradebook and the class report show it."""

    a: str
    b: str
    score: float
    lines: int
    cluster: int


@dataclass(frozen=True)
class Cluster:
    """Submissions that look alike, as the gradebook and the class report list them."""

    number: int
    names: list[str]
    pairs: int
    best: float


def grouped(reviews: list[Review]) -> list[Cluster]:
    """The clusters the pairs to review make, by number."""
    found: dict[int, list[Review]] = {}
    for review in reviews:
        found.setdefault(review.cluster, []).append(review)
    return [Cluster(number, sorted({name for r in mine for name in (r.a, r.b)}), len(mine), max(r.score for r in mine))
            for number, mine in sorted(found.items())]


def csv_text(pairs: list[Pair], criteria: Criteria) -> str:
    numbers = {name: index for index, group in enumerate(criteria.clusters(pairs), 1) for name in group}
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(COLUMNS)
    for p in pairs:
        flag = criteria.flags(p)
        writer.writerow([p.a, p.b, f"{p.score:.3f}", f"{p.a_in_b:.3f}", f"{p.b_in_a:.3f}", p.lines,
                         f"{criteria.baseline(p.score):.3f}", "yes" if flag else "", numbers[p.a] if flag else ""])
    return buffer.getvalue()


def to_review(folder: Path) -> list[Review]:
    """The pairs flagged in ``folder/similarity.csv`` (a ``grader similarity`` output), best first."""
    path = folder / CSV_NAME
    try:
        with open(path, newline="", encoding="utf-8") as stream:
            reader = csv.DictReader(stream)
            if tuple(reader.fieldnames or ()) != COLUMNS:
                raise SimilarityError(f"{path}: not a grader similarity output (columns {', '.join(COLUMNS)})")
            return [Review(row["a"], row["b"], float(row["score"]), int(row["lines"]), int(row["cluster"]))
                    for row in reader if row["to_review"] == "yes"]
    except (OSError, ValueError, csv.Error) as exc:
        raise SimilarityError(f"{path}: cannot read it ({exc.__class__.__name__}: {exc})") from None
