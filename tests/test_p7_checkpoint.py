"""Public tests for P7 (checkpoint.py): save, load, exact resume, atomic writes, safe loading."""

from __future__ import annotations

import collections
import copy
import functools
import io
import math
import os
import pickle
import random
import re
from collections import namedtuple
from pathlib import Path

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

import _kit
from _by_name import described
from _kit import call, call_interrupted_in_rename, check_equal, check_raises, check_true, describe_call, not_implemented

SAVE = "checkpoint.save_checkpoint"
LOAD = "checkpoint.load_checkpoint"
EXTRAS = "checkpoint.load_checkpoint_extras"
# No "explain" phase: on a failing example it replays the test hundreds of times (slow with torch).


def make_run(seed: int = 0, batch_norm: bool = False) -> tuple[torch.nn.Module, torch.optim.Optimizer]:
    """A small model with dropout (and batch norm, whose running statistics are buffers) and an AdamW
    optimizer (whose moments are state to restore)."""
    torch.manual_seed(seed)
    norm = torch.nn.BatchNorm1d(16) if batch_norm else torch.nn.Identity()
    model = torch.nn.Sequential(torch.nn.Linear(6, 16), norm, torch.nn.ReLU(), torch.nn.Dropout(0.3),
                                torch.nn.Linear(16, 2))
    return model, torch.optim.AdamW(model.parameters(), lr=1e-2)


LOADS_SAFELY = "P7.loads-safely"


def unloadable(call_text: str, exc: pickle.UnpicklingError) -> None:
    """Fail because torch.load(weights_only=True) refused a checkpoint the student's save_checkpoint wrote:
    the rule broken is [P7.loads-safely], whatever the running test checks, and torch's advice is left out."""
    found = re.search(r"GLOBAL ([\w.]+)", str(exc))
    culprit = found.group(1) if found else "an object it does not rebuild"
    if culprit.startswith("numpy"):
        culprit += " (a numpy array or scalar: np.random.get_state() holds one)"
    _kit.complain(call_text, f"raised UnpicklingError: torch.load(..., weights_only=True) refuses {culprit}",
                  "a checkpoint that loads with weights_only=True", SAVE,
                  "what save_checkpoint writes must hold only tensors, Python scalars, str, None and lists, tuples "
                  "and dicts of them: numpy's RNG state as plain values (keys.tolist(), ints, a float)",
                  rules=[LOADS_SAFELY])


def loading(fn):
    """The student's loader ``fn``, where a refusal of the checkpoint their save_checkpoint wrote fails as ``unloadable``."""
    @functools.wraps(fn)
    def load(*args):
        try:
            return fn(*args)
        except pickle.UnpicklingError as exc:
            unloadable(describe_call(fn, args), exc)
    return load


def train_step(model: torch.nn.Module, optimizer: torch.optim.Optimizer) -> float:
    """One step whose batch comes from all three RNGs, as real loops do (torch, numpy, random)."""
    data = torch.randn(32, 6)
    rows = torch.from_numpy(np.random.randint(0, 32, size=8))
    noise = random.gauss(0.0, 1.0)
    x = data[rows]
    loss = ((model(x) - noise) ** 2).mean()
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    return loss.item()


def scramble_rngs(seed: int = 12345) -> None:
    torch.manual_seed(seed)
    np.random.seed(seed)
    random.seed(seed)


def same_state(a: dict, b: dict) -> bool:
    """Two state dicts (nested) with the same keys and bit-identical tensors."""
    if isinstance(a, dict):
        return isinstance(b, dict) and a.keys() == b.keys() and all(same_state(a[k], b[k]) for k in a)
    if isinstance(a, (list, tuple)):
        return type(a) is type(b) and len(a) == len(b) and all(same_state(x, y) for x, y in zip(a, b))
    if isinstance(a, torch.Tensor):
        return isinstance(b, torch.Tensor) and a.dtype == b.dtype and a.shape == b.shape and torch.equal(a, b)
    return a == b or (type(a) is type(b) is float and math.isnan(a) and math.isnan(b))


def trained_run(steps: int = 3, batch_norm: bool = False) -> tuple[torch.nn.Module, torch.optim.Optimizer]:
    scramble_rngs(0)
    model, optimizer = make_run(0, batch_norm)
    for _ in range(steps):
        train_step(model, optimizer)
    return model, optimizer


def run_state(model: torch.nn.Module, optimizer: torch.optim.Optimizer) -> dict[str, object]:
    """What an exact resume must restore, by name: a copy of each piece as it is now."""
    return {"torch's RNG (torch.get_rng_state())": torch.get_rng_state(),
            "numpy's global RNG (np.random.get_state())": copy.deepcopy(np.random.get_state()),
            "Python's random (random.getstate())": random.getstate(),
            "the model's state_dict()": copy.deepcopy(model.state_dict()),
            "the AdamW state (optimizer.state_dict())": copy.deepcopy(optimizer.state_dict())}


def same_piece(a: object, b: object) -> bool:
    """``same_state``, where numpy arrays (numpy's RNG keys) compare element by element."""
    if isinstance(a, tuple) and isinstance(b, tuple) and len(a) == len(b):
        return all(same_piece(x, y) for x, y in zip(a, b))
    if isinstance(a, np.ndarray):
        return isinstance(b, np.ndarray) and a.dtype == b.dtype and np.array_equal(a, b)
    return same_state(a, b)


def not_restored(saved: dict[str, object], loaded: dict[str, object]) -> str:
    """A hint naming each piece of the run that ``load_checkpoint`` left different from the save."""
    differ = [name for name in saved if not same_piece(saved[name], loaded[name])]
    return f"after {LOAD}, these differ from what they were at the save: {'; '.join(differ)}" if differ else ""




def extra_values():
    scalars = (st.booleans() | st.integers(-2**40, 2**40) | st.floats(allow_nan=False) | st.text(max_size=8)
               | st.none() | st.complex_numbers(allow_nan=False))
    return st.recursive(scalars, lambda inner: st.lists(inner, max_size=3) | st.tuples(inner, inner)
                        | st.dictionaries(st.text(max_size=4), inner, max_size=3), max_leaves=8)



@pytest.mark.rule("P7.restores-model", "P7.restores-optimizer")
def test_round_trip_restores_model_optimizer_and_iteration(checkpoint, tmp_path):
    model, optimizer = trained_run(batch_norm=True)
    optimizer.param_groups[0]["lr"] = 3e-3  # as a schedule would have set it: a hyperparameter to restore
    path = tmp_path / "ckpt.pt"
    call(checkpoint.save_checkpoint, model, optimizer, 3, path)
    fresh_model, fresh_optimizer = make_run(seed=99, batch_norm=True)  # built with lr=1e-2
    got = check_equal(loading(checkpoint.load_checkpoint), path, fresh_model, fresh_optimizer, expected=3)
    check_true(same_state(fresh_model.state_dict(), model.state_dict()), f"{LOAD}({path.name}, fresh model, ...)",
               got, "the fresh model's state_dict equal to the saved model's (parameters and BatchNorm's running "
               "statistics, which are buffers)", LOAD)
    check_true(same_state(fresh_optimizer.state_dict(), optimizer.state_dict()),
               f"{LOAD}({path.name}, ..., fresh optimizer)", got,
               "the fresh optimizer's state_dict equal to the saved one's: AdamW moments and step counts, and its "
               "param_groups (the lr the saved run had reached, 3e-3, not the fresh optimizer's 1e-2)", LOAD)


@pytest.mark.rule("P7.restores-optimizer")
def test_a_checkpoint_before_the_first_step_restores_the_hyperparameters(checkpoint, tmp_path):
    model, optimizer = make_run()
    optimizer.param_groups[0]["lr"] = 3e-3  # set before any step: the optimizer has no state yet
    path = tmp_path / "ckpt.pt"
    call(checkpoint.save_checkpoint, model, optimizer, 0, path)
    fresh_model, fresh_optimizer = make_run(seed=99)  # built with lr=1e-2
    got = check_equal(loading(checkpoint.load_checkpoint), path, fresh_model, fresh_optimizer, expected=0)
    check_true(same_state(fresh_optimizer.state_dict(), optimizer.state_dict()),
               f"{LOAD}({path.name}, ..., fresh optimizer) of a checkpoint saved before the first step", got,
               "the fresh optimizer's state_dict equal to the saved one's: no state yet, and its param_groups (lr "
               "3e-3, not the fresh optimizer's 1e-2): load_state_dict restores both, whatever the state holds", LOAD)


@pytest.mark.rule("P7.returns-iteration")
def test_path_may_be_a_string_and_iteration_a_whole_float(checkpoint, tmp_path):
    model, optimizer = trained_run(1)
    path = str(tmp_path / "ckpt.pt")
    call(checkpoint.save_checkpoint, model, optimizer, 2e3, path)
    check_equal(loading(checkpoint.load_checkpoint), path, *make_run(), expected=2000,
                why="iteration is a count: 2e3 means 2000, and load returns it as an int")


@pytest.mark.rule("P7.iteration-count")
@pytest.mark.parametrize("bad", [-1, 2.5, float("inf"), float("nan")])
def test_bad_iteration_raises_and_writes_nothing(checkpoint, tmp_path, bad):
    path = tmp_path / "ckpt.pt"
    check_raises(ValueError, checkpoint.save_checkpoint, *trained_run(1), bad, path)
    check_true(not os.listdir(tmp_path), f"{SAVE}(..., iteration={bad}, {path.name})", os.listdir(tmp_path),
               "an empty directory: a bad argument is refused before anything is written", SAVE)


@pytest.mark.rule("P7.loads-safely")
def test_checkpoint_loads_with_weights_only(checkpoint):
    buffer = io.BytesIO()
    call(checkpoint.save_checkpoint, *trained_run(1), 1, buffer, note="kept")
    buffer.seek(0)
    try:
        torch.load(buffer, map_location="cpu", weights_only=True)
    except pickle.UnpicklingError as exc:
        unloadable(f"torch.load(<what {SAVE}(..., BytesIO()) wrote>, weights_only=True)", exc)


def draws() -> dict[str, list[float]]:
    """The next draws of torch's, numpy's (uniform, then gaussian) and Python's RNGs."""
    return {"torch's CPU generator": torch.rand(3).tolist(),
            "numpy's global RNG": np.random.random(2).tolist() + np.random.normal(size=2).tolist(),
            "Python's random": [random.random(), random.gauss(0.0, 1.0)]}


@pytest.mark.rule("P7.restores-rngs")
def test_every_rng_is_restored(checkpoint):
    model, optimizer = trained_run(1)
    np.random.normal()  # one gaussian of a pair: numpy keeps the other cached, which is state too
    buffer = io.BytesIO()
    call(checkpoint.save_checkpoint, model, optimizer, 1, buffer)
    expected = draws()
    scramble_rngs()
    buffer.seek(0)
    call(loading(checkpoint.load_checkpoint), buffer, *make_run(seed=5))
    got = draws()
    differ = [name for name in expected if got[name] != expected[name]]
    check_true(not differ, f"{LOAD}(...) then draws from every RNG", f"different draws from {', '.join(differ)}",
               "the draws made right after the save", LOAD,
               "save every RNG's state inside save_checkpoint and restore it in load_checkpoint "
               "(numpy's state includes has_gauss and cached_gaussian)")


@pytest.mark.rule("P7.restores-model", "P7.restores-optimizer", "P7.restores-rngs")
def test_exact_resume_is_bit_identical(checkpoint, tmp_path):
    model, optimizer = trained_run(3)
    path = tmp_path / "ckpt.pt"
    call(checkpoint.save_checkpoint, model, optimizer, 3, path)
    saved = run_state(model, optimizer)
    uninterrupted = [train_step(model, optimizer) for _ in range(4)]

    scramble_rngs()  # a new process starts with other RNG states and a freshly initialised model
    fresh_model, fresh_optimizer = make_run(seed=7)
    call(loading(checkpoint.load_checkpoint), path, fresh_model, fresh_optimizer)
    loaded = run_state(fresh_model, fresh_optimizer)
    resumed = [train_step(fresh_model, fresh_optimizer) for _ in range(4)]
    check_true(resumed == uninterrupted, f"{LOAD}(...) then 4 more training steps", resumed,
               f"exactly the losses of the uninterrupted run, {uninterrupted}", LOAD,
               "the steps draw from torch (data, dropout), numpy (indices) and Python's random (noise): "
               "all three RNG states and the AdamW state must be saved and restored", not_restored(saved, loaded))
    check_true(same_state(fresh_model.state_dict(), model.state_dict()), f"{LOAD}(...) then 4 steps",
               "different parameters", "bit-identical parameters to the uninterrupted run", LOAD)


@pytest.mark.rule("P7.file-object-out")
@pytest.mark.parametrize("kind", ["BytesIO", "open file"])
def test_save_to_a_file_object_at_its_position(checkpoint, tmp_path, kind):
    with (io.BytesIO() if kind == "BytesIO" else open(tmp_path / "ckpt.pt", "w+b")) as buffer:
        buffer.write(b"HEADER")
        call(checkpoint.save_checkpoint, *trained_run(2), 5, buffer)
        what = f"{SAVE}(..., {kind} holding b'HEADER')"
        check_true(not buffer.closed, what, f"a closed {kind}", f"the {kind} left open: it belongs to the caller",
                   SAVE)
        buffer.seek(0)
        content = buffer.read()
    check_true(content.startswith(b"HEADER") and len(content) > 6, what, content[:12],
               f"b'HEADER' kept and the checkpoint written after it (at the {kind}'s current position)", SAVE,
               hint="any writable binary file object (an open file too, not only BytesIO) is written to as it is")


@pytest.mark.rule("P7.load-from-position")
def test_load_from_a_file_object_at_its_position(checkpoint):
    model, optimizer = trained_run(2)
    saved = io.BytesIO()
    call(checkpoint.save_checkpoint, model, optimizer, 5, saved, note="in memory")
    buffer = io.BytesIO(b"HEADER" + saved.getvalue())
    buffer.seek(6)  # the checkpoint starts here
    fresh_model, fresh_optimizer = make_run(seed=3)
    check_equal(loading(checkpoint.load_checkpoint), buffer, fresh_model, fresh_optimizer, expected=5)
    check_true(same_state(fresh_model.state_dict(), model.state_dict()), f"{LOAD}(BytesIO at position 6, ...)",
               "different parameters", "the saved model's parameters", LOAD)
    buffer.seek(6)
    check_equal(loading(checkpoint.load_checkpoint_extras), buffer, expected={"note": "in memory"})


@pytest.mark.rule("P7.extras-allowed", "P7.extras-returned")
def test_extras_round_trip(checkpoint, tmp_path):
    extras = {"loss": 2.5, "tokens_seen": 123456, "done": False, "name": "run-7", "nothing": None,
              "z": 1 + 2j, "history": [1.0, 0.5], "shape": (4, 8), "cfg": {"lr": 1e-3, "layers": [2, 3], 0: "an int key"},
              "ema": torch.arange(4.0), "inf": float("inf"), "nan": [float("nan"), -float("inf")],
              "buffers": {"mean": torch.zeros(2), "pair": (torch.ones(1), [torch.arange(3)])},
              "by_pair": {(0, 1): 2.5, (1, ("a", None)): "tuple keys"}}
    path = tmp_path / "ckpt.pt"
    call(checkpoint.save_checkpoint, *trained_run(1), 1, path, **extras)
    got = call(loading(checkpoint.load_checkpoint_extras), path)
    check_true(same_state(got, extras), f"{EXTRAS}({path.name})", got, f"the extras saved: {extras}", EXTRAS)


@pytest.mark.rule("P7.extras-returned")
def test_no_extras_give_an_empty_dict(checkpoint):
    buffer = io.BytesIO()
    call(checkpoint.save_checkpoint, *make_run(), 0, buffer)
    buffer.seek(0)
    check_equal(loading(checkpoint.load_checkpoint_extras), buffer, expected={},
                why="the **extra keyword arguments as a dict: {} when save_checkpoint got none")


@pytest.mark.rule("P7.extras-restore-nothing")
def test_loading_the_extras_restores_nothing(checkpoint):
    buffer = io.BytesIO()
    call(checkpoint.save_checkpoint, *trained_run(1), 1, buffer, note="kept")
    scramble_rngs(5)
    expected = draws()
    scramble_rngs(5)
    buffer.seek(0)
    call(loading(checkpoint.load_checkpoint_extras), buffer)
    got = draws()
    differ = [name for name in expected if got[name] != expected[name]]
    check_true(not differ, f"{EXTRAS}(...) then draws from every RNG", f"different draws from {', '.join(differ)}",
               "the draws the RNGs would have made without the call: it restores nothing", EXTRAS)


@pytest.mark.rule("P7.extras-allowed")
@settings(max_examples=20, deadline=None)
@given(value=extra_values())
def test_any_safe_extra_round_trips(checkpoint, value):
    model, optimizer = make_run()
    buffer = io.BytesIO()
    call(checkpoint.save_checkpoint, model, optimizer, 0, buffer, value=value)
    buffer.seek(0)
    got = call(loading(checkpoint.load_checkpoint_extras), buffer)
    check_true(same_state(got, {"value": value}), f"{EXTRAS}(...) after saving value={value!r}", got,
               f"{{'value': {value!r}}}", EXTRAS)


# A tuple subclass: its items are allowed values, but it pickles as its own class, which weights_only refuses.
Point = namedtuple("Point", "x y")


class Steps(list):
    """A list subclass, refused for the same reason."""

    def __repr__(self) -> str:
        return f"Steps({list(self)!r})"


@pytest.mark.rule("P7.extras-refused")
@pytest.mark.parametrize("bad", [np.float64(1.0), np.int64(3), np.zeros(3), {1, 2}, [1, object()],
                                 {"deep": (1, np.float32(2.0))}, {np.int64(1): "a numpy key"}, Point(1, 2),
                                 {"nested": [Steps([1, 2])]}, collections.defaultdict(list, a=[1])],
                         ids=lambda bad: re.sub(r" at 0x[0-9a-f]+", "", repr(bad)))  # the same ids in every process
def test_unsafe_extra_raises_before_writing(checkpoint, tmp_path, bad):
    model, optimizer = trained_run(1)
    path = tmp_path / "ckpt.pt"
    call(checkpoint.save_checkpoint, model, optimizer, 1, path)
    before = path.read_bytes()
    check_raises(ValueError, checkpoint.save_checkpoint, model, optimizer, 2, path, bad=bad,
                 why="extras must load with weights_only=True: numpy values, subclasses of list, tuple or dict (a "
                 "namedtuple, a defaultdict) and other objects do not, and sets are refused too; test exact types")
    check_true(path.read_bytes() == before and os.listdir(tmp_path) == ["ckpt.pt"],
               f"{SAVE}(..., bad={bad!r})", sorted(os.listdir(tmp_path)),
               "the previous checkpoint unchanged and no other file: validate before writing", SAVE)
    buffer = io.BytesIO()
    check_raises(ValueError, checkpoint.save_checkpoint, model, optimizer, 2, buffer, bad=bad,
                 why="the same extras are refused whatever out is")
    check_true(not buffer.getvalue(), f"{SAVE}(..., BytesIO(), bad={bad!r})", f"{len(buffer.getvalue())} bytes written",
               "nothing written: validate before writing", SAVE)


def save_failing_half_way(checkpoint, path: Path, monkeypatch) -> bool:
    """Save over ``path`` while torch.save writes half a checkpoint, then fails as a full disk does:
    whether the error propagated."""
    model, optimizer = trained_run(1)
    real_save = torch.save

    def failing_save(obj, f, *args, **kwargs):
        data = io.BytesIO()
        real_save(obj, data, *args, **kwargs)
        half = data.getvalue()[: len(data.getvalue()) // 2]
        if isinstance(f, (str, os.PathLike)):
            with open(f, "wb") as handle:
                handle.write(half)
        else:
            f.write(half)
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(torch, "save", failing_save)
    monkeypatch.setattr(torch.serialization, "save", failing_save)
    for name, value in list(vars(checkpoint).items()):
        if value is real_save:  # `from torch import save` in the module under test
            monkeypatch.setattr(checkpoint, name, failing_save)
    try:
        checkpoint.save_checkpoint(model, optimizer, 2, path)
    except NotImplementedError as exc:
        not_implemented(checkpoint.save_checkpoint, (model, optimizer, 2, path), {}, exc)
    except Exception:  # noqa: BLE001 - the injected OSError (or an error wrapping it) must propagate
        return True
    finally:
        monkeypatch.undo()
    return False


@pytest.fixture
def previous(checkpoint, tmp_path) -> tuple[Path, bytes]:
    """A checkpoint saved at iteration 1 (its path and bytes), for a later save to fail over."""
    path = tmp_path / "ckpt.pt"
    call(checkpoint.save_checkpoint, *trained_run(1), 1, path)
    return path, path.read_bytes()


FAILING = "{}(..., {}) while torch.save fails half-way (disk full)"


@pytest.mark.rule("P7.save-error-propagates")
def test_failed_save_raises(checkpoint, previous, monkeypatch):
    path, _ = previous
    check_true(save_failing_half_way(checkpoint, path, monkeypatch), FAILING.format(SAVE, path.name),
               "it returned normally", "the error propagates: a failed save must not look successful", SAVE)


@pytest.mark.rule("P7.save-keeps-previous")
def test_failed_save_leaves_previous_checkpoint(checkpoint, previous, monkeypatch):
    path, before = previous
    save_failing_half_way(checkpoint, path, monkeypatch)
    check_true(path.read_bytes() == before, FAILING.format(SAVE, path.name), "a changed file",
               "the previous checkpoint, byte for byte: write a temporary file, then os.replace it", SAVE)
    check_equal(loading(checkpoint.load_checkpoint), path, *make_run(), expected=1)


@pytest.mark.rule("P7.save-no-temp-file")
def test_failed_save_leaves_no_temporary_file(checkpoint, previous, monkeypatch):
    path, _ = previous
    save_failing_half_way(checkpoint, path, monkeypatch)
    check_true(os.listdir(path.parent) == ["ckpt.pt"], FAILING.format(SAVE, path.name),
               sorted(os.listdir(path.parent)), "['ckpt.pt']: remove the temporary file when the save fails", SAVE)


@pytest.mark.rule("P7.save-error-propagates", "P7.save-keeps-previous", "P7.save-no-temp-file")
def test_interrupted_save_leaves_only_the_previous_checkpoint(checkpoint, previous):
    path, before = previous
    raised, renames = call_interrupted_in_rename(checkpoint, checkpoint.save_checkpoint, *trained_run(1), 2, path)
    if not renames:
        return  # the file was moved some other way: nothing here interrupted it
    what = f"{SAVE}(..., {path.name}) over a checkpoint, interrupted (KeyboardInterrupt) in os.replace"
    hint = ("remove the temporary file on any exception, KeyboardInterrupt too (except BaseException, or "
            "try/finally), and re-raise it")
    check_true(isinstance(raised, KeyboardInterrupt), what,
               "returned normally" if raised is None else f"raised {described(raised)}",
               "the KeyboardInterrupt, propagated", SAVE, hint=hint)
    check_true(os.listdir(path.parent) == ["ckpt.pt"] and path.read_bytes() == before, what,
               sorted(os.listdir(path.parent)), "['ckpt.pt'], the previous checkpoint byte for byte", SAVE, hint=hint)


@pytest.mark.rule("P7.save-no-temp-file")
def test_successful_save_leaves_only_the_checkpoint(checkpoint, tmp_path):
    model, optimizer = trained_run(1)
    path = tmp_path / "ckpt.pt"
    for iteration in (1, 2):  # the second save replaces the first
        call(checkpoint.save_checkpoint, model, optimizer, iteration, path)
    check_true(os.listdir(tmp_path) == ["ckpt.pt"], f"{SAVE}(..., {path.name}) twice", sorted(os.listdir(tmp_path)),
               "['ckpt.pt'] and no temporary files", SAVE)
    check_equal(loading(checkpoint.load_checkpoint), path, *make_run(), expected=2)


class _Payload:
    """An object whose unpickling runs code: it creates the file named in its argument."""

    def __init__(self, marker: str) -> None:
        self.marker = marker

    def __reduce__(self):
        return (open, (self.marker, "w"))


@pytest.mark.rule("P7.refuses-code")
def test_checkpoint_with_code_is_refused(checkpoint, tmp_path):
    model, optimizer = make_run()
    path, marker = tmp_path / "evil.pt", tmp_path / "pwned"
    torch.save({"model": model.state_dict(), "optimizer": optimizer.state_dict(), "iteration": 1,
                "extra": {}, "payload": _Payload(str(marker))}, path)
    for fn, args in ((checkpoint.load_checkpoint, (path, model, optimizer)), (checkpoint.load_checkpoint_extras, (path,))):
        try:
            fn(*args)
        except NotImplementedError as exc:
            not_implemented(fn, args, {}, exc)
        except Exception as exc:  # noqa: BLE001 - refusing is right (torch raises pickle.UnpicklingError)
            check_true("refused: pickle.find_class" not in described(exc), f"checkpoint.{fn.__name__}(evil.pt, ...)",
                       f"raised {described(exc)}", "a refusal by torch.load(..., weights_only=True): the file was "
                       "unpickled with its globals, which only the sandbox stopped", f"checkpoint.{fn.__name__}")
        else:
            check_true(False, f"checkpoint.{fn.__name__}(evil.pt, ...)", "it loaded",
                       f"an error such as {pickle.UnpicklingError.__name__}: load with weights_only=True",
                       f"checkpoint.{fn.__name__}")
        check_true(not marker.exists(), f"checkpoint.{fn.__name__}(evil.pt, ...)", "the payload ran",
                   "the file's code never executed: load with torch.load(..., weights_only=True)",
                   f"checkpoint.{fn.__name__}")


@pytest.mark.rule("P7.restores-cuda-rng")
@pytest.mark.gpu
def test_cuda_rng_state_is_restored(checkpoint, tmp_path):
    model, optimizer = trained_run(1)
    model.cuda()
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-2)
    torch.cuda.manual_seed_all(0)
    path = tmp_path / "ckpt.pt"
    call(checkpoint.save_checkpoint, model, optimizer, 1, path)
    expected = torch.randn(8, device="cuda").cpu()
    torch.cuda.manual_seed_all(99)
    call(loading(checkpoint.load_checkpoint), path, model, optimizer)
    got = torch.randn(8, device="cuda").cpu()
    check_true(torch.equal(got, expected), f"{LOAD}(...) then torch.randn(8, device='cuda')", got,
               f"the draws made after the save, {expected.tolist()}", LOAD, "save and restore every CUDA device's RNG")
