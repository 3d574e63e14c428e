"""What similarity compares: each submission's ``assignment/*.py`` as one document.

A submission is read exactly as ``grader batch`` reads it (``batch_entries`` finds the entries
of a class folder or archive, ``submission.stage`` finds and copies the package of a
folder or zip); its modules are joined in name order into one text. The kit's own stubs are the
boilerplate every student was given. A submission that cannot be read (no package, a broken zip,
a file that is not UTF-8 text) is listed with its reason, never fatal.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from ...submission import SubmissionError, stage
from ...paths import ASSIGNMENT
from .. import layouts
from ..batch_entries import class_folder


@dataclass(frozen=True)
class Document:
    """One submission's modules as one text; ``name`` is the student id (or ``past/<folder>/<id>``)."""

    name: str
    text: str


def package_text(package: Path) -> str:
    """The ``.py`` files of ``package`` joined in name order, each under a comment naming it."""
    return "".join(f"# ===== {path.name} =====\n{path.read_text(encoding='utf-8')}\n"
                   for path in sorted(package.glob("*.py")))


def stubs() -> Document:
    """What every student was given: the kit's ``assignment/`` (never counts as similarity)."""
    return Document("stubs", package_text(ASSIGNMENT))


def _read(spec: Path, name: str, scratch: Path) -> Document:
    try:
        return Document(name, package_text(stage(spec, scratch / "staged" / name)))
    except UnicodeDecodeError:
        raise SubmissionError("a module is not UTF-8 text") from None


def read_class(source: Path, scratch: Path, prefix: str = "") -> tuple[list[Document], dict[str, str]]:
    """The documents of a class folder (or archive), and the unreadable submissions with their reason.

    A group's one submission (a Gradescope export lists each submitter) is one document, named after
    them all (``a@uni.edu+b@uni.edu``): partners are not copies of each other.
    Raises ``batch_entries.BatchError`` when ``source`` is neither a folder nor a readable archive.
    """
    documents, unreadable = [], {}
    where = scratch / f"class-{prefix or 'current'}"
    groups: dict[Path, list[str]] = {}
    for entry in layouts.read_class(class_folder(source, where), where).entries:
        groups.setdefault(entry.paths[0], []).append(entry.student)
    for path, students in groups.items():
        name = prefix + "+".join(students)
        try:
            documents.append(_read(path, name, scratch))
        except SubmissionError as exc:
            unreadable[name] = str(exc)
    return documents, unreadable


def read_past(folder: Path, scratch: Path) -> tuple[list[Document], dict[str, str]]:
    """An earlier term's folder of submissions, or one submission (a public solution), as past documents."""
    prefix = f"past/{folder.resolve().name}/"
    try:
        return [_read(folder, prefix.rstrip("/"), scratch)], {}
    except SubmissionError:
        return read_class(folder, scratch, prefix)
