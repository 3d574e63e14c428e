"""Find the student's package in what was handed in, and stage a private copy for the judge.

A submission is a folder holding an ``assignment/`` package, a folder holding the module
files themselves, or a ``.zip`` of either (one top-level folder inside is fine). The kit's
own ``solutions`` and ``assignment`` may be named as packages. Only regular ``.py`` files are
staged (no symlinks, no ``conftest.py``/``sitecustomize.py``/``.pth`` beside the package), with
bounds on count and size so that a zip bomb is refused, not unpacked.
"""

from __future__ import annotations

import importlib.util
import shutil
import stat
import zipfile
import zlib
from pathlib import Path, PurePosixPath

from .paths import PACKAGE
from .problems import MODULES

MAX_FILES = 200
MAX_BYTES = 20 << 20


class SubmissionError(ValueError):
    """What was handed in cannot be graded; the message says why, in one line."""


def upload_fix(error: SubmissionError) -> str:
    """What the student reads when their upload cannot be graded: what is wrong and what to upload instead."""
    return (f"Your upload could not be graded: {error}. Upload again: a readable .zip with your assignment/ folder "
            f"({', '.join(f'{m}.py' for m in MODULES)} in it), or those files themselves.")


def _resolve(spec: str) -> Path:
    path = Path(spec)
    if path.exists():
        return path
    if spec in ("solutions", "assignment"):
        found = importlib.util.find_spec(spec)
        if found is not None and found.submodule_search_locations:
            return Path(next(iter(found.submodule_search_locations)))
    raise SubmissionError(f"no such file or folder: {spec}")


def _package_folder(root: Path) -> Path:
    """The folder that holds the modules: ``root/assignment``, ``root``, or a single sub-folder's."""
    candidates = [root / PACKAGE, root]
    subfolders = [p for p in root.iterdir() if p.is_dir() and not p.name.startswith((".", "__"))]
    if len(subfolders) == 1:
        candidates += [subfolders[0] / PACKAGE, subfolders[0]]
    for folder in candidates:
        if folder.is_dir() and any((folder / f"{m}.py").is_file() for m in MODULES):
            return folder
    names = ", ".join(f"{m}.py" for m in MODULES)
    raise SubmissionError(f"found no assignment package in {root.name or root}: expected an assignment/ folder "
                          f"or the module files ({names})")


def _extract(archive: Path, dest: Path) -> Path:
    dest.mkdir(parents=True, exist_ok=True)
    try:
        with zipfile.ZipFile(archive) as bundle:
            members = [m for m in bundle.infolist() if not m.is_dir()]
            if len(members) > MAX_FILES * 5 or sum(m.file_size for m in members) > MAX_BYTES * 5:
                raise SubmissionError(f"{archive.name} is too large to grade ({len(members)} files)")
            for member in members:
                name = member.filename.replace("\\", "/")  # archivers on Windows may write backslashes
                parts = PurePosixPath(name).parts
                is_link = stat.S_ISLNK(member.external_attr >> 16)
                if is_link or name.startswith("/") or ".." in parts or not name.endswith(".py"):
                    continue
                target = dest.joinpath(*parts)
                target.parent.mkdir(parents=True, exist_ok=True)
                with bundle.open(member) as source, open(target, "wb") as sink:
                    shutil.copyfileobj(source, sink)
    except (zipfile.BadZipFile, zlib.error, EOFError, RuntimeError, NotImplementedError, ValueError) as exc:
        # corrupt, truncated, encrypted or oddly compressed archives
        raise SubmissionError(f"{archive.name} is not a readable zip file ({exc})") from None
    return dest


def stage(spec: str | Path, dest: Path) -> Path:
    """Copy the submitted package's ``.py`` files into ``dest/assignment``; returns that folder."""
    try:
        return _stage(spec, dest)
    except OSError as exc:  # unreadable files, names too long, a full disk: one line, no traceback
        where = f" ({Path(str(exc.filename)).name[:60]})" if exc.filename else ""
        raise SubmissionError(f"cannot read {Path(str(spec)).name or spec}{where}: {exc.strerror or exc}") from None


def _stage(spec: str | Path, dest: Path) -> Path:
    source = _resolve(str(spec))
    if source.is_file():
        if source.suffix != ".zip":
            raise SubmissionError(f"{source.name}: a submission is a folder or a .zip file")
        source = _extract(source, dest / "unpacked")
    folder = _package_folder(source)
    package = dest / PACKAGE
    package.mkdir(parents=True)
    files = [p for p in folder.iterdir() if p.suffix == ".py" and p.is_file() and not p.is_symlink()]
    if len(files) > MAX_FILES or sum(p.stat().st_size for p in files) > MAX_BYTES:
        raise SubmissionError(f"{folder} is too large to grade")
    for path in files:
        shutil.copyfile(path, package / path.name)
    (package / "__init__.py").touch()
    shutil.rmtree(dest / "unpacked", ignore_errors=True)
    return package
