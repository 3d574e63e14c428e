"""Public tests for P6 (data.py): token files, memmaps and batch sampling.

Oracles: ``ndarray.tofile`` for the file format, ``np.memmap`` for loading, and the contract's
own properties for batches (every row of x is a real window of the tokens, y is x shifted by
one, every valid start and nothing else is drawn). The last test measures the memory that
sampling from a 1 GiB (sparse) token file really costs, in a fresh process (Linux only).
"""

from __future__ import annotations

import json
import os
import signal
import sys
import tempfile
import time
import warnings
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from _kit import call, call_interrupted_in_rename, check_raises, check_true, complain, describe_call, not_implemented, student_frames

SAVE, LOAD, BATCH = "data.save_tokens", "data.load_tokens", "data.get_batch"
DTYPES = [np.uint16, np.uint32, np.int32, np.int64, np.uint8]


# --- save_tokens / load_tokens ---------------------------------------------------------------

def token_lists():
    """(dtype, a non-empty list of tokens that fit it)."""
    def for_dtype(dtype):
        info = np.iinfo(dtype)
        return st.tuples(st.just(dtype), st.lists(st.integers(int(info.min), int(info.max)), min_size=1, max_size=50))
    return st.sampled_from(DTYPES).flatmap(for_dtype)


@pytest.mark.rule("P6.save-bytes")
@settings(max_examples=25, deadline=None)
@given(case=token_lists(), kind=st.sampled_from(["list", "list of numpy ints", "ndarray", "tensor"]),
       as_str=st.booleans())
def test_save_tokens_writes_what_tofile_writes(data, tmp_path_factory, case, kind, as_str):
    """Every token kind (a list of ints or of numpy integers, an integer ndarray or tensor), path a str or a Path."""
    dtype, values = case
    expected = np.array(values, dtype=np.dtype(dtype).newbyteorder("<"))
    tokens = {"list": values, "list of numpy ints": [np.dtype(dtype).type(v) for v in values],
              "ndarray": expected.astype(dtype), "tensor": torch.tensor(values, dtype=torch.int64)}[kind]
    folder = tmp_path_factory.mktemp("save")
    path = folder / "tokens.bin"
    call(data.save_tokens, tokens, str(path) if as_str else path, dtype=dtype)
    expected.tofile(folder / "reference.bin")
    want = (folder / "reference.bin").read_bytes()
    check_true(path.read_bytes() == want, f"{SAVE}({kind} of {values[:5]}..., {'a str' if as_str else 'a Path'}, "
               f"dtype={np.dtype(dtype)})",
               path.read_bytes()[:16], f"the bytes of ndarray.tofile: {want[:16]!r}...", SAVE,
               "raw little-endian integers, no header")


@pytest.mark.rule("P6.save-bytes")
@pytest.mark.parametrize("kind", ["list", "ndarray"])
def test_save_tokens_keeps_uint64_tokens_past_int64(data, tmp_path, kind):
    """Tokens of 2**63 and more fit uint64: checked as the integers they are, not through int64 (where they wrap
    negative and would be refused)."""
    values = [2**64 - 1, 2**63, 5]
    tokens = values if kind == "list" else np.array(values, dtype=np.uint64)
    path = tmp_path / "tokens.bin"
    call(data.save_tokens, tokens, path, dtype=np.uint64)
    want = np.array(values, dtype="<u8").tobytes()
    check_true(path.read_bytes() == want, f"{SAVE}({kind} {values}, path, dtype=np.uint64)", path.read_bytes()[:24],
               f"the bytes of ndarray.tofile: {want!r}", SAVE,
               "check each token against np.iinfo(dtype) as a Python int (or in uint64), never after int64")


@pytest.mark.rule("P6.save-bytes")
@pytest.mark.parametrize("dtype", [">u2", np.dtype(">i4"), ">u8"], ids=str)
def test_save_tokens_writes_little_endian_whatever_the_dtype_says(data, tmp_path, dtype):
    values = [1, 258, 7, 1000]
    path = tmp_path / "tokens.bin"
    call(data.save_tokens, values, path, dtype=dtype)
    want = np.asarray(values, dtype=np.dtype(dtype).newbyteorder("<")).tobytes()
    got = path.read_bytes()
    check_true(got == want, f"{SAVE}({values}, path, dtype={dtype!r})", f"the bytes {got.hex(' ')}",
               f"the bytes of np.asarray(tokens, dtype=np.dtype(dtype).newbyteorder('<')).tofile(path): {want.hex(' ')}",
               SAVE, "a big-endian dtype gives the integer type; the file is little-endian all the same")


@pytest.mark.rule("P6.load-memmap")
def test_round_trip_through_a_read_only_memmap(data, tmp_path):
    tokens = [0, 1, 2, 50256, 65535, 7]
    path = tmp_path / "tokens.bin"
    call(data.save_tokens, tokens, path)
    check_true(path.stat().st_size == 12, f"{SAVE}({tokens}, {path.name})", f"a file of {path.stat().st_size} bytes",
               "12 bytes: 6 uint16 tokens, 2 bytes each, no header", SAVE)
    loaded = call(data.load_tokens, str(path))  # a str, as in the handout's example (the other tests pass a Path)
    check_true(isinstance(loaded, np.memmap), f"{LOAD}({str(path)!r})", type(loaded).__name__, "an np.memmap", LOAD)
    check_true(loaded.dtype == np.uint16 and loaded.tolist() == tokens, f"{LOAD}({str(path)!r})", loaded,
               f"uint16 values {tokens}", LOAD)
    check_true(not loaded.flags.writeable, f"{LOAD}({str(path)!r}).flags.writeable", loaded.flags.writeable,
               "False: the memmap is read-only (mode='r')", LOAD)


@pytest.mark.rule("P6.load-memmap")
def test_load_with_another_dtype(data, tmp_path):
    path = tmp_path / "tokens.bin"
    call(data.save_tokens, np.array([70000, 3, 2**31 - 1]), path, dtype=np.int32)
    loaded = call(data.load_tokens, path, dtype=np.int32)
    check_true(loaded.tolist() == [70000, 3, 2**31 - 1], f"{LOAD}({path.name}, dtype=np.int32)", loaded,
               "[70000, 3, 2147483647]", LOAD)


def check_refused(data, tmp_path, bad, why: str, dtype=np.uint16) -> None:
    check_raises(ValueError, data.save_tokens, bad, tmp_path / "tokens.bin", dtype=dtype, why=why)


@pytest.mark.rule("P6.save-refuses-empty")
@pytest.mark.parametrize("bad", [[], np.array([], dtype=np.int64), torch.tensor([], dtype=torch.int64)], ids=repr)
def test_save_tokens_refuses_no_tokens(data, tmp_path, bad):
    check_refused(data, tmp_path, bad, "a token file of no tokens is refused")


@pytest.mark.rule("P6.save-refuses-non-integers")
@pytest.mark.parametrize("bad", [[1, 2.0, 3], [1, True], [1, np.float32(2.0)], np.array([1.5, 2.0]), np.array([2.0, 3.0]),
                                 np.array([True, False]), torch.tensor([1.0, 2.0]), torch.tensor([True])], ids=repr)
def test_save_tokens_refuses_tokens_that_are_not_integers(data, tmp_path, bad):
    check_refused(data, tmp_path, bad, "floats (even 2.0, even a float array of whole numbers) and bools are not tokens")


@pytest.mark.rule("P6.save-refuses-out-of-range")
@pytest.mark.parametrize("bad, dtype", [([-1, 5], np.uint16), ([65536], np.uint16), (np.array([5, -1]), np.uint16),
                                        (torch.tensor([70000]), np.uint16), (np.array([300]), np.uint8),
                                        ([2**31], np.int32)], ids=repr)
def test_save_tokens_refuses_tokens_that_do_not_fit(data, tmp_path, bad, dtype):
    info = np.iinfo(dtype)
    check_refused(data, tmp_path, bad, f"{np.dtype(dtype).name} holds {info.min}..{info.max}: check the range "
                  "before converting (numpy wraps silently)", dtype)


def left_in(folder: Path) -> dict[str, bytes]:
    return {name: (folder / name).read_bytes() for name in os.listdir(folder)}


@pytest.mark.rule("P6.save-validates-first")
@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.bool_], ids=repr)
def test_save_tokens_refuses_a_dtype_that_is_not_an_integer_dtype(data, tmp_path, dtype):
    check_refused(data, tmp_path, [1, 2, 3], "token files hold integers: a dtype that is not an integer dtype is "
                  "refused", dtype)


@pytest.mark.rule("P6.save-validates-first")
@pytest.mark.parametrize("existing", [None, b"previous contents"], ids=["no file", "a file already there"])
@pytest.mark.parametrize("bad", [[1, 2, 70000], [1, 2.0], []], ids=repr)
def test_save_tokens_refusal_leaves_the_folder_as_it_was(data, tmp_path, bad, existing):
    path = tmp_path / "tokens.bin"
    if existing is not None:
        path.write_bytes(existing)
    try:
        data.save_tokens(bad, path)
    except NotImplementedError as exc:
        not_implemented(data.save_tokens, (bad, path), {}, exc)
    except Exception:  # noqa: BLE001, S110 - which error is the refusal tests' business; here, what is left behind
        pass
    left, want = left_in(tmp_path), {} if existing is None else {"tokens.bin": existing}
    check_true(left == want, f"{SAVE}({bad!r}, {path.name}), a refused call", sorted(left) or "nothing",
               "nothing in the folder" if existing is None else "only the previous tokens.bin, unchanged", SAVE,
               "validate before writing anything")


@pytest.mark.rule("P6.save-atomic")
@pytest.mark.skipif(sys.platform == "win32", reason="needs a file-size limit (resource.RLIMIT_FSIZE)")
@pytest.mark.parametrize("existing", [b"previous tokens", None], ids=["over an existing file", "to a new path"])
def test_save_tokens_is_atomic(data, tmp_path, existing):
    """A write that fails part-way (here: a file-size limit of 4 KiB, as a full disk) keeps the previous file, and
    leaves no file where there was none."""
    import resource
    import signal

    path = tmp_path / "tokens.bin"
    if existing is not None:
        path.write_bytes(existing)
    tokens = np.arange(20_000, dtype=np.int64)
    soft, hard = resource.getrlimit(resource.RLIMIT_FSIZE)
    handler = signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # an over-limit write fails with OSError instead
    resource.setrlimit(resource.RLIMIT_FSIZE, (4096, hard))
    raised = None
    try:
        data.save_tokens(tokens, path)
    except NotImplementedError as exc:
        raised = exc
    except Exception as exc:  # noqa: BLE001 - the write error, whatever its type
        raised = exc
    finally:
        resource.setrlimit(resource.RLIMIT_FSIZE, (soft, hard))
        signal.signal(signal.SIGXFSZ, handler)
    if isinstance(raised, NotImplementedError):
        not_implemented(data.save_tokens, (tokens, path), {}, raised)
    where = "over an existing file" if existing is not None else "to a new path"
    what = f"{SAVE}(20000 tokens, {path.name}) {where}, with the disk full after 4096 bytes"
    check_true(raised is not None, what, "returned normally", "the write error (OSError: File too large)", SAVE)
    left = left_in(tmp_path)
    check_true(left == ({} if existing is None else {"tokens.bin": existing}), what,
               str({name: f"{len(content)} bytes" for name, content in left.items()}),
               "nothing in the folder" if existing is None else "only the previous tokens.bin, unchanged (15 bytes)",
               SAVE, "write to a temporary file in the same folder (whether or not path exists), os.replace it over "
               "path, remove it on error")


BESIDE_PATH = "create the temporary file beside path (tempfile.mkstemp(dir=path's folder)), then os.replace it over path"


@pytest.mark.rule("P6.save-atomic")
def test_save_tokens_keeps_its_temporary_file_beside_path(data, tmp_path, monkeypatch):
    """The system's temporary folder is missing during the call: a temporary file made beside path does not need it."""
    folder, elsewhere = tmp_path / "data", tmp_path / "missing-system-temp"
    folder.mkdir()
    path = folder / "tokens.bin"
    monkeypatch.setattr(tempfile, "tempdir", str(elsewhere))  # where mkstemp() without dir= would write
    monkeypatch.setenv("TMPDIR", str(elsewhere))
    what = f"{SAVE}([1, 2, 3], {path.name}) while the system's temporary folder does not exist"
    try:
        data.save_tokens([1, 2, 3], path)
    except NotImplementedError as exc:
        not_implemented(data.save_tokens, ([1, 2, 3], path), {}, exc)
    except Exception as exc:  # noqa: BLE001 - a temporary file made in the system's folder fails here
        complain(what, f"raised {type(exc).__name__}: {exc}", "tokens.bin written, no error", SAVE,
                 "the rename is atomic only within one file system, and the system's temporary folder may be on "
                 "another one (or, as here, be missing)", BESIDE_PATH + " (handout rule [P6.save-atomic])",
                 student_frames(data.save_tokens, exc))
    check_true(left_in(folder) == {"tokens.bin": bytes.fromhex("010002000300")}, what,
               f"the folder holds {sorted(left_in(folder))}", "only tokens.bin, holding 01 00 02 00 03 00", SAVE,
               hint=BESIDE_PATH + " (handout rule [P6.save-atomic])")


@pytest.mark.rule("P6.save-atomic")
def test_save_tokens_interrupted_leaves_no_file(data, tmp_path):
    """A KeyboardInterrupt as the temporary file is renamed over path propagates; the folder is as it was."""
    path = tmp_path / "tokens.bin"
    path.write_bytes(b"previous tokens")
    raised, renames = call_interrupted_in_rename(data, data.save_tokens, [1, 2, 3], path)
    what = f"{SAVE}([1, 2, 3], {path.name}) over an existing file, interrupted (KeyboardInterrupt) in os.replace"
    if not renames:
        return  # the file was moved some other way: nothing here interrupted it
    hint = ("remove the temporary file on any exception, KeyboardInterrupt too (except BaseException, or "
            "try/finally), and re-raise it (handout rule [P6.save-atomic])")
    check_true(isinstance(raised, KeyboardInterrupt), what,
               "returned normally" if raised is None else f"raised {type(raised).__name__}: {raised}",
               "the KeyboardInterrupt, propagated", SAVE, hint=hint)
    left = left_in(tmp_path)
    check_true(left == {"tokens.bin": b"previous tokens"}, what,
               str({name: f"{len(content)} bytes" for name, content in left.items()}),
               "only the previous tokens.bin, unchanged (15 bytes)", SAVE, hint=hint)


@pytest.mark.rule("P6.load-memmap")
@pytest.mark.parametrize("dtype", [">u2", np.dtype(">u2"), "<u2", ">i4", np.dtype(">i8"), "=i4", np.dtype("u4")],
                         ids=str)
def test_load_tokens_reads_little_endian_whatever_the_dtype_says(data, tmp_path, dtype):
    values = [1, 2, 258, 7]
    path = tmp_path / "tokens.bin"
    np.asarray(values, dtype=np.dtype(dtype).newbyteorder("<")).tofile(path)
    loaded = call(data.load_tokens, path, dtype=dtype)
    got = np.asarray(loaded).tolist()
    check_true(got == values, f"{LOAD}(a file written by np.asarray({values}, little-endian).tofile, dtype={dtype!r})",
               got, f"the file's values {values}", LOAD,
               "a big-endian dtype names the integer type only; the file is little-endian all the same",
               "map np.dtype(dtype).newbyteorder('<') (handout rule [P6.load-memmap])")


@pytest.mark.rule("P6.load-memmap")
@pytest.mark.parametrize("dtype", [np.uint8, np.int8, np.uint16, np.int32, np.int64], ids=str)
def test_load_tokens_maps_a_file_of_one_token(data, tmp_path, dtype):
    path = tmp_path / "tokens.bin"
    np.asarray([7], dtype=dtype).tofile(path)
    got = np.asarray(call(data.load_tokens, path, dtype=dtype)).tolist()
    check_true(got == [7], f"{LOAD}(a file holding one {np.dtype(dtype)} token, 7, dtype={np.dtype(dtype)})", got,
               "[7]: the smallest token file holds one token (of 1 to 8 bytes); only an empty file is refused", LOAD)


@pytest.mark.rule("P6.load-refuses")
@pytest.mark.parametrize("content, dtype", [(b"", np.uint16), (b"\x01\x02\x03", np.uint16), (b"\x00" * 6, np.int32),
                                            (b"\x00" * 8, np.float32), (b"\x00" * 8, np.float64),
                                            (b"\x00" * 8, np.bool_), (b"\x00" * 8, np.complex64)],
                         ids=["empty", "odd-size-uint16", "6-bytes-int32", "float32-dtype", "float64-dtype",
                              "bool-dtype", "complex64-dtype"])
def test_load_tokens_refuses_bad_files(data, tmp_path, content, dtype):
    path = tmp_path / "tokens.bin"
    path.write_bytes(content)
    check_raises(ValueError, data.load_tokens, path, dtype=dtype,
                 why="an empty file, a size that is not a whole number of tokens, or a dtype that is not an "
                     "integer dtype is not a token file")


@pytest.mark.rule("P6.load-missing-file")
def test_load_tokens_of_a_missing_file(data, tmp_path):
    check_raises(FileNotFoundError, data.load_tokens, tmp_path / "missing.bin")


# --- get_batch ---------------------------------------------------------------------------------
# The starts come first: where an off-by-one bound breaks every batch, the first failure names the rule of
# valid starts, not numpy's "high <= 0".

VALID_STARTS = ("every start 0 .. len(tokens) - L - 1 is valid, the last one included (its y ends at the last "
                "token): draw from integers(0, len(tokens) - L) / randint(0, len(tokens) - L), whose upper bound "
                "is exclusive (handout rule [P6.batch-valid-starts])")


def sample(data, tokens: np.ndarray, batch: Any, length: Any, *rng: np.random.Generator) -> tuple[Any, Any]:
    """``get_batch(tokens, batch, length, "cpu", *rng)``, a valid call: an error from it points at the valid starts."""
    try:
        return data.get_batch(tokens, batch, length, "cpu", *rng)
    except NotImplementedError as exc:
        not_implemented(data.get_batch, (tokens, batch, length, "cpu", *rng), {}, exc)
    except Exception as exc:  # noqa: BLE001 - a valid call that raised becomes a readable failure
        complain(describe_call(data.get_batch, (tokens, batch, length, "cpu", *rng)),
                 f"raised {type(exc).__name__}: {exc}",
                 f"a batch: {len(tokens)} tokens hold {len(tokens) - int(length)} window(s) of {int(length)} tokens "
                 "and their next token", BATCH, hint=VALID_STARTS, where=student_frames(data.get_batch, exc))


def check_windows(tokens: np.ndarray, got: Any, batch: int, length: int, call_text: str) -> list[int]:
    """x is int64 (B, L) and each row a real window tokens[s:s+L] for a valid start s; y int64 (B, L). The starts."""
    check_true(isinstance(got, tuple) and len(got) == 2 and all(isinstance(t, torch.Tensor) for t in got), call_text,
               got, "two tensors (x, y)", BATCH)
    for name, t in zip("xy", got):
        check_true(t.dtype == torch.int64 and tuple(t.shape) == (batch, length), call_text, t,
                   f"{name}: int64 of shape ({batch}, {length})", BATCH)
    rows = got[0].cpu().numpy()
    windows = np.lib.stride_tricks.sliding_window_view(np.asarray(tokens, dtype=np.int64), length)[:len(tokens) - length]
    match = (rows[:, None, :] == windows[None, :, :]).all(axis=2)  # match[i, s]: x[i] = tokens[s:s+L]
    for i in np.flatnonzero(~match.any(axis=1))[:1]:
        check_true(False, call_text, f"x[{i}]={rows[i].tolist()}",
                   "x[i] = tokens[s:s+L] for some valid start s (0 <= s <= len(tokens) - L - 1)", BATCH)
    return match.argmax(axis=1).tolist()


def starts_drawn(data, n: int, length: int, draws: int = 2000, seed: int = 0) -> np.ndarray:
    """With tokens = 0, 1, 2, ... each x[i, 0] is the start of window i."""
    tokens = np.arange(n, dtype=np.int64)
    got = sample(data, tokens, draws, length, np.random.default_rng(seed))
    check_windows(tokens, got, draws, length, f"get_batch(arange({n}), {draws}, {length}, 'cpu', rng)")
    return got[0][:, 0].numpy()


@pytest.mark.rule("P6.batch-valid-starts")
def test_one_window_only(data):
    starts = starts_drawn(data, n=9, length=8, draws=50)
    check_true(set(starts.tolist()) == {0}, "get_batch(arange(9), 50, 8, 'cpu', rng)", sorted(set(starts.tolist())),
               "only start 0: 9 tokens hold one window of 8 plus its next token", BATCH)


@pytest.mark.rule("P6.batch-valid-starts")
def test_the_last_valid_start_is_drawn(data):
    starts = starts_drawn(data, n=10, length=8, draws=400)
    check_true(set(starts.tolist()) == {0, 1}, "get_batch(arange(10), 400, 8, 'cpu', rng): starts drawn",
               sorted(set(starts.tolist())), "both starts 0 and 1 (valid starts are 0 .. len - L - 1 inclusive)", BATCH,
               "the last valid start s = len - L - 1 has y ending exactly at the last token")
    # The same starts without a generator, drawn from numpy's global RNG.
    tokens = np.arange(10, dtype=np.int64)
    np.random.seed(0)
    got = sample(data, tokens, 400, 8)
    starts = check_windows(tokens, got, 400, 8, "np.random.seed(0); get_batch(arange(10), 400, 8, 'cpu')")
    check_true(set(starts) == {0, 1}, "np.random.seed(0); get_batch(arange(10), 400, 8, 'cpu'): starts drawn",
               sorted(set(starts)), "both starts 0 and 1, with generator=None too (valid starts are 0 .. len - L - 1 "
               "inclusive)", BATCH, "np.random.randint(0, len(tokens) - L) draws every valid start: its upper bound is "
               "exclusive")


@pytest.mark.rule("P6.batch-valid-starts")
def test_starts_are_uniform(data):
    n, length, draws = 20, 8, 6000
    starts = starts_drawn(data, n, length, draws)
    counts = np.bincount(starts, minlength=n - length)
    expected = draws / (n - length)
    chi2 = float(((counts - expected) ** 2 / expected).sum())
    # 11 degrees of freedom: P(chi2 > 50) is about 6e-7 for a uniform sampler.
    check_true(len(counts) == n - length and chi2 < 50, f"get_batch(arange({n}), {draws}, {length}, 'cpu', rng)",
               f"start counts {counts.tolist()}", f"about {expected:.0f} draws of each start 0..{n - length - 1} "
               f"(chi-square {chi2:.1f}, limit 50)", BATCH)
    # Independent rows: about as many rows start lower than the row before as higher (a sorted batch has none).
    lower, higher = int((starts[1:] < starts[:-1]).sum()), int((starts[1:] > starts[:-1]).sum())
    check_true(min(lower, higher) > draws // 10, f"get_batch(arange({n}), {draws}, {length}, 'cpu', rng)",
               f"{lower} rows start lower than the row before and {higher} higher",
               f"both near {draws * (1 - 1 / (n - length)) / 2:.0f}: each row's start drawn independently of the others "
               "(not sorted)", BATCH)


@pytest.mark.rule("P6.batch-int64")
@settings(max_examples=25, deadline=None)
@given(tokens=hnp.arrays(np.uint16, st.integers(3, 60)), sizes=st.tuples(st.integers(1, 6), st.integers(1, 8)),
       seed=st.integers(0, 2**32 - 1))
def test_batches_are_int64_windows(data, tokens, sizes, seed):
    batch, length = sizes
    length = min(length, len(tokens) - 2)  # len(tokens) = L + 1, one start only, is the valid-starts tests' case
    got = sample(data, tokens, batch, length, np.random.default_rng(seed))
    check_windows(tokens, got, batch, length, f"get_batch(tokens of length {len(tokens)}, {batch}, {length}, 'cpu', rng)")


@pytest.mark.rule("P6.batch-y-shifted")
def test_targets_are_the_next_tokens(data):
    tokens = np.random.default_rng(3).permutation(500).astype(np.uint16)  # distinct: a row's start is known
    x, y = sample(data, tokens, 16, 12, np.random.default_rng(4))
    starts = check_windows(tokens, (x, y), 16, 12, "get_batch(500 distinct tokens, 16, 12, 'cpu', rng)")
    for i, s in enumerate(starts):
        check_true(np.array_equal(y[i].cpu().numpy(), tokens[s + 1:s + 13]), "get_batch(500 distinct tokens, 16, 12, "
                   "'cpu', rng)", f"x[{i}] = tokens[{s}:{s + 12}], y[{i}] = {y[i].tolist()}",
                   f"y[{i}] = tokens[{s + 1}:{s + 13}] = {tokens[s + 1:s + 13].tolist()} (x shifted by one)", BATCH)


@pytest.mark.rule("P6.batch-counts")
def test_counts_may_be_whole_floats(data):
    tokens = np.arange(100, dtype=np.uint16)
    got = sample(data, tokens, 4.0, 8.0, np.random.default_rng(0))
    check_windows(tokens, got, 4, 8, "get_batch(arange(100), 4.0, 8.0, 'cpu', rng)")


@pytest.mark.rule("P6.batch-generator")
def test_same_generator_seed_same_batch(data):
    tokens = np.arange(10_000, dtype=np.uint16)
    a = call(data.get_batch, tokens, 8, 16, "cpu", np.random.default_rng(42))
    b = call(data.get_batch, tokens, 8, 16, "cpu", np.random.default_rng(42))
    c = call(data.get_batch, tokens, 8, 16, "cpu", np.random.default_rng(43))
    check_true(torch.equal(a[0], b[0]) and torch.equal(a[1], b[1]), "get_batch(..., np.random.default_rng(42)) twice",
               (a[0][:, 0], b[0][:, 0]), "the same batch: the generator decides the starts", BATCH)
    check_true(not torch.equal(a[0], c[0]), "get_batch(..., default_rng(42)) and (..., default_rng(43))",
               (a[0][:, 0], c[0][:, 0]), "different batches for different seeds", BATCH)


@pytest.mark.rule("P6.batch-global-rng")
def test_global_numpy_rng_without_generator(data):
    tokens = np.arange(10_000, dtype=np.uint16)
    np.random.seed(1234)
    a = call(data.get_batch, tokens, 8, 16, "cpu")
    np.random.seed(1234)
    b = call(data.get_batch, tokens, 8, 16, "cpu")
    np.random.seed(4321)
    c = call(data.get_batch, tokens, 8, 16, "cpu")
    check_true(torch.equal(a[0], b[0]) and not torch.equal(a[0], c[0]),
               "np.random.seed(1234); get_batch(..., 'cpu') twice, then with seed 4321", (a[0][:, 0], b[0][:, 0], c[0][:, 0]),
               "the same batch after the same np.random.seed, another after another seed", BATCH,
               "with generator=None draw from numpy's global RNG (np.random), not torch's")


@pytest.mark.rule("P6.batch-refuses")
@pytest.mark.parametrize("n, batch, length", [(8, 2, 8), (100, 0, 8), (100, 2, 0), (100, -1, 8), (100, 2.5, 8),
                                              (100, 2, 7.5)])
def test_get_batch_refuses(data, n, batch, length):
    check_raises(ValueError, data.get_batch, np.arange(n, dtype=np.uint16), batch, length, "cpu",
                 np.random.default_rng(0), why="needs len(tokens) >= L + 1, B >= 1 and L >= 1")


@pytest.mark.rule("P6.batch-device")
@pytest.mark.parametrize("device", ["cpu", torch.device("cpu"), "cpu:0"], ids=repr)
def test_cpu_batches_for_every_spelling_of_the_device(data, device):
    """device is a str or a torch.device (get_batch's signature): each spelling of the CPU gives CPU tensors."""
    tokens = np.arange(200, dtype=np.uint16)
    what = f"get_batch(arange(200), 4, 8, {device!r}, rng)"
    got = call(data.get_batch, tokens, 4, 8, device, np.random.default_rng(0))
    check_windows(tokens, got, 4, 8, what)
    check_true(all(t.device.type == "cpu" for t in got), what, [t.device for t in got], "tensors on the CPU", BATCH,
               hint="device may be a str or a torch.device: torch.device(device).type says which (never str methods on it)")


@pytest.mark.rule("P6.batch-device")
@pytest.mark.gpu
def test_cuda_batches(data):
    tokens = np.arange(5000, dtype=np.uint16)
    x, y = call(data.get_batch, tokens, 8, 32, "cuda", np.random.default_rng(5))
    check_true(x.device.type == "cuda" and y.device.type == "cuda", "get_batch(..., 'cuda', rng)", x.device,
               "tensors on the GPU", BATCH)
    torch.cuda.synchronize()
    check_windows(tokens, (x.cpu(), y.cpu()), 8, 32, "get_batch(arange(5000), 8, 32, 'cuda', rng)")


# --- reality check: what sampling from a big memmap costs ---------------------------------------

SAMPLE = r"""
import json, os
import numpy as np
fd = os.open(path, os.O_RDONLY); os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED); os.close(fd)
def kib(key):
    for line in open("/proc/self/status"):
        if line.startswith(key + ":"):
            return int(line.split()[1])
rng = np.random.default_rng(0)
data.get_batch(np.arange(1000, dtype=np.uint16), 2, 8, "cpu", rng)  # one-time costs, not charged to the file
tokens = np.memmap(path, dtype=np.uint16, mode="r")
with open("/proc/self/clear_refs", "w") as f:
    f.write("5")  # reset the peak resident size (VmHWM) to the current one
base = kib("VmRSS")
open(ready, "w").write(str(base))
for _ in range(20):
    data.get_batch(tokens, 8, 256, "cpu", rng)
open(out, "w").write(json.dumps({"growth_mib": (kib("VmHWM") - base) / 1024}))
"""  # run with data (the module), path (the token file), ready and out (files it writes) defined
FRESH = r"""
import importlib, importlib.util, os, sys
folder, package, path, ready, out = sys.argv[1:6]
spec = importlib.util.spec_from_file_location(package, os.path.join(folder, "__init__.py"),
                                              submodule_search_locations=[folder])
pkg = importlib.util.module_from_spec(spec); sys.modules[package] = pkg; spec.loader.exec_module(pkg)
data = importlib.import_module(package + ".data")
""" + SAMPLE


def rss_kib(pid: int) -> int:
    try:
        return int(next(line for line in open(f"/proc/{pid}/status") if line.startswith("VmRSS:")).split()[1])
    except (OSError, StopIteration):
        return 0


def start_sampler(data, path: Path, ready: Path, out: Path, err: Path) -> int:
    """Run SAMPLE in a child process; its pid. The child is forked from this one (torch and the student's module
    already imported: nothing to import again), or, where this process has initialized CUDA (which a forked
    child cannot use), a fresh interpreter that imports the package itself."""
    names = {"path": str(path), "ready": str(ready), "out": str(out)}
    if torch.cuda.is_initialized():
        argv = [sys.executable, "-c", FRESH, str(Path(data.__file__).parent), data.__name__.rpartition(".")[0],
                names["path"], names["ready"], names["out"]]
        return os.posix_spawn(sys.executable, argv, os.environ, file_actions=[
            (os.POSIX_SPAWN_OPEN, 2, str(err), os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)  # Python 3.12+ warns of a fork beside other threads
        pid = os.fork()
    if pid == 0:
        code = 1
        try:
            torch.set_num_threads(1)  # the parent's OpenMP threads are not in the child
            exec(SAMPLE, {"data": data, **names})
            code = 0
        except BaseException as exc:  # noqa: BLE001 - whatever the student's code raised, reported by the parent
            err.write_text(f"{type(exc).__name__}: {exc}")
        finally:
            os._exit(code)
    return pid


def measure_growth(data, path: Path, stop_mib: int = 768) -> tuple[float | None, str]:
    """Run SAMPLE in a child process (``start_sampler``); stop it once it has grown by ``stop_mib`` (a whole-file
    reader). The peak growth in MiB, or None and why."""
    ready, out, err = (path.with_name(name) for name in ("ready", "out", "err"))
    pid = start_sampler(data, path, ready, out, err)
    deadline = time.monotonic() + 120
    try:
        while True:
            done, status = os.waitpid(pid, os.WNOHANG)
            if done:
                break
            base = int(ready.read_text() or 0) if ready.exists() else 0
            if (base and rss_kib(pid) - base > stop_mib * 1024) or time.monotonic() > deadline:
                return None, f"stopped after growing by more than {stop_mib} MiB (or running for 2 minutes)"
            time.sleep(0.01)
    finally:
        if not done:  # stopped, or this process interrupted: the child goes too
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
    code = os.waitstatus_to_exitcode(status)
    if code != 0 or not out.exists():
        errors = err.read_text().strip().splitlines() if err.exists() else []
        return None, (errors or [f"exit status {code}"])[-1]
    return json.loads(out.read_text())["growth_mib"], ""


@pytest.mark.rule("P6.batch-reads-windows")
@pytest.mark.skipif(not os.path.exists("/proc/self/clear_refs"), reason="needs Linux /proc to measure memory")
def test_sampling_a_1gib_file_costs_megabytes(data, tmp_path):
    """20 batches of 8 x 256 from a 1 GiB token file: a few MiB touched, not the whole file."""
    path = tmp_path / "big.bin"
    with open(path, "wb") as f:
        f.truncate(1 << 30)  # sparse: 1 GiB of zero tokens that take no disk space
    call(data.get_batch, call(data.load_tokens, path)[:10], 1, 2, "cpu")  # implemented at all?
    growth, problem = measure_growth(data, path)
    what = f"20 x {BATCH}(np.memmap of 1 GiB, 8, 256, 'cpu', rng) in a child process"
    # A sampler that indexes the memmap maps about 64 KiB per window (~10 MiB here); reading the
    # file whole costs at least its 1024 MiB. 512 MiB separates the two with a wide margin.
    check_true(growth is not None and growth < 512, what,
               f"peak resident memory grew by {growth:.0f} MiB" if growth is not None else problem,
               "well under 512 MiB (a few MiB: only the windows)", BATCH,
               "index the memmap with the sampled positions; never np.array(tokens) or tokens.astype(...)")
