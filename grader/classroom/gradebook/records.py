"""One student's line of the gradebook: read from a results.json, merged across folders.

A class may be graded in two passes: everything but the GPU tests on CPU runners (``--gpu off``)
and the GPU tests alone on GPU runners (``--gpu only``). A student's records of one pass must
agree (the same grade, written twice); records of the two passes are combined test by test,
each test's verdict from the pass that ran it, provided they graded the same submission with
the same kit version and the same options (all but ``--gpu``) and agree on every test both ran.
"""

from __future__ import annotations

import json
from collections import defaultdict
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ...problems import PROBLEMS, TOTAL_POINTS
from ...grading.results import GradingResult, TestResult, kit_data, regrade_reason

if TYPE_CHECKING:
    from .late import Late

COLUMNS = ("student", "total", *PROBLEMS, "provisional", "days_late", "late_penalty", "status", "graded_at", "isolation",
           "notes")
MAX_ROW = ["max points", str(TOTAL_POINTS), *(str(p.points) for p in PROBLEMS.values()), "", "", "", "max", "", "", ""]
NO_RESULT = "listed by its batch, no result (interrupted? re-run the batch)"
NO_SUBMISSION = "in the roster, no submission"
NOT_IN_ROSTER = "not in the roster"
GPU_PASS_ALONE = "only the GPU tests were graded (--gpu only): the CPU pass has no result for this student"


class GradebookError(ValueError):
    """The gradebook cannot be written (conflicting duplicates, unreadable results or inputs, nothing found)."""


@dataclass(frozen=True)
class Record:
    """One student's line of the gradebook, with what the summary needs.

    An error or missing row has a total of 0 (what a grade import needs), no problem scores,
    and its ``reason``; ``notes`` are the roster's and the overrides' remarks.
    """

    student: str
    status: str  # graded | error | missing
    total: float
    problems: tuple[float | None, ...]  # in PROBLEMS order; None where the problem was not graded
    provisional: bool
    graded_at: str
    content_hash: str = ""
    reason: str = ""
    notes: tuple[str, ...] = ()
    tests: tuple[TestResult, ...] = ()
    source: str = ""
    isolation: str = ""  # the containment the worker actually got, e.g. "bubblewrap + seccomp + cgroup v1"
    gpu_pass: bool = False  # graded with --gpu only (the GPU tests alone)
    grading: str = ""  # the kit version and grading options but --gpu (JSON): what two passes must share
    lms: dict[str, str] = field(default_factory=dict, compare=False)  # who the LMS knows (``layouts``), if it said
    late: Late | None = None  # how late, and what it cost (``late``, with --late); the total is after it

    @classmethod
    def missing(cls, student: str, reason: str) -> Record:
        return cls(student=student, status="missing", total=0.0, problems=(None,) * len(PROBLEMS),
                   provisional=False, graded_at="", reason=reason)

    def row(self) -> list[str]:
        notes = "; ".join(" ".join(note.split())[:300] for note in (self.reason, *self.notes) if note)
        late = [str(self.late.days), number(self.late.penalty)] if self.late else ["", ""]
        return [self.student, number(self.total), *map(number, self.problems),
                "" if self.status == "missing" else str(self.provisional).lower(), *late, self.status, self.graded_at,
                self.isolation, notes]

    def identity(self) -> tuple:
        """What two records of one student must share to be the same grade (not when or where it was written)."""
        return self.content_hash, self.status, self.total, self.problems, self.provisional, self.reason


def number(value: float | None) -> str:
    return "" if value is None else f"{value:.4f}".rstrip("0").rstrip(".")


def result_files(folder: Path) -> list[Path]:
    """``folder/results/*.json``, else every ``results/*.json`` below it, else the results files in it."""
    if (folder / "results").is_dir():
        return sorted((folder / "results").glob("*.json"))
    nested = sorted(folder.rglob("results/*.json"))
    return nested or sorted(p for p in folder.glob("*.json") if p.name != "batch.json")


def read_results(path: Path) -> tuple[dict[str, Any], GradingResult]:
    """A results.json as written by ``grader grade`` or ``grader batch``; GradebookError when it is not one."""
    try:
        data = json.loads(path.read_text())
        return data, GradingResult.from_gradescope_dict(data)
    except (OSError, ValueError, TypeError, AttributeError, KeyError) as exc:
        raise GradebookError(f"{path}: not a results file ({exc.__class__.__name__}: {exc})") from None


def student_of(path: Path, data: dict[str, Any]) -> str:
    return (kit_data(data).get("batch") or {}).get("student") or path.stem


def _scores(tests: tuple[TestResult, ...], graded: bool) -> dict[str, Any]:
    """A record's total, problem scores and provisional flag, from its tests."""
    result = GradingResult(tests=tests)
    return dict(total=result.score if graded else 0.0, provisional=result.provisional,
                problems=tuple(p.score if graded and p.total else None for p in result.problems().values()))


def grading_of(data: dict[str, Any]) -> tuple[str, str]:
    """(the ``--gpu`` mode, the kit version and every other grading option as JSON) of a results file.

    The options are those ``grader grade`` records, else (older results) those of the batch record.
    """
    kit = kit_data(data)
    options = dict(kit.get("options") or (kit.get("batch") or {}).get("options") or {})
    mode = str(options.pop("gpu", ""))
    for key in ("kit_version", "not_run"):  # the version is compared from the result itself; not_run is display
        options.pop(key, None)
    return mode, json.dumps({"kit_version": kit.get("kit_version", ""), **options}, sort_keys=True)


def read_record(path: Path) -> Record:
    """The record of one results file: an error row when the grader failed or could not judge a test."""
    data, result = read_results(path)
    batch: dict[str, Any] = kit_data(data).get("batch") or {}
    reason = regrade_reason(data) or ("error recorded by the batch" if batch.get("status") == "error" else "")
    mode, grading = grading_of(data)
    return Record(
        student=student_of(path, data), status="error" if reason else "graded", **_scores(result.tests, not reason),
        graded_at=batch.get("graded_at", ""), content_hash=batch.get("content_hash", ""), reason=reason,
        tests=result.tests, source=str(path.resolve()), isolation=result.isolation.get("mechanism", ""),
        gpu_pass=mode == "only", grading=grading, lms=dict(batch.get("lms") or {}))


def merge(records: list[Record]) -> list[Record]:
    """One record per student, sorted: each pass's identical duplicates collapse, the two passes combine
    (``combine``); conflicting records are refused."""
    by_student: dict[str, list[Record]] = defaultdict(list)
    for record in records:
        by_student[record.student].append(record)
    merged, conflicts = [], []
    for student in sorted(by_student):
        kept = []
        for gpu_pass in (False, True):
            group = sorted((r for r in by_student[student] if r.gpu_pass == gpu_pass), key=lambda r: (r.graded_at, r.source))
            conflicts += [f"{student}: {group[0].source} ({_describe(group[0])}) and {other.source} ({_describe(other)})"
                          for other in group[1:] if other.identity() != group[0].identity()]
            kept += group[:1]
        try:
            merged.append(combine(*kept) if len(kept) == 2 else _alone(kept[0]))
        except GradebookError as exc:
            conflicts.append(f"{student}: {exc}")
    if conflicts:
        raise GradebookError("conflicting results for the same student (merge only one of them: drop the "
                             "stale folder or re-grade):\n  " + "\n  ".join(conflicts))
    return merged


def _alone(record: Record) -> Record:
    """A record without the other pass: as it is, unless it is a GPU pass (then an error row: its total
    would count only the GPU tests)."""
    if not record.gpu_pass or record.status != "graded":
        return record
    return replace(record, status="error", reason=GPU_PASS_ALONE, **_scores(record.tests, False))


def combine(main: Record, gpu: Record) -> Record:
    """One student's record from the CPU pass (or a whole grading) and the GPU pass (``--gpu only``).

    Each test's verdict comes from the pass that ran it; a test both ran must have the same verdict.
    Refused (GradebookError) when the passes graded different submissions, with different kit versions
    or options, or disagree on a test. An error row in either pass makes the merged record an error row.
    """
    where = f"{main.source} ({_describe(main)}) and GPU pass {gpu.source} ({_describe(gpu)})"
    if main.content_hash != gpu.content_hash:
        raise GradebookError(f"the two passes graded different submissions: {where}")
    if main.grading != gpu.grading:
        raise GradebookError(f"the two passes were graded with different kit versions or options "
                             f"({main.grading} against {gpu.grading}): {where}")
    theirs = {t.nodeid: t for t in gpu.tests}
    tests = []
    for test in main.tests:
        other = theirs.pop(test.nodeid, None)
        if other is not None and "not_run" not in (test.status, other.status) and test.status != other.status:
            raise GradebookError(f"both passes ran {test.title} with different verdicts ({test.status}, "
                                 f"{other.status}): {where}")
        tests.append(other if other is not None and test.status == "not_run" != other.status else test)
    tests += theirs.values()  # tests of the GPU pass alone (none when both graded the same problems)
    reason = "; ".join(f"{name}: {r.reason}" for name, r in (("CPU pass", main), ("GPU pass", gpu)) if r.reason)
    return replace(main, status="error" if reason else "graded", **_scores(tuple(tests), not reason), reason=reason,
                   graded_at=max(main.graded_at, gpu.graded_at), tests=tuple(tests),
                   source=f"{main.source} + {gpu.source}", gpu_pass=False)


def _describe(record: Record) -> str:
    what = f"total {number(record.total)}" if record.status == "graded" else record.status
    return f"{what}, submission {record.content_hash[7:19] or 'unknown'}, graded {record.graded_at or '?'}"


def listed_without_result(folders: list[Path], present: set[str]) -> tuple[list[str], list[str]]:
    """Students listed by a batch.json without a result, and shards whose siblings (of the same pass) are absent."""
    manifests = {p.resolve() for folder in folders for p in folder.rglob("batch.json")}
    listed: set[str] = set()
    shards: dict[tuple[bool, int], set[int]] = defaultdict(set)
    unsharded: set[bool] = set()  # the passes graded in one piece somewhere
    for path in sorted(manifests):
        try:
            manifest = json.loads(path.read_text())
        except (OSError, ValueError):
            continue
        listed |= set(manifest.get("students", []))
        gpu_pass = (manifest.get("options") or {}).get("gpu") == "only"
        if manifest.get("shard"):
            index, count = (int(part) for part in manifest["shard"].split("/"))
            shards[gpu_pass, count].add(index)
        else:
            unsharded.add(gpu_pass)
    gaps = [f"{'GPU pass ' if gpu_pass else ''}shard {i}/{count}" for gpu_pass, count in sorted(shards)
            if gpu_pass not in unsharded for i in range(1, count + 1) if i not in shards[gpu_pass, count]]
    return sorted(listed - present), gaps
