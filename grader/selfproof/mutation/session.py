"""One problem's cosmic-ray session: a private copy of the reference, the engine's database, its run.

Layout under the work folder (``.kit-out/mutate/`` by default), per suite (``hidden``, ``public``) and problem::

    hidden/P3/session-<key>.sqlite   the engine's session database (resumable: finished mutants stay)
    hidden/P3/session-<key>.toml     its configuration (test command, expected score, distributor)
    hidden/P3/worker-<k>/submission/assignment/<module>.py   one copy per worker, mutated in place

``<key>`` hashes everything a verdict depends on (the reference module, the suite's test files, the
sample size and seed, the engine's version), so a changed suite or reference starts a new
session and an unchanged one resumes where it stopped.
"""

from __future__ import annotations

import hashlib
import random
import shlex
import shutil
import socket
import subprocess
import sys
import time
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from importlib.metadata import version
from pathlib import Path
from typing import Iterator

from cosmic_ray.config import ConfigDict, serialize_config
from cosmic_ray.work_db import use_db
from cosmic_ray.work_item import WorkerOutcome, WorkResult

from ...grading.grade import hidden_suites
from ...paths import KIT_ROOT, kit_pythonpath
from ...problems import PROBLEMS, suite_file
from ...submission import stage
from .regions import Eligibility, Identity, identities
from .verdict import SURVIVED, public_verdict

SOLUTIONS = KIT_ROOT / "solutions"
TIMEOUT_SECONDS = 600.0  # a mutant that hangs is stopped by the grader's own call limit well before this
OUT_OF_SCOPE, NOT_SAMPLED = "outside the solution's code", "not in the sample"


class MutationError(RuntimeError):
    """The session cannot start (the reference does not score full marks, the engine failed)."""


@dataclass(frozen=True)
class Session:
    problem: str
    folder: Path
    key: str
    suite: str = "hidden"

    @property
    def module(self) -> str:
        return PROBLEMS[self.problem].module

    @property
    def database(self) -> Path:
        return self.folder / f"session-{self.key}.sqlite"

    @property
    def config(self) -> Path:
        return self.folder / f"session-{self.key}.toml"

    def worker(self, index: int) -> Path:
        return self.folder / f"worker-{index}"

    @property
    def source(self) -> str:
        return (SOLUTIONS / f"{self.module}.py").read_text()


def suite_files(problem: str, suite: str) -> list[Path]:
    """The test files a verdict on ``problem`` runs: its hidden suite, or its public tests and their helpers."""
    if suite == "hidden":
        return hidden_suites([problem])
    tests = KIT_ROOT / "tests"
    return [tests / suite_file(problem), *sorted(tests.glob("_*.py")), tests / "conftest.py"]


def open_session(problem: str, work: Path, sample: int | None, seed: int, suite: str = "hidden") -> Session:
    """The session for ``problem``'s ``suite`` under ``work``, created (baseline checked, mutants listed) if new."""
    module = PROBLEMS[problem].module
    digest = hashlib.sha256()
    for part in [(SOLUTIONS / f"{module}.py").read_bytes(), *(p.read_bytes() for p in suite_files(problem, suite)),
                 f"{suite}/{sample}/{seed}/{version('cosmic-ray')}".encode()]:
        digest.update(hashlib.sha256(part).digest())
    session = Session(problem, work / suite / problem, digest.hexdigest()[:12], suite)
    if not session.database.exists():
        _create(session, sample, seed)
    return session


def _create(session: Session, sample: int | None, seed: int) -> None:
    session.folder.mkdir(parents=True, exist_ok=True)
    target = f"submission/assignment/{session.module}.py"  # relative: each worker mutates its own copy
    command = [sys.executable, "-m", "grader.selfproof.mutation.verdict", "submission", "--problem", session.problem,
               "--suite", session.suite, *_baseline(session)]
    config = ConfigDict({"module-path": target, "timeout": TIMEOUT_SECONDS, "excluded-modules": [],
                         "test-command": shlex.join(command), "distributor": {"name": "local"}})
    session.config.write_text(serialize_config(config))
    partial = session.database.with_suffix(".partial")
    partial.unlink(missing_ok=True)
    _fresh_copy(session, 0)
    _engine(["init", str(session.config), str(partial)], cwd=session.worker(0))
    _select(session, partial, sample, seed)
    partial.rename(session.database)  # only a complete, filtered session is ever resumed


def _baseline(session: Session) -> list[str]:
    """The verdict's arguments that the unmutated reference sets (its score on the hidden suite); raises
    ``MutationError`` where the reference does not pass the suite."""
    if session.suite == "public":
        status, line = public_verdict(str(SOLUTIONS), session.problem)
        if status != SURVIVED:
            raise MutationError(f"{session.problem}: the reference does not pass its public tests ({line})")
        return []
    from ...grading.grade import grade

    baseline = grade(SOLUTIONS, problems=[session.problem], profile="ci")
    runnable = baseline.max_score - sum(p.not_run for p in baseline.problems().values())
    if baseline.score < runnable or baseline.error:
        raise MutationError(f"{session.problem}: the reference scores {baseline.score:g} of {runnable:g} runnable "
                            "points; mutation testing needs a passing reference")
    return ["--expect", f"{baseline.score:g}"]


def _select(session: Session, database: Path, sample: int | None, seed: int) -> None:
    """Skip mutants outside the solution's code or its strings, and those outside the seeded sample."""
    eligible = Eligibility(session.source)
    with use_db(str(database)) as db:
        items = sorted(db.pending_work_items, key=lambda w: (w.mutations[0].start_pos, w.mutations[0].operator_name,
                                                             w.mutations[0].occurrence))
        in_scope = [w for w in items if eligible(w.mutations[0].start_pos, w.mutations[0].end_pos)]
        names = dict(zip((w.job_id for w in in_scope), identify(session, in_scope)))
        chosen = in_scope
        if sample is not None and sample < len(in_scope):
            chosen = random.Random(seed).sample(sorted(in_scope, key=lambda w: names[w.job_id]), sample)
        keep = {w.job_id for w in chosen}
        db.set_multiple_results([w.job_id for w in items if w.job_id not in names],
                                WorkResult(worker_outcome=WorkerOutcome.SKIPPED, output=OUT_OF_SCOPE))
        db.set_multiple_results([j for j in names if j not in keep],
                                WorkResult(worker_outcome=WorkerOutcome.SKIPPED, output=NOT_SAMPLED))


def identify(session: Session, items: list) -> list[Identity]:
    """Identities of work items of this session, in the order given (which must be source order)."""
    return identities(session.module, session.source, [(w.mutations[0].operator_name, w.mutations[0].start_pos)
                                                       for w in items])


def run(session: Session, jobs: int) -> None:
    """Run every pending mutant of the session: in this process's turn (jobs 1) or on ``jobs`` local workers."""
    with ExitStack() as stack:
        config = session.config
        if jobs > 1:  # each worker mutates its own fresh copy
            urls = [stack.enter_context(_http_worker(session, index)) for index in range(jobs)]
            config = session.folder / f"session-{session.key}-http.toml"
            settings = _read_config(session.config)
            settings["distributor"] = {"name": "http", "http": {"worker-urls": urls}}
            config.write_text(serialize_config(settings))
        else:
            _fresh_copy(session, 0)
        _engine(["exec", str(config), str(session.database)], cwd=session.worker(0))


def _read_config(path: Path) -> ConfigDict:
    from cosmic_ray.config import load_config

    return load_config(str(path))


def _fresh_copy(session: Session, index: int) -> Path:
    """A clean copy of the reference for worker ``index`` (a run stopped mid-mutant may have left one mutated)."""
    folder = session.worker(index)
    shutil.rmtree(folder, ignore_errors=True)
    stage(SOLUTIONS, folder / "submission")
    return folder


def _engine(arguments: list[str], cwd: Path) -> None:
    command = [sys.executable, "-m", "cosmic_ray.cli", *arguments]
    done = subprocess.run(command, cwd=cwd, env=kit_pythonpath(), capture_output=True, text=True)
    if done.returncode != 0:
        raise MutationError(f"cosmic-ray {arguments[0]} failed (exit {done.returncode}): {done.stderr[-800:]}")


@contextmanager
def _http_worker(session: Session, index: int) -> Iterator[str]:
    """An engine worker on a loopback port, in its own copy of the reference; yields its URL."""
    folder = _fresh_copy(session, index)
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    process = subprocess.Popen([sys.executable, "-m", "grader.selfproof.mutation.http_worker", str(port)], cwd=folder,
                               env=kit_pythonpath(), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        _wait_for(port, process)
        yield f"http://127.0.0.1:{port}"
    finally:
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def _wait_for(port: int, process: subprocess.Popen, seconds: float = 60.0) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise MutationError(f"a mutation worker exited at start (exit {process.returncode})")
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return
        except OSError:
            time.sleep(0.2)
    raise MutationError(f"a mutation worker did not listen on port {port} within {seconds:g} s")
