"""Probes for P7 (checkpoint.py): round trips, exact resume, failing saves, hostile files.

Each probe builds its own model, optimizer and files in a private temporary directory, drives
the student's functions and returns plain data (tensors, lists, flags, exceptions as values).
The judge decides; nothing here compares against a reference implementation.
"""

from __future__ import annotations

import io
import os
import random
import tempfile
from types import ModuleType
from typing import Any

import numpy as np
import torch

OPTIMIZERS = {
    "adamw": lambda params: torch.optim.AdamW(params, lr=1e-2, weight_decay=0.1),
    "sgd_momentum": lambda params: torch.optim.SGD(params, lr=1e-2, momentum=0.9),
    "adagrad": lambda params: torch.optim.Adagrad(params, lr=1e-2),
}


def _make_run(seed: int, optimizer: str = "adamw", device: str = "cpu") -> tuple[torch.nn.Module, torch.optim.Optimizer]:
    """A model with dropout (torch RNG) and batch norm (buffers), and a stateful optimizer."""
    torch.manual_seed(seed)
    model = torch.nn.Sequential(torch.nn.Linear(6, 16), torch.nn.BatchNorm1d(16), torch.nn.ReLU(),
                                torch.nn.Dropout(0.3), torch.nn.Linear(16, 2)).to(device)
    return model, OPTIMIZERS[optimizer](model.parameters())


def _step(model: torch.nn.Module, optimizer: torch.optim.Optimizer) -> float:
    """One training step drawing from every RNG a loop may use: torch, numpy (uniform and the
    cached-gaussian normal) and Python's random."""
    device = next(model.parameters()).device
    data = torch.randn(32, 6, device=device)
    rows = torch.from_numpy(np.random.randint(0, 32, size=8)).to(device)
    shift = torch.from_numpy(np.random.normal(size=3)).float()  # an odd count leaves a cached gaussian
    noise = random.gauss(0.0, 1.0) + random.random()
    loss = ((model(data[rows]) - noise - shift[0]) ** 2).mean()
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    return loss.item()


def _seed_all(seed: int) -> None:
    torch.manual_seed(seed)
    np.random.seed(seed)
    random.seed(seed)


def _state(model: torch.nn.Module) -> dict[str, torch.Tensor]:
    return {name: tensor.detach().cpu().clone() for name, tensor in model.state_dict().items()}


def _optimizer_state(optimizer: torch.optim.Optimizer) -> dict[str, Any]:
    """The optimizer's per-parameter state as plain data: "<param index>.<name>" -> tensor or number."""
    flat: dict[str, Any] = {}
    for index, (_, state) in enumerate(sorted(optimizer.state_dict()["state"].items())):
        for name, value in state.items():
            flat[f"{index}.{name}"] = value.detach().cpu().clone() if isinstance(value, torch.Tensor) else value
    return flat


def _draws() -> dict[str, list[float]]:
    return {"torch": torch.rand(4).tolist(), "numpy": np.random.random(2).tolist() + np.random.normal(size=2).tolist(),
            "python": [random.random(), random.gauss(0.0, 1.0)]}


def _peek_draws() -> dict[str, list[float]]:
    """The next draws of every RNG, leaving the RNGs where they were."""
    states = torch.get_rng_state(), np.random.get_state(), random.getstate()
    draws = _draws()
    torch.set_rng_state(states[0])
    np.random.set_state(states[1])
    random.setstate(states[2])
    return draws


def _attempt(fn, *args, **kwargs) -> Any:
    """The return value, or the exception raised (it crosses the wire as a ``Raised``)."""
    try:
        return fn(*args, **kwargs)
    except Exception as exc:  # noqa: BLE001 - the student's exception is the answer
        return exc


def resume(checkpoint: ModuleType, optimizer: str = "adamw", warmup: int = 3, steps: int = 4, seed: int = 0,
           scramble: int = 12345, iteration: int = 3) -> dict:
    """Train ``warmup`` steps, save, train ``steps`` more; then scramble every RNG, build a FRESH
    model and optimizer, load, and train ``steps`` again. Returns both runs' data."""
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "ckpt.pt")
        _seed_all(seed)
        model, opt = _make_run(seed, optimizer)
        for _ in range(warmup):
            _step(model, opt)
        saved_model, saved_optimizer = _state(model), _optimizer_state(opt)
        checkpoint.save_checkpoint(model, opt, iteration, path)
        expected_draws = _peek_draws()
        uninterrupted = [_step(model, opt) for _ in range(steps)]
        final = _state(model)

        _seed_all(scramble)
        fresh_model, fresh_opt = _make_run(scramble, optimizer)
        loaded_iteration = checkpoint.load_checkpoint(path, fresh_model, fresh_opt)
        loaded_model, loaded_optimizer = _state(fresh_model), _optimizer_state(fresh_opt)
        got_draws = _draws()

        _seed_all(scramble + 1)
        fresh_model, fresh_opt = _make_run(scramble + 1, optimizer)
        checkpoint.load_checkpoint(path, fresh_model, fresh_opt)
        resumed = [_step(fresh_model, fresh_opt) for _ in range(steps)]
        return {"iteration": loaded_iteration, "saved_model": saved_model, "loaded_model": loaded_model,
                "saved_optimizer": saved_optimizer, "loaded_optimizer": loaded_optimizer,
                "expected_draws": expected_draws, "draws": got_draws, "uninterrupted": uninterrupted,
                "resumed": resumed, "final": final, "resumed_final": _state(fresh_model)}


def iteration_round_trip(checkpoint: ModuleType, iteration: Any) -> dict:
    """Save with ``iteration`` to a BytesIO and load it back; returns what load returned (or the
    exception save or load raised) and how many bytes save wrote."""
    model, opt = _make_run(0)
    buffer = io.BytesIO()
    saved = _attempt(checkpoint.save_checkpoint, model, opt, iteration, buffer)
    written = len(buffer.getvalue())
    if isinstance(saved, Exception):
        return {"save": saved, "written": written, "load": None}
    buffer.seek(0)
    return {"save": saved, "written": written, "load": _attempt(checkpoint.load_checkpoint, buffer, *_make_run(1))}


def file_objects(checkpoint: ModuleType, prefix: bytes, iteration: int, note: str) -> dict:
    """Round trips through a BytesIO and a real file, both written after ``prefix`` bytes and read
    from that position."""
    _seed_all(0)
    model, opt = _make_run(0)
    for _ in range(2):
        _step(model, opt)
    out: dict[str, Any] = {"saved_model": _state(model), "saved_optimizer": _optimizer_state(opt)}

    buffer = io.BytesIO()
    buffer.write(prefix)
    checkpoint.save_checkpoint(model, opt, iteration, buffer, note=note)
    out["buffer_closed"] = buffer.closed
    out["buffer_prefix_kept"] = (not buffer.closed) and buffer.getvalue()[: len(prefix)] == prefix
    out["buffer_written"] = 0 if buffer.closed else len(buffer.getvalue()) - len(prefix)
    if not buffer.closed:
        buffer.seek(len(prefix))
        fresh_model, fresh_opt = _make_run(5)
        out["buffer_iteration"] = checkpoint.load_checkpoint(buffer, fresh_model, fresh_opt)
        out["buffer_model"], out["buffer_optimizer"] = _state(fresh_model), _optimizer_state(fresh_opt)
        buffer.seek(len(prefix))
        out["buffer_extras"] = checkpoint.load_checkpoint_extras(buffer)

    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "ckpt.bin")
        with open(path, "wb") as handle:
            handle.write(prefix)
            checkpoint.save_checkpoint(model, opt, iteration, handle, note=note)
        with open(path, "rb") as handle:
            handle.seek(len(prefix))
            fresh_model, fresh_opt = _make_run(6)
            out["file_iteration"] = checkpoint.load_checkpoint(handle, fresh_model, fresh_opt)
            out["file_model"] = _state(fresh_model)
            handle.seek(len(prefix))
            out["file_extras"] = checkpoint.load_checkpoint_extras(handle)
    return out


def extras_round_trip(checkpoint: ModuleType, extras: dict, to_path: bool = False) -> Any:
    """Save ``extras`` as keyword arguments and return what load_checkpoint_extras gives back."""
    model, opt = _make_run(0)
    if to_path:
        with tempfile.TemporaryDirectory() as tmp:
            path = os.path.join(tmp, "ckpt.pt")
            checkpoint.save_checkpoint(model, opt, 1, path, **extras)
            return checkpoint.load_checkpoint_extras(path)
    buffer = io.BytesIO()
    checkpoint.save_checkpoint(model, opt, 1, buffer, **extras)
    buffer.seek(0)
    return checkpoint.load_checkpoint_extras(buffer)


class _Point(tuple):
    """A tuple subclass (as a namedtuple is): pickled by reference to its class."""


def _bad_extras() -> dict[str, Any]:
    return {
        "numpy float64 (a float subclass)": np.float64(1.5),
        "numpy int64": np.int64(3),
        "numpy bool": np.bool_(True),
        "numpy array": np.zeros(3),
        "object": object(),
        "set": {1, 2},
        "tuple subclass": _Point((1, 2)),
        "numpy value in a list": [1.0, np.float32(2.0)],
        "numpy value deep in a dict": {"a": {"b": (1, np.int32(2))}},
        "numpy dict key": {np.int64(1): "one"},
        "function": len,
    }


def refused_extras(checkpoint: ModuleType) -> dict:
    """For each unsafe extra: what save raised (to a path and to a BytesIO), and whether anything
    was written (the previous checkpoint's bytes, the directory listing, the buffer)."""
    model, opt = _make_run(0)
    report = {}
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "ckpt.pt")
        checkpoint.save_checkpoint(model, opt, 1, path)
        with open(path, "rb") as handle:
            before = handle.read()
        for label, value in _bad_extras().items():
            raised = _attempt(checkpoint.save_checkpoint, model, opt, 2, path, good=1.0, bad=value)
            with open(path, "rb") as handle:
                intact = handle.read() == before
            buffer = io.BytesIO()
            raised_buffer = _attempt(checkpoint.save_checkpoint, model, opt, 2, buffer, bad=value)
            report[label] = {"raised": raised if isinstance(raised, Exception) else None,
                             "raised_buffer": raised_buffer if isinstance(raised_buffer, Exception) else None,
                             "intact": intact, "files": sorted(os.listdir(tmp)),
                             "buffer_written": len(buffer.getvalue())}
            if not intact:  # put the previous checkpoint back for the next case
                with open(path, "wb") as handle:
                    handle.write(before)
    return report


def failing_save(checkpoint: ModuleType, fail_after: float = 0.5) -> dict:
    """Save a checkpoint, then save again while torch.save writes part of its bytes and raises
    OSError (a full disk). Returns what the second save raised and the state of the directory."""
    model, opt = _make_run(0)
    real_save = torch.save

    def broken_save(obj, f, *args, **kwargs):
        data = io.BytesIO()
        real_save(obj, data, *args, **kwargs)
        partial = data.getvalue()[: int(len(data.getvalue()) * fail_after)]
        if isinstance(f, (str, bytes, os.PathLike)):
            with open(f, "wb") as handle:
                handle.write(partial)
        else:
            f.write(partial)
            f.flush()
        raise OSError(28, "No space left on device (injected by the grader)")

    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "ckpt.pt")
        first = _attempt(checkpoint.save_checkpoint, model, opt, 1, path)
        files_after_first = sorted(os.listdir(tmp))
        if isinstance(first, Exception) or not os.path.exists(path):
            return {"first": first, "files_after_first": files_after_first}
        with open(path, "rb") as handle:
            before = handle.read()
        patched = [(torch, "save"), (torch.serialization, "save")]
        patched += [(checkpoint, name) for name, value in vars(checkpoint).items() if value is real_save]
        for owner, name in patched:
            setattr(owner, name, broken_save)
        try:
            second = _attempt(checkpoint.save_checkpoint, model, opt, 2, path)
        finally:
            for owner, name in patched:
                setattr(owner, name, real_save)
        with open(path, "rb") as handle:
            intact = handle.read() == before
        files = sorted(os.listdir(tmp))
        loaded = _attempt(checkpoint.load_checkpoint, path, *_make_run(1))
        third = _attempt(checkpoint.save_checkpoint, model, opt, 3, path)
        return {"first": first, "files_after_first": files_after_first, "second": second, "intact": intact,
                "files": files, "loaded": loaded, "third": third, "files_after_third": sorted(os.listdir(tmp)),
                "loaded_third": _attempt(checkpoint.load_checkpoint, path, *_make_run(2))}


class _Payload:
    """Unpickling this object calls open(marker, "w"): it creates the marker file."""

    def __init__(self, marker: str) -> None:
        self.marker = marker

    def __reduce__(self):
        return (open, (self.marker, "w"))


def hostile_file(checkpoint: ModuleType) -> dict:
    """A checkpoint whose pickle carries code (beside what any checkpoint format holds). Returns what
    each loader did and whether the code ran."""
    model, opt = _make_run(0)
    report = {}
    with tempfile.TemporaryDirectory() as tmp:
        legit = os.path.join(tmp, "legit.pt")  # first, the loaders must load an ordinary checkpoint
        report["legit_save"] = _attempt(checkpoint.save_checkpoint, model, opt, 1, legit, note="ok")
        report["legit_load"] = _attempt(checkpoint.load_checkpoint, legit, *_make_run(1))
        report["legit_extras"] = _attempt(checkpoint.load_checkpoint_extras, legit)
        for loader in ("load_checkpoint", "load_checkpoint_extras"):
            marker = os.path.join(tmp, f"pwned-{loader}")
            path = os.path.join(tmp, f"evil-{loader}.pt")
            payload = _Payload(marker)
            torch.save({"model": model.state_dict(), "optimizer": opt.state_dict(), "iteration": 1,
                        "extra": {"x": payload}, "extras": {"x": payload}, "payload": payload}, path)
            args = (path, *_make_run(1)) if loader == "load_checkpoint" else (path,)
            result = _attempt(getattr(checkpoint, loader), *args)
            report[loader] = {"result": result if isinstance(result, Exception) else "returned normally",
                              "code_ran": os.path.exists(marker)}
    return report


def cuda_resume(checkpoint: ModuleType) -> dict:
    """A CUDA model: save, draw from the CUDA generator, scramble it, load into a fresh CUDA model
    and optimizer, draw again."""
    _seed_all(0)
    torch.cuda.manual_seed_all(0)
    model, opt = _make_run(0, device="cuda")
    for _ in range(2):
        _step(model, opt)
    buffer = io.BytesIO()
    checkpoint.save_checkpoint(model, opt, 2, buffer)
    expected = torch.randn(16, device="cuda").cpu()
    saved_model = _state(model)
    torch.cuda.manual_seed_all(999)
    fresh_model, fresh_opt = _make_run(7, device="cuda")
    buffer.seek(0)
    iteration = checkpoint.load_checkpoint(buffer, fresh_model, fresh_opt)
    got = torch.randn(16, device="cuda").cpu()
    devices = sorted({str(p.device) for p in fresh_model.parameters()})
    loaded_model = _state(fresh_model)
    _step(fresh_model, fresh_opt)  # the restored optimizer state must live on the parameters' device
    return {"iteration": iteration, "expected": expected, "got": got, "saved_model": saved_model,
            "loaded_model": loaded_model, "devices": devices}
