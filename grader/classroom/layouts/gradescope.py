"""A Gradescope "Export Submissions": ``submission_metadata.yml`` and one ``submission_<id>/`` per submission.

The metadata maps each submission folder to its ``:submitters:`` (each a ``:name:``, ``:sid:`` and
``:email:``) and its ``:created_at:`` time (Ruby-style symbol keys, read here without their colons).
Every submitter of a (group) submission is a student of their own, graded on the same folder; the
student id is the email (what Gradescope's score import matches), else the SID, else the folder's name.
"""

from __future__ import annotations

from datetime import datetime
from pathlib import Path
from typing import Any

import yaml

from ..batch_entries import BatchError, Entry, visible

METADATA = "submission_metadata.yml"


def _plain(value: Any) -> Any:
    """The metadata with Ruby's symbol keys (``:name``) as plain ones (``name``)."""
    if isinstance(value, dict):
        return {str(k).strip(":"): _plain(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_plain(v) for v in value]
    return value


def _when(value: Any) -> str:
    return value.isoformat() if isinstance(value, datetime) else str(value or "")


def read_metadata(folder: Path) -> dict[str, dict[str, Any]]:
    """The submissions the metadata lists, by folder name; BatchError when it is not Gradescope's metadata."""
    path = folder / METADATA
    try:
        data = _plain(yaml.safe_load(path.read_text(encoding="utf-8")))
    except (OSError, UnicodeDecodeError, yaml.YAMLError) as exc:
        raise BatchError(f"{path}: cannot read it ({' '.join(str(exc).split())})") from None
    if not isinstance(data, dict) or not all(isinstance(v, dict) for v in data.values()):
        raise BatchError(f"{path}: expected Gradescope's metadata (submission_<id>: its submitters and time)")
    return data


def entries(folder: Path) -> tuple[list[Entry], list[tuple[str, str]]]:
    """One entry per submitter, and (name, reason) for what is no submission the metadata lists."""
    metadata = read_metadata(folder)
    by_student: dict[str, list[tuple[Path, dict[str, str]]]] = {}
    unmatched = [(key, f"listed in {METADATA}, but the export has no folder {key}/")
                 for key in sorted(metadata) if not (folder / key).is_dir()]
    for path in visible(folder):
        if path.name == METADATA:
            continue
        info = metadata.get(path.name)
        if info is None or not path.is_dir():
            unmatched.append((path.name, f"not a submission folder listed in {METADATA}"))
            continue
        submitters = [s for s in info.get("submitters") or [] if isinstance(s, dict)]
        if not submitters:
            unmatched.append((path.name, f"{METADATA} names no submitter for it"))
        for submitter in submitters:
            ids = {key: str(submitter.get(key) or "") for key in ("name", "sid", "email")}
            student = ids["email"] or ids["sid"] or path.name
            lms = {"lms": "gradescope", **ids, "submission": path.name, "submitted_at": _when(info.get("created_at"))}
            by_student.setdefault(student, []).append((path, lms))
    return [Entry(student, tuple(p for p, _ in found), found[0][1]) for student, found in by_student.items()], unmatched
