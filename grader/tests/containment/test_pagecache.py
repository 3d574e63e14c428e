"""The judge's reading of a token file's page cache (grader/containment/pagecache.py): after an
eviction nothing of the file is counted, and every route into its pages shows, whoever took it."""

from __future__ import annotations

import ctypes
import os
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from grader.containment.pagecache import cached_bytes, evict

SIZE = 4 << 20
CHUNK = 1 << 20


@pytest.fixture
def file(tmp_path: Path) -> Iterator[tuple[Path, int]]:
    """A file of SIZE bytes on disk, written and flushed, and the judge's descriptor of it."""
    path = tmp_path / "tokens.bin"
    path.write_bytes(os.urandom(SIZE))
    fd = os.open(path, os.O_RDONLY)
    os.fsync(fd)
    evict(fd)
    if cached_bytes(fd):
        os.close(fd)
        pytest.skip("this file system keeps files in memory (tmpfs): there is no page cache to evict")
    yield path, fd
    os.close(fd)


def _spliced(path: Path) -> None:
    source, sink = os.open(path, os.O_RDONLY), os.open(os.devnull, os.O_WRONLY)
    reading, writing = os.pipe()
    try:
        offset = 0
        while offset < SIZE:  # a pipe holds 64 KiB: a splice moves at most that
            moved = os.splice(source, writing, CHUNK, offset_src=offset)
            offset += moved
            while moved:
                moved -= os.splice(reading, sink, moved)
    finally:
        for descriptor in (source, sink, reading, writing):
            os.close(descriptor)


def _advised(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        for offset in range(0, SIZE, CHUNK):
            os.posix_fadvise(fd, offset, CHUNK, os.POSIX_FADV_WILLNEED)
    finally:
        os.close(fd)


def _read_ahead(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        for offset in range(0, SIZE, CHUNK):
            ctypes.CDLL(None).readahead(fd, ctypes.c_longlong(offset), ctypes.c_size_t(CHUNK))
    finally:
        os.close(fd)


def _read_in_a_child(path: Path) -> None:
    child = os.fork()
    if child == 0:
        try:
            path.read_bytes()
        finally:
            os._exit(0)
    os.waitpid(child, 0)


@pytest.mark.parametrize("route", [lambda path: path.read_bytes(), _spliced, _advised, _read_ahead, _read_in_a_child],
                         ids=["read", "splice", "fadvise-willneed", "readahead", "forked-child"])
def test_every_route_into_the_file_shows(file, route: Callable[[Path], None]):
    path, fd = file
    route(path)
    deadline = time.monotonic() + 10  # fadvise and readahead start reads that finish later
    while cached_bytes(fd) < SIZE and time.monotonic() < deadline:
        time.sleep(0.05)
    # The whole file against nothing before; the kernel may take back a few pages meanwhile (proactive
    # reclaim: these machines run DAMON's), so "the whole file" is nine tenths of it or more.
    assert cached_bytes(fd) >= SIZE * 9 // 10
    evict(fd)
    assert cached_bytes(fd) == 0


def test_a_few_pages_read_are_a_few_pages(file):
    path, fd = file
    with open(path, "rb", buffering=0) as handle:
        os.posix_fadvise(handle.fileno(), 0, 0, os.POSIX_FADV_RANDOM)  # no read-ahead for this reader
        handle.seek(SIZE // 2)
        handle.read(100)
    assert 0 < cached_bytes(fd) <= 64 << 10
