"""Hidden tests for P6 (data.py): token files, memmaps and batch sampling, 12 points.

Oracles, all in the judge: numpy (``ndarray.tofile`` bytes, ``np.iinfo`` ranges) for the files,
which the judge writes into the exchange folder and reads back itself (grader/judge/drivers/data.py);
the contract's properties for batches, checked against the tokens the judge owns (every row a
real window with y shifted by one, exactly the valid starts, uniform, reproducible through a
generator or numpy's global RNG, which the judge seeds in the worker); and what sampling a
256 MiB sparse token file costs the worker's whole process tree, read by the judge from outside it
(its cgroup's peak memory, else its processes in /proc; bytes read), never from anything running in
the worker.
"""

from __future__ import annotations


import numpy as np
import pytest
import torch
from hypothesis import example, given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from grader.judge.drivers import data as driver
from grader.judge.handle import StudentError
from grader.judge.hidden._contract import refused_or_as_for
from grader.wire import Raised

# No "explain" phase: it re-runs a failing test hundreds of times (minutes for a stub) to annotate it.
DTYPES = [np.uint8, np.uint16, np.uint32, np.uint64, np.int8, np.int16, np.int32, np.int64]
TOKEN_FILE_BYTES = 256 << 20  # read whole, it costs at least this much; a sampler costs a few MiB


# --- strategies ---------------------------------------------------------------------------------

def token_dtypes():
    return st.sampled_from(DTYPES)


@st.composite
def token_inputs(draw):
    """(dtype, tokens as a list / list of numpy ints / integer ndarray / integer tensor, the values)."""
    dtype = draw(token_dtypes())
    if np.dtype(dtype).itemsize > 1 and draw(st.booleans()):
        dtype = np.dtype(dtype).newbyteorder(">")  # names the integer type only: the file stays little-endian
    info = np.iinfo(dtype)
    values = draw(st.lists(st.integers(int(info.min), int(info.max)), min_size=1, max_size=64))
    fits_int64 = all(-2**63 <= v < 2**63 for v in values)
    kind = draw(st.sampled_from(["list", "numpy ints", "ndarray", "tensor"] if fits_int64 else ["list", "ndarray"]))
    if kind == "list":
        tokens = values
    elif kind == "numpy ints":  # numpy integer scalars are integers too, of the token dtype or another
        scalar = draw(st.sampled_from([np.dtype(dtype).type, np.int64]))
        tokens = [scalar(v) for v in values]
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
    case = draw(st.sampled_from(["whole float", "numpy float", "float", "bool", "too large", "too small", "empty list",
                                 "empty ndarray", "empty tensor", "float ndarray", "float tensor", "bool ndarray",
                                 "bool tensor", "ndarray out of range", "tensor out of range"]))
    low = int(info.min) - draw(st.integers(1, 2**20))
    high = int(info.max) + draw(st.integers(1, 2**20))
    if case == "whole float":
        tokens = good[:where] + [float(draw(st.integers(0, 100)))] + good[where:]
    elif case == "numpy float":  # not a subclass of float: a check for Python floats alone lets it through
        kind = draw(st.sampled_from([np.float16, np.float32]))
        tokens = good[:where] + [kind(draw(st.integers(0, 100)))] + good[where:]
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
    """(tokens, B, L, as_file): token arrays of 3..200 tokens, B in 1..8, L in 1..len-2 (ints or whole floats); a
    single window (len = L + 1) is test_exactly_the_valid_starts' case."""
    def with_sizes(tokens):
        return st.tuples(st.just(tokens), st.integers(1, 8), st.integers(1, min(len(tokens) - 2, 32)), st.booleans(),
                         st.booleans())
    arrays = st.sampled_from([np.uint16, np.uint8, np.int32, np.int64]).flatmap(
        lambda dtype: hnp.arrays(dtype, st.integers(3, 200)))
    return arrays.flatmap(with_sizes)


# --- helpers ------------------------------------------------------------------------------------

def raised_text(raised: Raised | None) -> str:
    return "returned normally" if raised is None else f"raised {raised}"


def dtype_text(dtype) -> str:
    """``np.uint16``, or ``np.dtype('>u2')`` for a dtype that spells a byte order other than the native one."""
    resolved = np.dtype(dtype)
    return f"np.{resolved.name}" if resolved.isnative else f"np.dtype({resolved.str!r})"


def refused(raised: Raised | None) -> bool:
    return raised is not None and raised.is_a(ValueError)


# --- save_tokens / load_tokens -------------------------------------------------------------------
# The judge stages every file in a fresh folder of the exchange and reads back what is left there.

@pytest.mark.rule("P6.save-bytes")
@pytest.mark.points(1)
@given(case=token_inputs(), default_dtype=st.booleans(), as_str=st.booleans())
@example(case=(np.dtype(">u2"), "list", [1, 258, 65535], [1, 258, 65535]), default_dtype=False, as_str=True)
@example(case=(np.dtype(">i8"), "ndarray", np.array([-2, 1 << 40], dtype=">i8"), [-2, 1 << 40]), default_dtype=False,
         as_str=False)
@example(case=(np.dtype(np.uint64), "ndarray", np.array([2**64 - 1, 2**63, 5], dtype=np.uint64), [2**64 - 1, 2**63, 5]),
         default_dtype=False, as_str=False)
def test_save_tokens_writes_tofile_bytes(sub, case, default_dtype, as_str):
    """save_tokens writes exactly what ndarray.tofile writes: raw little-endian integers, no header."""
    dtype, kind, tokens, values = case
    use_default = default_dtype and dtype == np.uint16
    raised, files = driver.save(sub, tokens, None if use_default else dtype, as_str=as_str)
    call = f"data.save_tokens({kind} {driver.short(values)}, path{'' if use_default else f', dtype={dtype_text(dtype)}'})"
    assert raised is None, f"{call} {raised_text(raised)}, expected it to write the file"
    want = np.array(values, dtype=np.dtype(dtype).newbyteorder("<")).tobytes()  # the judge's own tofile bytes
    assert list(files) == ["tokens.bin"], f"{call} left {sorted(files)} in the folder, expected only tokens.bin"
    got = files["tokens.bin"]
    wrote = "no regular file" if got is None else f"{len(got)} bytes {got[:16].hex(' ')}..."
    assert got == want, f"{call} wrote {wrote}, expected the {len(want)} bytes of ndarray.tofile {want[:16].hex(' ')}..."


GOOD = st.lists(st.integers(0, 2**16 - 1), min_size=1, max_size=32).map(lambda v: np.array(v, dtype=np.int64))


@pytest.mark.rule("P6.save-refuses-empty", "P6.save-refuses-non-integers", "P6.save-refuses-out-of-range",
                  "P6.save-validates-first")
@pytest.mark.points(2)
@given(case=bad_tokens(), existing=st.sampled_from([None, b"previous tokens"]), good=GOOD)
@example(case=(np.uint16, [], "empty list"), existing=b"previous tokens", good=np.arange(3))
@example(case=(np.uint16, [4, 2.0], "whole float"), existing=None, good=np.arange(2))
@example(case=(np.uint16, [4, np.float32(2.0)], "numpy float"), existing=None, good=np.arange(2))
@example(case=(np.uint16, torch.tensor([1.0, 2.0], dtype=torch.bfloat16), "bfloat16 tensor"), existing=None,
         good=np.arange(5) * 977)
@example(case=(np.uint16, [3, True, 5], "bool"), existing=b"previous tokens", good=np.arange(7) + 60_000)
@example(case=(np.uint8, np.array([1, 300], dtype=np.int64), "ndarray out of range"), existing=None, good=np.arange(1))
@example(case=(np.uint16, np.array([5, -1], dtype=np.int64), "negative ndarray"), existing=None, good=np.arange(4))
@example(case=(np.float32, [1, 2, 3], "a float dtype"), existing=b"previous tokens", good=np.arange(3))
def test_save_tokens_refuses_and_leaves_the_folder_as_it_was(sub, case, existing, good):
    """Float, bool, out-of-range or no tokens raise ValueError (another shape is not graded); no file is left behind, an existing one is unchanged."""
    dtype, tokens, why = case
    # Error paths count only beside working code: a valid call drawn for each example, not one to memorize.
    saved, written = driver.save(sub, good, np.uint16)
    assert saved is None and written == {"tokens.bin": good.astype("<u2").tobytes()}, (
        f"data.save_tokens({driver.short(good)}, path) {raised_text(saved)} and left {sorted(written)}, expected "
        f"tokens.bin holding its {len(good)} tokens: a function earns its error-path points only when it also "
        "answers a valid call")
    raised, files = driver.save(sub, tokens, dtype, existing=existing)
    call = f"data.save_tokens({driver.short(tokens)}, path, dtype=np.{np.dtype(dtype).name}) [{why}]"
    assert refused(raised), f"{call} {raised_text(raised)}, expected ValueError"
    want = {} if existing is None else {"tokens.bin": existing}
    assert files == want, (
        f"{call} raised, but left the folder holding {sorted(files)} "
        f"{'(tokens.bin changed)' if existing and files.get('tokens.bin') != existing else ''}; expected "
        f"{'nothing' if existing is None else 'only the previous tokens.bin, unchanged'}: validate before writing")


@pytest.mark.rule("P6.save-atomic")
@pytest.mark.points(1)
@settings(max_examples=5)
@given(limit=st.sampled_from([0, 512, 4096]), count=st.integers(5000, 20000))
def test_save_tokens_is_atomic(sub, limit, count):
    """A failed write (disk full) or an interrupted one (KeyboardInterrupt) leaves only the previous file, unchanged.

    The temporary file is made beside the path: the worker's system temporary folder is missing during the calls."""
    tokens = np.arange(count, dtype=np.int64) % 65536
    existing = b"previous tokens"
    # The worker's system temporary folder does not exist: a temporary file made beside the path does not need it.
    raised, files = driver.save(sub, tokens, existing=existing, missing_temp=True)
    want = tokens.astype("<u2").tobytes()
    assert raised is None and files == {"tokens.bin": want}, (
        f"data.save_tokens({count} tokens, path) over an existing file, while the system's temporary folder does not "
        f"exist, {raised_text(raised)} and left {sorted(files)}; expected only tokens.bin, replaced by the {len(want)} "
        "new bytes: create the temporary file beside path (tempfile.mkstemp(dir=path's folder)), never in the "
        "system's temporary folder, as rule [P6.save-atomic] says (a rename across file systems fails)")
    # The judge lowers the worker's file-size limit for the call (a library call it orders there), over an existing
    # file and to a new path: a write straight to a path that does not exist yet is no more atomic.
    for before in (existing, None):
        raised, files = driver.save(sub, tokens, existing=before, file_limit=limit)
        where = "over an existing file" if before else "to a new path"
        call = (f"data.save_tokens({count} tokens, path) {where} with the disk full after {limit} bytes "
                "(the write fails with OSError: File too large)")
        assert raised is not None, f"{call} returned normally, expected the write error to propagate"
        assert files == ({"tokens.bin": before} if before else {}), (
            f"{call} left {sorted(files)}; expected "
            f"{'only the previous tokens.bin, unchanged' if before else 'nothing'}: write to a temporary file in the "
            "same folder (whether or not the path exists), os.replace it over the path, and remove the temporary "
            "file on error, as rule [P6.save-atomic] says")
    raised, files, renames = driver.save_interrupted(sub, tokens, existing)
    if renames:  # a file moved some other way is not interrupted here
        call = f"data.save_tokens({count} tokens, path) over an existing file, interrupted (KeyboardInterrupt) in os.replace"
        assert raised is not None and raised.is_a(KeyboardInterrupt) and files == {"tokens.bin": existing}, (
            f"{call} {raised_text(raised)} and left {sorted(files)} with tokens.bin "
            f"{'unchanged' if files.get('tokens.bin') == existing else 'changed'}; expected the KeyboardInterrupt to "
            "propagate and only the previous tokens.bin, unchanged: remove the temporary file on any exception, "
            "KeyboardInterrupt too (except BaseException, or try/finally), and re-raise it, as rule [P6.save-atomic] says")


@pytest.mark.rule("P6.load-memmap", "P6.load-refuses", "P6.load-missing-file")
@pytest.mark.points(1)
@given(dtype=token_dtypes(), data=st.data(), default_dtype=st.booleans(), as_str=st.booleans())
def test_load_tokens(sub, dtype, data, default_dtype, as_str):
    """load_tokens returns a read-only np.memmap of the file's values, little-endian whatever byte order dtype spells;
    an empty or ragged file or a dtype that is not an integer dtype raises ValueError, a missing file FileNotFoundError; a str that names no
    dtype is refused."""
    dtype = np.dtype(dtype)
    use_default = default_dtype and dtype == np.uint16
    spelled = "" if use_default else f", dtype={dtype.name!r}" if as_str else f", dtype=np.{dtype.name}"
    values = data.draw(hnp.arrays(dtype, st.integers(1, 64)), label="values")
    content = values.astype(dtype.newbyteorder("<")).tobytes()
    loaded = driver.load(sub, content, None if use_default else dtype.name if as_str else dtype)
    call = f"data.load_tokens(a file of {len(content)} bytes{spelled})"
    assert loaded.raised is None, f"{call} {raised_text(loaded.raised)}, expected a memmap of {len(values)} tokens"
    assert loaded.memmap, f"{call} returned a {loaded.type}, expected an np.memmap (never read the file whole)"
    assert not loaded.writeable, f"{call} returned a writeable memmap, expected a read-only one (mode='r')"
    got = loaded.values
    assert isinstance(got, np.ndarray) and got.dtype == dtype and np.array_equal(got, values), (
        f"{call} holds {getattr(got, 'dtype', type(got).__name__)} {np.asarray(got).tolist()[:8]}..., "
        f"expected {dtype} {values.tolist()[:8]}... (little-endian)")
    big = dtype.newbyteorder(">")  # names the integer type only: the file stays little-endian
    spelled_big = big.str if as_str else big
    loaded = driver.load(sub, content, spelled_big)
    got = loaded.values
    gave = raised_text(loaded.raised) if loaded.raised else (
        f"holds {getattr(got, 'dtype', type(got).__name__)} {np.asarray(got).tolist()[:8]}...")
    assert isinstance(got, np.ndarray) and np.array_equal(got, values), (
        f"data.load_tokens(a file of {len(content)} bytes, dtype={spelled_big!r}) {gave}, expected the file's values "
        f"{values.tolist()[:8]}...: the file is little-endian whatever byte order dtype spells, so map "
        "np.dtype(dtype).newbyteorder('<'), as rule [P6.load-memmap] says")
    if dtype.itemsize > 1:
        ragged = content[: data.draw(st.integers(1, len(content) - 1).filter(lambda n: n % dtype.itemsize), label="cut")]
        raised = driver.load(sub, ragged, None if use_default else dtype).raised
        assert refused(raised), (
            f"data.load_tokens(a file of {len(ragged)} bytes{spelled}) {raised_text(raised)}, expected ValueError "
            f"({len(ragged)} is not a multiple of {dtype.itemsize})")
    raised = driver.load(sub, b"", None if use_default else dtype).raised
    assert refused(raised), f"data.load_tokens(an empty file{spelled}) {raised_text(raised)}, expected ValueError"
    # Every dtype that is not an integer dtype: floats, which numpy could map, and bools and complex numbers too.
    other = np.dtype(data.draw(st.sampled_from([np.float16, np.float32, np.float64, np.bool_, np.complex64]),
                               label="other dtype"))
    raised = driver.load(sub, content[: len(content) // other.itemsize * other.itemsize] or b"\0" * 8, other).raised
    assert refused(raised), (f"data.load_tokens(a file of tokens, dtype=np.{other.name}) {raised_text(raised)}, "
                             "expected ValueError: a token file holds integers, and a dtype that is not an integer "
                             "dtype is refused")
    with driver.Folder(sub) as folder:  # a wrong type: ValueError, or TypeError as np.dtype raises for it
        refused_or_as_for(sub, "data.load_tokens", (folder.write("tokens.bin", content), "not a dtype"))
        raised = sub.attempt("data.load_tokens", folder.path("missing.bin"))
        assert isinstance(raised, Raised) and raised.is_a(FileNotFoundError), (
            f"data.load_tokens(a path where no file is) {raised_text(raised if isinstance(raised, Raised) else None)}, "
            "expected FileNotFoundError")


# --- get_batch ----------------------------------------------------------------------------------
# The judge seeds the worker's RNGs (or builds the generator there) and checks every row against
# the tokens it owns; nothing but the submission's get_batch runs in the worker.

@pytest.mark.rule("P6.batch-int64", "P6.batch-y-shifted", "P6.batch-counts", "P6.batch-device")
@pytest.mark.points(1)
@given(case=batch_cases(), seed=st.integers(0, 2**32 - 1),
       device=st.sampled_from(["cpu", torch.device("cpu"), "cpu:0", torch.device("cpu", 0)]))
@example(case=(np.arange(50, dtype=np.uint16), 3, 5, False, False), seed=0, device=torch.device("cpu"))
def test_batches_are_windows_with_shifted_targets(sub, case, seed, device):
    """x rows are real windows tokens[s:s+L], y the same windows shifted by one; int64 (B, L) on the CPU, the device a str or a torch.device."""
    tokens, batch, length, as_file, floats = case
    b, l = (float(batch), float(length)) if floats else (batch, length)
    [got] = driver.seeded_batches(sub, tokens, b, l, [seed], as_file=as_file, devices=True, device=device)
    what = (f"data.get_batch({'np.memmap' if as_file else 'array'} of {len(tokens)} {tokens.dtype} tokens, {b!r}, {l!r}, "
            f"{device!r}, rng)")
    driver.check_windows(tokens, got.value, batch, length, what)
    assert all(d == "cpu" for d in got.devices), f"{what} returned tensors on {list(got.devices)}, expected the CPU"


VALID_STARTS = ("every start 0 .. len(tokens) - L - 1 is valid, the last one included (its y ends at the last token): "
                "draw from integers(0, len(tokens) - L) / np.random.randint(0, len(tokens) - L), whose upper bound is "
                "exclusive")


@pytest.mark.rule("P6.batch-valid-starts", "P6.batch-refuses")
@pytest.mark.points(1)
@settings(max_examples=15)
@given(length=st.integers(1, 40), seed=st.integers(0, 2**32 - 1))
def test_exactly_the_valid_starts(sub, length, seed):
    """len L+1 allows only start 0 (with a generator or numpy's global RNG); len L+2 draws both 0 and 1 (with either);
    nothing beyond; bad sizes raise ValueError."""
    one = np.arange(length + 1, dtype=np.int64) * 7 + 3
    what = f"data.get_batch(tokens of length {length + 1}, 64, {length}, 'cpu', rng)"
    try:
        [got] = driver.seeded_batches(sub, one, 64, length, [seed])
        (alone,) = driver.global_batches(sub, one, 64, length, [seed])
    except StudentError as exc:
        raise AssertionError(f"{exc}: expected a batch, {length + 1} tokens hold one window of {length} tokens and "
                             f"its next token (start 0); {VALID_STARTS}") from None
    driver.check_windows(one, alone.value, 64, length, f"data.get_batch(tokens of length {length + 1}, 64, {length}, "
                         "'cpu')")
    starts = driver.check_windows(one, got.value, 64, length, what)
    assert set(starts) == {0}, f"{what} drew starts {sorted(set(starts))}, expected only 0"
    two = np.arange(length + 2, dtype=np.int64) * 7 + 3
    [got] = driver.seeded_batches(sub, two, 200, length, [seed])
    what = f"data.get_batch(tokens of length {length + 2}, 200, {length}, 'cpu', rng)"
    starts = driver.check_windows(two, got.value, 200, length, what)
    assert set(starts) == {0, 1}, (f"{what} drew starts {sorted(set(starts))} in 200 rows, expected both 0 and 1: "
                                   f"{VALID_STARTS}")
    (alone,) = driver.global_batches(sub, two, 200, length, [seed])
    what = f"np.random.seed({seed}); data.get_batch(tokens of length {length + 2}, 200, {length}, 'cpu')"
    starts = driver.check_windows(two, alone.value, 200, length, what)
    assert set(starts) == {0, 1}, (f"{what} drew starts {sorted(set(starts))} in 200 rows, expected both 0 and 1 "
                                   f"(generator=None too): {VALID_STARTS}")
    tokens = np.arange(length + 5, dtype=np.uint16)
    for n, b, l in [(length, 4, length), (length + 5, 0, length), (length + 5, 4, 0), (length + 5, -2, length),
                    (length + 5, 4, 1.5)]:
        sub.raises(ValueError, "data.get_batch", tokens[:n], b, l, "cpu")


@pytest.mark.rule("P6.batch-valid-starts")
@pytest.mark.points(1)
@settings(max_examples=10)
@given(starts=st.integers(2, 12), length=st.integers(1, 8), seed=st.integers(0, 2**32 - 1))
def test_starts_are_uniform(sub, starts, length, seed):
    """Every valid start is drawn about equally often (chi-square test, p about 1e-7), each row independently."""
    draws = 300 * starts
    tokens = np.arange(starts + length, dtype=np.int64)  # x[i, 0] is the start of row i
    [got] = driver.seeded_batches(sub, tokens, draws, length, [seed])
    what = f"data.get_batch(arange({starts + length}), {draws}, {length}, 'cpu', rng)"
    driver.check_windows(tokens, got.value, draws, length, what)
    first = got.value[0][:, 0].numpy()
    counts = np.bincount(first, minlength=starts)
    chi2 = float(((counts - 300) ** 2 / 300).sum())  # computed in the judge from the rows read back
    limit = driver.chi_square_limit(starts - 1)
    assert chi2 < limit, (f"{what}: start counts {counts.tolist()}, expected about 300 each "
                          f"(chi-square {chi2:.1f} over the limit {limit:.1f}): draw each start uniformly")
    lower, higher = int((first[1:] < first[:-1]).sum()), int((first[1:] > first[:-1]).sum())
    assert min(lower, higher) > draws // 10, (
        f"{what}: {lower} rows start lower than the row before and {higher} higher, expected both near "
        f"{draws * (1 - 1 / starts) / 2:.0f}: draw each row's start independently of the others (not sorted)")


@pytest.mark.rule("P6.batch-generator")
@pytest.mark.points(1)
@settings(max_examples=10)
@given(seed=st.integers(0, 2**32 - 2), as_file=st.booleans())
def test_generator_makes_batches_reproducible(sub, seed, as_file):
    """Equal np.random.Generator seeds give equal batches (whatever the global RNGs); different seeds differ."""
    tokens = np.random.default_rng(7).permutation(20_000).astype(np.uint32)  # distinct: rows are easy to place
    a, b, c = (got.value for got in driver.seeded_batches(sub, tokens, 16, 32, [seed, seed, seed + 1], as_file=as_file))
    what = f"data.get_batch(20000 tokens, 16, 32, 'cpu', np.random.default_rng({seed}))"
    for got in (a, b, c):
        driver.check_windows(tokens, got, 16, 32, what)
    assert torch.equal(a[0], b[0]) and torch.equal(a[1], b[1]), (
        f"{what} twice (numpy's and torch's global RNGs reseeded differently in between) gave different batches "
        f"(first starts {a[0][:4, 0].tolist()} vs {b[0][:4, 0].tolist()}): draw the starts from the generator")
    assert not torch.equal(a[0], c[0]), f"{what} and the same with seed {seed + 1} gave the same batch"


@pytest.mark.rule("P6.batch-global-rng")
@pytest.mark.points(1)
@settings(max_examples=10)
@given(seed=st.integers(0, 2**32 - 2))
def test_global_numpy_rng_without_generator(sub, seed):
    """With generator=None the starts come from numpy's global RNG: np.random.seed reproduces the batch."""
    tokens = np.random.default_rng(8).permutation(20_000).astype(np.uint32)
    a, b, c = (got.value for got in driver.global_batches(sub, tokens, 16, 32, [seed, seed, seed + 1]))
    what = "data.get_batch(20000 tokens, 16, 32, 'cpu')"
    for got in (a, b, c):
        driver.check_windows(tokens, got, 16, 32, what)
    assert torch.equal(a[0], b[0]) and torch.equal(a[1], b[1]), (
        f"np.random.seed({seed}); {what} twice (torch's RNG reseeded differently in between) gave different batches: "
        "with generator=None draw from numpy's global RNG (np.random.randint / np.random.choice)")
    assert not torch.equal(a[0], c[0]), f"{what} gave the same batch after np.random.seed({seed}) and ({seed + 1})"


@pytest.mark.rule("P6.load-memmap", "P6.batch-reads-windows")
@pytest.mark.points(1)
def test_memory_of_sampling_a_256mib_file(sub):
    """load_tokens and get_batch on a 256 MiB token file cost MiB of memory, not the whole file."""
    # Measured by the judge from outside the worker, for its whole process tree (forked children,
    # memfds and tmpfs files included; grader/containment/tree.py through sub.measure): the growth
    # of its memory at its peak (its cgroup's peak, reset before the call, where the host gives a
    # cgroup; else resident sets, memfds and private tmpfs files, with each process's VmHWM reset
    # through /proc/<pid>/clear_refs and samples every millisecond) and bytes read (rchar of
    # /proc/<pid>/io summed over the tree, exited children included) and page faults (its cgroup's
    # pgfault, else minflt + majflt + cminflt + cmajflt of /proc/<pid>/stat over the tree: a file
    # read through mappings unmapped at once shows in no resident set and no rchar, but each
    # fault maps at most one 2 MiB huge page, so touching half the file takes 64 faults or more).
    # Also read from the token file itself (sub.page_cache_bytes: grader/containment/pagecache.py): the
    # judge keeps its own descriptor of the file it made, evicts it from the page cache before the call
    # and counts with mincore(2) on its own mapping how much of it is cached after, by whatever route it came in
    # (read, mmap, splice, sendfile, posix_fadvise(WILLNEED), readahead: by any process; O_DIRECT
    # reads bypass the cache and show in rchar). Bytes the tree writes (wchar) count as memory that
    # left it. The file is sparse (no disk used) and fresh for each measurement; get_batch reads it
    # through a memmap the judge had advised MADV_RANDOM in the worker, so a window brings in its own
    # pages, not the host's read-around (8 MiB per fault here). Reading it whole costs at least its
    # 256 MiB; the reference costs about 12 MiB (load_tokens: read-around of its first and last token)
    # and 34 MiB (get_batch: 17 faults at 2 MiB each; python -m grader.bench.p6_costs). Half the file
    # separates them.
    size_mib = TOKEN_FILE_BYTES / 2**20
    limit = size_mib / 2
    where = f"a {size_mib:.0f} MiB token file (sparse, measured from outside your process and its children)"
    advice = "never np.array(tokens), tokens.astype(...), np.fromfile, f.read() or torch.tensor(tokens)"
    driver.warm_up(sub)
    (length, first, last), cost = driver.load_cost(sub, TOKEN_FILE_BYTES)
    assert (length, first, last) == (TOKEN_FILE_BYTES // 2, 0, 0), (
        f"{where}: data.load_tokens(path) has {length} tokens, first {first!r}, last {last!r}; "
        f"expected {TOKEN_FILE_BYTES // 2} zero tokens (uint16)")
    assert cost.touched_mib < limit, (
        f"{where}: data.load_tokens(path), then reading its first and last token, {driver.spent(cost)}, "
        f"expected well under {limit:.0f} MiB: return np.memmap(path, mode='r'); {advice}")
    batches, cost = driver.batch_cost(sub, TOKEN_FILE_BYTES, calls=2, batch_size=8, context_length=256)
    what = f"2 x data.get_batch(np.memmap of {where}, 8, 256, 'cpu', rng)"
    for got in batches:
        driver.check_windows(np.zeros(260, dtype=np.uint16), got, 8, 256, what)  # all tokens are 0
    assert cost.touched_mib < limit, (
        f"{what} {driver.spent(cost)}, expected well under {limit:.0f} MiB (a few MiB): index the memmap at the "
        f"sampled windows only, and touch no other page of it (no loop over the file, no mmap of it of your own); {advice}")


@pytest.mark.rule("P6.batch-device")
@pytest.mark.points(1)
@pytest.mark.gpu
def test_cuda_batches_come_from_pinned_memory(sub):
    """On CUDA the batch is int64 on the GPU, copied from pinned host memory with non_blocking=True."""
    # Checked in the judge: the device of each returned tensor (read back from the worker) and
    # every row against the judge's tokens. Pinned memory, read from outside the worker: the
    # page-locked host memory CUDA maps into the worker's processes during the call (shared
    # /dev/zero mappings in /proc/<pid>/maps; a copy from pageable memory adds none). non_blocking=True
    # leaves no trace once the copy is done and is not checked.
    tokens = np.random.default_rng(9).integers(0, 50_000, size=20_000).astype(np.uint16)
    got, pinned = driver.cuda_batch(sub, tokens, batch_size=8, context_length=64, seed=3)
    what = "data.get_batch(20000 tokens, 8, 64, 'cuda', rng)"
    driver.check_windows(tokens, got.value, 8, 64, what)
    assert got.devices and all(d.startswith("cuda") for d in got.devices), (
        f"{what} returned tensors on {list(got.devices)}, expected the GPU")
    assert pinned > 0, (f"{what}: no pinned (page-locked) host memory was allocated during the call: build the batch "
                        "on the CPU, pin it, then .to(device, non_blocking=True) (x.pin_memory().to(device, non_blocking=True))")
