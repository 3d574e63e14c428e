"""A generated class for the class-grading tests: reference copies, stubs, buggy and broken entries.

Grading goes through ``fixtures/fake_grade.py`` (same arguments and results.json as
``grader grade``, milliseconds per submission) unless a test asks for the real command.
"""

from __future__ import annotations

import json
import shutil
import sys
import zipfile
from dataclasses import fields
from pathlib import Path

from grader.classroom import batch
from grader.options import GradingOptions
from grader.paths import KIT_ROOT as KIT
from grader.problems import MODULES

FAKE_GRADE = (sys.executable, str(Path(__file__).resolve().parents[1] / "fixtures" / "fake_grade.py"))
GRADING_FIELDS = {f.name for f in fields(GradingOptions)}


def package(source: Path, dest: Path, nested: bool = True, edit: dict[str, str] | None = None) -> Path:
    """Copy ``source``'s modules into ``dest`` (under ``assignment/`` when nested), appending ``edit`` texts."""
    folder = dest / "assignment" if nested else dest
    folder.mkdir(parents=True)
    for path in source.glob("*.py"):
        shutil.copyfile(path, folder / path.name)
    for module, text in (edit or {}).items():
        with open(folder / f"{module}.py", "a") as stream:
            stream.write(f"\n{text}\n")
    return dest


def zipped(folder: Path) -> Path:
    archive = folder.with_name(folder.name + ".zip")
    with zipfile.ZipFile(archive, "w") as bundle:
        for path in sorted(folder.rglob("*")):
            if path.is_file():
                bundle.write(path, path.relative_to(folder).as_posix())
    shutil.rmtree(folder)
    return archive


def make_class(root: Path, references: int = 12, stubs: int = 8) -> Path:
    """``references`` copies of the reference (a third zipped), ``stubs`` stub copies, 6 buggy, 6 broken."""
    root.mkdir(parents=True)
    solutions, assignment = KIT / "solutions", KIT / "assignment"
    for i in range(references):
        entry = package(solutions, root / f"ref{i:02d}")
        if i % 3 == 2:
            zipped(entry)
    for i in range(stubs):
        entry = package(assignment, root / f"stub{i:02d}", nested=i % 2 == 0)
        if i % 4 == 3:
            zipped(entry)
    for i, module in enumerate(MODULES[:6]):
        package(solutions, root / f"bug-{module}", edit={module: "# FAKE_BUG"})
    (root / "empty").mkdir()
    (root / "notzip.zip").write_bytes(b"this is not a zip archive")
    (root / "notes.txt").write_text("a stray file in the submissions folder")
    package(solutions, root / "syntax", edit={"einsum": "def broken(:"})
    package(solutions, root / "crash", edit={"memory": "# FAKE_CRASH"})
    package(solutions, root / "garbage", edit={"memory": "# FAKE_GARBAGE"})
    return root


def grade_class(folder: Path, out: Path, **settings) -> int:
    """``grader batch`` with the fake grader, two at a time, no GPU; ``settings`` are batch.main's arguments
    and GradingOptions fields."""
    grading = {name: settings.pop(name) for name in [*settings] if name in GRADING_FIELDS}
    settings = {"jobs": 2, "timeout_seconds": 60.0, "grade_command": FAKE_GRADE, **settings}
    return batch.main(str(folder), out=out, options=GradingOptions(**{"gpu": "off", **grading}), **settings)


def results(out: Path) -> dict[str, dict]:
    return {path.stem: json.loads(path.read_text()) for path in sorted((out / "results").glob("*.json"))}
