"""``grader batch``: grade a whole class, a fresh judge per submission, ``--jobs`` at a time.

Every entry of the submissions folder (a folder or a ``.zip`` per student; the entry's name,
less ``.zip``, is the student id; or a Gradescope export or Canvas download as it comes, see
``layouts``) is graded by ``python -m grader grade ENTRY --out TMP`` in a
process group of its own, under a wall-clock limit. Each result is written atomically to
``OUT/results/<student>.json`` the moment it is done: the submission's results.json plus a
``batch`` record (student, content hash, grading options, status, graded_at). A re-run skips
every student whose content hash and options match the stored record, so an interrupted
batch resumes where it stopped. Whatever goes wrong with one submission (unreadable, crashed
judge, time limit, unreadable results) becomes an error row; the batch goes on.

The judge sessions of those grade commands fork from one warm judge the batch keeps
(``grading.judges.warm``) when it grades more than one submission with the grader's own command: they
skip importing torch, pytest and hypothesis again, and share nothing a submission can touch (no
submission code runs in a judge). Each submission's workers still start fresh in their sandbox.

``--shard I/N`` grades the students whose id hashes (SHA-256, first 8 bytes) to I-1 modulo N:
a student's shard depends only on their id and N, never on who else is in the folder.
``OUT/batch.json`` lists the students this run was responsible for, so that the gradebook can
tell a missing result from an absent student, with the layout read and the files that matched no student.

Exit status: 0 when every submission has a grade, 1 when the batch finished with error rows or files
that matched no student (listed at the end; every result is kept), 2 when it cannot start, 130 when
stopped by SIGINT (Ctrl-C) or SIGTERM (``kill PID``, Slurm's time limit, a cancelled CI job): every
result finished so far is kept and the same command resumes. A background job of a non-interactive
shell ignores SIGINT (the shell sets that, and the batch keeps it): stop such a batch with SIGTERM.
"""

from __future__ import annotations

import contextlib
import json
import shutil
import signal
import sys
import tempfile
import threading
import time
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import asdict
from pathlib import Path
from typing import Any

from .. import __version__
from ..arguments import parse_shard
from .batch_entries import BatchError, Entry, class_folder, content_hash, shard_of
from .layouts import read_class
from .batch_judge import LOGS, RESULTS, Running, grade_one, recorded_options
from ..options import GradingOptions
from ..grading import judges
from ..grading.results import GradingResult, kit_data, regrade_reason, write_atomic, write_json_atomic

GRADE_COMMAND = (sys.executable, "-m", "grader", "grade")
MANIFEST, JUNIT = "batch.json", "junit.xml"


def _reusable(path: Path, digest: str, options: GradingOptions, retry_errors: bool, cuda: bool) -> bool:
    """Whether the stored result at ``path`` still stands for this submission under these options."""
    try:
        data = json.loads(path.read_text())
        record = kit_data(data)["batch"]
    except (OSError, ValueError, KeyError, TypeError):
        return False
    if record.get("content_hash") != digest or record.get("options") != recorded_options(options):
        return False
    if record.get("status") != "graded" or regrade_reason(data):
        return not retry_errors
    # a GPU is here now: make it official (a --gpu only pass is partial by design, never provisional on that account)
    return not (kit_data(data).get("provisional") and cuda and options.gpu not in ("off", "only"))


def _summary_line(data: dict[str, Any]) -> str:
    from rich.markup import escape

    kit = kit_data(data)
    record = kit["batch"]
    if record["status"] != "graded":
        return f"{escape(record['student'])}: [red]error[/]: {escape(regrade_reason(data)[:200])}"
    total = sum(float(p.get("max_score", 0)) for p in kit.get("problems", {}).values())
    return (f"{escape(record['student'])}: {data['score']:g} / {total:g}"
            + (" (provisional)" if kit.get("provisional") else ""))


# -- the batch ------------------------------------------------------------------------------------

def _progress(console):
    from rich.progress import (BarColumn, MofNCompleteColumn, Progress, ProgressColumn, TextColumn,
                               TimeElapsedColumn, TimeRemainingColumn)
    from rich.text import Text

    class RateColumn(ProgressColumn):
        def render(self, task) -> Text:
            return Text(f"{task.speed * 60:.1f}/min" if task.speed else "-/min", style="cyan")

    return Progress(TextColumn("[bold]{task.description}"), BarColumn(), MofNCompleteColumn(), RateColumn(),
                    TextColumn("{task.fields[errors]} errors"), TimeElapsedColumn(), TextColumn("ETA"),
                    TimeRemainingColumn(), console=console)


def _cuda_available() -> bool:
    import torch

    return torch.cuda.is_available()


def _sigterm_as_interrupt(signum, frame) -> None:
    raise KeyboardInterrupt  # Slurm's time limit and a cancelled CI job stop the batch like Ctrl-C


def _manifest(out: Path, submissions_dir: Path, shard: tuple[int, int] | None, students: list[str],
              options: GradingOptions, only: list[str] | None) -> dict[str, Any]:
    """OUT/batch.json: the students this folder is responsible for (with --only, those already listed stay)."""
    manifest = {"submissions": str(submissions_dir), "shard": f"{shard[0]}/{shard[1]}" if shard else None,
                "students": students, "options": recorded_options(options), "kit_version": __version__}
    if only:
        try:
            manifest = {**manifest, **json.loads((out / MANIFEST).read_text())}
        except (OSError, ValueError):
            manifest["students"] = []
        manifest["students"] = sorted(set(manifest["students"]) | set(only))
    return manifest


def run(submissions_dir: Path, out: Path, *, jobs: int, shard: tuple[int, int] | None, options: GradingOptions,
        timeout_seconds: float, retry_errors: bool, command: tuple[str, ...], console,
        only: list[str] | None = None) -> int:
    """Grade the (shard of the) class into ``out``, or regrade ``only`` these students; 0 done, 1 done with error
    rows or files that matched no student, 130 interrupted."""
    from rich.markup import escape

    started = time.monotonic()
    scratch = Path(tempfile.mkdtemp(prefix="kit-batch-"))
    try:
        intake = read_class(class_folder(submissions_dir, scratch), scratch)
        entries = intake.entries
        for unmatched in intake.unmatched:
            console.print(f"[yellow]not graded[/] {escape(unmatched.name)}: {escape(unmatched.reason)}", highlight=False)
        if shard:
            entries = [e for e in entries if shard_of(e.student, shard[1]) == shard[0]]
        if only:
            unknown = sorted(set(only) - {e.student for e in entries})
            if unknown:
                raise BatchError(f"--only: no submission for {', '.join(unknown)} in {submissions_dir}"
                                 + (f" (shard {shard[0]}/{shard[1]})" if shard else ""))
            entries = [e for e in entries if e.student in only]
        (out / RESULTS).mkdir(parents=True, exist_ok=True)
        (out / LOGS).mkdir(exist_ok=True)
        manifest = {**_manifest(out, submissions_dir, shard, [e.student for e in entries], options, only),
                    "layout": intake.layout, "unmatched": [asdict(u) for u in intake.unmatched]}
        write_json_atomic(out / MANIFEST, manifest)
        cuda = options.gpu != "off" and _cuda_available()
        digests = {e.student: content_hash(e.paths) for e in entries}
        todo = entries if only else [e for e in entries if not _reusable(
            out / RESULTS / f"{e.student}.json", digests[e.student], options, retry_errors, cuda)]
        console.print(f"{len(entries)} submissions ({intake.layout} layout)"
                      f"{f' in shard {shard[0]}/{shard[1]}' if shard else ''}: "
                      f"{len(entries) - len(todo)} unchanged since graded, {len(todo)} to grade, {jobs} at a time")
        if not todo:
            console.print(f"nothing to grade; results in {out / RESULTS}")
            status = 0
        else:
            shared = judges.warm() if len(todo) > 1 and command == GRADE_COMMAND else contextlib.nullcontext()
            with shared:
                status = _grade_all(todo, digests, out, scratch, options, jobs, timeout_seconds, command, console,
                                    started)
        stored = _stored(out, manifest["students"])
        _write_junit(out, stored)
        if status != 0:
            return status
        errors = sorted(student for student, data in stored.items() if regrade_reason(data))
        if errors or intake.unmatched:
            named = f" ({escape(', '.join(errors[:10]))}{' ...' * (len(errors) > 10)})" if errors else ""
            console.print(f"[red]to fix[/]: {len(errors)} error rows{named}, {len(intake.unmatched)} files or folders "
                          f"that matched no student (in {out / MANIFEST})", highlight=False)
            return 1
        return 0
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def _stored(out: Path, students: list[str]) -> dict[str, dict[str, Any]]:
    """The readable results of this run's students, by student."""
    stored = {}
    for student in students:
        try:
            stored[student] = json.loads((out / RESULTS / f"{student}.json").read_text())
        except (OSError, ValueError):
            continue
    return stored


def _write_junit(out: Path, stored: dict[str, dict[str, Any]]) -> None:
    """OUT/junit.xml: one test suite per student of this run with a readable result."""
    from ..grading.junit import junit_xml

    results = {}
    for student, data in stored.items():
        try:
            results[student] = GradingResult.from_gradescope_dict(data)
        except (ValueError, KeyError, TypeError, AttributeError):
            continue
    write_atomic(out / JUNIT, junit_xml(results))


def _grade_all(todo: list[Entry], digests: dict[str, str], out: Path, scratch: Path, options: GradingOptions,
               jobs: int, timeout: float, command: tuple[str, ...], console, started: float) -> int:
    from rich.markup import escape

    running, errors, done = Running(), [], 0
    pool = ThreadPoolExecutor(max_workers=max(1, jobs), thread_name_prefix="batch")
    futures: dict[Future, Entry] = {}
    try:
        with _progress(console) as progress:
            task = progress.add_task("grading", total=len(todo), errors=0)
            futures = {pool.submit(grade_one, e, digests[e.student], out, scratch, options, command, timeout,
                                   running): e for e in todo}
            pending = set(futures)
            while pending:
                finished, pending = wait(pending, timeout=0.5, return_when=FIRST_COMPLETED)
                for future in sorted(finished, key=lambda f: futures[f].student):
                    try:
                        data = future.result()
                    except Exception as exc:  # the result could not even be written (disk full?): say so, go on
                        data = None
                        errors.append((futures[future].student, f"result not written: {exc}"))
                    else:
                        if data is None:  # its grade command was stopped by SIGINT
                            errors.append((futures[future].student, "its grading was interrupted (SIGINT): no "
                                                                    "result kept; run the same command again to grade it"))
                    if data is not None:
                        done += 1
                        record = kit_data(data)
                        if record["batch"]["status"] != "graded":
                            errors.append((record["batch"]["student"], regrade_reason(data)))
                        progress.console.print(_summary_line(data), highlight=False)
                    progress.update(task, advance=1, errors=len(errors))
    except KeyboardInterrupt:
        for future in futures:
            future.cancel()
        running.stop_all()
        pool.shutdown(wait=True)
        console.print(f"[yellow]interrupted[/]: every result finished so far is kept in {out / RESULTS} (at least "
                      f"{done} of {len(todo)} from this run); run the same command again to resume.", highlight=False)
        return 130
    finally:
        pool.shutdown(wait=True, cancel_futures=True)
    for student, error in errors:
        console.print(f"[red]error[/] {escape(student)}: {escape(error[:300])}", highlight=False)
    console.print(f"graded {done} ({len(errors)} errors) in {time.monotonic() - started:.1f} s; "
                  f"results in {out / RESULTS}")
    return 1 if errors else 0


def main(submissions: str, *, options: GradingOptions = GradingOptions(), out: Path | None = None, jobs: int = 1,
         shard: str | None = None, timeout_seconds: float = 1200.0, retry_errors: bool = False,
         only: list[str] | None = None, grade_command: tuple[str, ...] = GRADE_COMMAND) -> int:
    """Grade every submission in a folder (or class archive) into ``out``; 0 done, 1 done with error rows or
    unmatched files, 2 cannot start, 130 stopped (SIGINT or SIGTERM).

    ``only``: regrade just these students (whether or not they changed), keeping every other result.
    """
    from rich.console import Console

    console = Console(stderr=True)
    try:
        if out is None:
            raise BatchError("--out OUT_DIR is required")
        parsed = parse_shard(shard) if shard else None
        if jobs < 1 or timeout_seconds <= 0:
            raise BatchError("--jobs must be at least 1 and --timeout-seconds positive")
        if options.gpu in ("require", "only") and not _cuda_available():
            raise BatchError(f"--gpu {options.gpu}: no CUDA device is available on this machine")
    except (BatchError, ValueError) as exc:
        print(f"grader batch: {exc}", file=sys.stderr)
        return 2
    in_main = threading.current_thread() is threading.main_thread()
    previous = signal.signal(signal.SIGTERM, _sigterm_as_interrupt) if in_main else None
    try:
        return run(Path(submissions), Path(out), jobs=jobs, shard=parsed, options=options,
                   timeout_seconds=timeout_seconds, retry_errors=retry_errors, command=tuple(grade_command),
                   console=console, only=only)
    except BatchError as exc:
        print(f"grader batch: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:  # before grading started: nothing to keep
        print("grader batch: interrupted", file=sys.stderr)
        return 130
    finally:
        if in_main:
            signal.signal(signal.SIGTERM, previous)
