"""``grader mutate``: every small change a mutation engine can make to the reference, graded.

The curated corpus (``grader/mistakes/``) holds the mistakes its authors thought of; this
command measures the hidden suites against all of the engine's mutants of the reference
instead: one problem at a time, only code between ``# BEGIN SOLUTION`` / ``# END SOLUTION``
and never a string literal (docstrings, error messages). A mutant is killed when its problem
scores below the unmutated reference under the derandomized ``ci`` profile.

Engine: cosmic-ray. Its ``test-command`` is any shell command, so the verdict is the real
grader (``grader.selfproof.mutation.verdict``); it mutates a module file in place wherever that file is,
so it works on a private copy outside the kit; its session is a SQLite database of work
items that ``exec`` resumes, and that filters may mark skipped (how scope and sampling are
applied); its ``http`` distributor spreads a session over workers on several machines.
mutmut 3 (the current release) instead rewrites the whole source tree into trampolines and
runs its own pytest integration, so neither an arbitrary grading command nor a sandboxed
worker that imports a plain copy of the package fits it.

``--suite public`` runs each mutant against its problem's public tests instead (what a student runs
before submitting): a mutant they pass is a mistake a student learns of only from the grade.
"""

from __future__ import annotations

import time
from contextlib import nullcontext
from pathlib import Path
from typing import TYPE_CHECKING

from ...paths import KIT_ROOT
from ...problems import PROBLEMS
from . import equivalent as equivalent_list

if TYPE_CHECKING:
    from .report import Outcome

WORK = KIT_ROOT / ".kit-out" / "mutate"
SUITES = ("hidden", "public")  # what a mutant runs against: the graded suites, or the public tests


def mutate(problems: list[str], *, work: Path = WORK, sample: int | None = None, seed: int = 0,
           jobs: int = 1, suite: str = "hidden") -> list[Outcome]:
    """Run (or resume) a session per problem against ``suite``; every mutant's outcome. The hidden verdicts'
    judge sessions fork from one warm judge (``grading.judges.warm``)."""
    from ...grading import judges
    from .report import outcomes  # the engine comes with the dev extra: import it only when used
    from .session import open_session, run

    equivalent = equivalent_list.load()
    found: list[Outcome] = []
    with judges.warm() if suite == "hidden" else nullcontext():
        for problem in problems:
            session = open_session(problem, work, sample, seed, suite)
            run(session, jobs)
            found += outcomes(session, equivalent)
    return found


def main(*, problems: list[str] | None = None, sample: int | None = None, seed: int = 0, jobs: int = 1,
         work: Path = WORK, suite: str = "hidden") -> int:
    """Print survivors and scores; 0 when no mutant survived unlisted and none errored, 1 otherwise, 2 on failure."""
    from rich.console import Console

    console = Console()
    try:
        from .report import show
        from .session import MutationError
    except ImportError as exc:
        console.print(f"grader mutate: needs the mutation engine ({exc.name}): pip install -e '.[dev]'", markup=False)
        return 2
    started = time.monotonic()
    try:
        found = mutate(problems or list(PROBLEMS), work=work, sample=sample, seed=seed, jobs=jobs, suite=suite)
    except (MutationError, equivalent_list.EquivalentListError) as exc:
        console.print(f"grader mutate: {exc}", markup=False)
        return 2
    show(found, equivalent_list.load(), console)
    console.print(f"{len(found)} mutants against the {suite} tests in {time.monotonic() - started:.0f} s (work folder {work})")
    return 1 if any(o.status in ("survived", "error", "pending") for o in found) else 0
