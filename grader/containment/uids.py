"""A dedicated uid per concurrent worker, guaranteed unique on this host while it is held.

A claim is an exclusive ``flock`` on ``CLAIMS/<uid>``, a folder only root can write: the kernel
releases it when the holder closes it or dies, so a crashed grader never leaks a uid, and two
graders (or two judges of one grading) can never hold the same one. A uid still used by a
process (left over from elsewhere) is skipped too.
"""

from __future__ import annotations

import fcntl
import os
import stat
from dataclasses import dataclass
from pathlib import Path

UID_BASE, UID_SPAN = 200_000, 60_000
CLAIMS = Path("/run/grader-uids") if Path("/run").is_dir() else Path("/var/lock/grader-uids")


class ClaimError(RuntimeError):
    """No uid could be claimed (the claims folder is not root's own, or every uid is taken)."""


@dataclass
class Claim:
    uid: int
    fd: int

    def release(self) -> None:
        os.close(self.fd)


def _claims_folder() -> Path:
    CLAIMS.mkdir(mode=0o700, parents=True, exist_ok=True)
    info = os.lstat(CLAIMS)
    if not stat.S_ISDIR(info.st_mode) or info.st_uid != 0 or info.st_mode & 0o022:
        raise ClaimError(f"{CLAIMS} is not a folder only root can write")
    return CLAIMS


def _in_use() -> set[int]:
    """Real uids of the processes visible in /proc."""
    uids = set()
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                uids.add(os.stat(f"/proc/{entry}").st_uid)
            except OSError:
                continue
    return uids


def claim() -> Claim:
    """Claim a free uid in ``[UID_BASE, UID_BASE + UID_SPAN)`` (root only); hold it until ``release``."""
    folder = _claims_folder()
    busy = _in_use()
    start = os.getpid() % UID_SPAN
    for step in range(UID_SPAN):
        uid = UID_BASE + (start + step) % UID_SPAN
        if uid in busy:
            continue
        fd = os.open(folder / str(uid), os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            continue
        return Claim(uid, fd)
    raise ClaimError(f"every uid from {UID_BASE} to {UID_BASE + UID_SPAN - 1} is taken")
