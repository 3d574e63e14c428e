"""A Canvas "Download Submissions": one flat folder, each file named
``<login or name>[_LATE]_<user id>_<submission id>_<original name>``.

A student's files are grouped by login and user id: a single ``.zip`` is graded as it is, anything
else is copied under its original name (less the ``-1`` Canvas adds to a re-uploaded file's name)
into a folder of the student's own. The student id is the login (with the user id where two users
share one); Canvas's ``ID`` (the user id) is what its gradebook import matches.
"""

from __future__ import annotations

import re
import shutil
from collections import Counter
from pathlib import Path

from ..batch_entries import Entry, visible

NAME = re.compile(r"(?P<login>[^_]+?)(?P<late>_LATE)?_(?P<user>\d+)_(?P<submission>\d+)_(?P<original>.+)")
REUPLOAD = re.compile(r"-\d+(?=\.(?:py|zip)$)")
NOT_CANVAS = "not named <login>_<user id>_<submission id>_<file> as Canvas names a submission's files"


def is_download(folder: Path) -> bool:
    """Files only, and some named as Canvas names them."""
    paths = visible(folder)
    return bool(paths) and all(p.is_file() for p in paths) and any(NAME.fullmatch(p.name) for p in paths)


def entries(folder: Path, scratch: Path) -> tuple[list[Entry], list[tuple[str, str]]]:
    """One entry per Canvas user, and (file, reason) for each file that is none of theirs."""
    groups: dict[tuple[str, str], list[tuple[Path, re.Match]]] = {}
    unmatched = []
    for path in visible(folder):
        match = NAME.fullmatch(path.name)
        if match is None:
            unmatched.append((path.name, NOT_CANVAS))
        else:
            groups.setdefault((match["login"], match["user"]), []).append((path, match))
    logins = Counter(login for login, _ in groups)
    found = []
    for (login, user), files in sorted(groups.items()):
        student = f"{login}-{user}" if logins[login] > 1 else login
        lms = {"lms": "canvas", "name": login, "ID": user, "submission": files[0][1]["submission"],
               "late": str(any(m["late"] for _, m in files)).lower()}
        if len(files) == 1 and files[0][0].suffix.lower() == ".zip":
            found.append(Entry(student, (files[0][0],), lms))
            continue
        target = scratch / student
        target.mkdir(parents=True)
        for path, match in files:
            original = REUPLOAD.sub("", match["original"])
            if (target / original).exists():
                unmatched.append((path.name, f"a second file {original} for {student}: the other one is graded"))
            else:
                shutil.copyfile(path, target / original)
        found.append(Entry(student, (target,), lms))
    return found, unmatched
