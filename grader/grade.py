"""``grader grade``: grade one submission with the hidden suites, judged outside student code.

The submission is staged into a private folder; judge sessions (pytest over the hidden suites
with ``grader.plugin``, one per group of problems, ``--jobs`` at a time) each drive their own
sandboxed worker. Their outcomes are merged into one ``GradingResult``, written as
results.json and shown as a table.

The budget is a wall for the whole grading: each judge session gets the time before it less a
reserve (``_judge_budget``) and shares that among its problems (``grader.budget``), so that a
problem that stalls costs only itself; a session still running at the wall is stopped, and its
problems score 0 (``BUDGET_MESSAGE``).
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from .problems import PROBLEMS
from .results import NOT_JUDGED, GradingResult, TestResult, write_atomic, write_json_atomic
from .submission import SubmissionError, stage

HIDDEN = Path(__file__).resolve().parent / "hidden"
KIT_ROOT = Path(__file__).resolve().parents[1]


BUDGET_MESSAGE = "not run: this submission used up its time budget"
JUDGE_RESERVE = (15.0, 0.15)  # seconds (plus one call), share of the time left: kept from the judges' own
# budget for their start-up, the call in flight and shut-down, so that they normally end, with a result per
# test, before the wall
REPORT_SECONDS = 1.0  # kept after the wall for writing results.json and the table


class GradingError(RuntimeError):
    """The grader itself could not grade (bad arguments, no GPU where one is required)."""


def hidden_suites(problems: list[str] | None = None, hidden: Path = HIDDEN) -> list[Path]:
    """The hidden test files, in problem order, optionally only for ``problems`` (P1..P8)."""
    wanted = [key for key in PROBLEMS if not problems or key in problems]
    return [path for key in wanted for path in sorted(hidden.glob(f"test_{key.lower()}_*.py"))]


def _judge_budget(left: float, call_seconds: float) -> float:
    """The judges' own time budget, out of the ``left`` seconds before the wall."""
    return max(1.0, left - max(JUDGE_RESERVE[0] + call_seconds, JUDGE_RESERVE[1] * left))


def _judge_command(files: list[Path], package: Path, outcomes: Path, options: dict) -> list[str]:
    command = [sys.executable, "-m", "pytest", *map(str, files), "-p", "grader.plugin", "-q", "--assert=plain",
               "-p", "no:cacheprovider", "-c", str(HIDDEN / "pytest.ini"), "--rootdir", str(files[0].parent),
               "--submission", str(package), "--outcomes", str(outcomes), "--gpu", options["gpu"],
               "--call-seconds", str(options["call_seconds"]),
               "--budget-seconds", str(_judge_budget(options["deadline"] - time.monotonic(), options["call_seconds"])),
               "--memory-mb", str(options["memory_mb"]), "--hypothesis-profile", options["profile"],
               "--hypothesis-seed", str(options["seed"])]
    for path in options["masks"]:
        command += ["--mask", str(path)]
    return command + (["--in-process"] if options["in_process"] else []) + (
        ["--first-failure"] if options["first_failure"] else [])


def _stop_at(processes: list[subprocess.Popen], deadline: float) -> set[int]:
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
    """The problems (P1..P8, in order) whose hidden suites are among ``files``."""
    return [key for key in PROBLEMS if any(f.name.startswith(f"test_{key.lower()}_") for f in files)]


def _whole_problem(key: str, name: str, status: str, message: str, **extra: str) -> dict:
    """One outcome standing for a whole problem that was not judged test by test (all its points, 0 scored)."""
    return dict(problem=key, module=PROBLEMS[key].module, name=name, points=float(PROBLEMS[key].points),
                status=status, message=message, **extra)


def _over_budget(files: list[Path]) -> dict:
    """The outcomes of a judge session stopped at the budget wall: each of its problems failed, 0 points."""
    return {"outcomes": [_whole_problem(key, "(whole problem)", "failed", BUDGET_MESSAGE, nodeid=f"{key}::budget")
                         for key in _problems_of(files)]}


def _run_judges(groups: list[list[Path]], package: Path, workdir: Path, options: dict) -> list[dict]:
    """Run one judge session per group, all at once, until the budget wall; returns each session's
    report (fail closed: see ``_session_report``)."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(KIT_ROOT), os.environ.get("PYTHONPATH")]))}
    sessions = []
    for index, files in enumerate(groups):
        outcomes, log = workdir / f"outcomes-{index}.json", workdir / f"judge-{index}.log"
        with open(log, "wb") as stream:
            process = subprocess.Popen(_judge_command(files, package, outcomes, options), stdout=stream,
                                       stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, cwd=workdir, env=env)
        sessions.append((process, files, outcomes, log))
    try:
        stopped = _stop_at([process for process, *_ in sessions], options["deadline"])
    finally:  # Ctrl-C or any error: no judge (and so no worker) outlives this call
        for process, *_ in sessions:
            if process.poll() is None:
                process.kill()
                process.wait()
    return [_over_budget(files) if index in stopped else _session_report(process.returncode, files, outcomes, log)
            for index, (process, files, outcomes, log) in enumerate(sessions)]


def _session_report(exit_code: int, files: list[Path], outcomes: Path, log: Path) -> dict:
    """A judge session's outcomes, taken only when it ended normally (exit 0 or 1 and a complete
    outcomes file in which every test was judged). Otherwise every problem of the session is an
    error: nothing it recorded earns points, whatever stopped it (a signal, a crash, a kill)."""
    try:
        data = json.loads(outcomes.read_text())
        complete = (exit_code in (0, 1) and isinstance(data, dict) and data.get("complete") is True
                    and all(o["status"] in ("passed", "failed", "not_run") for o in data["outcomes"]))
    except (OSError, ValueError, KeyError, TypeError):
        data, complete = {}, False
    if complete:
        return data
    how = f"killed by signal {signal.Signals(-exit_code).name}" if exit_code < 0 else f"exit status {exit_code}"
    tail = " | ".join(line.strip() for line in log.read_text(errors="replace").splitlines()[-3:] if line.strip())
    reason = f"a judge session ended abnormally ({how}){': ' + tail[-300:] if tail else ''}"
    problems = _problems_of(files)
    tests = [{**o, "status": "error", "message": NOT_JUDGED} for o in (data.get("outcomes") or [])
             if isinstance(o, dict)] if isinstance(data, dict) else []
    judged = {t["problem"] for t in tests}
    tests += [_whole_problem(key, f"{PROBLEMS[key].title} (not graded)", "error", NOT_JUDGED)
              for key in problems if key not in judged]
    return {"outcomes": tests, "isolation": data.get("isolation", {}) if isinstance(data, dict) else {},
            "import_error": "", "failed": f"grading of {', '.join(problems)} failed, regrade: {reason}"}


def _split(files: list[Path], jobs: int) -> list[list[Path]]:
    groups = [files[i::jobs] for i in range(max(1, min(jobs, len(files))))]
    return [group for group in groups if group]


def _notes(reports: list[dict], tests: list[TestResult]) -> tuple[str, ...]:
    notes = set()
    late = sorted({t.problem for t in tests if "time budget" in t.message})  # BUDGET_MESSAGE, or the judges' own
    if late:
        notes.add(f"{', '.join(late)} used up {'its' if len(late) == 1 else 'their'} share of the time budget; "
                  "the tests not judged by then were not run.")
    for report in reports:
        if report.get("import_error"):
            notes.add(f"Importing your package failed: {report['import_error']}")
    return tuple(sorted(notes))


def grade(submission: str | Path, *, gpu: str = "auto", jobs: int = 1, seed: int = 0, in_process: bool = False,
          budget_seconds: float = 900.0, call_seconds: float = 30.0, memory_mb: int = 4096,
          problems: list[str] | None = None, profile: str = "grading", masks: tuple[Path, ...] = (),
          hidden: Path = HIDDEN, started: float | None = None, first_failure: bool = False) -> GradingResult:
    """Grade one submission within ``budget_seconds`` of ``started`` (default: now), start-up included.

    ``first_failure`` stops each judge at its first failed test (the rest are "not run"): for
    mutation verdicts, which only ask whether anything failed.

    Raises SubmissionError when the submission cannot be read, GradingError on bad options.
    """
    started = time.monotonic() if started is None else started
    if gpu in ("require", "only"):
        import torch

        if not torch.cuda.is_available():
            raise GradingError(f"--gpu {gpu}: no CUDA device is available on this machine")
    files = hidden_suites(problems, hidden)
    if not files:
        raise GradingError(f"no hidden suites found for {problems or 'any problem'} in {hidden}")
    workdir = Path(tempfile.mkdtemp(prefix="kit-judge-"))
    try:
        package = stage(submission, workdir / "staged")
        options = dict(gpu=gpu, seed=seed, in_process=in_process, deadline=started + budget_seconds - REPORT_SECONDS,
                       call_seconds=call_seconds, memory_mb=memory_mb, profile=profile, first_failure=first_failure,
                       masks=[*masks, workdir, Path(submission).resolve() if Path(submission).exists() else workdir])
        reports = _run_judges(_split(files, jobs), package, workdir, options)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    tests = [TestResult(**outcome) for report in reports for outcome in report["outcomes"]]
    isolation = next((r["isolation"] for r in reports if r.get("isolation")), {})
    failures = "; ".join(r["failed"] for r in reports if r.get("failed"))
    graded_with = dict(gpu=gpu, seed=seed, profile=profile, budget_seconds=budget_seconds, call_seconds=call_seconds,
                       memory_mb=memory_mb, problems=sorted(problems) if problems else None)
    return GradingResult(tests=tuple(tests), submission=str(submission), isolation=isolation,
                         execution_time=time.monotonic() - started, notes=_notes(reports, tests), error=failures,
                         options=graded_with)


def main(submission: str, *, out: Path | None = None, gpu: str = "auto", jobs: int = 1, seed: int = 0,
         in_process: bool = False, budget_seconds: float = 900.0, call_seconds: float = 30.0, memory_mb: int = 4096,
         problems: list[str] | None = None, profile: str = "grading", not_run: str = "exclude",
         visibility: str = "visible", junit: Path | None = None, verbose: bool = False) -> int:
    """Grade, write results.json (and JUnit XML), print the table; 0 when grading completed, 2 when it could not."""
    from rich.console import Console

    from .report import print_result

    started = time.monotonic()
    console = Console(stderr=True)
    try:
        with console.status(f"grading {submission} ({jobs} judge session{'s' if jobs > 1 else ''})..."):
            result = grade(submission, gpu=gpu, jobs=jobs, seed=seed, in_process=in_process,
                           budget_seconds=budget_seconds, call_seconds=call_seconds, memory_mb=memory_mb,
                           problems=problems, profile=profile, masks=(out.resolve(),) if out else (),
                           started=started)
    except (SubmissionError, GradingError) as exc:
        result = GradingResult.failed(str(submission), str(exc), time.monotonic() - started)
        _write(result, out, junit, not_run, visibility)
        print(f"grader grade: cannot grade {submission}: {exc}", file=sys.stderr)
        return 2
    print_result(result, verbose=verbose)
    _write(result, out, junit, not_run, visibility)
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

