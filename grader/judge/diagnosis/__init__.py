"""Diagnosis by behaviour: which known mistake a failing submission behaves like.

The catalog is the curated mutants (``grader/mistakes/p<N>_<module>.toml``): each is a plausible
student bug with its misconception and the handout section that explains it. When a hidden test
fails, the judge replays the test's recorded requests (``session.Recording``) on the reference
and on each variant of the problem (the reference with one mutant applied, imported in the judge:
kit code, never shipped). A variant *reproduces* the failure when it answers every recorded request
as the student did while the reference does not; the feedback names the variants that do. When
none does, or the test cannot be replayed (a callback, files, measurements, the source text), it
names nothing: never a guess. P7's tests save in one worker and load in another, and P8's drive
training loops through callbacks, so their failures are diagnosed by a probe instead (``PROBES``:
``checkpoint``, ``amp``, sharing ``probe``): the student's functions and each variant's are run through
the same fixed calls, and a variant is named when everything the judge observes of it is what it
observes of the student's, and not of the reference's. A problem whose entry is not ``diagnosed``
(``grader/problems.py``: ``python -m grader.bench.diagnosis`` has not measured it) names nothing.
"""

from __future__ import annotations

import ast
import atexit
import importlib
import itertools
import shutil
import tempfile
import time
from dataclasses import dataclass
from functools import cache
from pathlib import Path

from ... import mistakes
from ..handle import Recording, Submission
from ...problems import PROBLEMS
from ...submission import stage
from . import amp, checkpoint, probe
from .replay import Variant, judge_state, unreplayable

_PACKAGES = itertools.count()
# The problems diagnosed by a probe, not by replaying the test's requests: the probe's module, which calls the
# problem's own module (each probe has ``of_student``, ``of_variant`` and ``OBSERVED_BY``).
PROBES = {"P7": checkpoint, "P8": amp}


@dataclass(frozen=True)
class Mistake:
    id: str
    problem: str
    misconception: str
    section: str  # a ``### module.Name`` heading of handout.md


def section_of(mutant: mistakes.Mutant, source: str) -> str:
    """The mutant's ``section``, else ``module.Name`` of the top-level definition holding its edit ("" if none)."""
    if mutant.section:
        return mutant.section
    line = source[: source.find(mutant.find)].count("\n") + 1
    for node in ast.parse(source).body:
        if isinstance(node, (ast.FunctionDef, ast.ClassDef)) and node.lineno <= line <= (node.end_lineno or 0):
            return f"{mutant.module}.{node.name}"
    return ""


@cache
def available() -> bool:
    """Whether this kit holds what diagnosis replays on: the reference and the catalog (a kit without them
    names no mistake rather than failing the grading)."""
    return mistakes.SOLUTIONS.is_dir() and any(mistakes.CATALOG.glob("p*_*.toml"))


@cache
def catalog(problem: str) -> tuple[Mistake, ...]:
    """The known mistakes of ``problem`` (a key of ``PROBLEMS``) that a CPU judge can reproduce."""
    found = []
    for mutant in mistakes.load():
        if mutant.problem == problem and mutant.diagnose and not mutant.gpu:
            source = (mistakes.SOLUTIONS / f"{mutant.module}.py").read_text()
            found.append(Mistake(mutant.id, problem, mutant.misconception, section_of(mutant, source)))
    return tuple(found)


def feedback(mistakes: list[Mistake]) -> str:
    """What the student reads under a failed test ("" when nothing is known)."""
    if len(mistakes) == 1:
        (mistake,) = mistakes
        return (f"Known mistake ({mistake.id}): your code behaves like one that has this bug: "
                f"{mistake.misconception}. See handout.md, section '{mistake.section}'.")
    if mistakes:
        named = "; ".join(f"{m.id}: {m.misconception} (handout section '{m.section}')" for m in mistakes)
        return f"Known mistakes: your code behaves like each of these: {named}."
    return ""


class Diagnoser:
    """The variants of each problem, imported once per judge process, on first need."""

    def __init__(self) -> None:
        self.folder = Path(tempfile.mkdtemp(prefix="kit-variants-"))
        atexit.register(shutil.rmtree, self.folder, True)
        self.variants: dict[str, tuple[Variant, list[tuple[Mistake, Variant]]]] = {}
        self.signatures: dict[str, probe.Signature] = {}  # each probed variant's, by package
        self.students: dict[tuple[str, Path], probe.Signature | None] = {}  # each submission's, probed once

    def _load(self, problem: str) -> tuple[Variant, list[tuple[Mistake, Variant]]]:
        if problem not in self.variants:
            reference = Variant(stage(mistakes.SOLUTIONS, self.folder / problem / "reference"), _package())
            by_id = {m.id: m for m in mistakes.load()}
            self.variants[problem] = reference, [
                (mistake, Variant(mistakes.materialize(by_id[mistake.id], self.folder / problem / mistake.id),
                                  _package())) for mistake in catalog(problem)]
        return self.variants[problem]

    def diagnose(self, problem: str, recording: Recording, seconds: float,
                 submission: Submission | None = None, test: str = "") -> list[Mistake]:
        """The known mistakes whose variants reproduce the recorded behaviour (a problem of ``PROBES``: the
        ``submission``'s behaviour under its probe, as it bears on the hidden ``test``, a test function's
        name); empty: nothing known, also when it takes more than ``seconds``."""
        if not PROBLEMS[problem].diagnosed or not available():
            return []
        deadline = time.monotonic() + seconds
        if problem in PROBES:
            found = self._probe(problem, submission, seconds, test) if submission is not None else []
        elif recording.blocked or unreplayable(recording.exchanges):
            return []
        else:
            reference, variants = self._load(problem)
            if reference.reproduces(recording.exchanges, deadline):
                return []  # the answers do not explain the failure
            found = [mistake for mistake, variant in variants if variant.reproduces(recording.exchanges, deadline)]
        return found if time.monotonic() <= deadline else []

    def _probe(self, problem: str, submission: Submission, seconds: float, test: str) -> list[Mistake]:
        """The variants of ``problem`` whose probe signature is the student's while the reference's is not,
        and differs from the reference's where it bears on ``test``. The student is probed once per
        submission (in fresh workers), each variant once (in the judge)."""
        prober = PROBES[problem]
        key = (problem, submission.source_dir)
        if key not in self.students:
            self.students[key] = prober.of_student(submission, seconds)
        student = self.students[key]
        reference, variants = self._load(problem)
        expected = self._signature(problem, reference)
        if student is None or probe.alike(expected, student) or not probe.bears_on(test, student, expected,
                                                                                   prober.OBSERVED_BY):
            return []
        return [mistake for mistake, variant in variants if probe.alike(self._signature(problem, variant), student)]

    def _signature(self, problem: str, variant: Variant) -> probe.Signature:
        if variant.package not in self.signatures:
            with judge_state():
                self.signatures[variant.package] = PROBES[problem].of_variant(
                    importlib.import_module(f"{variant.package}.{PROBLEMS[problem].module}"))
        return self.signatures[variant.package]


def _package() -> str:
    return f"_kit_variant_{next(_PACKAGES)}"
