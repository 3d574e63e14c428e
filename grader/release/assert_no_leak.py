"""Step (last): verify the build leaks no solution body, hidden test or instructor tool.

Checks: only the expected top-level entries exist; no solution marker survives; the stubs are
exactly what ``grader stubs`` generates; and no distinctive line of a solution region or of a
hidden suite, judge-side driver, diagnosis module, known mistake (a mutant's edit or a mistaken
fixture) appears in any released file (lines that the public tests or the stubs
themselves contain are not secrets, nor are the few idioms in ``PUBLIC_IDIOMS``).
"""

from __future__ import annotations

from pathlib import Path

from .. import mistakes
from ..problems import suite_problem
from .stubs import BEGIN, END, expected_stubs, find_regions, stale_stubs
from ._context import ReleaseContext, ReleaseError

ALLOWED_TOP_LEVEL = {"assignment", "tests", "handout.md", "pyproject.toml", "README.md", ".gitignore", ".github"}
MIN_SECRET_LENGTH = 24
# The loop every torch optimizer writes, and the lecture's own AdaGrad update: the handout quotes the
# lecture's AdaGrad, and a mistaken fixture written as a student would copies it.
PUBLIC_IDIOMS = {"for group in self.param_groups:", 'for p in group["params"]:', "g2 += torch.square(grad)"}


def _distinctive(lines: list[str]) -> set[str]:
    stripped = (line.strip() for line in lines)
    return {line for line in stripped if len(line) >= MIN_SECRET_LENGTH and not line.startswith("#")}


def secret_lines(kit: Path) -> set[str]:
    """Lines that would reveal a solution or a hidden test, minus what is public anyway."""
    secrets: set[str] = set()
    for path in sorted((kit / "solutions").glob("*.py")):
        lines = path.read_text().splitlines()
        for region in find_regions("\n".join(lines), str(path)):
            secrets |= _distinctive(lines[region.begin: region.end - 1])
    for folder in ("grader/judge/hidden", "grader/judge/drivers", "grader/judge/diagnosis", "grader/tests/fixtures/mistakes",
                   "grader/tests/fixtures/blind_mistakes"):
        for path in sorted((kit / folder).rglob("*.py")):
            secrets |= _distinctive(path.read_text().splitlines())
    for mutant in mistakes.load():  # the mistaken variants diagnosis compares students with
        secrets |= _distinctive(mutant.replace.splitlines())
    public = set(PUBLIC_IDIOMS)
    for text in [path.read_text() for path in sorted((kit / "tests").rglob("*.py"))] \
            + list(expected_stubs(kit / "solutions").values()):
        public |= {line.strip() for line in text.splitlines()}
    handout = (kit / "handout.md").read_text() if (kit / "handout.md").is_file() else ""
    return {line for line in secrets - public if line not in handout}  # a line the handout shows is public


def _released_text(out: Path) -> dict[Path, str]:
    texts = {}
    for path in sorted(out.rglob("*")):
        if path.is_file():
            texts[path] = path.read_bytes().decode("utf-8", errors="replace")
    return texts


def find_leaks(kit: Path, out: Path) -> list[str]:
    """Every problem found in the build at ``out``; empty when it is clean."""
    problems = [f"unexpected entry {entry.name!r} at the top level"
                for entry in sorted(out.iterdir()) if entry.name not in ALLOWED_TOP_LEVEL]
    problems += [f"stub {name} is not the generated stub" for name in stale_stubs(kit / "solutions", out / "assignment")]
    secrets = secret_lines(kit)
    for path, text in _released_text(out).items():
        where = path.relative_to(out)
        if BEGIN in text or END in text:
            problems.append(f"{where}: contains a solution marker")
        if suite_problem(path.name) and (kit / "grader" / "judge" / "hidden" / path.name).exists() \
                and text == (kit / "grader" / "judge" / "hidden" / path.name).read_text():
            problems.append(f"{where}: is a hidden suite")
        for line in text.splitlines():
            if line.strip() in secrets:
                problems.append(f"{where}: contains a secret line: {line.strip()[:80]!r}")
                break
    return problems


def assert_no_leak(context: ReleaseContext) -> None:
    leaks = find_leaks(context.kit, context.out)
    if leaks:
        raise ReleaseError("the release leaks and was not written:\n  " + "\n  ".join(leaks))
