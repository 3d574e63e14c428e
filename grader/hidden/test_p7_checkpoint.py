"""Hidden suite for P7 (checkpoint.py): exact resume, file objects, extras, atomic saves, safe loads.

The judge drives everything: it builds models (dropout, batch norm) and optimizers in the worker
as library objects, stages them in a state it computed itself, calls the submission's
save_checkpoint, scrambles every RNG, builds a FRESH model and optimizer and calls its
load_checkpoint, then reads back states and draws and orders training steps. Every expected
value comes from the judge running the same recipe on its own torch objects
(grader/drivers/checkpoint.py): the state at the save, the draws right after it, the
uninterrupted run (a correct resume is bit-identical to it, so every comparison is exact).
Files are written in the exchange folder and inspected by the judge on its own file system
(bytes, listings, and for the hostile file the folder's inode, ctime and entries).
"""

from __future__ import annotations

import math
import string

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from grader import wire
from grader.drivers import checkpoint as drive

SAVE = "checkpoint.save_checkpoint"
LOAD = "checkpoint.load_checkpoint"
EXTRAS = "checkpoint.load_checkpoint_extras"
RNG_NAMES = {"torch": "torch's CPU generator (torch.get_rng_state)",
             "numpy": "numpy's global RNG (np.random.get_state, including its cached gaussian)",
             "python": "Python's random module (random.getstate)"}
# One clear failure per test, and no "explain" phase (it replays a failing example hundreds of times).
# Keyword names save_checkpoint's own parameters take: an extra cannot be called like them.
RESERVED = {"model", "optimizer", "iteration", "out"}


# --- comparisons (exact: a resumed run must be bit-identical) -------------------------------------

def same(a: object, b: object) -> bool:
    """Equal with the same types all the way down; floats bit-for-bit (NaN equals NaN); tensors by
    dtype, shape and bytes."""
    if type(a) is not type(b):
        return False
    if isinstance(a, torch.Tensor):
        return (a.dtype == b.dtype and a.shape == b.shape  # an empty tensor may have stride 0: no bytes view
                and (a.numel() == 0 or torch.equal(a.reshape(-1).view(torch.uint8), b.reshape(-1).view(torch.uint8))))
    if isinstance(a, float):
        return a == b and math.copysign(1, a) == math.copysign(1, b) or (math.isnan(a) and math.isnan(b))
    if isinstance(a, complex):
        return same(a.real, b.real) and same(a.imag, b.imag)
    if isinstance(a, (list, tuple)):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b))
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(same(a[k], b[k]) for k in a)
    return a == b


def differing(want: dict, got: object) -> list[str]:
    """Names of the entries of a state dict that are missing or not bit-identical."""
    if not isinstance(got, dict):
        return ["<not a dict>"]
    return sorted(str(k) for k in set(want) | set(got) if k not in got or k not in want or not same(want[k], got[k]))


def shown(value: object, limit: int = 200) -> str:
    """A value for a message: an exception as "raised Type: message", anything else as a short repr."""
    text = f"raised {value}" if isinstance(value, wire.Raised) else repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def check_no_raise(value: object, what: str) -> None:
    assert not isinstance(value, wire.Raised), f"{what} raised {value}, expected it to succeed"


# --- strategies ---------------------------------------------------------------------------------

def iterations() -> st.SearchStrategy:
    """Valid counts (ints, whole floats such as 2e3) and invalid ones (negative, fractional, non-finite)."""
    valid = st.integers(0, 10**15) | st.integers(0, 2**53).map(float) | st.sampled_from([0, 1, 2e3, 70e9])
    invalid = (st.integers(max_value=-1) | st.floats(max_value=-1.0, allow_infinity=False)
               | st.floats(0.0, 1e6).filter(lambda v: not v.is_integer()) | st.sampled_from([math.inf, math.nan]))
    return valid | invalid


def tensors() -> st.SearchStrategy[torch.Tensor]:
    dtypes = st.sampled_from([np.float32, np.float64, np.float16, np.int64, np.int8, np.uint8, np.bool_])
    arrays = hnp.arrays(dtypes, hnp.array_shapes(min_dims=0, max_dims=3, min_side=0, max_side=3))
    as_tensor = st.builds(lambda a: torch.from_numpy(np.array(a)), arrays)
    return as_tensor | as_tensor.map(lambda t: t.to(torch.bfloat16) if t.is_floating_point() else t)


# Every character but surrogates, as st.text's default, without its codec: that default (and
# st.from_regex) first tests all 1.1 million code points against UTF-8, a 200 MB transient that
# alone overflows a 768 MB Gradescope container.
CHARACTERS = st.characters(exclude_categories=("Cs",))


def safe_values() -> st.SearchStrategy:
    """Every kind of value an extra may be, nested."""
    scalars = (st.booleans() | st.integers() | st.floats() | st.complex_numbers() | st.text(CHARACTERS, max_size=6)
               | st.none() | tensors())
    keys = st.text(CHARACTERS, max_size=5) | st.integers(-5, 5)
    return st.recursive(scalars, lambda inner: st.lists(inner, max_size=3) | st.tuples(inner, inner)
                        | st.dictionaries(keys, inner, max_size=3), max_leaves=10)


def extras() -> st.SearchStrategy[dict]:
    names = st.builds(str.__add__, st.sampled_from(string.ascii_lowercase + "_"),
                      st.text(string.ascii_lowercase + string.digits + "_", max_size=8)).filter(lambda n: n not in RESERVED)
    return st.dictionaries(names, safe_values(), max_size=4)


# --- tests --------------------------------------------------------------------------------------
# Where things come from: "expected" values are computed in the judge (drive.save_point runs the
# run on the judge's own torch objects); "got" values are read back from the objects the worker
# holds, or from the exchange folder on the judge's file system.

def bytes_in(buffer) -> bytes:
    """The whole content of a BytesIO the worker holds."""
    return buffer.call("getvalue")


@pytest.mark.points(1)
@settings(max_examples=20)
@given(iteration=iterations())
def test_iteration_round_trip(sub, iteration):
    """load_checkpoint returns the saved iteration as an int; bad iterations raise ValueError"""
    model, optimizer = drive.build_run(sub, "sgd_momentum")
    buffer = sub.lib("io.BytesIO")
    saved = sub.outcome(SAVE, model, optimizer, iteration, buffer)
    written = len(bytes_in(buffer))
    call = f"{SAVE}(model, optimizer, iteration={iteration!r}, BytesIO())"
    valid = math.isfinite(iteration) and iteration >= 0 and float(iteration).is_integer()
    if not valid:
        assert isinstance(saved, wire.Raised) and saved.is_a(ValueError), (
            f"{call} gave {shown(saved)}, expected ValueError: an iteration is a count (a whole number >= 0)")
        assert written == 0, f"{call} wrote {written} bytes before raising, expected nothing written"
        return
    check_no_raise(saved, call)
    buffer.call("seek", 0)
    loaded = sub.outcome(LOAD, buffer, *drive.build_run(sub, "sgd_momentum"))
    check_no_raise(loaded, f"{LOAD}(...) after {call}")
    assert type(loaded) is int and loaded == int(iteration), (
        f"{LOAD}(...) after {call} returned {shown(loaded)}, expected the int {int(iteration)}")


def save_and_reload(sub, point: drive.SavePoint, iteration: int, scramble: int = 12345) -> tuple:
    """Stage ``point`` in the worker, save it with the submission's save_checkpoint, scramble every
    RNG and load into a fresh model and optimizer: (what load returned, fresh model, fresh optimizer)."""
    folder = drive.Folder(sub.exchange(), "resume-")
    model, optimizer = drive.stage(sub, point)
    path = folder.path("ckpt.pt")
    saved = sub.outcome(SAVE, model, optimizer, iteration, path)
    check_no_raise(saved, f"{SAVE}(model, optimizer, {iteration}, path)")
    fresh_model, fresh_optimizer = drive.fresh_run(sub, point.optimizer_name, scramble)
    loaded = sub.outcome(LOAD, path, fresh_model, fresh_optimizer)
    check_no_raise(loaded, f"{LOAD}(path, fresh_model, fresh_optimizer)")
    return loaded, fresh_model, fresh_optimizer


@pytest.mark.points(1)
def test_model_and_optimizer_state_restored(sub):
    """load_checkpoint restores parameters, buffers and the optimizer's state into a fresh model"""
    for optimizer in ("adamw", "sgd_momentum", "adagrad"):
        point = drive.save_point(optimizer, warmup=3)  # expected: the judge's own run at the save
        iteration, model, fresh = save_and_reload(sub, point, iteration=3)
        what = f"{LOAD}(path, fresh_model, fresh_{optimizer}) after 3 training steps"
        assert iteration == 3 and type(iteration) is int, (
            f"{what} returned {shown(iteration)}, expected the saved iteration 3")
        bad = differing(point.model, drive.model_state(sub, model))
        assert not bad, (f"{what}: the model's state_dict entries {bad} differ from the saved model's "
                         "(parameters and buffers such as BatchNorm's running statistics must be restored)")
        bad = differing(point.optimizer_state, drive.optimizer_state(fresh))
        assert not bad, (f"{what}: the optimizer's state entries {bad} (<param index>.<name>) differ from the saved "
                         "optimizer's: save optimizer.state_dict() and load it with optimizer.load_state_dict()")


@pytest.mark.points(1)
def test_every_rng_state_restored(sub):
    """load_checkpoint restores torch's, numpy's and Python's RNGs to their state at the save"""
    point = drive.save_point("adamw", warmup=3)  # expected draws: the judge's RNGs right after the save
    save_and_reload(sub, point, iteration=3)
    drawn = drive.draws(sub)  # the worker's RNGs, drawn by library calls the judge orders
    for name, description in RNG_NAMES.items():
        assert drawn[name] == point.draws[name], (
            f"after {LOAD}(...), {name} drew {drawn[name]}, expected {point.draws[name]} (what it drew right after "
            f"the save): save and restore {description}")


@pytest.mark.points(1)
def test_resume_is_bit_identical(sub):
    """A run resumed from a checkpoint continues bit-identically to the uninterrupted run"""
    for optimizer, warmup in (("adamw", 3), ("sgd_momentum", 1)):
        point = drive.save_point(optimizer, warmup=warmup, steps=4)  # the uninterrupted run, in the judge
        _, model, fresh = save_and_reload(sub, point, iteration=warmup)
        with drive.one_thread(sub):
            resumed = [drive.train_step(sub, model, fresh) for _ in range(4)]
        what = (f"save after {warmup} steps ({optimizer}), scramble all RNGs, {LOAD} into a fresh model and "
                "optimizer, train 4 steps (batches from torch, numpy and random, dropout)")
        assert resumed == point.losses, (
            f"{what}: losses {resumed}, expected exactly {point.losses} (the uninterrupted run)")
        bad = differing(point.final, drive.model_state(sub, model))
        assert not bad, f"{what}: the final {bad} are not bit-identical to the uninterrupted run's"


@pytest.mark.points(1)
def test_file_objects(sub):
    """save and load work on file objects (BytesIO, open files) at their current position"""
    prefix = b"GRADER-PREFIX\x00\x01"
    point = drive.save_point("adamw", warmup=2)
    model, optimizer = drive.stage(sub, point)
    buffer = sub.lib("io.BytesIO")
    buffer.call("write", prefix)
    call = f"{SAVE}(model, optimizer, 7, buffer, note='kept') on a BytesIO holding {len(prefix)} bytes"
    check_no_raise(sub.outcome(SAVE, model, optimizer, 7, buffer, note="kept"), call)
    assert not buffer.get("closed"), f"{call} closed the buffer, expected it left open (it belongs to the caller)"
    content = bytes_in(buffer)
    assert content[: len(prefix)] == prefix and len(content) > len(prefix), (
        f"{call}: {len(content) - len(prefix)} bytes after the existing ones (prefix kept: "
        f"{content[:len(prefix)] == prefix}), expected the checkpoint written at the buffer's current position")

    folder = drive.Folder(sub.exchange(), "file-objects-")
    handle = sub.lib("builtins.open", folder.path("ckpt.bin"), "wb")
    handle.call("write", prefix)
    saved = sub.outcome(SAVE, model, optimizer, 7, handle, note="kept")
    check_no_raise(saved, f"{SAVE}(..., open(path, 'wb'), ...)")
    handle.call("close")
    written = folder.read("ckpt.bin") or b""  # read by the judge on its own file system
    assert written[: len(prefix)] == prefix and len(written) > len(prefix), (
        f"{SAVE}(..., open(path, 'wb') after writing {len(prefix)} bytes, ...) left {len(written)} bytes in the file, "
        "expected the prefix kept and the checkpoint after it")

    for kind, source in (("buffer", "BytesIO"), ("file", "open(path, 'rb')")):
        src = buffer if kind == "buffer" else sub.lib("builtins.open", folder.path("ckpt.bin"), "rb")
        src.call("seek", len(prefix))
        fresh_model, fresh_optimizer = drive.fresh_run(sub, "adamw", 5)
        what = f"{LOAD}({source} positioned after the prefix, ...)"
        iteration = sub.outcome(LOAD, src, fresh_model, fresh_optimizer)
        assert iteration == 7, f"{what} returned {shown(iteration)}, expected 7"
        bad = differing(point.model, drive.model_state(sub, fresh_model))
        assert not bad, f"{what}: the model entries {bad} differ from the saved model's"
        if kind == "buffer":
            bad = differing(point.optimizer_state, drive.optimizer_state(fresh_optimizer))
            assert not bad, f"{what}: the optimizer state entries {bad} differ from the saved optimizer's"
        src.call("seek", len(prefix))
        extras = sub.outcome(EXTRAS, src)
        assert same(extras, {"note": "kept"}), (
            f"{EXTRAS}(same file object) returned {shown(extras)}, expected {{'note': 'kept'}}")


@pytest.mark.points(1)
@settings(max_examples=20)
@given(extra=extras(), to_path=st.booleans())
def test_extras_round_trip(sub, extra, to_path):
    """load_checkpoint_extras returns exactly the extras saved: tensors, scalars, str, None, containers"""
    model, optimizer = drive.build_run(sub, "sgd_momentum")
    out = drive.Folder(sub.exchange(), "extras-").path("ckpt.pt") if to_path else sub.lib("io.BytesIO")
    target = "path" if to_path else "BytesIO"
    saved = sub.outcome(SAVE, model, optimizer, 1, out, **extra)
    check_no_raise(saved, f"{SAVE}(model, optimizer, 1, {target}, ...)")
    if not to_path:
        out.call("seek", 0)
    got = sub.outcome(EXTRAS, out)
    assert same(got, extra), (f"{EXTRAS}(...) after {SAVE}(model, optimizer, 1, {target}, "
                              f"**{extra!r:.300}) returned {got!r:.300}, expected the same values with the same types")


def unsafe_extras(sub) -> dict[str, object]:
    """Values that do not load with weights_only=True; those the wire cannot carry are built in the
    worker by library calls."""
    return {
        "numpy float64 (a float subclass)": np.float64(1.5),
        "numpy int64": np.int64(3),
        "numpy bool": np.bool_(True),
        "numpy array": np.zeros(3),
        "object": sub.lib("builtins.object"),
        "set": sub.lib("builtins.set", [1, 2]),
        "tuple subclass (time.struct_time)": sub.lib("time.gmtime", 0),
        "numpy value in a list": [1.0, np.float32(2.0)],
        "numpy value deep in a dict": {"a": {"b": (1, np.int32(2))}},
        "numpy dict key": {np.int64(1): "one"},
        "function": sub.lib("builtins.getattr", sub.lib("importlib.import_module", "builtins"), "len"),
    }


@pytest.mark.points(1)
def test_unsafe_extras_refused_before_writing(sub):
    """Extras that would not load with weights_only=True raise ValueError and nothing is written"""
    model, optimizer = drive.build_run(sub, "sgd_momentum")
    folder = drive.Folder(sub.exchange(), "refused-")
    path = folder.path("ckpt.pt")
    check_no_raise(sub.outcome(SAVE, model, optimizer, 1, path), f"{SAVE}(model, optimizer, 1, path)")
    before = folder.read("ckpt.pt")
    for label, value in unsafe_extras(sub).items():
        call = f"{SAVE}(..., bad=<{label}>)"
        buffer = sub.lib("io.BytesIO")
        for target, out, kwargs in (("a path", path, {"good": 1.0}), ("a BytesIO", buffer, {})):
            raised = sub.outcome(SAVE, model, optimizer, 2, out, **kwargs, bad=value)
            assert isinstance(raised, wire.Raised) and raised.is_a(ValueError), (
                f"{call} to {target} gave {shown(raised)}, expected ValueError: only tensors, Python bool/int/float/"
                "complex, str, None and lists, tuples and dicts of them (keys included, exact types) load safely")
        files, intact = folder.listing(), folder.read("ckpt.pt") == before
        assert intact and files == ["ckpt.pt"], (
            f"{call} over an existing checkpoint left {files} (previous checkpoint intact: {intact}), "
            "expected the previous checkpoint untouched and no other file: validate before writing")
        written = len(bytes_in(buffer))
        assert written == 0, f"{call} to a BytesIO wrote {written} bytes, expected 0: validate before writing"


@pytest.mark.points(1)
def test_failed_save_is_atomic(sub):
    """A save that fails half-way leaves the previous checkpoint intact and no temporary file"""
    model, optimizer = drive.build_run(sub, "adamw")
    folder = drive.Folder(sub.exchange(), "atomic-")
    path = folder.path("ckpt.pt")
    check_no_raise(sub.outcome(SAVE, model, optimizer, 1, path), f"{SAVE}(model, optimizer, 1, 'ckpt.pt')")
    files = folder.listing()
    assert files == ["ckpt.pt"], f"{SAVE}(..., 'ckpt.pt') left {files} in its directory, expected only ['ckpt.pt']"
    before = folder.read("ckpt.pt")
    # The failure: the optimizer's hyperparameters hold a lock, which pickle refuses only once
    # torch.save is under way (the output already opened), as a full disk would fail it.
    group = optimizer.get("param_groups", keep=True).call("__getitem__", 0, keep=True)
    group.call("__setitem__", "lock", sub.lib("threading.Lock"))
    call = (f"{SAVE}(model, optimizer, 2, 'ckpt.pt') while torch.save fails part-way (the optimizer's state "
            "holds a threading.Lock, which cannot be pickled)")
    second = sub.outcome(SAVE, model, optimizer, 2, path)
    group.call("pop", "lock")
    assert isinstance(second, wire.Raised), (
        f"{call} returned {shown(second)}, expected the error to propagate (a failed save must not look successful)")
    assert folder.read("ckpt.pt") == before, (
        f"{call} changed the previous 'ckpt.pt', expected it byte-for-byte intact: write to a "
        "temporary file in the same directory, fsync, then os.replace it over the target")
    files = folder.listing()
    assert files == ["ckpt.pt"], (
        f"{call} left {files} in the directory, expected only ['ckpt.pt']: remove the temporary file on error")
    loaded = sub.outcome(LOAD, path, *drive.build_run(sub, "adamw"))
    assert loaded == 1, f"{LOAD}('ckpt.pt', ...) after the failed save returned {shown(loaded)}, expected 1"
    third = sub.outcome(SAVE, model, optimizer, 3, path)
    check_no_raise(third, f"{SAVE}(model, optimizer, 3, 'ckpt.pt') after the failure")
    files, loaded = folder.listing(), sub.outcome(LOAD, path, *drive.build_run(sub, "adamw"))
    assert files == ["ckpt.pt"] and loaded == 3, (
        f"a later successful save left {files} and loads as iteration {shown(loaded)}, "
        "expected ['ckpt.pt'] holding iteration 3")


@pytest.mark.points(1)
def test_checkpoint_carrying_code_is_refused(sub):
    """A checkpoint whose pickle carries code is refused and the code never runs"""
    model, optimizer = drive.build_run(sub, "adamw")
    folder = drive.Folder(sub.exchange(), "hostile-")
    legit = folder.path("legit.pt")
    saved = sub.outcome(SAVE, model, optimizer, 1, legit, note="ok")
    check_no_raise(saved, f"{SAVE}(model, optimizer, 1, 'legit.pt', note='ok')")
    loaded = sub.outcome(LOAD, legit, *drive.build_run(sub, "adamw"))
    assert loaded == 1, f"{LOAD}('legit.pt', ...) of an ordinary checkpoint returned {shown(loaded)}, expected 1"
    extras = sub.outcome(EXTRAS, legit)
    assert same(extras, {"note": "ok"}), (
        f"{EXTRAS}('legit.pt') of an ordinary checkpoint returned {shown(extras)}, expected {{'note': 'ok'}}")
    point = drive.save_point("adamw", warmup=1)
    for loader in ("load_checkpoint", "load_checkpoint_extras"):
        # The judge writes the file; its code would make a folder in a folder the judge watches
        # from outside the worker (inode, ctime, mode, entries): hiding the trace changes them too.
        trap = drive.Folder(sub.exchange(), f"trap-{loader}-")
        torch.save(drive.hostile_checkpoint(point, trap.path("pwned")), trap.host / "evil.pt")
        before = trap.settle()
        run = drive.build_run(sub, "adamw") if loader == "load_checkpoint" else ()
        args = (trap.path("evil.pt"), *run)
        result = sub.outcome(f"checkpoint.{loader}", *args)
        after = trap.snapshot()
        call = f"checkpoint.{loader}('evil.pt', ...) on a file whose unpickling would create a folder"
        trace = "the trace is there" if "pwned" in after[3] else "the trace was hidden"
        assert after == before, (
            f"{call}: the file's code RAN (its folder changed: {trace}), "
            "expected it never executed: load with torch.load(..., weights_only=True)")
        assert isinstance(result, wire.Raised), (
            f"{call} returned {shown(result)}, expected an error "
            "(torch raises pickle.UnpicklingError with weights_only=True)")


@pytest.mark.points(1)
@pytest.mark.gpu
def test_cuda_rng_and_model_restored(sub):
    """On CUDA, load_checkpoint restores the CUDA generator and a CUDA model and optimizer"""
    # Expected draws: the judge seeds its own CUDA generator, notes that state, and draws. The
    # worker's generator is set to that state right before the save. Not run on a CPU-only host:
    # the CUDA calls of this test are verified only where a GPU is present.
    with torch.random.fork_rng(devices=[0]):
        torch.cuda.manual_seed(2024)
        cuda_state = torch.cuda.get_rng_state()
        expected = torch.randn(16, device="cuda").cpu()
    point = drive.save_point("adamw", warmup=2)
    model, optimizer = drive.stage(sub, point, device="cuda")
    sub.lib("torch.cuda.set_rng_state", cuda_state)
    buffer = sub.lib("io.BytesIO")
    check_no_raise(sub.outcome(SAVE, model, optimizer, 2, buffer), f"{SAVE}(cuda_model, optimizer, 2, BytesIO())")
    sub.lib("torch.cuda.manual_seed_all", 999)
    fresh_model, fresh_optimizer = drive.build_run(sub, "adamw", device="cuda")
    buffer.call("seek", 0)
    iteration = sub.outcome(LOAD, buffer, fresh_model, fresh_optimizer)
    assert iteration == 2, f"{LOAD}(...) of a CUDA run returned {shown(iteration)}, expected 2"
    got = sub.lib("torch.randn", 16, device="cuda").read()
    parameters = sub.lib("builtins.list", fresh_model.call("parameters", keep=True))
    devices = sorted({str(parameters.call("__getitem__", i, keep=True).get("device"))
                      for i in range(parameters.call("__len__"))})
    assert devices == ["cuda:0"], f"after {LOAD}(...) the model's parameters are on {devices}, expected cuda:0"
    bad = differing(point.model, drive.model_state(sub, fresh_model))
    assert not bad, f"{LOAD}(...) into a fresh CUDA model: entries {bad} differ from the saved model's"
    assert same(got, expected), (
        f"after {LOAD}(...), torch.randn(16, device='cuda') drew {got.tolist()[:4]}..., expected "
        f"{expected.tolist()[:4]}... (the draws right after the save): save torch.cuda.get_rng_state_all() "
        "and restore every device's generator")
    # the restored optimizer state must live on the parameters' device: one step must run
    with drive.one_thread(sub):
        drive.train_step(sub, fresh_model, fresh_optimizer, device="cuda")
