"""``grader similarity SUBMISSIONS --out DIR``: which submissions look alike, for an instructor to review.

Every pair of the class's submissions (and each submission with every ``--past`` one) is compared
over its ``assignment/*.py`` with copydetect, the kit's stubs as boilerplate (``compare``); a pair is
judged against the class's own pairs, and the pairs to review grouped into clusters (``pairs``).
Writes ``DIR/similarity.csv`` (every pair, its scores and cluster), ``DIR/similarity.html`` (the
clusters and the best pairs) and ``DIR/clusters/cluster-N.html`` (a cluster side by side, ``page``);
``grader gradebook --similarity DIR`` and ``grader report`` list the clusters. Submissions that
cannot be read are listed, never fatal.
"""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
from pathlib import Path

from ...grading.results import write_atomic
from ..batch_entries import BatchError
from .documents import Document, read_class, read_past, stubs
from .pairs import CSV_NAME, Criteria, SimilarityError, csv_text

HTML_NAME = "similarity.html"


def _documents(submissions: Path, past: list[Path], scratch: Path) -> tuple[list[Document], list[Document], dict[str, str]]:
    try:
        documents, unreadable = read_class(submissions, scratch)
    except (BatchError, OSError) as exc:
        raise SimilarityError(str(exc)) from None
    if len(documents) < 2:
        raise SimilarityError(f"{submissions}: {len(documents)} readable submissions, nothing to compare"
                              + (f" ({len(unreadable)} unreadable)" if unreadable else ""))
    earlier: list[Document] = []
    for folder in past:
        if not folder.is_dir():
            raise SimilarityError(f"--past {folder}: no such folder")
        found, bad = read_past(folder, scratch)
        earlier += found
        unreadable |= bad
    return documents, earlier, unreadable


def run(submissions: Path, out: Path, *, past: list[Path], criteria: Criteria,
        jobs: int = 1) -> tuple[int, int, dict[str, str]]:
    """Compare and write both files; (submissions compared, pairs to review, unreadable submissions)."""
    scratch = Path(tempfile.mkdtemp(prefix="kit-similarity-"))
    try:
        documents, earlier, unreadable = _documents(submissions, past, scratch)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    from .compare import compare  # copydetect imports matplotlib: not for every grader command that reads pairs
    from .page import FOLDER, pages

    pairs = compare(documents, earlier, stubs(), jobs)
    criteria = criteria.calibrated(pairs)
    table, written = csv_text(pairs, criteria), pages(pairs, documents + earlier, len(earlier), unreadable, criteria)
    write_atomic(out / CSV_NAME, table.encode())
    for name, page in written.items():
        write_atomic(out / name, page.encode())
    for stale in set((out / FOLDER).glob("cluster-*.html")) - {out / name for name in written}:
        stale.unlink()  # a cluster of an earlier run
    return len(documents), sum(map(criteria.flags, pairs)), unreadable


def main(submissions: str, *, out: Path, past: tuple[Path, ...] = (), threshold: float = Criteria.threshold,
         min_lines: int = Criteria.min_lines, margin: float = Criteria.margin,
         jobs: int = len(os.sched_getaffinity(0))) -> int:
    """0 when compared (whatever was found), 2 when refused."""
    try:
        count, flagged, unreadable = run(Path(submissions), Path(out), past=list(past),
                                         criteria=Criteria(threshold, min_lines, margin), jobs=jobs)
    except SimilarityError as exc:
        print(f"grader similarity: {' '.join(str(exc).split())}", file=sys.stderr)
        return 2
    for name, reason in unreadable.items():
        print(f"grader similarity: not compared: {name}: {reason}", file=sys.stderr)
    print(f"similarity: {count} submissions compared, {flagged} pairs to review -> {out / HTML_NAME}, {out / CSV_NAME}")
    return 0
