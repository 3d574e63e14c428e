"""Step: the student repository's own files: pyproject.toml, README.md, a CI workflow."""

from __future__ import annotations

import shutil
from pathlib import Path

from ._context import ReleaseContext

TEMPLATES = Path(__file__).parent / "templates"
STUDENT_CI = Path(__file__).resolve().parents[1] / "release_files" / "student-ci.yml"


def write_project_files(context: ReleaseContext) -> None:
    for name in ("pyproject.toml", "README.md"):
        shutil.copyfile(TEMPLATES / name, context.out / name)
    (context.out / ".gitignore").write_text("__pycache__/\n*.egg-info/\n.hypothesis/\n.venv/\n")
    if STUDENT_CI.exists():
        workflows = context.out / ".github" / "workflows"
        workflows.mkdir(parents=True)
        shutil.copyfile(STUDENT_CI, workflows / "tests.yml")
