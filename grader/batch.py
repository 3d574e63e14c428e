"""``grader batch``: grade a whole class, a fresh judge per submission, ``--jobs`` at a time.

Every entry of the submissions folder (a folder or a ``.zip`` per student; the entry's name,
less ``.zip``, is the student id) is graded by ``python -m grader grade ENTRY --out TMP`` in a
process group of its own, under a wall-clock limit. Each result is written atomically to
``OUT/results/<student>.json`` the moment it is done: the submission's results.json plus a
``batch`` record (student, content hash, grading options, status, graded_at). A re-run skips
every student whose content hash and options match the stored record, so an interrupted
batch resumes where it stopped. Whatever goes wrong with one submission (unreadable, crashed
judge, time limit, unreadable results) becomes an error row; the batch goes on.

``--shard I/N`` grades the students whose id hashes (SHA-256, first 8 bytes) to I-1 modulo N:
a student's shard depends only on their id and N, never on who else is in the folder.
``OUT/batch.json`` lists the students this run was responsible for, so that the gradebook can
tell a missing result from an absent student.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import signal
import subprocess
import sys
import tarfile
import tempfile
import threading
import time
import zipfile
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from . import __version__
from .results import GradingResult, kit_data, regrade_reason, write_atomic, write_json_atomic

GRADE_COMMAND = (sys.executable, "-m", "grader", "grade")
KIT_ROOT = Path(__file__).resolve().parents[1]
RESULTS, LOGS, MANIFEST, JUNIT = "results", "logs", "batch.json", "junit.xml"
GRACE_SECONDS = 5.0  # after SIGINT, how long a judge may take to stop its workers before SIGKILL


class BatchError(RuntimeError):
    """The batch cannot start (no such folder, bad shard, no GPU where one is required)."""


@dataclass(frozen=True)
class Entry:
    """One student's submission: normally one path; two or more when names collide (alice/, alice.zip)."""

    student: str
    paths: tuple[Path, ...]


# -- which submissions, which shard, unchanged or not -------------------------------------------

def student_id(path: Path) -> str:
    return path.name[:-4] if path.name.lower().endswith(".zip") and path.is_file() else path.name


def submissions(folder: Path) -> list[Entry]:
    """The entries of ``folder``, sorted by student id; hidden entries (``.git``, ``.DS_Store``) skipped."""
    by_student: dict[str, list[Path]] = {}
    for path in sorted(folder.iterdir()):
        if not path.name.startswith((".", "__MACOSX")):
            by_student.setdefault(student_id(path), []).append(path)
    return [Entry(student, tuple(paths)) for student, paths in sorted(by_student.items())]


def parse_shard(text: str) -> tuple[int, int]:
    """``"I/N"`` (1 <= I <= N) as ``(I, N)``; ValueError with a usable message otherwise."""
    try:
        index, count = (int(part) for part in text.split("/"))
    except ValueError:
        raise ValueError(f"--shard {text!r}: expected I/N, e.g. 2/4") from None
    if not 1 <= index <= count:
        raise ValueError(f"--shard {text!r}: I must be between 1 and N")
    return index, count


def shard_of(student: str, count: int) -> int:
    """The shard (1..count) a student belongs to: a hash of the id alone, stable as the class changes."""
    return int.from_bytes(hashlib.sha256(student.encode()).digest()[:8], "big") % count + 1


def content_hash(paths: tuple[Path, ...]) -> str:
    """SHA-256 over every file's relative path and bytes (``__pycache__`` ignored), in a fixed order."""
    digest = hashlib.sha256()
    for path in paths:
        digest.update(f"entry {path.name}\0".encode())
        files = [path] if not path.is_dir() else sorted(
            p for p in path.rglob("*") if "__pycache__" not in p.parts and (p.is_file() or p.is_symlink()))
        for file in files:
            digest.update(f"{file.relative_to(path).as_posix()}\0".encode())
            digest.update(f"-> {os.readlink(file)}".encode() if file.is_symlink() else file.read_bytes())
            digest.update(b"\0")
    return f"sha256:{digest.hexdigest()}"


def _reusable(path: Path, digest: str, options: dict[str, Any], retry_errors: bool, cuda: bool) -> bool:
    """Whether the stored result at ``path`` still stands for this submission under these options."""
    try:
        data = json.loads(path.read_text())
        record = kit_data(data)["batch"]
    except (OSError, ValueError, KeyError, TypeError):
        return False
    if record.get("content_hash") != digest or record.get("options") != options:
        return False
    if record.get("status") != "graded" or regrade_reason(data):
        return not retry_errors
    # a GPU is here now: make it official (a --gpu only pass is partial by design, never provisional on that account)
    return not (kit_data(data).get("provisional") and cuda and options["gpu"] not in ("off", "only"))


def _class_folder(source: Path, scratch: Path) -> Path:
    """The folder of submissions: ``source`` itself, or a class archive (.zip, .tar[.gz]) unpacked into scratch."""
    if source.is_dir():
        return source
    if not source.is_file():
        raise BatchError(f"no such folder or archive: {source}")
    dest = scratch / "class"
    if zipfile.is_zipfile(source):
        shutil.unpack_archive(source, dest, "zip")  # skips absolute and '..' member names
    elif tarfile.is_tarfile(source):
        with tarfile.open(source) as archive:
            archive.extractall(dest, filter="data")
    else:
        raise BatchError(f"{source.name}: expected a folder of submissions or a .zip/.tar.gz of one")
    top = [p for p in dest.iterdir() if not p.name.startswith((".", "__MACOSX"))]
    return top[0] if len(top) == 1 and top[0].is_dir() else dest


# -- grading one submission ------------------------------------------------------------------------

class _Running:
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


def _grade_command(command: tuple[str, ...], entry: Path, out: Path, options: dict[str, Any]) -> list[str]:
    argv = [*command, str(entry.resolve()), "--out", str(out), "--jobs", "1", "--gpu", options["gpu"],
            "--seed", str(options["seed"]), "--profile", options["profile"],
            "--budget-seconds", str(options["budget_seconds"]), "--call-seconds", str(options["call_seconds"]),
            "--memory-mb", str(options["memory_mb"]), "--not-run", options["not_run"]]
    return argv + (["--problems", ",".join(options["problems"])] if options["problems"] else [])


def _log_tail(log: Path) -> str:
    try:
        lines = [line.strip() for line in log.read_text(errors="replace").splitlines() if line.strip()]
    except OSError:
        return ""
    return " | ".join(lines[-3:])[-600:]


def _judge(entry: Entry, out_dir: Path, scratch: Path, options: dict[str, Any], command: tuple[str, ...],
           timeout: float, running: _Running) -> tuple[dict[str, Any] | None, str, int | None] | None:
    """Run the grade command on one entry: (results, error, exit code), or None when interrupted."""
    if len(entry.paths) > 1:
        return None, "more than one entry for this student: " + ", ".join(p.name for p in entry.paths), None
    workdir = Path(tempfile.mkdtemp(prefix="judge-", dir=scratch))
    try:
        results, log = workdir / "results.json", out_dir / LOGS / f"{entry.student}.log"
        env = {**os.environ,
               "PYTHONPATH": os.pathsep.join(filter(None, [str(KIT_ROOT), os.environ.get("PYTHONPATH")]))}
        process = running.start(_grade_command(command, entry.paths[0], results, options), log, env)
        if process is None:
            return None
        try:
            exit_code = process.wait(timeout)
        except subprocess.TimeoutExpired:
            _stop([process])
            return None, f"grading took longer than {timeout:g} s and was stopped", None
        finally:
            running.finished(process)
        if running.stopping.is_set():
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


def _grade_one(entry: Entry, digest: str, out_dir: Path, scratch: Path, options: dict[str, Any],
               command: tuple[str, ...], timeout: float, running: _Running) -> dict[str, Any] | None:
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
    data.setdefault("extra_data", {})["batch"] = {"student": entry.student, "content_hash": digest, "options": options, "status": status,
                     "graded_at": graded_at, "exit_code": exit_code, "seconds": round(time.monotonic() - started, 2)}
    write_json_atomic(out_dir / RESULTS / f"{entry.student}.json", data)
    return data


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
              options: dict[str, Any], only: list[str] | None) -> dict[str, Any]:
    """OUT/batch.json: the students this folder is responsible for (with --only, those already listed stay)."""
    manifest = {"submissions": str(submissions_dir), "shard": f"{shard[0]}/{shard[1]}" if shard else None,
                "students": students, "options": options, "kit_version": __version__}
    if only:
        try:
            manifest = {**manifest, **json.loads((out / MANIFEST).read_text())}
        except (OSError, ValueError):
            manifest["students"] = []
        manifest["students"] = sorted(set(manifest["students"]) | set(only))
    return manifest


def run(submissions_dir: Path, out: Path, *, jobs: int, shard: tuple[int, int] | None, options: dict[str, Any],
        timeout_seconds: float, retry_errors: bool, command: tuple[str, ...], console,
        only: list[str] | None = None) -> int:
    """Grade the (shard of the) class into ``out``, or regrade ``only`` these students; 0 done, 130 interrupted."""
    started = time.monotonic()
    scratch = Path(tempfile.mkdtemp(prefix="kit-batch-"))
    try:
        entries = submissions(_class_folder(submissions_dir, scratch))
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
        manifest = _manifest(out, submissions_dir, shard, [e.student for e in entries], options, only)
        write_json_atomic(out / MANIFEST, manifest)
        cuda = options["gpu"] != "off" and _cuda_available()
        digests = {e.student: content_hash(e.paths) for e in entries}
        todo = entries if only else [e for e in entries if not _reusable(
            out / RESULTS / f"{e.student}.json", digests[e.student], options, retry_errors, cuda)]
        console.print(f"{len(entries)} submissions{f' in shard {shard[0]}/{shard[1]}' if shard else ''}: "
                      f"{len(entries) - len(todo)} unchanged since graded, {len(todo)} to grade, {jobs} at a time")
        if not todo:
            console.print(f"nothing to grade; results in {out / RESULTS}")
            status = 0
        else:
            status = _grade_all(todo, digests, out, scratch, options, jobs, timeout_seconds, command, console, started)
        _write_junit(out, manifest["students"])
        return status
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def _write_junit(out: Path, students: list[str]) -> None:
    """OUT/junit.xml: one test suite per student of this run with a readable result."""
    from .junit import junit_xml

    results = {}
    for student in students:
        try:
            results[student] = GradingResult.from_gradescope_dict(json.loads((out / RESULTS / f"{student}.json")
                                                                             .read_text()))
        except (OSError, ValueError, KeyError, TypeError):
            continue
    write_atomic(out / JUNIT, junit_xml(results))


def _grade_all(todo: list[Entry], digests: dict[str, str], out: Path, scratch: Path, options: dict[str, Any],
               jobs: int, timeout: float, command: tuple[str, ...], console, started: float) -> int:
    from rich.markup import escape

    running, errors, done = _Running(), [], 0
    pool = ThreadPoolExecutor(max_workers=max(1, jobs), thread_name_prefix="batch")
    futures: dict[Future, Entry] = {}
    try:
        with _progress(console) as progress:
            task = progress.add_task("grading", total=len(todo), errors=0)
            futures = {pool.submit(_grade_one, e, digests[e.student], out, scratch, options, command, timeout,
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
    return 0


def main(submissions: str, *, out: Path | None = None, jobs: int = 1, shard: str | None = None, gpu: str = "auto",
         seed: int = 0, problems: list[str] | None = None, profile: str = "grading", budget_seconds: float = 900.0,
         call_seconds: float = 30.0, memory_mb: int = 4096, timeout_seconds: float = 1200.0,
         retry_errors: bool = False, not_run: str = "exclude", only: list[str] | None = None,
         grade_command: tuple[str, ...] = GRADE_COMMAND) -> int:
    """Grade every submission in a folder (or class archive) into ``out``; 0 done, 2 cannot start, 130 stopped.

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
        if gpu in ("require", "only") and not _cuda_available():
            raise BatchError(f"--gpu {gpu}: no CUDA device is available on this machine")
    except (BatchError, ValueError) as exc:
        print(f"grader batch: {exc}", file=sys.stderr)
        return 2
    options = {"gpu": gpu, "seed": seed, "problems": sorted(problems) if problems else None, "profile": profile,
               "budget_seconds": budget_seconds, "call_seconds": call_seconds, "memory_mb": memory_mb,
               "not_run": not_run, "kit_version": __version__}
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
