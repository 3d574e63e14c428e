"""One grading in the attack check: ``grader grade`` on an attack or a control, in an
autograder-like folder, its time and results recorded."""

from __future__ import annotations

import hashlib
import json
import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from ...options import GradingOptions
from ...paths import kit_pythonpath
from ...containment import template
from ...grading import judges
from ...grading.results import GradingResult, TestResult
from .processes import Reaper

SLACK_SECONDS = 180


@dataclass
class Graded:
    """One run of ``grader grade``: what it wrote and how it ended."""

    returncode: int | None
    seconds: float
    data: dict | None
    text: str
    stderr: str
    digest: str

    @property
    def tests(self) -> tuple[TestResult, ...]:
        return GradingResult.from_gradescope_dict(self.data).tests if self.data else ()

    @property
    def statuses(self) -> dict[str, str]:
        return {t.nodeid: t.status for t in self.tests}

    @property
    def messages(self) -> list[str]:
        return [t.message for t in self.tests]

    @property
    def score(self) -> float:
        return float((self.data or {}).get("score", 0.0))


def digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest() if path.is_file() else ""


def layout(grading: Path) -> tuple[Path, Path]:
    """An autograder-like folder: submission/, results/, canaries; returns (submission, results.json)."""
    for folder in (grading / "submission", grading / "results", grading / "tmp"):
        folder.mkdir(parents=True, exist_ok=True)
    for folder in (grading, grading / "submission", grading / "results"):
        (folder / "canary.txt").write_text("left here by the attack check; must survive grading\n")
    return grading / "submission", grading / "results" / "results.json"


def grade(grading: Path, submission: Path, out: Path, problems: str, options: dict, reaper: Reaper,
          warm: bool = False) -> Graded:
    """``grader grade`` on ``submission``'s ``problems`` (comma-separated) with the ci profile and an attack's
    ``options`` (call_seconds, budget_seconds, memory_mb), stopped ``SLACK_SECONDS`` after its budget. Graded
    as an instructor's grade command is, its judges and workers started cold, or (``warm``) as a batch grades:
    forked from this check's warm judge and worker template (``judges.warm``)."""
    settings = GradingOptions(problems=tuple(problems.split(",")), profile="ci", **options)
    budget = settings.budget_seconds
    command = [sys.executable, "-m", "grader", "grade", str(submission), "--out", str(out), *settings.to_argv()]
    env = kit_pythonpath({**os.environ, "TMPDIR": str(grading / "tmp")})
    if not warm:
        env.pop(judges.SHARED, None)
        env.pop(template.ADDRESS, None)
    started = time.monotonic()
    with reaper.lock:
        process = subprocess.Popen(command, cwd=grading, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                   stderr=subprocess.PIPE, start_new_session=True)
        reaper.tracked.add(process.pid)
    try:
        _, stderr = process.communicate(timeout=budget + SLACK_SECONDS)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        _, stderr = process.communicate()
        process.returncode = None
    finally:
        with reaper.lock:
            reaper.tracked.discard(process.pid)
    seconds = time.monotonic() - started
    text = out.read_text(errors="replace") if out.is_file() else ""
    try:
        data = json.loads(text) if text else None
    except ValueError:
        data = None
    return Graded(process.returncode, seconds, data, text, stderr.decode(errors="replace")[-2000:], digest(out))
