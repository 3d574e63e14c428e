"""``grader gradebook``: merge result folders (shards, re-runs) into one gradebook.

Reads every result under the given folders (a batch's OUT_DIR with ``results/<student>.json``,
a downloaded CI artifact holding several such folders, or a plain folder of results.json files)
and writes three files:

- the CSV (student, total, P1..P8, provisional, status, graded_at), sorted by student, so the
  same results give the same bytes whatever the order of the folders;
- a summary next to it (same name, ``.md``): totals, per-problem means, the pass rate of every
  test, the tests most often failed, error rows and whatever is missing;
- a histogram of totals (same name, ``.png``).

A student found more than once is fine when the records agree (same submission content, same
status and scores; the earliest graded_at is kept) and refused otherwise, naming both files.
Each batch's ``batch.json`` lists the students it was responsible for: a listed student with no
result becomes a "missing" row, and a shard I/N whose sibling shards are absent is reported;
either makes the exit status 1 (the files are written all the same). Error and missing rows
leave total and problem cells empty: no number is invented for a submission not graded.
"""

from __future__ import annotations

import csv
import io
import json
import statistics
import sys
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .problems import PROBLEMS
from .results import GradingResult, TestResult, kit_data, write_atomic

COLUMNS = ("student", "total", *PROBLEMS, "provisional", "status", "graded_at")
MOST_FAILED = 10


class GradebookError(ValueError):
    """The folders cannot be merged (conflicting duplicates, unreadable results, nothing found)."""


@dataclass(frozen=True)
class Record:
    """One student's line of the gradebook, with what the summary needs."""

    student: str
    status: str  # graded | error | missing
    total: float | None
    max_score: float
    problems: tuple[float | None, ...]  # in PROBLEMS order; None where the problem was not graded
    provisional: bool
    graded_at: str
    content_hash: str = ""
    error: str = ""
    tests: tuple[TestResult, ...] = ()
    source: str = ""

    def row(self) -> list[str]:
        return [self.student, _number(self.total), *map(_number, self.problems),
                "" if self.status == "missing" else str(self.provisional).lower(), self.status, self.graded_at]

    def identity(self) -> tuple:
        """What two records of one student must share to be the same grade (not when or where it was written)."""
        return self.content_hash, tuple(self.row()[:-1])


def _number(value: float | None) -> str:
    return "" if value is None else f"{value:.4f}".rstrip("0").rstrip(".")


# -- reading -----------------------------------------------------------------------------------------

def result_files(folder: Path) -> list[Path]:
    """``folder/results/*.json``, else every ``results/*.json`` below it, else the results files in it."""
    if (folder / "results").is_dir():
        return sorted((folder / "results").glob("*.json"))
    nested = sorted(folder.rglob("results/*.json"))
    return nested or sorted(p for p in folder.glob("*.json") if p.name != "batch.json")


def read_record(path: Path) -> Record:
    try:
        data = json.loads(path.read_text())
        result = GradingResult.from_gradescope_dict(data)
    except (OSError, ValueError, TypeError, AttributeError) as exc:
        raise GradebookError(f"{path}: not a results file ({exc.__class__.__name__}: {exc})") from None
    kit = kit_data(data)
    record: dict[str, Any] = kit.get("batch") or {}
    status = record.get("status") or ("error" if kit.get("grader_error") else "graded")
    problems = result.problems()
    graded = status == "graded"
    return Record(
        student=record.get("student") or path.stem, status=status, total=result.score if graded else None,
        max_score=result.max_score,
        problems=tuple(p.score if graded and p.total else None for p in problems.values()),
        provisional=result.provisional, graded_at=record.get("graded_at", ""),
        content_hash=record.get("content_hash", ""), error=str(kit.get("grader_error", "")), tests=result.tests,
        source=str(path.resolve()))


def merge(records: list[Record]) -> list[Record]:
    """One record per student, sorted; identical duplicates collapse, conflicting ones are refused."""
    by_student: dict[str, list[Record]] = defaultdict(list)
    for record in records:
        by_student[record.student].append(record)
    merged, conflicts = [], []
    for student in sorted(by_student):
        group = sorted(by_student[student], key=lambda r: (r.graded_at, r.source))
        first = group[0]
        for other in group[1:]:
            if other.identity() != first.identity():
                conflicts.append(f"{student}: {first.source} ({_describe(first)}) and {other.source} "
                                 f"({_describe(other)})")
        merged.append(first)
    if conflicts:
        raise GradebookError("conflicting results for the same student (merge only one of them: drop the "
                             "stale folder or re-grade):\n  " + "\n  ".join(conflicts))
    return merged


def _describe(record: Record) -> str:
    what = f"total {_number(record.total)}" if record.status == "graded" else record.status
    return f"{what}, submission {record.content_hash[7:19] or 'unknown'}, graded {record.graded_at or '?'}"


def missing(folders: list[Path], present: set[str]) -> tuple[list[str], list[str]]:
    """Students listed by a batch.json without a result, and shards whose siblings are absent."""
    manifests = {p.resolve() for folder in folders for p in folder.rglob("batch.json")}
    listed, shards, unsharded = set(), defaultdict(set), False
    for path in sorted(manifests):
        try:
            manifest = json.loads(path.read_text())
        except (OSError, ValueError):
            continue
        listed |= set(manifest.get("students", []))
        if manifest.get("shard"):
            index, count = (int(part) for part in manifest["shard"].split("/"))
            shards[count].add(index)
        else:
            unsharded = True
    gaps = [] if unsharded else [f"shard {i}/{count}" for count in sorted(shards)
                                 for i in range(1, count + 1) if i not in shards[count]]
    return sorted(listed - present), gaps


# -- writing -----------------------------------------------------------------------------------------

def csv_text(records: list[Record]) -> str:
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(COLUMNS)
    writer.writerows(record.row() for record in records)
    return buffer.getvalue()


def summary_text(records: list[Record], gaps: list[str]) -> str:
    graded = [r for r in records if r.status == "graded"]
    count = {status: sum(r.status == status for r in records) for status in ("graded", "error", "missing")}
    lines = ["# Gradebook summary", "",
             f"{len(records)} students: {count['graded']} graded, {count['error']} errors, "
             f"{count['missing']} missing; {sum(r.provisional for r in graded)} provisional (GPU tests not run)."]
    if graded:
        totals = [r.total for r in graded]
        lines += ["", f"Totals: mean {statistics.fmean(totals):.2f}, median {_number(statistics.median(totals))}, "
                      f"min {_number(min(totals))}, max {_number(max(totals))} "
                      f"(out of {_number(max(r.max_score for r in graded))})."]
    lines += ["", "## Per problem", "", "| problem | graded | mean | max points | mean % |",
              "|---|---:|---:|---:|---:|"]
    for index, (key, problem) in enumerate(PROBLEMS.items()):
        scores = [r.problems[index] for r in graded if r.problems[index] is not None]
        if scores:
            mean = statistics.fmean(scores)
            lines.append(f"| {key} {problem.module} | {len(scores)} | {mean:.2f} | {problem.points} | "
                         f"{100 * mean / problem.points:.1f} |")
    tally: dict[tuple[int, str], dict[str, int]] = defaultdict(lambda: {"passed": 0, "failed": 0, "not_run": 0})
    order = {key: i for i, key in enumerate(PROBLEMS)}
    for record in graded:
        for test in record.tests:
            tally[(order.get(test.problem, len(order)), f"{test.problem} {test.name}")][test.status] += 1
    lines += ["", "## Pass rate per test", "", "| test | passed | failed | not run | pass rate |",
              "|---|---:|---:|---:|---:|"]
    for (_, name), counts in sorted(tally.items()):
        ran = counts["passed"] + counts["failed"]
        rate = f"{100 * counts['passed'] / ran:.1f}%" if ran else "-"
        lines.append(f"| {_cell(name)} | {counts['passed']} | {counts['failed']} | {counts['not_run']} | {rate} |")
    failed = sorted(((c["failed"], name) for (_, name), c in tally.items() if c["failed"]), key=lambda x: (-x[0], x[1]))
    lines += ["", f"## Most often failed (top {MOST_FAILED})", ""]
    lines += [f"{i}. {_cell(name)}: failed by {n} of {len(graded)}" for i, (n, name) in
              enumerate(failed[:MOST_FAILED], 1)] or ["No test failed."]
    errors = [r for r in records if r.status == "error"]
    if errors:
        lines += ["", "## Errors (not graded: look at the logs, fix, re-run the batch with --retry-errors)", "",
                  "| student | reason |", "|---|---|"]
        lines += [f"| {_cell(r.student)} | {_cell(r.error[:300])} |" for r in errors]
    if count["missing"] or gaps:
        lines += ["", "## Missing", ""]
        lines += [f"- {r.student}: listed by its batch, no result (interrupted? re-run the batch)"
                  for r in records if r.status == "missing"]
        lines += [f"- {gap}: no batch.json found (its results were not merged)" for gap in gaps]
    return "\n".join(lines) + "\n"


def _cell(text: str) -> str:
    return " ".join(text.split()).replace("|", "\\|")


def histogram_png(records: list[Record], path: Path) -> None:
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure
    from matplotlib.ticker import MaxNLocator

    graded = [r for r in records if r.status == "graded"]
    top = max((r.max_score for r in graded), default=100.0) or 100.0
    step = max(1.0, top / 20)
    bins = [i * step for i in range(int(top / step) + 2)]
    figure = Figure(figsize=(7, 4), dpi=100)
    FigureCanvasAgg(figure)
    axes = figure.subplots()
    axes.hist([r.total for r in graded], bins=bins, color="#4472c4", edgecolor="white")
    if graded:
        mean = statistics.fmean(r.total for r in graded)
        axes.axvline(mean, color="#c00000", linestyle="--", label=f"mean {mean:.1f}")
        axes.legend()
    axes.set_xlabel(f"total (out of {top:g})")
    axes.set_ylabel("students")
    axes.yaxis.set_major_locator(MaxNLocator(integer=True))
    axes.set_title(f"Totals of {len(graded)} graded submissions")
    axes.set_xlim(0, bins[-1])
    figure.tight_layout()
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png", metadata={"Software": None})
    write_atomic(path, buffer.getvalue())


def build(folders: list[Path], out_csv: Path) -> tuple[list[Record], list[str]]:
    """Merge ``folders`` and write the CSV, summary and histogram; returns the rows and shard gaps."""
    for folder in folders:
        if not folder.is_dir():
            raise GradebookError(f"no such folder: {folder}")
    files = sorted({p.resolve() for folder in folders for p in result_files(folder)})
    if not files:
        raise GradebookError(f"no results found in {', '.join(map(str, folders))}")
    records = merge([read_record(path) for path in files])
    absent, gaps = missing(folders, {r.student for r in records})
    records = sorted(records + [Record(student=s, status="missing", total=None, max_score=0.0,
                                       problems=(None,) * len(PROBLEMS), provisional=False, graded_at="")
                                for s in absent], key=lambda r: r.student)
    write_atomic(out_csv, csv_text(records).encode())
    write_atomic(out_csv.with_suffix(".md"), summary_text(records, gaps).encode())
    histogram_png(records, out_csv.with_suffix(".png"))
    return records, gaps


def main(folders: list[str], *, csv: Path = Path("gradebook.csv")) -> int:
    """Write the gradebook; 0 when complete, 1 when students or shards are missing, 2 when refused."""
    try:
        records, gaps = build([Path(f) for f in folders], Path(csv))
    except GradebookError as exc:
        print(f"grader gradebook: {exc}", file=sys.stderr)
        return 2
    count = {status: sum(r.status == status for r in records) for status in ("graded", "error", "missing")}
    print(f"gradebook: {len(records)} students ({count['graded']} graded, {count['error']} errors, "
          f"{count['missing']} missing) -> {csv}, {Path(csv).with_suffix('.md')}, {Path(csv).with_suffix('.png')}")
    if count["missing"] or gaps:
        print("grader gradebook: incomplete: " + ", ".join(
            [f"{count['missing']} students without a result"] * bool(count["missing"]) + gaps), file=sys.stderr)
        return 1
    return 0
