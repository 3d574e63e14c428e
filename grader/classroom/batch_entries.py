"""The class a batch grades: one entry per student, its shard, and its content's hash.

A student's id is the entry's name (less ``.zip``); the shard depends only on that id and the
number of shards; the hash covers every file's relative path and bytes, so that a re-run can
tell an unchanged submission from a changed one. A class may also come as one archive.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import tarfile
import zipfile
import zlib
from dataclasses import dataclass, field
from pathlib import Path


class BatchError(RuntimeError):
    """The batch cannot start (no such folder, bad shard, no GPU where one is required)."""


@dataclass(frozen=True)
class Entry:
    """One student's submission: normally one path; two or more when names collide (alice/, alice.zip)."""

    student: str
    paths: tuple[Path, ...]
    lms: dict[str, str] = field(default_factory=dict, compare=False)  # who the LMS knows (see ``layouts``)


def visible(folder: Path) -> list[Path]:
    """The entries of ``folder``, sorted, hidden ones (``.git``, ``.DS_Store``, ``__MACOSX``) skipped."""
    return [path for path in sorted(folder.iterdir()) if not path.name.startswith((".", "__MACOSX"))]


def student_id(path: Path) -> str:
    return path.name[:-4] if path.name.lower().endswith(".zip") and path.is_file() else path.name


def submissions(folder: Path) -> list[Entry]:
    """The entries of a plain class folder, sorted by student id; hidden entries skipped."""
    by_student: dict[str, list[Path]] = {}
    for path in visible(folder):
        by_student.setdefault(student_id(path), []).append(path)
    return [Entry(student, tuple(paths)) for student, paths in sorted(by_student.items())]


def shard_of(student: str, count: int) -> int:
    """The shard (1..count) a student belongs to: a hash of the id alone, stable as the class changes."""
    return int.from_bytes(hashlib.sha256(student.encode()).digest()[:8], "big") % count + 1


def content_hash(paths: tuple[Path, ...]) -> str:
    """SHA-256 over every file's relative path and bytes (``__pycache__`` ignored), in a fixed order."""
    digest = hashlib.sha256()
    for path in paths:
        digest.update(f"entry {path.name}\0".encode())
        files = [path] if not path.is_dir() else sorted(
            p for p in path.rglob("*") if "__pycache__" not in p.parts and (p.is_file() or p.is_symlink()))
        for file in files:
            digest.update(f"{file.relative_to(path).as_posix()}\0".encode())
            digest.update(f"-> {os.readlink(file)}".encode() if file.is_symlink() else file.read_bytes())
            digest.update(b"\0")
    return f"sha256:{digest.hexdigest()}"


def class_folder(source: Path, scratch: Path) -> Path:
    """The folder of submissions: ``source`` itself, or a class archive (.zip, .tar[.gz]) unpacked into scratch."""
    if source.is_dir():
        return source
    if not source.is_file():
        raise BatchError(f"no such folder or archive: {source}")
    dest = scratch / "class"
    try:
        if zipfile.is_zipfile(source):
            shutil.unpack_archive(source, dest, "zip")  # skips absolute and '..' member names
        elif tarfile.is_tarfile(source):
            with tarfile.open(source) as archive:
                archive.extractall(dest, filter="data")
        else:
            raise BatchError(f"{source.name}: expected a folder of submissions or a .zip/.tar.gz of one")
    except (zipfile.BadZipFile, tarfile.TarError, zlib.error, EOFError, NotImplementedError) as exc:
        raise BatchError(f"{source.name}: not a readable archive ({exc})") from None
    top = [p for p in dest.iterdir() if not p.name.startswith((".", "__MACOSX"))]
    return top[0] if len(top) == 1 and top[0].is_dir() else dest
