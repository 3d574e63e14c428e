"""A folder in the exchange that the judge reaches safely, whatever the worker does there.

The worker may write anything into the exchange folder: links to the judge's own files, FIFOs
that block a reader, files that never end. The judge therefore never uses a path inside it:
it creates a fresh folder and reaches every entry through that folder's descriptor, without
following links, reading at most ``KEPT_BYTES`` of a regular file.
"""

from __future__ import annotations

import os
import secrets
import shutil
import stat

from ..handle import Submission

KEPT_BYTES = 1 << 20  # of each file the submission leaves: more is never needed to judge it


class Folder:
    """A fresh folder in the exchange, owned like the exchange so that the worker may write in it.

    The judge reaches it only through a descriptor opened without following links: a link or a
    FIFO the worker puts there is never followed, read through or written through.
    """

    def __init__(self, sub: Submission, prefix: str = "judge") -> None:
        exchange = sub.exchange()
        top = os.open(exchange.host, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
        try:
            owner = os.fstat(top)
            name = f"{prefix}-{secrets.token_hex(8)}"
            os.mkdir(name, 0o700, dir_fd=top)
            os.chown(name, owner.st_uid, owner.st_gid, dir_fd=top, follow_symlinks=False)
            self.fd = os.open(name, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW, dir_fd=top)
        finally:
            os.close(top)
        self.owner = (owner.st_uid, owner.st_gid)
        self.host, self.inside = exchange.host / name, exchange.path(name)

    def __enter__(self) -> Folder:
        return self

    def __exit__(self, *exc: object) -> None:
        os.close(self.fd)
        shutil.rmtree(self.host, ignore_errors=True)

    def path(self, name: str) -> str:
        """``name`` in this folder, as the worker sees it."""
        return f"{self.inside}/{name}"

    def _create(self, name: str) -> int:
        fd = os.open(name, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o644, dir_fd=self.fd)
        os.fchown(fd, *self.owner)
        return fd

    def write(self, name: str, content: bytes) -> str:
        """Write a file the worker may read, replace or rewrite; its path as the worker sees it."""
        with os.fdopen(self._create(name), "wb") as f:
            f.write(content)
        return self.path(name)

    def sparse(self, name: str, size: int) -> str:
        """A file of ``size`` zero bytes that takes no space until read; its path as the worker sees it."""
        fd = self._create(name)
        try:
            os.ftruncate(fd, size)
        finally:
            os.close(fd)
        return self.path(name)

    def held(self, name: str) -> int:
        """A read-only descriptor of the regular file ``name``, for the judge to keep (the caller closes it):
        taken before the worker knows the file, it names the file the judge made whatever the worker
        renames or replaces later."""
        fd = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK, dir_fd=self.fd)
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            os.close(fd)
            raise OSError(f"{name} is not a regular file")
        return fd

    def listing(self) -> list[str]:
        """The names of the folder's entries, sorted."""
        return sorted(os.listdir(self.fd))

    def read(self, name: str, limit: int = KEPT_BYTES) -> bytes | None:
        """The first ``limit`` bytes of the regular file ``name``; None for anything else (a link, a
        FIFO, a folder) or when there is no such entry."""
        try:
            fd = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK, dir_fd=self.fd)
        except OSError:  # a link (ELOOP), or gone already
            return None
        with os.fdopen(fd, "rb") as f:
            return f.read(limit) if stat.S_ISREG(os.fstat(fd).st_mode) else None

    def files(self) -> dict[str, bytes | None]:
        """Every entry of the folder: a regular file's first ``KEPT_BYTES`` bytes, None for anything else."""
        return {name: self.read(name) for name in self.listing()}

    def snapshot(self) -> tuple:
        """What any change to the folder moves, seen through its descriptor: its inode, its ctime
        (which no unprivileged process can set back), its mode and its entries."""
        info = os.fstat(self.fd)
        return info.st_ino, info.st_ctime_ns, stat.S_IMODE(info.st_mode), tuple(self.listing())
