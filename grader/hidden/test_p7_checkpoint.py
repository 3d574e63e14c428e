"""Hidden suite for P7 (checkpoint.py): exact resume, file objects, extras, atomic saves, safe loads.

The probes (grader/probes/checkpoint.py) drive the submission in the worker: they train a small
model with dropout, batch norm and a stateful optimizer, save, keep training, then scramble every
RNG and load into a FRESH model and optimizer. The oracles are the uninterrupted run itself (a
correct resume is bit-identical to it, so every comparison here is exact), the state dicts
PyTorch produced at the moment of saving, and the file system (bytes, directory listings).
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from grader import wire

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


def safe_values() -> st.SearchStrategy:
    """Every kind of value an extra may be, nested."""
    scalars = (st.booleans() | st.integers() | st.floats() | st.complex_numbers() | st.text(max_size=6)
               | st.none() | tensors())
    keys = st.text(max_size=5) | st.integers(-5, 5)
    return st.recursive(scalars, lambda inner: st.lists(inner, max_size=3) | st.tuples(inner, inner)
                        | st.dictionaries(keys, inner, max_size=3), max_leaves=10)


def extras() -> st.SearchStrategy[dict]:
    names = st.from_regex(r"[a-z_][a-z0-9_]{0,8}", fullmatch=True).filter(lambda n: n not in RESERVED)
    return st.dictionaries(names, safe_values(), max_size=4)


# --- tests --------------------------------------------------------------------------------------

@pytest.mark.points(1)
@settings(max_examples=20)
@given(iteration=iterations())
def test_iteration_round_trip(sub, iteration):
    """load_checkpoint returns the saved iteration as an int; bad iterations raise ValueError"""
    got = sub.probe("checkpoint.iteration_round_trip", iteration=iteration)
    call = f"{SAVE}(model, optimizer, iteration={iteration!r}, BytesIO())"
    valid = math.isfinite(iteration) and iteration >= 0 and float(iteration).is_integer()
    if not valid:
        assert isinstance(got["save"], wire.Raised) and got["save"].is_a(ValueError), (
            f"{call} gave {shown(got['save'])}, expected ValueError: an iteration is a count (a whole number >= 0)")
        assert got["written"] == 0, f"{call} wrote {got['written']} bytes before raising, expected nothing written"
        return
    check_no_raise(got["save"], call)
    check_no_raise(got["load"], f"{LOAD}(...) after {call}")
    assert type(got["load"]) is int and got["load"] == int(iteration), (
        f"{LOAD}(...) after {call} returned {shown(got['load'])}, expected the int {int(iteration)}")


@pytest.mark.points(1)
def test_model_and_optimizer_state_restored(sub):
    """load_checkpoint restores parameters, buffers and the optimizer's state into a fresh model"""
    for optimizer in ("adamw", "sgd_momentum", "adagrad"):
        got = sub.probe("checkpoint.resume", optimizer=optimizer, warmup=3, steps=1, iteration=3)
        what = f"{LOAD}(path, fresh_model, fresh_{optimizer}) after 3 training steps"
        assert got["iteration"] == 3 and type(got["iteration"]) is int, (
            f"{what} returned {shown(got['iteration'])}, expected the saved iteration 3")
        bad = differing(got["saved_model"], got["loaded_model"])
        assert not bad, (f"{what}: the model's state_dict entries {bad} differ from the saved model's "
                         "(parameters and buffers such as BatchNorm's running statistics must be restored)")
        bad = differing(got["saved_optimizer"], got["loaded_optimizer"])
        assert not bad, (f"{what}: the optimizer's state entries {bad} (<param index>.<name>) differ from the saved "
                         "optimizer's: save optimizer.state_dict() and load it with optimizer.load_state_dict()")


@pytest.mark.points(1)
def test_every_rng_state_restored(sub):
    """load_checkpoint restores torch's, numpy's and Python's RNGs to their state at the save"""
    got = sub.probe("checkpoint.resume", optimizer="adamw", warmup=3, steps=1)
    for name, description in RNG_NAMES.items():
        want, drawn = got["expected_draws"][name], got["draws"][name]
        assert drawn == want, (
            f"after {LOAD}(...), {name} drew {drawn}, expected {want} (what it drew right after the save): "
            f"save and restore {description}")


@pytest.mark.points(1)
def test_resume_is_bit_identical(sub):
    """A run resumed from a checkpoint continues bit-identically to the uninterrupted run"""
    for optimizer, warmup in (("adamw", 3), ("sgd_momentum", 1)):
        got = sub.probe("checkpoint.resume", optimizer=optimizer, warmup=warmup, steps=4)
        what = (f"save after {warmup} steps ({optimizer}), scramble all RNGs, {LOAD} into a fresh model and "
                "optimizer, train 4 steps (batches from torch, numpy and random, dropout)")
        assert got["resumed"] == got["uninterrupted"], (
            f"{what}: losses {got['resumed']}, expected exactly {got['uninterrupted']} (the uninterrupted run)")
        bad = differing(got["final"], got["resumed_final"])
        assert not bad, f"{what}: the final {bad} are not bit-identical to the uninterrupted run's"


@pytest.mark.points(1)
def test_file_objects(sub):
    """save and load work on file objects (BytesIO, open files) at their current position"""
    prefix = b"GRADER-PREFIX\x00\x01"
    got = sub.probe("checkpoint.file_objects", prefix=prefix, iteration=7, note="kept")
    call = f"{SAVE}(model, optimizer, 7, buffer, note='kept') on a BytesIO holding {len(prefix)} bytes"
    assert not got["buffer_closed"], f"{call} closed the buffer, expected it left open (it belongs to the caller)"
    assert got["buffer_prefix_kept"] and got["buffer_written"] > 0, (
        f"{call}: {got['buffer_written']} bytes after the existing ones (prefix kept: {got['buffer_prefix_kept']}), "
        "expected the checkpoint written at the buffer's current position")
    for kind, source in (("buffer", "BytesIO"), ("file", "open(path, 'rb')")):
        what = f"{LOAD}({source} positioned after the prefix, ...)"
        assert got[f"{kind}_iteration"] == 7, f"{what} returned {shown(got[f'{kind}_iteration'])}, expected 7"
        bad = differing(got["saved_model"], got[f"{kind}_model"])
        assert not bad, f"{what}: the model entries {bad} differ from the saved model's"
        assert same(got[f"{kind}_extras"], {"note": "kept"}), (
            f"{EXTRAS}(same file object) returned {shown(got[f'{kind}_extras'])}, expected {{'note': 'kept'}}")
    bad = differing(got["saved_optimizer"], got["buffer_optimizer"])
    assert not bad, f"{LOAD}(BytesIO, ...): the optimizer state entries {bad} differ from the saved optimizer's"


@pytest.mark.points(1)
@settings(max_examples=20)
@given(extra=extras(), to_path=st.booleans())
def test_extras_round_trip(sub, extra, to_path):
    """load_checkpoint_extras returns exactly the extras saved: tensors, scalars, str, None, containers"""
    got = sub.probe("checkpoint.extras_round_trip", extras=extra, to_path=to_path)
    assert same(got, extra), (f"{EXTRAS}(...) after {SAVE}(model, optimizer, 1, {'path' if to_path else 'BytesIO'}, "
                              f"**{extra!r:.300}) returned {got!r:.300}, expected the same values with the same types")


@pytest.mark.points(1)
def test_unsafe_extras_refused_before_writing(sub):
    """Extras that would not load with weights_only=True raise ValueError and nothing is written"""
    report = sub.probe("checkpoint.refused_extras")
    for label, got in report.items():
        call = f"{SAVE}(..., bad=<{label}>)"
        for key, target in (("raised", "a path"), ("raised_buffer", "a BytesIO")):
            raised = got[key]
            assert isinstance(raised, wire.Raised) and raised.is_a(ValueError), (
                f"{call} to {target} gave {shown(raised)}, expected ValueError: only tensors, Python bool/int/float/"
                "complex, str, None and lists, tuples and dicts of them (keys included, exact types) load safely")
        assert got["intact"] and got["files"] == ["ckpt.pt"], (
            f"{call} over an existing checkpoint left {got['files']} (previous checkpoint intact: {got['intact']}), "
            "expected the previous checkpoint untouched and no other file: validate before writing")
        assert got["buffer_written"] == 0, (
            f"{call} to a BytesIO wrote {got['buffer_written']} bytes, expected 0: validate before writing")


@pytest.mark.points(1)
def test_failed_save_is_atomic(sub):
    """A save that fails half-way leaves the previous checkpoint intact and no temporary file"""
    got = sub.probe("checkpoint.failing_save", fail_after=0.5)
    check_no_raise(got["first"], f"{SAVE}(model, optimizer, 1, 'ckpt.pt')")
    assert got["files_after_first"] == ["ckpt.pt"], (
        f"{SAVE}(..., 'ckpt.pt') left {got['files_after_first']} in its directory, expected only ['ckpt.pt']")
    call = f"{SAVE}(model, optimizer, 2, 'ckpt.pt') while torch.save writes half its bytes and raises OSError"
    assert isinstance(got["second"], wire.Raised), (
        f"{call} returned {shown(got['second'])}, expected the error to propagate (a failed save must not look successful)")
    assert got["intact"], (f"{call} changed the previous 'ckpt.pt', expected it byte-for-byte intact: write to a "
                           "temporary file in the same directory, fsync, then os.replace it over the target")
    assert got["files"] == ["ckpt.pt"], (
        f"{call} left {got['files']} in the directory, expected only ['ckpt.pt']: remove the temporary file on error")
    assert got["loaded"] == 1, f"{LOAD}('ckpt.pt', ...) after the failed save returned {shown(got['loaded'])}, expected 1"
    check_no_raise(got["third"], f"{SAVE}(model, optimizer, 3, 'ckpt.pt') after the failure")
    assert got["files_after_third"] == ["ckpt.pt"] and got["loaded_third"] == 3, (
        f"a later successful save left {got['files_after_third']} and loads as iteration {shown(got['loaded_third'])}, "
        "expected ['ckpt.pt'] holding iteration 3")


@pytest.mark.points(1)
def test_checkpoint_carrying_code_is_refused(sub):
    """A checkpoint whose pickle carries code is refused and the code never runs"""
    report = sub.probe("checkpoint.hostile_file")
    check_no_raise(report["legit_save"], f"{SAVE}(model, optimizer, 1, 'legit.pt', note='ok')")
    assert report["legit_load"] == 1, (
        f"{LOAD}('legit.pt', ...) of an ordinary checkpoint returned {shown(report['legit_load'])}, expected 1")
    assert same(report["legit_extras"], {"note": "ok"}), (
        f"{EXTRAS}('legit.pt') of an ordinary checkpoint returned {shown(report['legit_extras'])}, expected {{'note': 'ok'}}")
    for loader in ("load_checkpoint", "load_checkpoint_extras"):
        got = report[loader]
        call = f"checkpoint.{loader}('evil.pt', ...) on a file whose unpickling would create a file"
        assert not got["code_ran"], (f"{call}: the file's code RAN, expected it never executed: load with "
                                     "torch.load(..., weights_only=True)")
        assert isinstance(got["result"], wire.Raised), (
            f"{call} {got['result']}, expected an error (torch raises pickle.UnpicklingError with weights_only=True)")


@pytest.mark.points(1)
@pytest.mark.gpu
def test_cuda_rng_and_model_restored(sub):
    """On CUDA, load_checkpoint restores the CUDA generator and a CUDA model and optimizer"""
    got = sub.probe("checkpoint.cuda_resume", timeout=120)
    assert got["iteration"] == 2, f"{LOAD}(...) of a CUDA run returned {shown(got['iteration'])}, expected 2"
    assert got["devices"] == ["cuda:0"], f"after {LOAD}(...) the model's parameters are on {got['devices']}, expected cuda:0"
    bad = differing(got["saved_model"], got["loaded_model"])
    assert not bad, f"{LOAD}(...) into a fresh CUDA model: entries {bad} differ from the saved model's"
    assert same(got["got"], got["expected"]), (
        f"after {LOAD}(...), torch.randn(16, device='cuda') drew {got['got'].tolist()[:4]}..., expected "
        f"{got['expected'].tolist()[:4]}... (the draws right after the save): save torch.cuda.get_rng_state_all() "
        "and restore every device's generator")
