"""What the tests of the probes (grader.judge.diagnosis.PROBES) share: submissions made of the reference with
fixtures appended to one module, and the mistakes a probe names on one of them."""

from __future__ import annotations

from pathlib import Path

from grader.submission import stage
from grader.judge import diagnosis, handle
from grader.judge.inprocess import InProcess
from grader.paths import KIT_ROOT
from grader import mistakes

FIXTURES = KIT_ROOT / "grader" / "tests" / "fixtures"


def staged(folder: Path, module: str, *appended: Path) -> Path:
    """The reference staged in ``folder`` with each of ``appended`` added to its ``module``.py."""
    package = stage(mistakes.SOLUTIONS, folder)
    target = package / f"{module}.py"
    target.write_text("\n\n".join([target.read_text(), *(path.read_text() for path in appended)]))
    return package


def submission(folder: Path, module: str, *appended: Path) -> handle.Submission:
    """``staged``, served in process."""
    package = staged(folder, module, *appended)
    return handle.Submission(InProcess(package), package)


def named(diagnoser: diagnosis.Diagnoser, problem: str, sub: handle.Submission, test: str = "") -> list[str]:
    """The ids of the mistakes ``problem``'s probe names on ``sub`` for a failed ``test`` (any test: "")."""
    return [mistake.id for mistake in diagnoser.diagnose(problem, handle.Recording(), 60, sub, test)]
