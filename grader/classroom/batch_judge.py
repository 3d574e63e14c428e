"""Grading one submission of a batch: ``grader grade`` in a process group of its own, under a
wall-clock limit, its result written at once with the batch's record; Ctrl-C stops every judge."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import tempfile
import threading
import time
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from .. import __version__
from .batch_entries import Entry
from ..options import GradingOptions
from ..paths import kit_pythonpath
from ..grading.results import GradingResult, regrade_reason, write_json_atomic

RESULTS, LOGS = "results", "logs"
GRACE_SECONDS = 5.0  # after SIGINT, how long a judge may take to stop its workers before SIGKILL
# How a grade command stopped by SIGINT ends. Ctrl-C reaches one started at that very moment (still in the
# batch's process group, between fork and its own session), perhaps before the batch itself has stopped.
INTERRUPTED = (130, -signal.SIGINT)


def recorded_options(options: GradingOptions) -> dict[str, Any]:
    """The options a batch record (and OUT/batch.json) holds: a stored result is reused only under equal ones."""
    return {**options.graded_with(), "not_run": options.not_run, "kit_version": __version__}


class Running:
    """The judge process groups now running, so that Ctrl-C can stop every one of them."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.stopping = threading.Event()
        self.processes: set[subprocess.Popen] = set()

    def start(self, argv: list[str], log: Path, env: dict[str, str]) -> subprocess.Popen | None:
        with self.lock:  # a process is either started before stop_all() looks, or not at all
            if self.stopping.is_set():
                return None
            with open(log, "wb") as stream:
                process = subprocess.Popen(argv, stdout=stream, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                           env=env, start_new_session=True)
            self.processes.add(process)
            return process

    def finished(self, process: subprocess.Popen) -> None:
        with self.lock:
            self.processes.discard(process)

    def stop_all(self) -> None:
        self.stopping.set()
        with self.lock:
            processes = list(self.processes)
        _stop(processes)


def _signal_group(process: subprocess.Popen, signum: int) -> None:
    try:
        os.killpg(process.pid, signum)
    except (ProcessLookupError, PermissionError):
        pass


def _stop(processes: list[subprocess.Popen]) -> None:
    """SIGINT each judge's group (the judge then kills its workers), SIGKILL what is left after the grace."""
    for process in processes:
        _signal_group(process, signal.SIGINT)
    deadline = time.monotonic() + GRACE_SECONDS
    try:
        for process in processes:
            try:
                process.wait(max(0.0, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                pass
    finally:
        for process in processes:
            _signal_group(process, signal.SIGKILL)
            process.wait()


def _log_tail(log: Path) -> str:
    try:
        lines = [line.strip() for line in log.read_text(errors="replace").splitlines() if line.strip()]
    except OSError:
        return ""
    return " | ".join(lines[-3:])[-600:]


def _judge(entry: Entry, out_dir: Path, scratch: Path, options: GradingOptions, command: tuple[str, ...],
           timeout: float, running: Running) -> tuple[dict[str, Any] | None, str, int | None] | None:
    """Run the grade command on one entry: (results, error, exit code), or None when interrupted (the batch
    stopping, or the grade command stopped by SIGINT): no result then, and a rerun grades the entry."""
    if len(entry.paths) > 1:
        return None, "more than one entry for this student: " + ", ".join(p.name for p in entry.paths), None
    workdir = Path(tempfile.mkdtemp(prefix="judge-", dir=scratch))
    try:
        results, log = workdir / "results.json", out_dir / LOGS / f"{entry.student}.log"
        argv = [*command, str(entry.paths[0].resolve()), "--out", str(results), "--jobs", "1", *options.to_argv()]
        process = running.start(argv, log, kit_pythonpath())
        if process is None:
            return None
        try:
            exit_code = process.wait(timeout)
        except subprocess.TimeoutExpired:
            _stop([process])
            return None, f"grading took longer than {timeout:g} s and was stopped", None
        finally:
            running.finished(process)
        if running.stopping.is_set() or exit_code in INTERRUPTED:
            return None
        try:
            data = json.loads(results.read_text())
            if isinstance(data, dict) and isinstance(data.get("score"), (int, float)):
                return data, "", exit_code
            problem = "results.json holds no score"
        except (OSError, ValueError) as exc:
            problem = f"no readable results ({exc.__class__.__name__})"
        tail = _log_tail(log)
        return None, f"the grader exited with code {exit_code}, {problem}" + (f": {tail}" if tail else ""), exit_code
    finally:
        shutil.rmtree(workdir, ignore_errors=True)


def grade_one(entry: Entry, digest: str, out_dir: Path, scratch: Path, options: GradingOptions,
               command: tuple[str, ...], timeout: float, running: Running) -> dict[str, Any] | None:
    """Grade one entry and write its result at once; None when the batch was interrupted first."""
    graded_at = datetime.now(timezone.utc).isoformat(timespec="seconds")
    started = time.monotonic()
    try:
        judged = _judge(entry, out_dir, scratch, options, command, timeout, running)
    except Exception as exc:  # whatever breaks here is this submission's error row, never the batch's end
        judged = None, f"the batch could not run the grader: {exc.__class__.__name__}: {exc}", None
    if judged is None:
        return None
    data, error, exit_code = judged
    if data is None:
        data = GradingResult.failed(", ".join(str(p) for p in entry.paths), error,
                                    time.monotonic() - started).to_gradescope_dict()
    status = "error" if regrade_reason(data) else "graded"  # --retry-errors regrades it
    data.setdefault("extra_data", {})["batch"] = {"student": entry.student, "content_hash": digest, "options": recorded_options(options), "status": status,
                     "graded_at": graded_at, "exit_code": exit_code, "seconds": round(time.monotonic() - started, 2),
                     **({"lms": entry.lms} if entry.lms else {})}
    write_json_atomic(out_dir / RESULTS / f"{entry.student}.json", data)
    return data
