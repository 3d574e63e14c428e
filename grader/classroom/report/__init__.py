"""``grader report OUT_DIR... [--similarity DIR] --html report.html``: the class on one page.

The rows are the gradebook's (``gradebook.collect``: the same merge, roster and overrides); the
page (``page``) shows the distribution of totals and the scores per problem (the gradebook's
figures, as inline SVG), per-problem means and pass rates, the tests most often failed, the known
mistakes per problem (what to re-teach), the error and missing rows, the pairs ``grader
similarity`` flagged, and every student's feedback as ``grader show`` prints it. Self-contained:
no script, no stylesheet or font fetched.
"""

from __future__ import annotations

import sys
from pathlib import Path

from ...grading.results import write_atomic
from ..gradebook import collect, reviews
from ..gradebook.records import GradebookError


def main(folders: list[str], *, out: Path, similarity: Path | None = None, roster: Path | None = None,
         overrides: Path | None = None, late: Path | None = None) -> int:
    """Write the page; 0 when written, 2 when refused (nothing written)."""
    from .page import html  # matplotlib, for the figures: not for every grader command

    paths = [Path(f) for f in folders]
    try:
        records, _, changes = collect(paths, roster, overrides, late)
        page = html(records, paths, reviews(similarity), similarity, Path(out), changes)
    except GradebookError as exc:
        print(f"grader report: {' '.join(str(exc).split())}", file=sys.stderr)
        return 2
    write_atomic(Path(out), page.encode())
    print(f"report: {len(records)} students -> {out}")
    return 0
