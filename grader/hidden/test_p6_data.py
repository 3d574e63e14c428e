"""Hidden tests for P6 (data.py): token files, memmaps and batch sampling, 12 points.

Oracles: numpy (``ndarray.tofile`` bytes, ``np.frombuffer`` values, ``np.iinfo`` ranges) for the
files; the contract's properties for batches (every row a real window with y shifted by one,
exactly the valid starts, uniform, reproducible through the generator or numpy's global RNG);
and the memory a fresh process really uses (VmHWM) when sampling from a 1 GiB sparse file.
Probes (grader/probes/data.py) do the file work and RNG seeding inside the worker.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

# No "explain" phase: it re-runs a failing test hundreds of times (minutes for a stub) to annotate it.
DTYPES = [np.uint8, np.uint16, np.uint32, np.uint64, np.int8, np.int16, np.int32, np.int64]
VALUE_ERROR = "builtins.ValueError"


# --- strategies ---------------------------------------------------------------------------------

def token_dtypes():
    return st.sampled_from(DTYPES)


@st.composite
def token_inputs(draw):
    """(dtype, tokens as a list / list of numpy ints / integer ndarray / integer tensor, the values)."""
    dtype = draw(token_dtypes())
    info = np.iinfo(dtype)
    values = draw(st.lists(st.integers(int(info.min), int(info.max)), min_size=1, max_size=64))
    fits_int64 = all(-2**63 <= v < 2**63 for v in values)
    kind = draw(st.sampled_from(["list", "numpy ints", "ndarray", "tensor"] if fits_int64 else ["list", "ndarray"]))
    if kind == "list":
        tokens = values
    elif kind == "numpy ints":
        tokens = [np.int64(v) for v in values]
    elif kind == "ndarray":
        source = draw(st.sampled_from([dtype, np.int64])) if fits_int64 else dtype
        tokens = np.array(values, dtype=source)
    else:
        tokens = torch.tensor(values, dtype=draw(st.sampled_from([torch.int64, torch.int32])) if all(
            -2**31 <= v < 2**31 for v in values) else torch.int64)
    return dtype, kind, tokens, values


@st.composite
def bad_tokens(draw):
    """(dtype, tokens that save_tokens must refuse, why)."""
    dtype = draw(st.sampled_from([np.uint8, np.uint16, np.int16, np.uint32, np.int32]))
    info = np.iinfo(dtype)
    good = draw(st.lists(st.integers(max(int(info.min), -1000), min(int(info.max), 1000)), min_size=0, max_size=8))
    where = draw(st.integers(0, len(good)))
    case = draw(st.sampled_from(["whole float", "float", "bool", "too large", "too small", "empty list",
                                 "empty ndarray", "empty tensor", "float ndarray", "float tensor", "bool ndarray",
                                 "bool tensor", "ndarray out of range", "tensor out of range"]))
    low = int(info.min) - draw(st.integers(1, 2**20))
    high = int(info.max) + draw(st.integers(1, 2**20))
    if case == "whole float":
        tokens = good[:where] + [float(draw(st.integers(0, 100)))] + good[where:]
    elif case == "float":
        tokens = good[:where] + [draw(st.floats(0.1, 100.0).filter(lambda v: not v.is_integer()))] + good[where:]
    elif case == "bool":
        tokens = good[:where] + [draw(st.booleans())] + good[where:]
    elif case == "too large":
        tokens = good[:where] + [high] + good[where:]
    elif case == "too small":
        tokens = good[:where] + [low] + good[where:]
    elif case == "empty list":
        tokens = []
    elif case == "empty ndarray":
        tokens = np.array([], dtype=np.int64)
    elif case == "empty tensor":
        tokens = torch.tensor([], dtype=torch.int64)
    elif case == "float ndarray":
        tokens = np.array(good + [1], dtype=np.float64)
    elif case == "float tensor":
        tokens = torch.tensor(good + [1], dtype=torch.float32)
    elif case == "bool ndarray":
        tokens = np.array([True, False] + [bool(v % 2) for v in good])
    elif case == "bool tensor":
        tokens = torch.tensor([True, False] + [bool(v % 2) for v in good])
    elif case == "ndarray out of range":
        tokens = np.array(good[:where] + [draw(st.sampled_from([low, high]))] + good[where:], dtype=np.int64)
    else:
        tokens = torch.tensor(good[:where] + [draw(st.sampled_from([low, high]))] + good[where:], dtype=torch.int64)
    return dtype, tokens, case


def batch_cases():
    """(tokens, B, L, as_file): token arrays of 2..200 tokens, B in 1..8, L in 1..len-1 (ints or whole floats)."""
    def with_sizes(tokens):
        return st.tuples(st.just(tokens), st.integers(1, 8), st.integers(1, min(len(tokens) - 1, 32)), st.booleans(),
                         st.booleans())
    arrays = st.sampled_from([np.uint16, np.uint8, np.int32, np.int64]).flatmap(
        lambda dtype: hnp.arrays(dtype, st.integers(2, 200)))
    return arrays.flatmap(with_sizes)


# --- helpers ------------------------------------------------------------------------------------

def raised_text(answer: dict) -> str:
    raised = answer["raised"]
    return "returned normally" if raised is None else f"raised {raised['types'][0].rsplit('.', 1)[-1]}: {raised['message']}"


def short(tokens) -> str:
    if isinstance(tokens, (np.ndarray, torch.Tensor)):
        return f"{type(tokens).__name__} of {tokens.dtype} {tokens.tolist()[:8]}{'...' if len(tokens) > 8 else ''}"
    return repr(tokens[:8])[:-1] + (", ...]" if len(tokens) > 8 else "]")


def check_windows(tokens: np.ndarray, got, batch: int, length: int, what: str) -> list[int]:
    """Assert the contract of one (x, y); returns the start of each row."""
    assert isinstance(got, tuple) and len(got) == 2, f"{what} returned {type(got).__name__}, expected a pair (x, y)"
    x, y = got
    for name, t in (("x", x), ("y", y)):
        assert isinstance(t, torch.Tensor), f"{what}: {name} is a {type(t).__name__}, expected a torch.Tensor"
        assert t.dtype == torch.int64 and tuple(t.shape) == (batch, length), (
            f"{what}: {name} is {t.dtype} of shape {tuple(t.shape)}, expected torch.int64 of shape ({batch}, {length})")
    values = tokens.astype(np.int64)
    windows = np.lib.stride_tricks.sliding_window_view(values, length + 1)  # row s = tokens[s : s + L + 1]
    distinct = len(np.unique(values)) == len(values)
    position = {int(v): s for s, v in enumerate(values)} if distinct else {}
    starts = []
    for i in range(batch):
        row_x, row_y = x[i].numpy(), y[i].numpy()
        if distinct:  # the only candidate start is where x's first token sits
            s = position.get(int(row_x[0]), len(windows))
            ok = s < len(windows) and np.array_equal(windows[s, :-1], row_x) and np.array_equal(windows[s, 1:], row_y)
            matches = np.array([s] if ok else [], dtype=np.int64)
        else:
            matches = np.flatnonzero((windows[:, :-1] == row_x).all(axis=1) & (windows[:, 1:] == row_y).all(axis=1))
        assert matches.size, (
            f"{what}: row {i} is x={row_x.tolist()[:8]}..., y={row_y.tolist()[:8]}..., which is not tokens[s:s+L], "
            f"tokens[s+1:s+L+1] for any valid start 0 <= s <= len(tokens) - L - 1 = {len(values) - length - 1}")
        starts.append(int(matches[0]))
    return starts


def chi_square_limit(dof: int, z: float = 5.2) -> float:
    """Wilson-Hilferty upper quantile of chi-square(dof) at z sigmas (z = 5.2: p about 1e-7), a
    slight overestimate for small dof, so a uniform sampler essentially never fails."""
    return dof * (1 - 2 / (9 * dof) + z * math.sqrt(2 / (9 * dof))) ** 3


# --- save_tokens / load_tokens -------------------------------------------------------------------

@pytest.mark.points(1)
@given(case=token_inputs(), default_dtype=st.booleans(), as_str=st.booleans())
def test_save_tokens_writes_tofile_bytes(sub, case, default_dtype, as_str):
    """save_tokens writes exactly what ndarray.tofile writes: raw little-endian integers, no header."""
    dtype, kind, tokens, values = case
    use_default = default_dtype and dtype == np.uint16
    answer = sub.probe("data.save", tokens=tokens, dtype=None if use_default else dtype, as_str=as_str)
    call = f"data.save_tokens({kind} {short(values)}, path{'' if use_default else f', dtype=np.{np.dtype(dtype).name}'})"
    assert answer["raised"] is None, f"{call} {raised_text(answer)}, expected it to write the file"
    want = np.array(values, dtype=np.dtype(dtype).newbyteorder("<")).tobytes()
    got = answer["files"]
    assert list(got) == ["tokens.bin"], f"{call} left the files {sorted(got)} in the folder, expected only tokens.bin"
    assert got["tokens.bin"] == want, (f"{call} wrote {len(got['tokens.bin'])} bytes {got['tokens.bin'][:16].hex(' ')}..., "
                                       f"expected the {len(want)} bytes of ndarray.tofile {want[:16].hex(' ')}...")


@pytest.mark.points(2)
@given(case=bad_tokens(), existing=st.sampled_from([None, b"previous tokens"]))
def test_save_tokens_refuses_and_leaves_the_folder_as_it_was(sub, case, existing):
    """Float, bool, out-of-range or no tokens raise ValueError; no file is left behind, an existing one is unchanged."""
    dtype, tokens, why = case
    answer = sub.probe("data.save", tokens=tokens, dtype=dtype, existing=existing)
    call = f"data.save_tokens({short(tokens)}, path, dtype=np.{np.dtype(dtype).name}) [{why}]"
    assert answer["raised"] is not None and VALUE_ERROR in answer["raised"]["types"], (
        f"{call} {raised_text(answer)}, expected ValueError")
    want = {} if existing is None else {"tokens.bin": existing}
    assert answer["files"] == want, (
        f"{call} raised, but left the folder holding {sorted(answer['files'])} "
        f"{'(tokens.bin changed)' if existing and answer['files'].get('tokens.bin') != existing else ''}; expected "
        f"{'nothing' if existing is None else 'only the previous tokens.bin, unchanged'}: validate before writing")


@pytest.mark.points(1)
@settings(max_examples=5)
@given(limit=st.sampled_from([0, 512, 4096]), count=st.integers(5000, 20000))
def test_save_tokens_is_atomic(sub, limit, count):
    """A write that fails part-way (disk full) leaves the previous file intact and no partial file."""
    tokens = np.arange(count, dtype=np.int64) % 65536
    existing = b"previous tokens"
    answer = sub.probe("data.save", tokens=tokens, existing=existing)
    want = tokens.astype("<u2").tobytes()
    assert answer["raised"] is None and answer["files"] == {"tokens.bin": want}, (
        f"data.save_tokens({count} tokens, path) over an existing file {raised_text(answer)} and left "
        f"{sorted(answer['files'])}; expected only tokens.bin, replaced by the {len(want)} new bytes")
    answer = sub.probe("data.save", tokens=tokens, existing=existing, file_limit=limit)
    call = (f"data.save_tokens({count} tokens, path) with the disk full after {limit} bytes "
            "(the write fails with OSError: File too large)")
    assert answer["raised"] is not None, f"{call} returned normally, expected the write error to propagate"
    assert answer["files"] == {"tokens.bin": existing}, (
        f"{call} left {sorted(answer['files'])} with tokens.bin "
        f"{'unchanged' if answer['files'].get('tokens.bin') == existing else 'changed'}; expected only the previous "
        "tokens.bin, unchanged: write to a temporary file in the same folder, os.replace it over the path, "
        "and remove the temporary file on error")


@pytest.mark.points(1)
@given(dtype=token_dtypes(), data=st.data(), default_dtype=st.booleans())
def test_load_tokens(sub, dtype, data, default_dtype):
    """load_tokens returns a read-only np.memmap of the file's values; an empty or ragged file raises ValueError."""
    dtype = np.dtype(dtype)
    use_default = default_dtype and dtype == np.uint16
    spelled = "" if use_default else f", dtype=np.{dtype.name}"
    values = data.draw(hnp.arrays(dtype, st.integers(1, 64)), label="values")
    content = values.astype(dtype.newbyteorder("<")).tobytes()
    answer = sub.probe("data.load", content=content, dtype=None if use_default else dtype)
    call = f"data.load_tokens(a file of {len(content)} bytes{spelled})"
    assert answer["raised"] is None, f"{call} {raised_text(answer)}, expected a memmap of {len(values)} tokens"
    assert answer["memmap"], f"{call} returned a {answer['type']}, expected an np.memmap (never read the file whole)"
    assert not answer["writeable"], f"{call} returned a writeable memmap, expected a read-only one (mode='r')"
    assert answer["dtype"] == dtype and np.array_equal(answer["values"], values), (
        f"{call} holds {answer['dtype']} {answer['values'].tolist()[:8]}..., expected {dtype} {values.tolist()[:8]}... "
        "(little-endian)")
    if dtype.itemsize > 1:
        ragged = content[: data.draw(st.integers(1, len(content) - 1).filter(lambda n: n % dtype.itemsize), label="cut")]
        answer = sub.probe("data.load", content=ragged, dtype=None if use_default else dtype)
        assert answer["raised"] is not None and VALUE_ERROR in answer["raised"]["types"], (
            f"data.load_tokens(a file of {len(ragged)} bytes{spelled}) {raised_text(answer)}, expected ValueError "
            f"({len(ragged)} is not a multiple of {dtype.itemsize})")
    answer = sub.probe("data.load", content=b"", dtype=None if use_default else dtype)
    assert answer["raised"] is not None and VALUE_ERROR in answer["raised"]["types"], (
        f"data.load_tokens(an empty file{spelled}) {raised_text(answer)}, expected ValueError")


# --- get_batch ----------------------------------------------------------------------------------

@pytest.mark.points(1)
@given(case=batch_cases(), seed=st.integers(0, 2**32 - 1))
def test_batches_are_windows_with_shifted_targets(sub, case, seed):
    """x rows are real windows tokens[s:s+L], y the same windows shifted by one; int64 (B, L) on the CPU."""
    tokens, batch, length, as_file, floats = case
    b, l = (float(batch), float(length)) if floats else (batch, length)
    [got] = sub.probe("data.batches", tokens=tokens, batch_size=b, context_length=l, seeds=[seed], as_file=as_file)
    what = (f"data.get_batch({'np.memmap' if as_file else 'array'} of {len(tokens)} {tokens.dtype} tokens, {b!r}, {l!r}, "
            "'cpu', rng)")
    check_windows(tokens, got, batch, length, what)
    assert all(t.device.type == "cpu" for t in got), f"{what} returned tensors on {got[0].device}, expected the CPU"


@pytest.mark.points(1)
@settings(max_examples=15)
@given(length=st.integers(1, 40), seed=st.integers(0, 2**32 - 1))
def test_exactly_the_valid_starts(sub, length, seed):
    """len L+1 allows only start 0; len L+2 draws both 0 and 1; nothing beyond; bad sizes raise ValueError."""
    one = np.arange(length + 1, dtype=np.int64) * 7 + 3
    [got] = sub.probe("data.batches", tokens=one, batch_size=64, context_length=length, seeds=[seed])
    what = f"data.get_batch(tokens of length {length + 1}, 64, {length}, 'cpu', rng)"
    starts = check_windows(one, got, 64, length, what)
    assert set(starts) == {0}, f"{what} drew starts {sorted(set(starts))}, expected only 0"
    two = np.arange(length + 2, dtype=np.int64) * 7 + 3
    [got] = sub.probe("data.batches", tokens=two, batch_size=200, context_length=length, seeds=[seed])
    what = f"data.get_batch(tokens of length {length + 2}, 200, {length}, 'cpu', rng)"
    starts = check_windows(two, got, 200, length, what)
    assert set(starts) == {0, 1}, (f"{what} drew starts {sorted(set(starts))} in 200 rows, expected both 0 and 1 "
                                   "(the last valid start len - L - 1 must be reachable)")
    tokens = np.arange(length + 5, dtype=np.uint16)
    for n, b, l in [(length, 4, length), (length + 5, 0, length), (length + 5, 4, 0), (length + 5, -2, length),
                    (length + 5, 4, 1.5)]:
        sub.raises(ValueError, "data.get_batch", tokens[:n], b, l, "cpu")


@pytest.mark.points(1)
@settings(max_examples=10)
@given(starts=st.integers(2, 12), length=st.integers(1, 8), seed=st.integers(0, 2**32 - 1))
def test_starts_are_uniform(sub, starts, length, seed):
    """Every valid start is drawn about equally often (chi-square test, p about 1e-7)."""
    draws = 300 * starts
    tokens = np.arange(starts + length, dtype=np.int64)  # x[i, 0] is the start of row i
    [(x, _)] = sub.probe("data.batches", tokens=tokens, batch_size=draws, context_length=length, seeds=[seed])
    what = f"data.get_batch(arange({starts + length}), {draws}, {length}, 'cpu', rng)"
    assert isinstance(x, torch.Tensor) and tuple(x.shape) == (draws, length), f"{what} returned x of the wrong shape"
    first = x[:, 0].numpy()
    assert first.min() >= 0 and first.max() <= starts - 1, (
        f"{what} drew starts from {first.min()} to {first.max()}, expected 0 .. {starts - 1}")
    counts = np.bincount(first, minlength=starts)
    chi2 = float(((counts - 300) ** 2 / 300).sum())
    limit = chi_square_limit(starts - 1)
    assert chi2 < limit, (f"{what}: start counts {counts.tolist()}, expected about 300 each "
                          f"(chi-square {chi2:.1f} over the limit {limit:.1f}): draw each start uniformly")


@pytest.mark.points(1)
@settings(max_examples=10)
@given(seed=st.integers(0, 2**32 - 2), as_file=st.booleans())
def test_generator_makes_batches_reproducible(sub, seed, as_file):
    """Equal np.random.Generator seeds give equal batches (whatever the global RNGs); different seeds differ."""
    tokens = np.random.default_rng(7).permutation(20_000).astype(np.uint32)  # distinct: rows are easy to place
    a, b, c = sub.probe("data.batches", tokens=tokens, batch_size=16, context_length=32,
                        seeds=[seed, seed, seed + 1], as_file=as_file)
    what = f"data.get_batch(20000 tokens, 16, 32, 'cpu', np.random.default_rng({seed}))"
    for got in (a, b, c):
        check_windows(tokens, got, 16, 32, what)
    assert torch.equal(a[0], b[0]) and torch.equal(a[1], b[1]), (
        f"{what} twice (numpy's and torch's global RNGs reseeded differently in between) gave different batches "
        f"(first starts {a[0][:4, 0].tolist()} vs {b[0][:4, 0].tolist()}): draw the starts from the generator")
    assert not torch.equal(a[0], c[0]), f"{what} and the same with seed {seed + 1} gave the same batch"


@pytest.mark.points(1)
@settings(max_examples=10)
@given(seed=st.integers(0, 2**32 - 2))
def test_global_numpy_rng_without_generator(sub, seed):
    """With generator=None the starts come from numpy's global RNG: np.random.seed reproduces the batch."""
    tokens = np.random.default_rng(8).permutation(20_000).astype(np.uint32)
    a, b, c = sub.probe("data.global_batches", tokens=tokens, batch_size=16, context_length=32,
                        seeds=[seed, seed, seed + 1])
    what = "data.get_batch(20000 tokens, 16, 32, 'cpu')"
    for got in (a, b, c):
        check_windows(tokens, got, 16, 32, what)
    assert torch.equal(a[0], b[0]) and torch.equal(a[1], b[1]), (
        f"np.random.seed({seed}); {what} twice (torch's RNG reseeded differently in between) gave different batches: "
        "with generator=None draw from numpy's global RNG (np.random.randint / np.random.choice)")
    assert not torch.equal(a[0], c[0]), f"{what} gave the same batch after np.random.seed({seed}) and ({seed + 1})"


@pytest.mark.points(1)
def test_memory_of_a_fresh_process_sampling_a_1gib_file(sub):
    """In a fresh process, load_tokens and 20 get_batch calls on a 1 GiB token file add MiB, not the whole file."""
    report = sub.probe("data.memory", timeout=120)
    size_mib = report["size"] / 2**20
    # Reading the file whole costs at least its size (1024 MiB) in resident memory; a sampler
    # that indexes the memmap maps ~64 KiB (fault-around) per window: 160 windows ~ 10 MiB
    # (measured: 10 MiB; with 2 MiB large folios at most 320 MiB). Half the file separates them.
    limit = min(512.0, size_mib / 2)
    where = f"a fresh process with a {size_mib:.0f} MiB token file (sparse, evicted from the page cache)"
    assert "stopped_mib" not in report, (
        f"{where}: load_tokens and get_batch grew peak resident memory by more than {report.get('stopped_mib', 0):.0f} "
        f"MiB (the process was stopped there), expected well under {limit:.0f} MiB: map the file "
        "(np.memmap(path, mode='r')) and index it at the sampled windows only; never np.array(tokens), "
        "tokens.astype(...), np.fromfile or torch.tensor(tokens)")
    assert "error" not in report and "import_error" not in report, (
        f"{where}: {report.get('error') or 'importing your package failed: ' + report['import_error']}")
    assert "load_error" not in report, f"{where}: data.load_tokens(path) raised {report['load_error']}"
    assert report["load_growth_mib"] < limit, (
        f"{where}: data.load_tokens(path), then reading two tokens, grew peak resident memory by "
        f"{report['load_growth_mib']:.0f} MiB, expected well under {limit:.0f} MiB: return np.memmap(path, mode='r'), "
        "never read the file")
    assert "batch_error" not in report, (
        f"{where}: data.get_batch(np.memmap of the file, 8, 256, 'cpu', rng) raised {report['batch_error']}")
    assert report["batch_growth_mib"] < limit, (
        f"{where}: 20 x data.get_batch(np.memmap of the file, 8, 256, 'cpu', rng) grew peak resident memory by "
        f"{report['batch_growth_mib']:.0f} MiB, expected well under {limit:.0f} MiB (a few MiB): index the memmap "
        "at the sampled windows only; never np.array(tokens), tokens.astype(...) or torch.tensor(tokens)")


@pytest.mark.points(1)
@pytest.mark.gpu
def test_cuda_batches_come_from_pinned_memory(sub):
    """On CUDA the batch is int64 on the GPU, copied from pinned host memory with non_blocking=True."""
    tokens = np.random.default_rng(9).integers(0, 50_000, size=20_000).astype(np.uint16)
    report = sub.probe("data.cuda_transfers", tokens=tokens, batch_size=8, context_length=64, seed=3)
    what = "data.get_batch(20000 tokens, 8, 64, 'cuda', rng)"
    assert report["devices"] == ["cuda:0", "cuda:0"] or all(d.startswith("cuda") for d in report["devices"]), (
        f"{what} returned tensors on {report['devices']}, expected the GPU")
    check_windows(tokens, (report["x"], report["y"]), 8, 64, what)
    transfers = report["transfers"]
    assert transfers, (f"{what}: no copy from a CPU tensor to the GPU was seen (Tensor.to / .cuda / .copy_): build the "
                       "batch on the CPU, pin it, then .to(device, non_blocking=True)")
    bad = [t for t in transfers if not (t["pinned"] and t["non_blocking"])]
    assert not bad, (f"{what}: host-to-GPU copies {bad} are not from pinned memory with non_blocking=True; "
                     "use x.pin_memory().to(device, non_blocking=True)")
