"""Hidden suite for P7 (checkpoint.py): exact resume, file objects, extras, atomic saves, safe loads.

The judge drives everything: it builds models (dropout, batch norm) and optimizers in the worker
as library objects, stages them in a state it computed itself and calls the submission's
save_checkpoint. Every checkpoint saved is then loaded in a SECOND worker of the submission (the
``fresh`` fixture), which receives only the checkpoint's bytes from the judge: there the judge
scrambles every RNG, builds a fresh model and optimizer, calls load_checkpoint, then reads back
states and draws and orders training steps. The judge also reads each checkpoint itself, with
torch.load(weights_only=True), and finds in it the state it expects (grader/judge/drivers/
checkpoint_file.py). Every expected value comes from the judge running the same recipe on its own
torch objects (grader/judge/drivers/checkpoint.py): the state at the save, the draws right after it,
the uninterrupted run (a correct resume is bit-identical to it, so every comparison is exact).
Files are written in the exchange folder and read by the judge through grader/judge/drivers/folder.py
(bytes, listings, and for the hostile file the folder's inode, ctime and entries).
"""

from __future__ import annotations

import io
import math
import pickle

import numpy as np
import pytest
import torch
from hypothesis import example, given, settings
from hypothesis import strategies as st

from grader import wire
from grader.judge.drivers import checkpoint as drive
from grader.judge.drivers import checkpoint_file
from grader.judge.drivers.folder import Folder
from grader.judge.drivers.renames import interrupted_renames
from grader.judge.drivers.checkpoint_values import extras, iterations
from grader.judge.drivers.answers import same, shown

SAVE = "checkpoint.save_checkpoint"
LOAD = "checkpoint.load_checkpoint"
EXTRAS = "checkpoint.load_checkpoint_extras"
RNG_NAMES = {"torch": "torch's CPU generator (torch.get_rng_state)",
             "numpy": "numpy's global RNG (np.random.get_state, including its cached gaussian)",
             "python": "Python's random module (random.getstate)"}
# The iteration saved with a staged run: no other number in these checkpoints equals it, so the
# judge finding it in the file means it was saved.
ITERATION = 4099
SEEDED = 31337  # every RNG of the loading worker is seeded with it before load_checkpoint_extras


@pytest.fixture(scope="module")
def fresh(sub):
    """The worker every checkpoint is loaded in: it never ran a save, and gets only the bytes."""
    with drive.Loader(sub.sibling()) as loader:
        yield loader


# --- comparisons (exact: a resumed run must be bit-identical) -------------------------------------

def outcome(value: object) -> str:
    """``shown(value)``, where torch's refusal of a checkpoint names the rule the save broke, not torch's advice."""
    if isinstance(value, wire.Raised) and value.is_a(pickle.UnpicklingError):
        return f"raised UnpicklingError: {checkpoint_file.refused(value.message)}"
    return shown(value, limit=400)


def check_no_raise(value: object, what: str) -> None:
    assert not isinstance(value, wire.Raised), f"{what} {outcome(value)}, expected it to succeed"


def written(folder: Folder, name: str, call: str) -> bytes:
    """The checkpoint ``call`` left as ``name`` in ``folder``, read by the judge (a regular file only)."""
    data = folder.read(name, checkpoint_file.CHECKPOINT_BYTES + 1)
    assert data is not None, f"{call} left no regular file {name!r} (entries: {folder.listing()})"
    return data


def check_holds(data: bytes, call: str, **expected: object) -> None:
    """The checkpoint ``call`` wrote holds ``expected`` (see checkpoint_file.missing), as the judge reads it."""
    why = checkpoint_file.check(data, **expected)
    assert not why, (f"the checkpoint {call} wrote is not what was saved: {why} (read by the judge with "
                     "torch.load(weights_only=True); see handout.md, P7, 'What is graded')")


# --- tests --------------------------------------------------------------------------------------
# Where things come from: "expected" values are computed in the judge (drive.save_point runs the
# run on the judge's own torch objects); "got" values are read back from the objects the worker
# holds, or from the exchange folder on the judge's file system.

def bytes_in(buffer) -> bytes:
    """The whole content of a BytesIO the worker holds."""
    return buffer.call("getvalue")


@pytest.mark.rule("P7.iteration-count", "P7.returns-iteration")
@pytest.mark.points(1)
@settings(max_examples=20)
@given(iteration=iterations())
def test_iteration_round_trip(sub, fresh, iteration):
    """load_checkpoint returns the saved iteration as an int; bad iterations raise ValueError"""
    model, optimizer = drive.build_run(sub, "sgd_momentum")
    buffer = sub.lib("io.BytesIO")
    saved = sub.attempt(SAVE, model, optimizer, iteration, buffer)
    written = len(bytes_in(buffer))
    call = f"{SAVE}(model, optimizer, iteration={iteration!r}, BytesIO())"
    valid = math.isfinite(iteration) and iteration >= 0 and float(iteration).is_integer()
    if not valid:
        assert isinstance(saved, wire.Raised) and saved.is_a(ValueError), (
            f"{call} gave {shown(saved)}, expected ValueError: an iteration is a count (a whole number >= 0)")
        assert written == 0, f"{call} wrote {written} bytes before raising, expected nothing written"
        return
    check_no_raise(saved, call)
    data = bytes_in(buffer)
    check_holds(data, call, iteration=int(iteration))
    loaded = fresh.sub.attempt(LOAD, fresh.buffer(data), *drive.build_run(fresh.sub, "sgd_momentum"))
    check_no_raise(loaded, f"{LOAD}(...) after {call}")
    assert type(loaded) is int and loaded == int(iteration), (
        f"{LOAD}(...) after {call} returned {outcome(loaded)}, expected the int {int(iteration)}")


def save_and_reload(sub, fresh, point: drive.SavePoint, scramble: int = 12345) -> tuple:
    """Stage ``point`` in the worker and save it to a path with the submission's save_checkpoint;
    in the fresh worker, scramble every RNG and load the file's bytes into a fresh model and
    optimizer: (the file's bytes, what load returned, fresh model, fresh optimizer)."""
    call = f"{SAVE}(model, optimizer, {ITERATION}, path)"
    with Folder(sub, "resume") as folder:
        model, optimizer = drive.restore_point(sub, point)
        check_no_raise(sub.attempt(SAVE, model, optimizer, ITERATION, folder.path("ckpt.pt")), call)
        data = written(folder, "ckpt.pt", call)
    fresh_model, fresh_optimizer = drive.fresh_run(fresh.sub, point.optimizer_name, scramble)
    loaded = fresh.sub.attempt(LOAD, fresh.path(data), fresh_model, fresh_optimizer)
    check_no_raise(loaded, f"{LOAD}(path, fresh_model, fresh_optimizer) in a fresh process")
    return data, loaded, fresh_model, fresh_optimizer


@pytest.mark.rule("P7.restores-model", "P7.restores-optimizer")
@pytest.mark.points(1)
def test_model_and_optimizer_state_restored(sub, fresh):
    """load_checkpoint restores parameters, buffers and the optimizer's state into a fresh model"""
    # Saved after 3 steps, and before the first one (no state yet, a decayed lr all the same).
    for optimizer, warmup in (("adamw", 3), ("sgd_momentum", 3), ("adagrad", 3), ("adamw", 0)):
        point = drive.save_point(optimizer, warmup=warmup)  # expected: the judge's own run at the save
        data, iteration, model, loaded = save_and_reload(sub, fresh, point)
        check_holds(data, f"{SAVE}(model, {optimizer}, {ITERATION}, path)", model=point.model,
                    optimizer=point.optimizer, iteration=ITERATION)
        what = f"{LOAD}(path, fresh_model, fresh_{optimizer}) after {warmup} training steps, in a fresh process"
        assert iteration == ITERATION and type(iteration) is int, (
            f"{what} returned {outcome(iteration)}, expected the saved iteration {ITERATION}")
        bad = checkpoint_file.differing(point.model, drive.model_state(fresh.sub, model))
        assert not bad, (f"{what}: the model's state_dict entries {bad} differ from the saved model's "
                         "(parameters and buffers such as BatchNorm's running statistics must be restored)")
        bad = checkpoint_file.differing(point.optimizer_state, drive.optimizer_state(loaded))
        assert not bad, (f"{what}: the optimizer's state entries {bad} (<param index>.<name>) differ from the saved "
                         "optimizer's: save optimizer.state_dict() and load it with optimizer.load_state_dict()")
        saved_lr, got_lr = [group["lr"] for group in point.optimizer["param_groups"]], drive.learning_rates(loaded)
        assert got_lr == saved_lr, (
            f"{what}: the optimizer's lr is {got_lr}, expected the saved {saved_lr} (a schedule had lowered it from "
            f"the fresh optimizer's): its param_groups are part of optimizer.state_dict(), restored by load_state_dict")


@pytest.mark.rule("P7.restores-rngs", "P7.loads-safely")
@pytest.mark.points(1)
def test_every_rng_state_restored(sub, fresh):
    """load_checkpoint restores torch's, numpy's and Python's RNGs to their state at the save"""
    point = drive.save_point("adamw", warmup=3)  # expected draws: the judge's RNGs right after the save
    data, *_ = save_and_reload(sub, fresh, point)
    check_holds(data, f"{SAVE}(model, optimizer, {ITERATION}, path)", rng=point.rng)
    drawn = drive.draws(fresh.sub)  # the loading worker's RNGs, drawn by library calls the judge orders
    for name, description in RNG_NAMES.items():
        assert drawn[name] == point.draws[name], (
            f"after {LOAD}(...), {name} drew {drawn[name]}, expected {point.draws[name]} (what it drew right after "
            f"the save): save and restore {description}")


@pytest.mark.rule("P7.restores-model", "P7.restores-optimizer", "P7.restores-rngs")
@pytest.mark.points(1)
def test_resume_is_bit_identical(sub, fresh):
    """A run resumed from a checkpoint continues bit-identically to the uninterrupted run"""
    for optimizer, warmup in (("adamw", 3), ("sgd_momentum", 1)):
        point = drive.save_point(optimizer, warmup=warmup, steps=4)  # the uninterrupted run, in the judge
        data, _, model, loaded = save_and_reload(sub, fresh, point)
        check_holds(data, f"{SAVE}(model, {optimizer}, {ITERATION}, path)", model=point.model,
                    optimizer=point.optimizer, rng=point.rng, iteration=ITERATION)
        with drive.one_thread(fresh.sub):
            resumed = [drive.train_step(fresh.sub, model, loaded) for _ in range(4)]
        what = (f"save after {warmup} steps ({optimizer}), in a fresh process scramble all RNGs, {LOAD} into a "
                "fresh model and optimizer, train 4 steps (batches from torch, numpy and random, dropout)")
        assert resumed == point.losses, (
            f"{what}: losses {resumed}, expected exactly {point.losses} (the uninterrupted run)")
        bad = checkpoint_file.differing(point.final, drive.model_state(fresh.sub, model))
        assert not bad, f"{what}: the final {bad} are not bit-identical to the uninterrupted run's"


@pytest.mark.rule("P7.file-object-out", "P7.load-from-position")
@pytest.mark.points(1)
def test_file_objects(sub, fresh):
    """save and load work on file objects (BytesIO, open files) at their current position"""
    prefix = b"GRADER-PREFIX\x00\x01"
    point = drive.save_point("adamw", warmup=2)
    model, optimizer = drive.restore_point(sub, point)
    buffer = sub.lib("io.BytesIO")
    buffer.call("write", prefix)
    call = f"{SAVE}(model, optimizer, {ITERATION}, buffer, note='kept') on a BytesIO holding {len(prefix)} bytes"
    check_no_raise(sub.attempt(SAVE, model, optimizer, ITERATION, buffer, note="kept"), call)
    assert not buffer.get("closed"), f"{call} closed the buffer, expected it left open (it belongs to the caller)"
    content = bytes_in(buffer)
    assert content[: len(prefix)] == prefix and len(content) > len(prefix), (
        f"{call}: {len(content) - len(prefix)} bytes after the existing ones (prefix kept: "
        f"{content[:len(prefix)] == prefix}), expected the checkpoint written at the buffer's current position")
    check_holds(content[len(prefix):], call, model=point.model, iteration=ITERATION, extras={"note": "kept"})

    with Folder(sub, "file-objects") as folder:
        handle = sub.lib("builtins.open", folder.path("ckpt.bin"), "wb")
        handle.call("write", prefix)
        call = f"{SAVE}(..., open(path, 'wb') after writing {len(prefix)} bytes, ...)"
        check_no_raise(sub.attempt(SAVE, model, optimizer, ITERATION, handle, note="kept"), call)
        handle.call("close")
        on_disk = written(folder, "ckpt.bin", call)
    assert on_disk[: len(prefix)] == prefix and len(on_disk) > len(prefix), (
        f"{call} left {len(on_disk)} bytes in the file, expected the prefix kept and the checkpoint after it")
    check_holds(on_disk[len(prefix):], call, model=point.model, iteration=ITERATION, extras={"note": "kept"})

    # Loaded in the fresh worker, from the same bytes: a BytesIO, and the file opened there.
    for kind, source in (("buffer", "BytesIO"), ("file", "open(path, 'rb')")):
        src = fresh.buffer(content) if kind == "buffer" else fresh.sub.lib("builtins.open", fresh.path(on_disk), "rb")
        src.call("seek", len(prefix))
        fresh_model, fresh_optimizer = drive.fresh_run(fresh.sub, "adamw", 5)
        what = f"{LOAD}({source} positioned after the prefix, ...) in a fresh process"
        iteration = fresh.sub.attempt(LOAD, src, fresh_model, fresh_optimizer)
        assert iteration == ITERATION, f"{what} returned {outcome(iteration)}, expected {ITERATION}"
        bad = checkpoint_file.differing(point.model, drive.model_state(fresh.sub, fresh_model))
        assert not bad, f"{what}: the model entries {bad} differ from the saved model's"
        if kind == "buffer":
            bad = checkpoint_file.differing(point.optimizer_state, drive.optimizer_state(fresh_optimizer))
            assert not bad, f"{what}: the optimizer state entries {bad} differ from the saved optimizer's"
        src.call("seek", len(prefix))
        extras = fresh.sub.attempt(EXTRAS, src)
        assert same(extras, {"note": "kept"}), (
            f"{EXTRAS}(same file object) returned {outcome(extras)}, expected {{'note': 'kept'}}")


@pytest.mark.rule("P7.extras-allowed", "P7.extras-returned", "P7.extras-restore-nothing")
@pytest.mark.points(1)
@settings(max_examples=20)
@given(extra=extras(), to_path=st.booleans())
@example(extra={}, to_path=False)
@example(extra={"by_pair": {(0, 1): 2.5, (1, None): [torch.ones(2)]}}, to_path=False)  # a tuple is a key too
def test_extras_round_trip(sub, fresh, extra, to_path):
    """load_checkpoint_extras returns exactly the extras saved ({} for none) and restores nothing"""
    model, optimizer = drive.build_run(sub, "sgd_momentum")
    target = "path" if to_path else "BytesIO"
    call = f"{SAVE}(model, optimizer, 1, {target}, **{extra!r:.300})"
    if to_path:
        with Folder(sub, "extras") as folder:
            check_no_raise(sub.attempt(SAVE, model, optimizer, 1, folder.path("ckpt.pt"), **extra), call)
            data = written(folder, "ckpt.pt", call)
    else:
        buffer = sub.lib("io.BytesIO")
        check_no_raise(sub.attempt(SAVE, model, optimizer, 1, buffer, **extra), call)
        data = bytes_in(buffer)
    check_holds(data, call, extras=extra)
    source = fresh.path(data) if to_path else fresh.buffer(data)
    drive.seed_all(fresh.sub, SEEDED)
    got = fresh.sub.attempt(EXTRAS, source)
    assert same(got, extra), (f"{EXTRAS}(...) in a fresh process after {call} returned {outcome(got)}, "
                              "expected the same values with the same types")
    drawn = drive.draws(fresh.sub)
    changed = [RNG_NAMES[name] for name, want in drive.seeded_draws(SEEDED).items() if drawn[name] != want]
    assert not changed, (f"{EXTRAS}(...) in a fresh process after {call} changed the state of {'; '.join(changed)}: "
                         "it returns the extras and restores nothing")


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
        "dict subclass (collections.defaultdict)": sub.lib("collections.defaultdict", None, {"a": [1]}),
        "numpy value in a list": [1.0, np.float32(2.0)],
        "numpy value deep in a dict": {"a": {"b": (1, np.int32(2))}},
        "numpy dict key": {np.int64(1): "one"},
        "function": sub.lib("builtins.getattr", sub.lib("importlib.import_module", "builtins"), "len"),
    }


@pytest.mark.rule("P7.extras-refused")
@pytest.mark.points(1)
def test_unsafe_extras_refused_before_writing(sub):
    """Extras that would not load with weights_only=True raise ValueError and nothing is written"""
    point = drive.save_point("sgd_momentum", warmup=1)
    model, optimizer = drive.restore_point(sub, point)
    with Folder(sub, "refused") as folder:
        path = folder.path("ckpt.pt")
        call = f"{SAVE}(model, optimizer, {ITERATION}, path)"
        check_no_raise(sub.attempt(SAVE, model, optimizer, ITERATION, path), call)
        before = written(folder, "ckpt.pt", call)
        check_holds(before, call, model=point.model, optimizer=point.optimizer, iteration=ITERATION)
        for label, value in unsafe_extras(sub).items():
            call = f"{SAVE}(..., bad=<{label}>)"
            buffer = sub.lib("io.BytesIO")
            for target, out, kwargs in (("a path", path, {"good": 1.0}), ("a BytesIO", buffer, {})):
                raised = sub.attempt(SAVE, model, optimizer, 2, out, **kwargs, bad=value)
                assert isinstance(raised, wire.Raised) and raised.is_a(ValueError), (
                    f"{call} to {target} gave {shown(raised)}, expected ValueError: only tensors, Python bool/int/"
                    "float/complex, str, None and lists, tuples and dicts of them (keys included, exact types) "
                    "load safely")
            files, intact = folder.listing(), folder.read("ckpt.pt", len(before) + 1) == before
            assert intact and files == ["ckpt.pt"], (
                f"{call} over an existing checkpoint left {files} (previous checkpoint intact: {intact}), "
                "expected the previous checkpoint untouched and no other file: validate before writing")
            written_bytes = len(bytes_in(buffer))
            assert written_bytes == 0, f"{call} to a BytesIO wrote {written_bytes} bytes, expected 0: validate before writing"


@pytest.mark.rule("P7.save-error-propagates", "P7.save-keeps-previous", "P7.save-no-temp-file")
@pytest.mark.points(1)
def test_failed_save_is_atomic(sub, fresh):
    """A save that fails half-way, or is interrupted, leaves the previous checkpoint intact and no temporary file"""
    model, optimizer = drive.build_run(sub, "adamw")
    with Folder(sub, "atomic") as folder:
        path = folder.path("ckpt.pt")
        check_no_raise(sub.attempt(SAVE, model, optimizer, 1, path), f"{SAVE}(model, optimizer, 1, 'ckpt.pt')")
        files = folder.listing()
        assert files == ["ckpt.pt"], f"{SAVE}(..., 'ckpt.pt') left {files} in its directory, expected only ['ckpt.pt']"
        before = written(folder, "ckpt.pt", f"{SAVE}(model, optimizer, 1, 'ckpt.pt')")
        check_holds(before, f"{SAVE}(model, optimizer, 1, 'ckpt.pt')", iteration=1)
        # The failure: the optimizer's hyperparameters hold a lock, which pickle refuses only once
        # torch.save is under way (the output already opened), as a full disk would fail it.
        group = optimizer.get("param_groups", keep=True).call("__getitem__", 0, keep=True)
        group.call("__setitem__", "lock", sub.lib("threading.Lock"))
        call = (f"{SAVE}(model, optimizer, 2, 'ckpt.pt') while torch.save fails part-way (the optimizer's state "
                "holds a threading.Lock, which cannot be pickled)")
        second = sub.attempt(SAVE, model, optimizer, 2, path)
        group.call("pop", "lock")
        assert isinstance(second, wire.Raised), (
            f"{call} returned {shown(second)}, expected the error to propagate (a failed save must not look successful)")
        after = folder.read("ckpt.pt", len(before) + 1)
        assert after == before, (
            f"{call} changed the previous 'ckpt.pt', expected it byte-for-byte intact: write to a "
            "temporary file in the same directory, fsync, then os.replace it over the target")
        files = folder.listing()
        assert files == ["ckpt.pt"], (
            f"{call} left {files} in the directory, expected only ['ckpt.pt']: remove the temporary file on error")
        loaded = fresh.sub.attempt(LOAD, fresh.path(after), *drive.build_run(fresh.sub, "adamw"))
        assert loaded == 1, (f"{LOAD}('ckpt.pt', ...) in a fresh process after the failed save returned "
                             f"{outcome(loaded)}, expected 1")
        with interrupted_renames(sub, "checkpoint") as renames:
            interrupted = sub.attempt(SAVE, model, optimizer, 2, path)
            moved = renames()
        if moved:  # a file moved some other way is not interrupted here
            files, intact = folder.listing(), folder.read("ckpt.pt", len(before) + 1) == before
            assert isinstance(interrupted, wire.Raised) and interrupted.is_a(KeyboardInterrupt) and intact \
                and files == ["ckpt.pt"], (
                f"{SAVE}(model, optimizer, 2, 'ckpt.pt') interrupted (KeyboardInterrupt) in os.replace gave "
                f"{shown(interrupted)} and left {files} (previous checkpoint intact: {intact}), expected the "
                "KeyboardInterrupt to propagate and only the previous 'ckpt.pt', intact: remove the temporary file on "
                "any exception, KeyboardInterrupt too (except BaseException, or try/finally), and re-raise it")
        third = sub.attempt(SAVE, model, optimizer, 3, path)
        check_no_raise(third, f"{SAVE}(model, optimizer, 3, 'ckpt.pt') after the failure")
        files = folder.listing()
        last = written(folder, "ckpt.pt", f"{SAVE}(model, optimizer, 3, 'ckpt.pt')")
        check_holds(last, f"{SAVE}(model, optimizer, 3, 'ckpt.pt') after the failure", iteration=3)
    loaded = fresh.sub.attempt(LOAD, fresh.path(last), *drive.build_run(fresh.sub, "adamw"))
    assert files == ["ckpt.pt"] and loaded == 3, (
        f"a later successful save left {files} and loads in a fresh process as iteration {outcome(loaded)}, "
        "expected ['ckpt.pt'] holding iteration 3")


@pytest.mark.rule("P7.refuses-code")
@pytest.mark.points(1)
def test_checkpoint_carrying_code_is_refused(sub, fresh):
    """A checkpoint whose pickle carries code is refused and the code never runs"""
    model, optimizer = drive.build_run(sub, "adamw")
    with Folder(sub, "legit") as folder:
        call = f"{SAVE}(model, optimizer, 1, 'legit.pt', note='ok')"
        check_no_raise(sub.attempt(SAVE, model, optimizer, 1, folder.path("legit.pt"), note="ok"), call)
        legit = written(folder, "legit.pt", call)
        check_holds(legit, call, iteration=1, extras={"note": "ok"})
    loaded = fresh.sub.attempt(LOAD, fresh.path(legit), *drive.build_run(fresh.sub, "adamw"))
    assert loaded == 1, (f"{LOAD}('legit.pt', ...) of an ordinary checkpoint, in a fresh process, returned "
                         f"{outcome(loaded)}, expected 1")
    extras = fresh.sub.attempt(EXTRAS, fresh.path(legit))
    assert same(extras, {"note": "ok"}), (
        f"{EXTRAS}('legit.pt') of an ordinary checkpoint returned {outcome(extras)}, expected {{'note': 'ok'}}")
    point = drive.save_point("adamw", warmup=1)
    for loader in ("load_checkpoint", "load_checkpoint_extras"):
        # The judge writes the file; its code would make a folder in a folder the judge watches
        # through its descriptor (inode, ctime, mode, entries): hiding the trace changes them too.
        with Folder(sub, f"trap-{loader}") as trap:
            hostile = io.BytesIO()
            torch.save(drive.hostile_checkpoint(point, trap.path("pwned")), hostile)
            evil = trap.write("evil.pt", hostile.getvalue())
            before = drive.settle(trap)
            run = drive.build_run(sub, "adamw") if loader == "load_checkpoint" else ()
            result = sub.attempt(f"checkpoint.{loader}", evil, *run)
            after = trap.snapshot()
        call = f"checkpoint.{loader}('evil.pt', ...) on a file whose unpickling would create a folder"
        trace = "the trace is there" if "pwned" in after[3] else "the trace was hidden"
        assert after == before, (
            f"{call}: the file's code RAN (its folder changed: {trace}), "
            "expected it never executed: load with torch.load(..., weights_only=True)")
        assert isinstance(result, wire.Raised), (
            f"{call} returned {shown(result)}, expected an error "
            "(torch raises pickle.UnpicklingError with weights_only=True)")


@pytest.mark.rule("P7.restores-cuda-rng")
@pytest.mark.points(1)
@pytest.mark.gpu
def test_cuda_rng_and_model_restored(sub, fresh):
    """On CUDA, load_checkpoint restores the CUDA generator and a CUDA model and optimizer"""
    # Expected draws: the judge seeds its own CUDA generator, notes that state, and draws. The
    # worker's generator is set to that state right before the save; the checkpoint is loaded in
    # the fresh worker. Not run on a CPU-only host: the CUDA calls of this test are verified only
    # where a GPU is present.
    with torch.random.fork_rng(devices=[0]):
        torch.cuda.manual_seed(2024)
        cuda_state = torch.cuda.get_rng_state()
        expected = torch.randn(16, device="cuda").cpu()
    point = drive.save_point("adamw", warmup=2)
    model, optimizer = drive.restore_point(sub, point, device="cuda")
    sub.lib("torch.cuda.set_rng_state", cuda_state)
    buffer = sub.lib("io.BytesIO")
    call = f"{SAVE}(cuda_model, optimizer, {ITERATION}, BytesIO())"
    check_no_raise(sub.attempt(SAVE, model, optimizer, ITERATION, buffer), call)
    data = bytes_in(buffer)
    check_holds(data, call, model=point.model, iteration=ITERATION)
    fresh.sub.lib("torch.cuda.manual_seed_all", 999)
    fresh_model, fresh_optimizer = drive.build_run(fresh.sub, "adamw", device="cuda")
    iteration = fresh.sub.attempt(LOAD, fresh.buffer(data), fresh_model, fresh_optimizer)
    assert iteration == ITERATION, (
        f"{LOAD}(...) of a CUDA run in a fresh process returned {outcome(iteration)}, expected {ITERATION}")
    got = fresh.sub.lib("torch.randn", 16, device="cuda").read()
    parameters = fresh.sub.lib("builtins.list", fresh_model.call("parameters", keep=True))
    devices = sorted({str(parameters.call("__getitem__", i, keep=True).get("device"))
                      for i in range(parameters.call("__len__"))})
    assert devices == ["cuda:0"], f"after {LOAD}(...) the model's parameters are on {devices}, expected cuda:0"
    bad = checkpoint_file.differing(point.model, drive.model_state(fresh.sub, fresh_model))
    assert not bad, f"{LOAD}(...) into a fresh CUDA model: entries {bad} differ from the saved model's"
    assert same(got, expected), (
        f"after {LOAD}(...), torch.randn(16, device='cuda') drew {got.tolist()[:4]}..., expected "
        f"{expected.tolist()[:4]}... (the draws right after the save): save torch.cuda.get_rng_state_all() "
        "and restore every device's generator")
    # the restored optimizer state must live on the parameters' device: one step must run
    with drive.one_thread(fresh.sub):
        drive.train_step(fresh.sub, fresh_model, fresh_optimizer, device="cuda")
