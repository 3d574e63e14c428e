"""``grader gradebook``: merge result folders (shards, re-runs) into one gradebook.

Reads every result under the given folders (a batch's OUT_DIR with ``results/<student>.json``,
a downloaded CI artifact holding several such folders, or a plain folder of results.json files)
and writes four files:

- the CSV (student, total, one column per problem, provisional, days_late, late_penalty, status, graded_at, isolation:
  the containment the worker got, notes), a "max points" row first, then the students sorted, so the same
  results give the same bytes whatever the order of the folders;
- a summary next to it (same name, ``.md``): totals (mean, median), per-problem means, the pass
  rate of every test, the tests most often failed, error rows, what is missing, overrides;
- a histogram of totals (same name, ``.png``) and the scores per problem (``-problems.png``).

A student found more than once is fine when the records agree (same submission content, same
status and scores; the earliest graded_at is kept) and refused otherwise, naming both files.
A result whose grading failed, or with a test the grader could not judge, is an error row.
Each batch's ``batch.json`` lists the students it was responsible for: a listed student with no
result becomes a "missing" row, and a shard I/N whose sibling shards are absent is reported.
With ``--roster``, roster students without a submission are "missing" rows and submissions not
in it are noted. Error and missing rows total 0, with the reason in ``notes``. ``--overrides``
sets problem or test scores by hand, the reason kept (``inputs``); ``--late FILE`` applies a due date and
a late policy to the submission times (``late``: days late, free days, penalty). ``--similarity DIR`` lists the
pairs ``grader similarity`` flagged in the summary, to review. ``--lms canvas|plain --lms-out FILE``
also writes the totals as an LMS imports them (``lms``). A lost result, a lost shard
or a submission not in the roster makes the exit status 1 (the files are written all the same).
"""

from __future__ import annotations

import sys
from pathlib import Path

from ...grading.results import write_atomic
from ..similarity.pairs import Review, SimilarityError, to_review
from .inputs import Change, apply_overrides, apply_roster, read_overrides, roster_rows
from .late import apply_late, read_policy
from .lms import Export, lms_text
from .records import (COLUMNS, NO_RESULT, GradebookError, Record, listed_without_result, merge, read_record,
                      result_files)
from .summary import counts, csv_text, incomplete, summary_text

__all__ = ["COLUMNS", "GradebookError", "build", "main", "outputs"]


def outputs(out_csv: Path) -> dict[str, Path]:
    """The files written beside the CSV, by what they hold."""
    return {"csv": out_csv, "summary": out_csv.with_suffix(".md"), "histogram": out_csv.with_suffix(".png"),
            "problems": out_csv.with_name(f"{out_csv.stem}-problems.png")}


def collect(folders: list[Path], roster: Path | None = None, overrides: Path | None = None,
            late: Path | None = None) -> tuple[list[Record], list[str], list[Change]]:
    """Every row (merged, roster, overrides and late policy applied), the shard gaps and the overrides' changes."""
    for folder in folders:
        if not folder.is_dir():
            raise GradebookError(f"no such folder: {folder}")
    files = sorted({p.resolve() for folder in folders for p in result_files(folder)})
    if not files:
        raise GradebookError(f"no results found in {', '.join(map(str, folders))}")
    records = merge([read_record(path) for path in files])
    absent, gaps = listed_without_result(folders, {r.student for r in records})
    records = sorted(records + [Record.missing(s, NO_RESULT) for s in absent], key=lambda r: r.student)
    if roster is not None:
        records = apply_roster(records, list(roster_rows(roster)))
    records, changes = apply_overrides(records, read_overrides(overrides) if overrides else [])
    if late is not None:
        records = apply_late(records, read_policy(late))
    return records, gaps, changes


def reviews(similarity: Path | None) -> list[Review]:
    """The pairs to review of a ``grader similarity`` output folder (none without one)."""
    try:
        return to_review(similarity) if similarity is not None else []
    except SimilarityError as exc:
        raise GradebookError(str(exc)) from None


def build(folders: list[Path], out_csv: Path, *, roster: Path | None = None, overrides: Path | None = None,
          similarity: Path | None = None, lms: Export | None = None,
          late: Path | None = None) -> tuple[list[Record], list[str]]:
    """Merge ``folders`` and write the CSV, summary and figures (and the LMS export); returns the rows
    and shard gaps.

    Every input is read and checked before the first file is written.
    """
    from .plots import histogram, problem_scores, write_png

    records, gaps, changes = collect(folders, roster, overrides, late)
    summary = summary_text(records, gaps, changes, reviews(similarity))
    export = lms_text(records, roster_rows(roster) if roster else {}, lms) if lms else None
    files = outputs(out_csv)
    write_atomic(files["csv"], csv_text(records).encode())
    write_atomic(files["summary"], summary.encode())
    write_png(histogram(records), files["histogram"])
    write_png(problem_scores(records), files["problems"])
    if export is not None:
        write_atomic(lms.out, export.encode())
    return records, gaps


def main(folders: list[str], *, csv: Path = Path("gradebook.csv"), roster: Path | None = None,
         overrides: Path | None = None, similarity: Path | None = None, lms: Export | None = None,
         late: Path | None = None) -> int:
    """Write the gradebook; 0 when complete, 1 when something needs attention (see ``incomplete``), 2 when refused."""
    try:
        records, gaps = build([Path(f) for f in folders], Path(csv), roster=roster, overrides=overrides,
                              similarity=similarity, lms=lms, late=late)
    except GradebookError as exc:
        print(f"grader gradebook: {exc}", file=sys.stderr)
        return 2
    count = counts(records)
    print(f"gradebook: {len(records)} students ({count['graded']} graded, {count['error']} errors, "
          f"{count['missing']} missing) -> {', '.join(map(str, outputs(Path(csv)).values()))}"
          + (f", {lms.out} ({lms.kind})" if lms else ""))
    attention = incomplete(records, gaps)
    if attention:
        print("grader gradebook: incomplete: " + ", ".join(attention), file=sys.stderr)
        return 1
    return 0
