"""Step: the student repository's own files: pyproject.toml, README.md, .gitignore, a CI workflow."""

from __future__ import annotations

import shutil
from pathlib import Path

from ._context import ReleaseContext

TEMPLATES = Path(__file__).parent / "templates"


def write_project_files(context: ReleaseContext) -> None:
    for name in ("pyproject.toml", "README.md"):
        shutil.copyfile(TEMPLATES / name, context.out / name)
    (context.out / ".gitignore").write_text("__pycache__/\n*.egg-info/\n.hypothesis/\n.venv/\n")
    workflows = context.out / ".github" / "workflows"
    workflows.mkdir(parents=True)
    shutil.copyfile(TEMPLATES / "student-ci.yml", workflows / "tests.yml")
