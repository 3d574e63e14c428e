"""``grader release OUT``: build the student repository, as an ordered list of small steps.

Each step reads the kit and writes into a fresh build folder; the last step verifies the
build, and only a verified build is moved to OUT. Ordering rules:
- ``write_stubs`` must come before ``assert_no_leak`` (the check reads the stubs it wrote);
- ``assert_no_leak`` is last, so that nothing written after it escapes the check.
"""

from __future__ import annotations

import shutil
import sys
import tempfile
from pathlib import Path
from typing import Callable

from ._context import ReleaseContext, ReleaseError
from .assert_no_leak import assert_no_leak
from .assert_portable import assert_portable
from .copy_handout import copy_handout
from .copy_public_tests import copy_public_tests
from .write_project_files import write_project_files
from .write_stubs import write_stubs

STEPS: list[Callable[[ReleaseContext], None]] = [
    write_stubs,
    copy_public_tests,
    copy_handout,
    write_project_files,
    assert_portable,
    assert_no_leak,
]


def build(out: Path, kit: Path | None = None) -> Path:
    """Build the release into ``out`` (which must not exist or be empty); returns ``out``."""
    context_kit = kit or ReleaseContext.default_kit()
    if out.exists() and any(out.iterdir()):
        raise ReleaseError(f"{out} exists and is not empty; choose a new folder (nothing was written)")
    with tempfile.TemporaryDirectory(prefix="kit-release-") as tmp:
        context = ReleaseContext(kit=context_kit, out=Path(tmp) / "release")
        context.out.mkdir()
        for step in STEPS:
            step(context)
        out.parent.mkdir(parents=True, exist_ok=True)
        if out.exists():
            out.rmdir()
        shutil.copytree(context.out, out)
    return out


def setup_commands(readme: str) -> list[str]:
    """The commands of the "Set up" section of a release README: its indented lines, comments included."""
    section = readme.split("\n## Set up\n", 1)[-1].split("\n## ", 1)[0]
    return [line.strip() for line in section.splitlines() if line.startswith("    ")]


def main(out: str, *, kit: Path | None = None) -> int:
    """Build and verify the student release; 1 (and nothing at OUT) if verification fails."""
    try:
        build(Path(out), kit)
    except ReleaseError as exc:
        print(f"grader release: {exc}", file=sys.stderr)
        return 1
    commands = setup_commands((Path(out) / "README.md").read_text(encoding="utf-8"))
    print(f"student release written to {out}; set it up in that folder as its README.md says, one of:",
          *(f"    {command}" for command in commands),
          "(where download.pytorch.org cannot be reached, its README says what to run instead); then: pytest tests/",
          sep="\n")
    return 0
