"""``grader grade``: grade one submission with the hidden suites, judged outside student code.

The submission is staged into a private folder; judge sessions (pytest over the hidden suites
with ``grader.judge.plugin``, one per group of problems of about equal expected wall time (``split``),
``--jobs`` at a time, started by ``grading.judges``: as processes, or forked from a warm judge inside
``judges.warm()``, which a grading of more than one session opens itself where no warm judge serves it:
one import of the judge's libraries and one worker template for all its sessions) each drive their own
sandboxed worker. Their reports (``grader.record.JudgeReport``) are
merged into one ``GradingResult``, written as results.json and shown as a table.

The budget is a wall for the whole grading: each judge session gets the time before it less a
reserve (``_judge_budget``) and shares that among its problems (``grader.judge.budget``), so that a
problem that stalls costs only itself; a session still running at the wall is stopped, and its
problems score 0 (``BUDGET_MESSAGE``).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from ..options import GradingOptions
from ..paths import HIDDEN
from ..problems import PROBLEMS, Problem, suite_file, suite_problem
from ..record import JUDGED, NOT_JUDGED, JudgeReport, RecordError, TestRecord
from . import judges
from .results import GradingResult, TestResult, stub_function, write_atomic, write_json_atomic
from ..submission import SubmissionError, stage, upload_fix



BUDGET_MESSAGE = "not run: this submission used up its time budget"
JUDGE_RESERVE = (15.0, 0.15)  # seconds (plus one call), share of the time left: kept from the judges' own
# budget for their start-up, the call in flight and shut-down, so that they normally end, with a result per
# test, before the wall
REPORT_SECONDS = 1.0  # kept after the wall for writing results.json and the table
# A judge loads the pytest plugins it names (the kit's and hypothesis's), not every plugin installed beside
# them: an unrelated one cannot change how a suite runs, and importing them cost each judge half a CPU-second.
JUDGE_PLUGINS = ("grader.judge.plugin", "_hypothesis_pytestplugin")
# Of pytest's own plugins, one a judge does without: unraisableexception turns an exception in a __del__ into a
# warning (student code never runs in the judge) and, as pytest ends, runs the garbage collector five times over
# torch's objects, about a CPU-second.
JUDGE_WITHOUT = ("unraisableexception",)


class GradingError(RuntimeError):
    """The grader itself could not grade (bad arguments, no GPU where one is required)."""


def hidden_suites(problems: list[str] | None = None, hidden: Path = HIDDEN) -> list[Path]:
    """The hidden test files, in problem order, optionally only for ``problems`` (keys of ``PROBLEMS``)."""
    wanted = [key for key in PROBLEMS if not problems or key in problems]
    return [hidden / suite_file(key) for key in wanted if (hidden / suite_file(key)).is_file()]


def _judge_budget(left: float, call_seconds: float) -> float:
    """The judges' own time budget, out of the ``left`` seconds before the wall."""
    return max(1.0, left - max(JUDGE_RESERVE[0] + call_seconds, JUDGE_RESERVE[1] * left))


@dataclass(frozen=True)
class _Run:
    """One grading's judge sessions: their options, the wall they end by, the paths their workers must not see."""

    options: GradingOptions
    deadline: float
    masks: tuple[Path, ...]

    def command(self, files: list[Path], package: Path, report: Path) -> list[str]:
        budget = _judge_budget(self.deadline - time.monotonic(), self.options.call_seconds)
        return judge_command(files, package, report, self.options, budget, self.masks)


def judge_command(files: list[Path], package: Path, report: Path, options: GradingOptions, budget_seconds: float,
                  masks: tuple[Path, ...] = ()) -> list[str]:
    """The command line of one judge session: pytest over ``files`` with the kit's plugin, grading the staged
    ``package`` with ``options`` in ``budget_seconds`` of its own, its report written to ``report``."""
    plugins = [argument for name in (*JUDGE_PLUGINS, *(f"no:{n}" for n in JUDGE_WITHOUT)) for argument in ("-p", name)]
    command = [sys.executable, "-m", "grader.judge.session", *map(str, files), *plugins, "-q", "--assert=plain",
               "-p", "no:cacheprovider", "-c", str(HIDDEN / "pytest.ini"), "--rootdir", str(files[0].parent),
               "--submission", str(package), "--judge-report", str(report), *options.judge_argv(budget_seconds)]
    for path in masks:
        command += ["--mask", str(path)]
    return command


def _stop_at(processes: list[judges.Session], deadline: float) -> set[int]:
    """Wait for every process until ``deadline``; kill those still running then. Returns their indexes."""
    stopped = set()
    for index, process in enumerate(processes):
        try:
            process.wait(max(0.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
            stopped.add(index)
    return stopped


def _problems_of(files: list[Path]) -> list[str]:
    """The problems (in ``PROBLEMS`` order) whose hidden suites are among ``files``."""
    found = {suite_problem(f.name) for f in files}
    return [key for key in PROBLEMS if key in found]


def _whole_problem(key: str, name: str, status: str, message: str, nodeid: str = "") -> TestRecord:
    """One record standing for a whole problem that was not judged test by test (all its points, 0 scored)."""
    return TestRecord(problem=key, module=PROBLEMS[key].module, name=name, points=float(PROBLEMS[key].points),
                      status=status, message=message, nodeid=nodeid)


def _over_budget(files: list[Path]) -> JudgeReport:
    """The report of a judge session stopped at the budget wall: each of its problems failed, 0 points."""
    return JudgeReport(complete=False, tests=[_whole_problem(key, "(whole problem)", "failed", BUDGET_MESSAGE,
                                                             nodeid=f"{key}::budget") for key in _problems_of(files)])


def _run_judges(groups: list[list[Path]], package: Path, workdir: Path, run: _Run) -> list[JudgeReport]:
    """Run one judge session per group, all at once, until the budget wall; returns each session's
    report (fail closed: see ``_session_report``)."""
    env = judges.judge_environment()
    sessions = []
    for index, files in enumerate(groups):
        report, log = workdir / f"judge-report-{index}.json", workdir / f"judge-{index}.log"
        sessions.append((judges.start(run.command(files, package, report), workdir, log, env), files, report, log))
    try:
        stopped = _stop_at([process for process, *_ in sessions], run.deadline)
    finally:  # Ctrl-C or any error: no judge (and so no worker) outlives this call
        for process, *_ in sessions:
            if process.poll() is None:
                process.kill()
                process.wait()
    return [_over_budget(files) if index in stopped else _session_report(process.returncode, files, report, log)
            for index, (process, files, report, log) in enumerate(sessions)]


def _session_report(exit_code: int, files: list[Path], path: Path, log: Path) -> JudgeReport:
    """A judge session's report, taken only when it ended normally (exit 0 or 1 and a complete
    report in which every test was judged). Otherwise every problem of the session is an
    error: nothing it recorded earns points, whatever stopped it (a signal, a crash, a kill)."""
    try:
        report: JudgeReport | None = JudgeReport.from_json(path.read_text())
        unreadable = ""
    except (OSError, RecordError) as exc:
        report, unreadable = None, f"; its report was unreadable: {exc}" if isinstance(exc, RecordError) else ""
    if exit_code in (0, 1) and report and report.complete and all(t.status in JUDGED for t in report.tests):
        return report
    how = f"killed by signal {signal.Signals(-exit_code).name}" if exit_code < 0 else f"exit status {exit_code}"
    tail = " | ".join(line.strip() for line in log.read_text(errors="replace").splitlines()[-3:] if line.strip())
    reason = f"a judge session ended abnormally ({how}{unreadable}){': ' + tail[-300:] if tail else ''}"
    problems = _problems_of(files)
    tests = [replace(t, status="error", message=NOT_JUDGED) for t in (report.tests if report else [])]
    judged = {t.problem for t in tests}
    tests += [_whole_problem(key, f"{PROBLEMS[key].title} (not graded)", "error", NOT_JUDGED)
              for key in problems if key not in judged]
    return JudgeReport(complete=False, tests=tests, isolation=report.isolation if report else {},
                       failed=f"grading of {', '.join(problems)} failed, regrade: {reason}")


def split(files: list[Path], jobs: int) -> list[list[Path]]:
    """``files`` in at most ``jobs`` groups of about equal wall time (``Problem.seconds``): the longest first,
    each to the group with the least so far. In a group, problems graded in a worker of their own
    (``Problem.own_worker``) come first, so that their worker has ended before the shared one starts (one
    worker's memory at a time); the others keep the given order."""
    groups: list[list[Path]] = [[] for _ in range(max(1, min(jobs, len(files))))]
    for file in sorted(files, key=_seconds, reverse=True):
        min(groups, key=lambda group: sum(map(_seconds, group))).append(file)
    return [sorted(group, key=lambda file: (not _own_worker(file), files.index(file))) for group in groups if group]


def _problem(file: Path) -> Problem | None:
    key = suite_problem(file.name)
    return PROBLEMS[key] if key else None


def _seconds(file: Path) -> float:
    problem = _problem(file)
    return problem.seconds if problem else 1.0


def _own_worker(file: Path) -> bool:
    problem = _problem(file)
    return problem is not None and problem.own_worker


def _notes(reports: list[JudgeReport], tests: list[TestResult]) -> tuple[str, ...]:
    notes = set()
    late = sorted({t.problem for t in tests if "time budget" in t.message})  # BUDGET_MESSAGE, or the judges' own
    if late:
        notes.add(f"{', '.join(late)} used up {'its' if len(late) == 1 else 'their'} share of the time budget; "
                  "the tests not judged by then were not run.")
    for report in reports:
        if report.import_error:
            notes.add(f"Importing your package failed: {report.import_error}")
    unwritten = [name for name in dict.fromkeys(stub_function(t.message) for t in tests if t.status == "failed") if name]
    if unwritten:
        notes.add(f"Not implemented yet (still raising NotImplementedError): {', '.join(unwritten)}; the tests "
                  f"below that call them fail until they are written.")
    return tuple(sorted(notes))


def grade(submission: str | Path, options: GradingOptions | None = None, *, jobs: int = 1,
          masks: tuple[Path, ...] = (), hidden: Path = HIDDEN, started: float | None = None,
          **changes: Any) -> GradingResult:
    """Grade one submission with ``options`` (default: the kit's), each field named in ``changes``
    replaced (``grade(path, problems=["P1"], profile="ci")``), within its budget of ``started``
    (default: now), start-up included; ``jobs`` judge sessions at once.

    ``first_failure`` stops each judge at its first failed test (the rest are "not run"): for
    mutation verdicts, which only ask whether anything failed.

    Raises SubmissionError when the submission cannot be read, GradingError on bad options.
    """
    started = time.monotonic() if started is None else started
    try:
        options = replace(options or GradingOptions(), **changes)
    except (TypeError, ValueError) as exc:
        raise GradingError(str(exc)) from None
    if options.gpu in ("require", "only"):
        import torch

        if not torch.cuda.is_available():
            raise GradingError(f"--gpu {options.gpu}: no CUDA device is available on this machine")
    files = hidden_suites(list(options.problems) if options.problems else None, hidden)
    if not files:
        raise GradingError(f"no hidden suites found for {options.problems or 'any problem'} in {hidden}")
    workdir = Path(tempfile.mkdtemp(prefix="kit-judge-"))
    try:
        package = stage(submission, workdir / "staged")
        run = _Run(options, deadline=started + options.budget_seconds - REPORT_SECONDS,
                   masks=(*masks, workdir, Path(submission).resolve() if Path(submission).exists() else workdir))
        groups = split(files, jobs)
        shared = len(groups) > 1 and judges.SHARED not in os.environ  # a batch's gradings fork from the batch's
        with judges.warm() if shared else contextlib.nullcontext():
            reports = _run_judges(groups, package, workdir, run)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    order = {key: index for index, key in enumerate(PROBLEMS)}  # what students read: P1 first, whichever ended first
    tests = sorted((TestResult.from_record(record) for report in reports for record in report.tests),
                   key=lambda test: order.get(test.problem, len(order)))
    isolation = next((r.isolation for r in reports if r.isolation), {})
    failures = "; ".join(r.failed for r in reports if r.failed)
    return GradingResult(tests=tuple(tests), submission=str(submission), isolation=isolation,
                         execution_time=time.monotonic() - started, notes=_notes(reports, tests), error=failures,
                         options=options.graded_with())


def main(submission: str, *, options: GradingOptions = GradingOptions(), out: Path | None = None, jobs: int = 1,
         visibility: str = "visible", junit: Path | None = None, verbose: bool = False) -> int:
    """Grade, write results.json (and JUnit XML), print the table; 0 when grading completed, 2 when it could not."""
    from rich.console import Console

    from .report import print_result

    started = time.monotonic()
    console = Console(stderr=True)
    try:
        with console.status(f"grading {submission} ({jobs} judge session{'s' if jobs > 1 else ''})..."):
            result = grade(submission, options, jobs=jobs, masks=(out.resolve(),) if out else (), started=started)
    except (SubmissionError, GradingError) as exc:
        result = GradingResult.failed(str(submission), str(exc), time.monotonic() - started,
                                      upload_fix(exc) if isinstance(exc, SubmissionError) else "")
        _write(result, out, junit, options.not_run, visibility)
        print(f"grader grade: cannot grade {submission}: {exc}", file=sys.stderr)
        return 2
    print_result(result, verbose=verbose)
    _write(result, out, junit, options.not_run, visibility)
    if result.error:
        print(f"grader grade: {result.error}", file=sys.stderr)
        return 2
    return 0


def _write(result: GradingResult, out: Path | None, junit: Path | None, not_run: str, visibility: str) -> None:
    from .junit import junit_xml

    if out:
        write_json_atomic(out, result.to_gradescope_dict(not_run=not_run, visibility=visibility))
    if junit:
        write_atomic(junit, junit_xml({Path(result.submission).name or "submission": result}))

