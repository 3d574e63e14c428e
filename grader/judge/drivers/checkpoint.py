"""P7: training runs driven step by step, by one recipe, in the worker and in the judge.

Every recipe below takes a *side* (``drivers/__init__.py``): the submission or ``JUDGE``. Each (building a run, a training step, drawing from each RNG, reading a state) is
written once over that interface, so the values the judge expects come from exactly the sequence
of library calls it orders in the worker. Only the submission's own functions
(``checkpoint.save_checkpoint`` and the loaders) run in the worker without the judge ordering them.
Checkpoints are loaded in a second worker (``Loader``), which the judge hands only their bytes.
"""

from __future__ import annotations

import contextlib
import posix
import random
import threading
import time
from dataclasses import dataclass
from typing import Any, Iterator

import numpy as np
import torch

from grader.judge.handle import Remote, StudentError, Submission

from .folder import Folder
from .sides import JUDGE, Handle, Side, one_thread

OPTIMIZERS = {
    "adamw": ("torch.optim.AdamW", {"lr": 1e-2, "weight_decay": 0.1}),
    "sgd_momentum": ("torch.optim.SGD", {"lr": 1e-2, "momentum": 0.9}),
    "adagrad": ("torch.optim.Adagrad", {"lr": 1e-2}),
}
# A folder's ctime moves in steps of the kernel's coarse clock (a few milliseconds): waiting one
# step after staging a folder makes any later change to it show.
CLOCK_STEP_SECONDS = 0.02


# --- recipes (one for both sides) ---------------------------------------------------------------

def build_run(side: Side, optimizer: str = "adamw", device: str = "cpu") -> tuple[Handle, Handle]:
    """A model with dropout (torch's RNG) and batch norm (buffers), and a stateful optimizer."""
    model = side.lib("torch.nn.Sequential", side.lib("torch.nn.Linear", 6, 16), side.lib("torch.nn.BatchNorm1d", 16),
                     side.lib("torch.nn.ReLU"), side.lib("torch.nn.Dropout", 0.3), side.lib("torch.nn.Linear", 16, 2))
    model.call("to", device)
    name, options = OPTIMIZERS[optimizer]
    return model, side.lib(name, model.call("parameters", keep=True), **options)


def train_step(side: Side, model: Handle, optimizer: Handle, device: str = "cpu") -> float:
    """One step drawing from every RNG a loop may use: torch (the batch, dropout), numpy (rows,
    and an odd count of gaussians, which leaves one cached) and Python's random."""
    data = side.lib("torch.randn", 32, 6, device=device)
    rows = side.lib("torch.from_numpy", side.lib("numpy.random.randint", 0, 32, size=8)).call("to", device, keep=True)
    shift = side.lib("numpy.random.normal", size=3).read()
    target = side.lib("random.gauss", 0.0, 1.0).read() + side.lib("random.random").read() + float(shift[0])
    out = model.call("__call__", data.call("index_select", 0, rows, keep=True), keep=True)
    loss = out.call("sub", target, keep=True).call("pow", 2, keep=True).call("mean", keep=True)
    optimizer.call("zero_grad")
    loss.call("backward")
    optimizer.call("step")
    return float(loss.read())


def seed_all(side: Side, seed: int) -> None:
    side.lib("torch.manual_seed", seed)
    side.lib("numpy.random.seed", seed)
    side.lib("random.seed", seed)


def rng_states(side: Side) -> tuple:
    return (side.lib("torch.get_rng_state").read(), side.lib("numpy.random.get_state").read(),
            side.lib("random.getstate").read())


def set_rng_states(side: Side, states: tuple) -> None:
    side.lib("torch.set_rng_state", states[0])
    side.lib("numpy.random.set_state", states[1])
    side.lib("random.setstate", states[2])


def draws(side: Side) -> dict[str, list[float]]:
    """The next draws of torch's, numpy's (uniform, then gaussian) and Python's RNGs."""
    return {"torch": side.lib("torch.rand", 4).read().tolist(),
            "numpy": side.lib("numpy.random.random", 2).read().tolist()
            + side.lib("numpy.random.normal", size=2).read().tolist(),
            "python": [side.lib("random.random").read(), side.lib("random.gauss", 0.0, 1.0).read()]}


def model_state(side: Side, model: Handle) -> dict[str, torch.Tensor]:
    return side.lib("builtins.dict", model.call("state_dict", keep=True)).read()


def optimizer_state(optimizer: Handle) -> dict[str, Any]:
    """The optimizer's per-parameter state as "<param index>.<name>" -> tensor or number."""
    state = optimizer.call("state_dict")["state"]
    return {f"{index}.{name}": value for index, (_, entry) in enumerate(sorted(state.items()))
            for name, value in entry.items()}


# --- the oracle: the same run, in the judge ------------------------------------------------------

@dataclass(frozen=True)
class SavePoint:
    """A run at the moment of saving (computed in the judge), and how it goes on uninterrupted."""

    optimizer_name: str
    model: dict[str, torch.Tensor]
    optimizer: dict  # the full state_dict, to stage the worker's optimizer
    optimizer_state: dict[str, Any]  # its per-parameter entries, to compare with
    rng: tuple
    draws: dict[str, list[float]]  # what every RNG draws right after the save
    losses: list[float]  # the next steps' losses, uninterrupted
    final: dict[str, torch.Tensor]  # the model after those steps


@contextlib.contextmanager
def _judge_rngs() -> Iterator[None]:
    """The judge's own global RNGs, put back as they were afterwards."""
    states = torch.get_rng_state(), np.random.get_state(), random.getstate()
    try:
        yield
    finally:
        torch.set_rng_state(states[0])
        np.random.set_state(states[1])
        random.setstate(states[2])


LR_DECAY = 0.5  # a schedule's step before the save: the lr to restore is not the one a fresh optimizer starts with


def decay_lr(side: Side, optimizer: Handle) -> None:
    """Multiply every param group's lr by ``LR_DECAY``, as a learning-rate schedule would."""
    state = optimizer.call("state_dict")
    for group in state["param_groups"]:
        group["lr"] *= LR_DECAY
    optimizer.call("load_state_dict", state)


def learning_rates(optimizer: Handle) -> list[float]:
    """Each param group's lr, in order."""
    return [group["lr"] for group in optimizer.call("state_dict")["param_groups"]]


def save_point(optimizer: str, warmup: int, steps: int = 0, seed: int = 0) -> SavePoint:
    """Train ``warmup`` steps in the judge, decay the lr (``decay_lr``), note everything at that point, then go
    on ``steps``."""
    with _judge_rngs(), one_thread(JUDGE):
        seed_all(JUDGE, seed)
        model, opt = build_run(JUDGE, optimizer)
        for _ in range(warmup):
            train_step(JUDGE, model, opt)
        decay_lr(JUDGE, opt)
        saved_model, saved_optimizer, rng = model_state(JUDGE, model), opt.call("state_dict"), rng_states(JUDGE)
        saved_entries = optimizer_state(opt)
        expected_draws = draws(JUDGE)
        set_rng_states(JUDGE, rng)
        losses = [train_step(JUDGE, model, opt) for _ in range(steps)]
        return SavePoint(optimizer, saved_model, saved_optimizer, saved_entries, rng, expected_draws, losses,
                         model_state(JUDGE, model))


def seeded_draws(seed: int) -> dict[str, list[float]]:
    """What every RNG draws right after ``seed_all(side, seed)``, drawn in the judge."""
    with _judge_rngs():
        seed_all(JUDGE, seed)
        return draws(JUDGE)


def restore_point(side: Side, point: SavePoint, device: str = "cpu") -> tuple[Handle, Handle]:
    """A run on ``side`` in exactly the state of ``point``: weights, buffers, optimizer, RNGs."""
    model, opt = build_run(side, point.optimizer_name, device)
    model.call("load_state_dict", point.model)
    opt.call("load_state_dict", point.optimizer)
    set_rng_states(side, point.rng)
    return model, opt


def fresh_run(side: Side, optimizer: str, seed: int, device: str = "cpu") -> tuple[Handle, Handle]:
    """Every RNG scrambled and a new run built from them: nothing left of a saved state."""
    seed_all(side, seed)
    return build_run(side, optimizer, device)


# --- files and the worker that loads them -------------------------------------------------------

def settle(folder: Folder) -> tuple:
    """The folder's snapshot once the coarse clock has moved past its last change."""
    time.sleep(CLOCK_STEP_SECONDS)
    return folder.snapshot()


class Loader:
    """A second worker of the submission, where every checkpoint the suite saves is loaded: the
    judge hands it the checkpoint's bytes (as a file in its exchange folder, or a ``BytesIO``) and
    nothing else, so a load there can only restore what the file holds."""

    def __init__(self, sub: Submission) -> None:
        self._sub = sub
        self._folder: Folder | None = None
        self._generation = -1
        self._count = 0
        self._warm, self._closed = threading.Event(), threading.Event()
        self._thread = threading.Thread(target=self._warm_up, daemon=True)
        self._thread.start()

    def _warm_up(self) -> None:
        """Start the worker and build a run there (torch.optim's first use costs about as much as
        the start) while the suite works in the other worker; a failure shows on the next request.
        The thread lives until the worker is closed: the worker dies with the thread that started
        it (bubblewrap's --die-with-parent)."""
        with contextlib.suppress(StudentError):
            build_run(self._sub)
        self._warm.set()
        self._closed.wait()

    @property
    def sub(self) -> Submission:
        """The loading worker's session, once warmed up."""
        self._warm.wait()
        return self._sub

    def __enter__(self) -> Loader:
        return self

    def __exit__(self, *exc: object) -> None:
        if self._folder is not None:
            self._folder.__exit__()
        self.sub.close()
        self._closed.set()
        self._thread.join()

    def path(self, data: bytes) -> str:
        """A new file holding ``data`` in this worker's exchange folder; its path as the worker sees it."""
        if self._folder is None or self._generation != self.sub.backend.restarts:  # a restart empties the exchange
            if self._folder is not None:
                self._folder.__exit__()
            self._folder = Folder(self.sub, "loaded")
            self._generation = self.sub.backend.restarts
        self._count += 1
        return self._folder.write(f"ckpt-{self._count}.pt", data)

    def buffer(self, data: bytes) -> Remote:
        """A ``BytesIO`` holding ``data`` in this worker, at position 0."""
        return self.sub.lib("io.BytesIO", data)


class Payload:
    """Unpickling this object calls ``posix.mkdir(marker)``: code that leaves a trace on disk."""

    def __init__(self, marker: str) -> None:
        self.marker = marker

    def __reduce__(self) -> tuple:
        return posix.mkdir, (self.marker,)


def hostile_checkpoint(point: SavePoint, marker: str) -> dict:
    """A checkpoint in every layout a submission may expect, carrying a ``Payload`` beside it."""
    payload = Payload(marker)
    return {"model": point.model, "optimizer": point.optimizer, "iteration": 1, "extra": {"x": payload},
            "extras": {"x": payload}, "payload": payload}
