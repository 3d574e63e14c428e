"""What a file has in the page cache, read by the judge through its own mapping of it (asked through the
backend: ``Backend.evict_page_cache``, ``Backend.page_cache_bytes``).

Whatever route brought a page of the file in (read(2), a mapping, splice(2), sendfile(2),
``posix_fadvise(WILLNEED)``, ``readahead(2)``; by any process), ``mincore(2)`` on a mapping of the
same file shows it resident: the judge keeps a descriptor of the file from the moment it made it,
evicts what is cached before the call it measures (``POSIX_FADV_DONTNEED``) and counts the resident
pages after it. Only reads that bypass the cache (``O_DIRECT``) are not there; rchar counts them.
"""

from __future__ import annotations

import ctypes
import mmap
import os

_libc = ctypes.CDLL(None, use_errno=True)
_libc.mmap.restype = ctypes.c_void_p
_libc.mmap.argtypes = (ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_long)
_libc.munmap.argtypes = (ctypes.c_void_p, ctypes.c_size_t)
_libc.mincore.argtypes = (ctypes.c_void_p, ctypes.c_size_t, ctypes.c_char_p)
_FAILED = ctypes.c_void_p(-1).value


def _checked(result: int | None, what: str) -> int:
    if result is None or result == _FAILED or result == -1:
        number = ctypes.get_errno()
        raise OSError(number, f"{what}: {os.strerror(number)}")
    return result


def evict(fd: int) -> None:
    """Drop the file's clean pages from the page cache (those no process maps)."""
    os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)


def cached_bytes(fd: int) -> int:
    """How many bytes of the file behind ``fd`` are in the page cache now (whole pages)."""
    size = os.fstat(fd).st_size
    if size == 0:
        return 0
    address = _checked(_libc.mmap(None, size, mmap.PROT_READ, mmap.MAP_SHARED, fd, 0), "mmap")
    try:
        pages = -(-size // mmap.PAGESIZE)
        vector = ctypes.create_string_buffer(pages)
        _checked(_libc.mincore(address, size, vector), "mincore")
        return sum(byte & 1 for byte in vector.raw) * mmap.PAGESIZE
    finally:
        _libc.munmap(address, size)
