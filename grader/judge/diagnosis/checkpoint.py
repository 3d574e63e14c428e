"""P7's known mistakes, named by what a checkpointing implementation does rather than by a replay.

P7's hidden tests save in one worker, read the file in the judge and load its bytes in a second
worker: no recording of one worker's requests can be replayed. For P7's failed tests the judge
instead runs one fixed probe (``signature``) on the student's functions, in two fresh workers of
the submission (one saves, the other loads the bytes, as the suite does; started once the suite's
own workers are closed, ``grader.judge.plugin``), and the same probe on the reference and on each
known variant IN THE JUDGE (kit code, never the student's), from the judge's own copy of the same
save point. The signature holds only what the judge itself observes: what the saved file holds
(read in the judge with ``torch.load(weights_only=True)``, ``checkpoint_file``), whether a file
object was closed or its prefix lost, what loading that file restores into a run whose RNGs were
scrambled (the returned iteration, the model's and optimizer's differing entries, each
generator's next draws), the extras read back, which bad iterations and extras are refused
(exception types), what a save that fails half-way leaves in its folder, and whether a file
carrying code is refused. Each side loads the file it saved, so the file's layout never matters.
A variant whose signature is the student's is named on a failed test only when it differs from
the reference in an observation that bears on that test (``OBSERVED_BY``): a second, unprobed
mistake failing another test is not blamed on the probed one.
"""

from __future__ import annotations

import io
import pickle
import tempfile
from pathlib import Path
from types import ModuleType
from typing import Any, Callable

import numpy as np
import torch

from ... import wire
from ..drivers import checkpoint as drive
from ..drivers import checkpoint_file
from ..drivers.folder import Folder
from ..drivers.answers import same
from ..drivers.sides import JUDGE, Handle, Side
from ..handle import Submission
from . import probe
from .probe import Signature, raised

PREFIX = b"KIT-DIAGNOSIS\x00"  # a file object is written and read at its current position, after this
ITERATION = 4099  # no other number in these checkpoints equals it
EXTRAS = {"note": "kept", "scale": 0.5, "ids": [1, 2]}
SAVE_STEPS = 3  # training steps before the save: an odd count of gaussians leaves numpy one cached
SCRAMBLE = 77  # every RNG of the loading side is seeded with this before the load
BAD_ITERATIONS = (-1, 2.5, 2000.0)
BAD_EXTRAS: dict[str, Callable[[Side], Any]] = {  # values that do not load with weights_only=True
    "numpy float64": lambda side: np.float64(1.5),
    "numpy dict key": lambda side: {np.int64(1): "one"},
    "numpy value in a list": lambda side: [1.0, np.float32(2.0)],
    "set": lambda side: side.lib("builtins.set", [1, 2]),
}
# The observations that bear on each hidden P7 test (grader/judge/hidden/test_p7_checkpoint.py): a
# variant is named on a failed test only when it differs from the reference in one of them.
OBSERVED_BY = {
    "test_iteration_round_trip": ("save", "load", "bad iterations"),
    "test_model_and_optimizer_state_restored": ("save", "load"),
    "test_every_rng_state_restored": ("save", "load"),
    "test_resume_is_bit_identical": ("save", "load"),
    "test_file_objects": ("save", "load", "extras"),
    "test_extras_round_trip": ("save", "extras"),
    "test_unsafe_extras_refused_before_writing": ("save", "bad extras"),
    "test_failed_save_is_atomic": ("save", "load", "failed save"),
    "test_checkpoint_carrying_code_is_refused": ("save", "load", "extras", "code-carrying file"),
    "test_cuda_rng_and_model_restored": ("save", "load"),
}


class Student:
    """The submission's functions, called in two fresh workers of it (one saves, the other loads)."""

    def __init__(self, saver: Submission, loader: Submission) -> None:
        self.saver, self.loader = saver, loader

    def save(self, *args: Any, **kwargs: Any) -> Any:
        return self.saver.attempt("checkpoint.save_checkpoint", *args, **kwargs)

    def load(self, *args: Any) -> Any:
        return self.loader.attempt("checkpoint.load_checkpoint", *args)

    def extras(self, src: Handle) -> Any:
        return self.loader.attempt("checkpoint.load_checkpoint_extras", src)

    def folder(self) -> Folder:
        return Folder(self.saver, "diagnosis")


class InJudge:
    """A variant's functions (its ``checkpoint`` module: kit code) called in the judge on judge objects."""

    saver = loader = JUDGE

    def __init__(self, module: ModuleType) -> None:
        self.module = module

    def save(self, *args: Any, **kwargs: Any) -> Any:
        return probe.attempt(self.module.save_checkpoint, *args, **kwargs)

    def load(self, *args: Any) -> Any:
        return probe.attempt(self.module.load_checkpoint, *args)

    def extras(self, src: Handle) -> Any:
        return probe.attempt(self.module.load_checkpoint_extras, src)

    def folder(self) -> JudgeFolder:
        return JudgeFolder()


class JudgeFolder:
    """A temporary folder of the judge with the reading interface of ``drivers.folder.Folder``."""

    def __enter__(self) -> JudgeFolder:
        self._temporary = tempfile.TemporaryDirectory(prefix="kit-diagnosis-")
        self.root = Path(self._temporary.name)
        return self

    def __exit__(self, *exc: object) -> None:
        self._temporary.cleanup()

    def path(self, name: str) -> str:
        return str(self.root / name)

    def read(self, name: str, limit: int) -> bytes | None:
        path = self.root / name
        return path.read_bytes()[:limit] if path.is_file() else None

    def listing(self) -> list[str]:
        return sorted(entry.name for entry in self.root.iterdir())


def returned(attempt: Any) -> tuple:
    """A value as the signature keeps it: its type, and the value itself when it is a plain scalar."""
    if raised(attempt):
        return ("raised", raised(attempt))
    plain = type(attempt) in (bool, int, float, str, type(None))
    return (type(attempt).__name__, attempt if plain else None)


def content(buffer: Handle) -> bytes | None:
    """What a ``BytesIO`` holds (None once closed)."""
    return None if buffer.get("closed") else buffer.call("getvalue")


def held(data: bytes | None, point: drive.SavePoint) -> tuple:
    """What of the saved state the file (after ``PREFIX``) holds, read in the judge: what it misses."""
    if data is None or data[: len(PREFIX)] != PREFIX:
        return ("no file after the prefix",)
    try:
        content = checkpoint_file.load(data[len(PREFIX):])
    except checkpoint_file.Unreadable:
        return ("unreadable with weights_only=True",)
    return tuple(checkpoint_file.missing(content, model=point.model, optimizer=point.optimizer, iteration=ITERATION,
                                         rng=point.rng, extras=EXTRAS))


def iteration_kept(data: bytes | None, iteration: float) -> tuple:
    """The types of the numbers equal to ``iteration`` in the file, read in the judge."""
    if data is None:
        return ("closed",)
    try:
        content = checkpoint_file.load(data)
    except checkpoint_file.Unreadable:
        return ("unreadable",)
    return tuple(sorted({type(v).__name__ for v in checkpoint_file.values(content)
                         if type(v) in (int, float) and v == iteration}))


def extras_read(attempt: Any) -> tuple:
    """What ``load_checkpoint_extras`` gave back, against ``EXTRAS``."""
    if raised(attempt):
        return ("raised", raised(attempt))
    if same(attempt, EXTRAS):
        return ("the extras",)
    return ("a dict holding them and more",) if checkpoint_file.holds_extras(attempt, EXTRAS) else ("other",)


def signature(implementation: Student | InJudge, point: drive.SavePoint) -> Signature:
    """The probe: what ``implementation`` does, each observation made by the judge."""
    seen: Signature = {}
    saver, loader = implementation.saver, implementation.loader
    model, optimizer = drive.restore_point(saver, point)
    buffer = saver.lib("io.BytesIO")
    buffer.call("write", PREFIX)
    attempt = implementation.save(model, optimizer, ITERATION, buffer, **EXTRAS)
    data = None if raised(attempt) else content(buffer)
    seen["save"] = (raised(attempt), data is None, held(data, point))
    if data is not None:
        src = loader.lib("io.BytesIO", data)
        src.call("seek", len(PREFIX))
        fresh_model, fresh_optimizer = drive.fresh_run(loader, "adamw", SCRAMBLE)
        iteration = implementation.load(src, fresh_model, fresh_optimizer)
        draws = tuple((name, tuple(values)) for name, values in drive.draws(loader).items())
        seen["load"] = (returned(iteration),
                        tuple(checkpoint_file.differing(point.model, drive.model_state(loader, fresh_model))),
                        tuple(checkpoint_file.differing(point.optimizer_state, drive.optimizer_state(fresh_optimizer))),
                        draws)
        src.call("seek", len(PREFIX))
        seen["extras"] = extras_read(implementation.extras(src))
    iterations, extras = [], []
    for bad in BAD_ITERATIONS:
        buffer = saver.lib("io.BytesIO")
        attempt = implementation.save(model, optimizer, bad, buffer)
        iterations.append((raised(attempt),) if raised(attempt) else iteration_kept(content(buffer), bad))
    for make in BAD_EXTRAS.values():
        buffer = saver.lib("io.BytesIO")
        attempt = implementation.save(model, optimizer, 1, buffer, bad=make(saver))
        extras.append((raised(attempt), bool(content(buffer))))
    seen["bad iterations"], seen["bad extras"] = tuple(iterations), tuple(extras)
    seen["failed save"] = failed_save(implementation, model, optimizer)
    seen["code-carrying file"] = code_refused(implementation, point)
    return seen


class Harmless:
    """Unpickling it calls ``len((1, 2, 3))``: code in a checkpoint that weights_only=True refuses, and that
    does nothing where a loader without it runs it (in a variant of the judge, or in the student's worker)."""

    def __reduce__(self) -> tuple:
        return len, ((1, 2, 3),)


def code_refused(implementation: Student | InJudge, point: drive.SavePoint) -> tuple:
    """Whether each loader refuses a checkpoint (in every layout) that carries code: True when it raised
    pickle's UnpicklingError, as torch.load(weights_only=True) does."""
    buffer = io.BytesIO()
    code = Harmless()
    torch.save({"model": point.model, "optimizer": point.optimizer, "iteration": 1, "extra": {"x": code},
                "extras": {"x": code}, "payload": code}, buffer)
    loader = implementation.loader
    attempts = (implementation.load(loader.lib("io.BytesIO", buffer.getvalue()), *drive.build_run(loader, "adamw")),
                implementation.extras(loader.lib("io.BytesIO", buffer.getvalue())))
    return tuple(isinstance(attempt, wire.Raised) and attempt.is_a(pickle.UnpicklingError) for attempt in attempts)


def failed_save(implementation: Student | InJudge, model: Handle, optimizer: Handle) -> tuple:
    """A save to a path, then one that torch.save fails part-way (a lock in the optimizer's hyperparameters,
    as the hidden suite does): what each raised, and what the folder holds after each."""
    with implementation.folder() as folder:
        first = implementation.save(model, optimizer, 1, folder.path("ckpt.pt"))
        before, entries = folder.read("ckpt.pt", checkpoint_file.CHECKPOINT_BYTES), len(folder.listing())
        group = optimizer.get("param_groups", keep=True).call("__getitem__", 0, keep=True)
        group.call("__setitem__", "lock", implementation.saver.lib("threading.Lock"))
        second = implementation.save(model, optimizer, 2, folder.path("ckpt.pt"))
        group.call("pop", "lock")
        after = folder.read("ckpt.pt", checkpoint_file.CHECKPOINT_BYTES)
        return raised(first), entries, bool(raised(second)), after == before, len(folder.listing())


def of_student(submission: Submission, seconds: float) -> Signature | None:
    """The student's signature, from two fresh workers of the submission (one saves, the other loads) within
    ``seconds`` (None: nothing is known)."""
    point = drive.save_point("adamw", warmup=SAVE_STEPS)
    return probe.of_student(submission, seconds, "P7", 2, lambda saver, loader: signature(Student(saver, loader), point))


def of_variant(module: ModuleType) -> Signature:
    """A variant's signature, its ``checkpoint`` module run in the judge."""
    return signature(InJudge(module), drive.save_point("adamw", warmup=SAVE_STEPS))
