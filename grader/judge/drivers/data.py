"""P6: token files staged and read by the judge, batches drawn in the worker, costs measured from outside.

Everything here runs in the judge. Files go through the exchange folder (``sub.exchange()``):
the judge writes the inputs and reads what the submission left, through descriptors that never
follow a link the worker may have planted there. The worker runs only the submission's functions
and the library calls named here (``numpy.memmap``, ``numpy.array``, ``numpy.random.default_rng``,
``numpy.random.seed``, ``torch.manual_seed``, ``pathlib.Path``, ``torch.zeros``; ``tempfile.tempdir`` set and
``os.replace`` and ``os.rename`` replaced by a ``unittest.mock.Mock`` for one call, then restored).
What a call costs the worker's whole process tree is read by the judge from outside it (its
cgroup, else its processes in /proc: ``Submission.measure``) before and after it runs, and what
a token file lost to the page cache from the file itself (``Submission.page_cache_bytes``: the judge's
own mapping of the file it made); every expected value is computed by the hidden suite from the tokens it owns.
"""

from __future__ import annotations

import contextlib
import math
import mmap
import os
import resource
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any, TypeVar

import numpy as np
import torch

from ..handle import Remote, StudentError, Submission, holding
from ...wire import Raised
from .folder import Folder
from .renames import interrupted_renames

MiB = 1 << 20
T = TypeVar("T")


def library(sub: Submission, target: str, *args: Any, **kwargs: Any) -> Any:
    """Call a library function in the worker (e.g. to seed its RNGs); its value as data."""
    with holding(sub.lib(target, *args, **kwargs)) as result:
        return result.read()


@contextlib.contextmanager
def file_size_limit(sub: Submission, limit: int | None) -> Iterator[None]:
    """While the block runs, the worker's writes fail past ``limit`` bytes (EFBIG, as on a full
    disk: Python ignores SIGXFSZ, so the write raises). Set by a library call the judge orders in
    the worker (``resource.setrlimit``; the judge may lack the capability to prlimit a worker that
    runs as another user): a submission that defuses it only makes its write succeed, which fails."""
    if limit is None:
        yield
        return
    soft, hard = library(sub, "resource.getrlimit", resource.RLIMIT_FSIZE)
    library(sub, "resource.setrlimit", resource.RLIMIT_FSIZE, (limit, hard))
    try:
        yield
    finally:
        with contextlib.suppress(StudentError):  # a worker that died is restarted with its own limits
            library(sub, "resource.setrlimit", resource.RLIMIT_FSIZE, (soft, hard))


@contextlib.contextmanager
def system_temp_folder(sub: Submission, path: str | None) -> Iterator[None]:
    """While the block runs, the worker's ``tempfile`` takes ``path`` for the system's temporary
    folder (``tempfile.tempdir``: where ``mkstemp()`` without ``dir=`` creates its file)."""
    if path is None:
        yield
        return
    with holding(sub.lib("importlib.import_module", "tempfile")) as module:
        previous = module.get("tempdir")
        module.set("tempdir", path)
        try:
            yield
        finally:
            with contextlib.suppress(StudentError):
                module.set("tempdir", previous)


def _dtype_kwargs(dtype: Any) -> dict:
    """``dtype=`` as an ``np.dtype`` (a scalar type such as ``np.uint8`` crosses the wire as one anyway), or as
    the str that spells it."""
    return {} if dtype is None else {"dtype": dtype if isinstance(dtype, str) else np.dtype(dtype)}


# -- save_tokens / load_tokens -------------------------------------------------------------------

MISSING_TEMP = "missing-system-temp"  # the system's temporary folder, with ``save(missing_temp=True)``: never created


def save(sub: Submission, tokens: Any, dtype: Any = None, *, existing: bytes | None = None, as_str: bool = True,
         file_limit: int | None = None, missing_temp: bool = False) -> tuple[Raised | None, dict[str, bytes | None]]:
    """``save_tokens(tokens, path[, dtype=dtype])`` into a fresh folder (holding ``existing`` at
    ``path`` first, when given; ``path`` a str or a ``pathlib.Path`` built in the worker): what it
    raised, and every file the folder holds afterwards, read by the judge. With ``missing_temp``
    the worker's system temporary folder is ``MISSING_TEMP`` in that folder, which does not exist."""
    with Folder(sub) as folder:
        path = folder.write("tokens.bin", existing) if existing is not None else folder.path("tokens.bin")
        target = path if as_str else sub.lib("pathlib.Path", path)
        with file_size_limit(sub, file_limit), system_temp_folder(sub, folder.path(MISSING_TEMP) if missing_temp else None):
            result = sub.attempt("data.save_tokens", tokens, target, **_dtype_kwargs(dtype))
        return (result if isinstance(result, Raised) else None), folder.files()


def save_interrupted(sub: Submission, tokens: Any, existing: bytes) -> tuple[Raised | None, dict[str, bytes | None], int]:
    """``save_tokens(tokens, path)`` over a file holding ``existing``, with ``os.replace`` and ``os.rename``
    raising KeyboardInterrupt in the worker (``interrupted_renames``): what it raised, every file the
    folder holds afterwards, and how many times the interrupted renames were called."""
    with Folder(sub) as folder:
        path = folder.write("tokens.bin", existing)
        with interrupted_renames(sub, "data") as renames:
            result = sub.attempt("data.save_tokens", tokens, path)
            calls = renames()
        return (result if isinstance(result, Raised) else None), folder.files(), calls


@dataclass(frozen=True)
class Loaded:
    """What ``load_tokens`` gave: what it raised, or the array read back and its kind."""

    raised: Raised | None
    type: str = ""
    memmap: bool = False
    writeable: bool = False
    values: Any = None


def load(sub: Submission, content: bytes, dtype: Any = None) -> Loaded:
    """``load_tokens(path[, dtype=dtype])`` of a file the judge wrote holding ``content``."""
    with Folder(sub) as folder:
        path = folder.write("tokens.bin", content)
        result = sub.attempt("data.load_tokens", path, **_dtype_kwargs(dtype))
        if isinstance(result, Raised):
            return Loaded(result)
        with holding(sub.new("data.load_tokens", path, **_dtype_kwargs(dtype))) as loaded, \
                holding(sub.lib("importlib.import_module", "numpy")) as numpy, \
                holding(numpy.get("memmap", keep=True)) as memmap_class:
            if library(sub, "builtins.isinstance", loaded, memmap_class) is not True:
                return Loaded(None, loaded.type_name, values=result)
            with holding(loaded.get("flags", keep=True)) as flags:
                return Loaded(None, loaded.type_name, True, flags.get("writeable") is True, result)


# -- get_batch -----------------------------------------------------------------------------------

@dataclass(frozen=True)
class Batch:
    """What ``get_batch`` returned, as data, and (when asked for) the device of each returned tensor."""

    value: Any
    devices: tuple[str, ...] = ()


def _pair_of_tensors(value: Any) -> bool:
    return type(value) is tuple and len(value) == 2 and all(isinstance(t, torch.Tensor) for t in value)


def get_batch(sub: Submission, tokens: Any, batch_size: Any, context_length: Any, device: Any = "cpu",
              generator: Remote | None = None, *, devices: bool = False) -> Batch:
    """``get_batch(tokens, B, L, device[, generator])`` in the worker; with ``devices``, each
    returned tensor's device is read back from the worker too (the data comes back on the CPU)."""
    args = (tokens, batch_size, context_length, device) + (() if generator is None else (generator,))
    with holding(sub.new("data.get_batch", *args)) as pair:
        value = pair.read()
        if not (devices and _pair_of_tensors(value)):
            return Batch(value)
        found = []
        for index in (0, 1):
            with holding(pair.call("__getitem__", index, keep=True)) as tensor:
                found.append(str(tensor.get("device")))
        return Batch(value, tuple(found))


@contextlib.contextmanager
def token_source(sub: Submission, tokens: np.ndarray, as_file: bool = False) -> Iterator[Remote]:
    """``tokens`` held in the worker: the array, sent once, or (``as_file``) a read-only
    ``np.memmap`` of a file the judge wrote with its bytes."""
    if not as_file:
        with holding(sub.lib("numpy.array", tokens)) as held:
            yield held
        return
    with Folder(sub) as folder:
        path = folder.write("tokens.bin", tokens.tobytes())
        with holding(sub.lib("numpy.memmap", path, dtype=tokens.dtype, mode="r")) as held:
            yield held


def seeded_batches(sub: Submission, tokens: np.ndarray, batch_size: Any, context_length: Any, seeds: list[int],
                   as_file: bool = False, devices: bool = False, device: Any = "cpu") -> list[Batch]:
    """One ``get_batch(tokens, B, L, device, np.random.default_rng(seed))`` per seed (``device`` "cpu" unless
    given: a str or a ``torch.device``), the generator built in the worker; before each, numpy's and torch's
    global RNGs there are seeded differently, so that only the generator can make two batches equal."""
    with token_source(sub, tokens, as_file) as source:
        batches = []
        for number, seed in enumerate(seeds):
            library(sub, "numpy.random.seed", 1000 + number)
            library(sub, "torch.manual_seed", 1000 + number)
            with holding(sub.lib("numpy.random.default_rng", seed)) as generator:
                batches.append(get_batch(sub, source, batch_size, context_length, device, generator, devices=devices))
        return batches


def global_batches(sub: Submission, tokens: np.ndarray, batch_size: int, context_length: int,
                   seeds: list[int]) -> list[Batch]:
    """One ``get_batch(tokens, B, L, "cpu")`` (no generator) after each ``np.random.seed(seed)`` in
    the worker; torch's global RNG is seeded differently each time, so only numpy's can make two equal."""
    with token_source(sub, tokens) as source:
        batches = []
        for number, seed in enumerate(seeds):
            library(sub, "torch.manual_seed", 2000 + number)
            library(sub, "numpy.random.seed", seed)
            batches.append(get_batch(sub, source, batch_size, context_length))
        return batches


# -- what sampling costs, measured from outside the worker -------------------------------------------

MIB_PER_FAULT = 2.0  # a PMD-mapped huge page (x86-64, arm64 with 4 KiB pages)


@dataclass(frozen=True)
class Cost:
    """What one action cost the worker's whole process tree (forked children, memfds and tmpfs
    files included), read by the judge from outside it (``Submission.measure``), and what the
    token file lost to the page cache, read from the file itself (``Submission.page_cache_bytes``)."""

    peak_mib: float  # growth of the memory the tree held, at its highest
    written_mib: float  # bytes written through write(2) and the like (wchar): memory that left the tree
    read_mib: float  # bytes copied in through read(2) and the like (rchar), by any process of the tree
    faults: int  # page faults of every process of the tree: a mapped page touched for the first time
    cached_mib: float  # the token file's pages in the page cache after the action (none before it)
    source: str  # what counted the memory

    @property
    def mapped_mib(self) -> float:
        """The most memory (file pages included) the faults can have brought in: one fault maps at
        most a huge page (a file's large folio mapped whole; fault-around maps only 16 small pages)."""
        return self.faults * MIB_PER_FAULT

    @property
    def touched_mib(self) -> float:
        return max(self.peak_mib + self.written_mib, self.read_mib, self.mapped_mib, self.cached_mib)


def measure(sub: Submission, action: Callable[[], T], file: int | None = None) -> tuple[T, Cost]:
    """Run ``action`` (calls into the worker) and measure, from the judge, what it cost the worker;
    ``file``: the judge's descriptor of the token file, evicted from the page cache first."""
    if file is not None:
        sub.evict_page_cache(file)
    before = sub.measure(reset_peak=True)
    result = action()
    after = sub.measure()
    return result, Cost(peak_mib=max(after.peak_bytes - before.memory_bytes, 0) / MiB,
                        written_mib=(after.written_bytes - before.written_bytes) / MiB,
                        read_mib=(after.read_bytes - before.read_bytes) / MiB,
                        faults=after.page_faults - before.page_faults,
                        cached_mib=(sub.page_cache_bytes(file) if file is not None else 0) / MiB,
                        source=after.source)


def spent(cost: Cost) -> str:
    """What ``cost`` says the worker did, in the student's terms."""
    return (f"grew peak memory by {cost.peak_mib:.0f} MiB ({cost.source}), wrote {cost.written_mib:.0f} MiB, "
            f"read {cost.read_mib:.0f} MiB, made {cost.faults} page faults (first touches of memory or of a mapped "
            f"file, pages it never held at once included; one maps up to {MIB_PER_FAULT:.0f} MiB: "
            f"{cost.mapped_mib:.0f} MiB counted) and brought {cost.cached_mib:.0f} MiB of the token file into the "
            "page cache (by any route: read, mmap, splice, readahead)")


def warm_up(sub: Submission) -> None:
    """One small load_tokens and get_batch first, so that one-time costs (imports, allocator pools)
    are not charged to the big file."""
    with Folder(sub) as folder:
        sub.attempt("data.load_tokens", folder.write("warm.bin", np.arange(4096, dtype=np.uint16).tobytes()))
        sub.attempt("data.get_batch", np.arange(4096, dtype=np.uint16), 2, 8, "cpu")


def load_cost(sub: Submission, size: int) -> tuple[tuple, Cost]:
    """``load_tokens(path)`` of a sparse file of ``size`` bytes, then its first and last token read
    back (the memmap released after): those two tokens, and what it all cost."""
    with Folder(sub) as folder, _held(folder, "tokens.bin", size) as (path, file):

        def load_and_read_ends() -> tuple:
            with holding(sub.new("data.load_tokens", path)) as tokens:
                return tokens.call("__len__"), tokens.call("__getitem__", 0), tokens.call("__getitem__", -1)

        return measure(sub, load_and_read_ends, file)


def batch_cost(sub: Submission, size: int, calls: int, batch_size: int, context_length: int) -> tuple[list, Cost]:
    """``calls`` x ``get_batch(np.memmap of a sparse uint16 file of size bytes, B, L, "cpu", rng)``
    (the memmap and the generator built in the worker first; the memmap's mapping advised
    ``MADV_RANDOM``, so that a window read through it brings in its own pages, not the 8 MiB the
    host reads around a fault): the batches, and what they cost."""
    with Folder(sub) as folder, _held(folder, "tokens.bin", size) as (path, file):
        with holding(sub.lib("numpy.memmap", path, dtype=np.dtype(np.uint16), mode="r")) as tokens, \
                holding(sub.lib("numpy.random.default_rng", 0)) as generator:
            with holding(tokens.get("_mmap", keep=True)) as mapping:
                mapping.call("madvise", mmap.MADV_RANDOM)
            return measure(sub, lambda: [sub.call("data.get_batch", tokens, batch_size, context_length, "cpu", generator)
                                         for _ in range(calls)], file)


@contextlib.contextmanager
def _held(folder: Folder, name: str, size: int) -> Iterator[tuple[str, int]]:
    """A sparse file of ``size`` bytes: its path as the worker sees it, and the judge's descriptor of it."""
    path = folder.sparse(name, size)
    file = folder.held(name)
    try:
        yield path, file
    finally:
        os.close(file)


# -- CUDA ------------------------------------------------------------------------------------------

def cuda_batch(sub: Submission, tokens: np.ndarray, batch_size: int, context_length: int,
               seed: int) -> tuple[Batch, int]:
    """``get_batch(tokens, B, L, "cuda", np.random.default_rng(seed))``: the batch with its devices,
    and how many bytes of pinned host memory the worker's process tree gained during the call, read
    from outside it (``Submission.measure_gpu``: the mappings CUDA makes for page-locked
    memory). CUDA is initialized in the worker first, so that only the call's own mappings count."""
    sub.lib("torch.zeros", 1, device="cuda").release()
    with token_source(sub, tokens) as source, holding(sub.lib("numpy.random.default_rng", seed)) as generator:
        before = sub.measure_gpu().pinned_host_bytes
        batch = get_batch(sub, source, batch_size, context_length, "cuda", generator, devices=True)
        after = sub.measure_gpu().pinned_host_bytes
    return batch, after - before


def short(tokens: Any) -> str:
    """Tokens for a message: their type, dtype, shape and first values."""
    if isinstance(tokens, (np.ndarray, torch.Tensor)):
        flat = tokens.reshape(-1).tolist()
        return (f"{type(tokens).__name__} of {tokens.dtype}, shape {tuple(tokens.shape)}, {flat[:8]}"
                f"{'...' if len(flat) > 8 else ''}")
    return repr(tokens[:8])[:-1] + (", ...]" if len(tokens) > 8 else "]")


def check_windows(tokens: np.ndarray, got: Any, batch: int, length: int, what: str) -> list[int]:
    """Assert the contract of one (x, y); returns the start of each row."""
    assert isinstance(got, tuple) and len(got) == 2, f"{what} returned {type(got).__name__}, expected a pair (x, y)"
    x, y = got
    for name, t in (("x", x), ("y", y)):
        assert isinstance(t, torch.Tensor), f"{what}: {name} is a {type(t).__name__}, expected a torch.Tensor"
        assert t.dtype == torch.int64 and tuple(t.shape) == (batch, length), (
            f"{what}: {name} is {t.dtype} of shape {tuple(t.shape)}, expected torch.int64 of shape ({batch}, {length})")
    values = tokens.astype(np.int64)
    windows = np.lib.stride_tricks.sliding_window_view(values, length + 1)  # row s = tokens[s : s + L + 1]
    rows_x, rows_y = x.numpy(), y.numpy()
    starts = _starts(values, windows, rows_x, rows_y)
    unmatched = np.flatnonzero(starts < 0)
    i = int(unmatched[0]) if unmatched.size else 0
    assert not unmatched.size, (
        f"{what}: row {i} is x={rows_x[i].tolist()[:8]}..., y={rows_y[i].tolist()[:8]}..., which is not tokens[s:s+L], "
        f"tokens[s+1:s+L+1] for any valid start 0 <= s <= len(tokens) - L - 1 = {len(values) - length - 1}")
    return starts.tolist()


def _starts(values: np.ndarray, windows: np.ndarray, rows_x: np.ndarray, rows_y: np.ndarray) -> np.ndarray:
    """For each row, the first start s with x == tokens[s:s+L] and y == tokens[s+1:s+L+1] (``windows[s]``), or -1."""
    found = np.full(len(rows_x), -1, dtype=np.int64)
    if not len(windows):
        return found
    if len(np.unique(values)) == len(values):  # the only candidate start is where x's first token sits
        order = np.argsort(values)
        at = order[np.searchsorted(values[order], rows_x[:, 0]).clip(0, len(values) - 1)]
        candidate = (values[at] == rows_x[:, 0]) & (at < len(windows))
        s = np.where(candidate, at, 0)
        ok = candidate & (windows[s, :-1] == rows_x).all(axis=1) & (windows[s, 1:] == rows_y).all(axis=1)
        return np.where(ok, s, found)
    for i, (row_x, row_y) in enumerate(zip(rows_x, rows_y)):
        matches = np.flatnonzero((windows[:, :-1] == row_x).all(axis=1) & (windows[:, 1:] == row_y).all(axis=1))
        found[i] = matches[0] if matches.size else -1
    return found


def chi_square_limit(dof: int, z: float = 5.2) -> float:
    """Wilson-Hilferty upper quantile of chi-square(dof) at z sigmas (z = 5.2: p about 1e-7), a
    slight overestimate for small dof, so a uniform sampler essentially never fails."""
    return dof * (1 - 2 / (9 * dof) + z * math.sqrt(2 / (9 * dof))) ** 3
