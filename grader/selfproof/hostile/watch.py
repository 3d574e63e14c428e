"""What the attack check watches on the file system: the places an attack must leave alone."""

from __future__ import annotations

import os
import re
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from ...paths import KIT_ROOT
from ...containment.uids import UID_BASE, UID_SPAN

SCRATCH_NAME = re.compile(r"^(tmp[\w-]{8}|pytest-of-[\w.-]+|kit-(judge|worker|hostile|mutant|selfcheck)-[\w-]+)$")


def _scan(root: Path, depth: int | None, skip: frozenset[str] = frozenset()) -> dict[str, tuple]:
    """path -> (kind, size, mtime, mode, uid) of everything under ``root`` (to ``depth`` levels)."""
    found: dict[str, tuple] = {}

    def visit(folder: Path, level: int) -> None:
        try:
            entries = list(os.scandir(folder))
        except OSError:
            return
        for entry in entries:
            if entry.name in skip or entry.path in skip:
                continue
            try:
                info = entry.stat(follow_symlinks=False)
            except OSError:
                continue
            if entry.is_symlink():
                found[entry.path] = ("link", os.readlink(entry.path))
            elif entry.is_dir(follow_symlinks=False):
                found[entry.path] = ("dir", info.st_mode, info.st_uid)
                if depth is None or level < depth:
                    visit(Path(entry.path), level + 1)
            else:
                found[entry.path] = ("file", info.st_size, info.st_mtime_ns, info.st_mode, info.st_uid)

    if root.exists():
        found[str(root)] = ("root",)
        visit(root, 1)
    return found


def _uid_of(entry: tuple | None) -> int | None:
    return entry[2] if entry and entry[0] == "dir" else entry[4] if entry and entry[0] == "file" else None


def _submissions(uid: int | None) -> bool:
    """Whether a file owned by ``uid`` could have been written by a worker (a dedicated uid, or,
    when grading unprivileged, this user: a shared folder's other files belong to other programs)."""
    return uid is not None and (UID_BASE <= uid < UID_BASE + UID_SPAN or (os.geteuid() != 0 and uid == os.geteuid()))


@dataclass
class Watch:
    """The places an attack must leave alone, and how closely each is looked at. In shared places
    (the temporary folders, $HOME, the root folder) only what a worker could own, or what carries
    the attack's marker, counts: other programs on the machine come and go there."""

    places: list[tuple[Path, int | None, frozenset[str]]]
    shared: tuple[str, ...]
    marker: str
    before: dict[str, tuple] = field(default_factory=dict)

    def take(self) -> dict[str, tuple]:
        snapshot: dict[str, tuple] = {}
        for root, depth, skip in self.places:
            snapshot.update(_scan(root, depth, skip))
        return snapshot

    def start(self) -> None:
        self.before = self.take()

    def changes(self) -> list[str]:
        after = self.take()
        found = []
        for path in sorted(set(self.before) | set(after)):
            old, new = self.before.get(path), after.get(path)
            if os.path.dirname(path) in self.shared and self.marker not in path and not (
                    _submissions(_uid_of(old)) or _submissions(_uid_of(new))) or (
                    os.path.dirname(path) in _TEMP_TOPS and SCRATCH_NAME.match(os.path.basename(path))):
                continue
            if old != new:
                what = "new" if old is None else "removed" if new is None else "changed"
                found.append(f"{path} ({what})")
        return found


_TEMP_TOPS = {os.path.realpath(p) for p in {tempfile.gettempdir(), "/tmp", "/var/tmp", "/dev/shm"}}


def attack_watch(grading: Path, run_root: Path, siblings: set[str], marker: str) -> Watch:
    # Caches of the kit's own tool runs, which other tests may write meanwhile: no grading reads them (a judge
    # keeps its hypothesis folder in its own working folder).
    kit_skip = frozenset({"__pycache__", ".pytest_cache", ".hypothesis", ".git", ".mypy_cache", ".ruff_cache"})
    places: list[tuple[Path, int | None, frozenset[str]]] = [
        (KIT_ROOT, None, kit_skip),
        (grading, None, frozenset({str(grading / "tmp"), str(grading / "results" / "results.json")})),
        (run_root, 1, frozenset(siblings - {grading.name})),
        (Path.home(), 1, frozenset()), (Path("/autograder"), None, frozenset()),
    ]
    git = KIT_ROOT / ".git"
    if git.is_dir():  # its hooks and config (the history itself changes with every commit)
        places += [(git, 1, frozenset(p.name for p in git.iterdir() if p.name not in ("config", "hooks"))),
                   (git / "hooks", None, frozenset())]
    places += [(Path(top), 1, frozenset({str(run_root)})) for top in sorted(_TEMP_TOPS)]
    places += [(parent, 1, frozenset({str(run_root)})) for parent in run_root.parents if str(parent) not in _TEMP_TOPS]
    shared = (*_TEMP_TOPS, str(Path.home()), *(str(p) for p in run_root.parents))
    return Watch(places, shared, marker)
