"""P7: checkpointing and exact resume.

A checkpoint holds everything a training run needs to continue as if it had never stopped:
the model's parameters and buffers, the optimizer's state (AdamW's moments, step counts), the
iteration, any extras the caller adds, and the state of every random number generator the
loop draws from (torch on the CPU and on each CUDA device, numpy's global RNG, Python's
``random``). Saving to a path is atomic; loading never executes code from the file.
"""

from __future__ import annotations

import contextlib
import os
import random
import tempfile
from pathlib import Path
from typing import IO, Any

import numpy as np
import torch

from ._counts import as_count

PathOrFile = str | os.PathLike | IO[bytes]

# BEGIN SOLUTION
# Exactly these types load under torch.load(weights_only=True). Subclasses are refused on purpose:
# numpy.float64 is a subclass of float, an IntEnum of int, a namedtuple of tuple, and each of them
# is pickled by reference to its class, which the weights-only unpickler does not allow.
_SCALARS = (bool, int, float, complex, str, type(None))
_TENSORS = (torch.Tensor, torch.nn.Parameter)


def _check_extra(value: Any, where: str) -> None:
    """Raise ValueError unless ``value`` is built only from types that load with weights_only=True."""
    kind = type(value)
    if kind in _SCALARS or kind in _TENSORS:
        return
    if kind is list or kind is tuple:
        for i, item in enumerate(value):
            _check_extra(item, f"{where}[{i}]")
        return
    if kind is dict:
        for key, item in value.items():
            _check_extra(key, f"a key of {where}")
            _check_extra(item, f"{where}[{key!r}]")
        return
    raise ValueError(f"extra {where} has type {kind.__module__}.{kind.__qualname__}, which does not load "
                     "with torch.load(weights_only=True); use tensors, Python scalars, str, None, "
                     "and lists, tuples and dicts of them")


def _rng_states() -> dict[str, Any]:
    """Every RNG the training loop may draw from, in a form that loads with weights_only=True."""
    # np.random.get_state() holds a numpy array, which weights_only=True refuses: keep plain ints.
    name, keys, pos, has_gauss, cached_gaussian = np.random.get_state()
    return {
        "torch": torch.get_rng_state(),
        "cuda": torch.cuda.get_rng_state_all() if torch.cuda.is_available() else [],
        "numpy": {"bit_generator": name, "keys": keys.tolist(), "pos": int(pos),
                  "has_gauss": int(has_gauss), "cached_gaussian": float(cached_gaussian)},
        "python": random.getstate(),
    }


def _set_rng_states(states: dict[str, Any]) -> None:
    torch.set_rng_state(states["torch"])
    if torch.cuda.is_available():
        # A checkpoint written on a machine with more (or fewer) GPUs restores the devices both have.
        for device, state in enumerate(states["cuda"][: torch.cuda.device_count()]):
            torch.cuda.set_rng_state(state, device)
    numpy = states["numpy"]
    np.random.set_state((numpy["bit_generator"], np.asarray(numpy["keys"], dtype=np.uint32), numpy["pos"],
                         numpy["has_gauss"], numpy["cached_gaussian"]))
    random.setstate(states["python"])


def _atomic_save(payload: dict[str, Any], path: Path) -> None:
    """Write to a temporary file beside ``path``, flush it to disk, then rename it over ``path``.

    ``os.replace`` is atomic on POSIX and Windows when both names are on the same file system
    (hence the same directory): a reader sees the old checkpoint or the new one, never half of one.
    """
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            torch.save(payload, f)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise


def _load(src: PathOrFile) -> dict[str, Any]:
    # weights_only=True: the unpickler rebuilds only tensors and plain containers, so a file that
    # carries code (an object whose __reduce__ calls os.system) is refused, not executed.
    # map_location="cpu": load_state_dict copies onto the devices the model and optimizer live on.
    return torch.load(src, map_location="cpu", weights_only=True)
# END SOLUTION


def save_checkpoint(model: torch.nn.Module, optimizer: torch.optim.Optimizer, iteration: int,
                    out: PathOrFile, **extra: Any) -> None:
    """Save model and optimizer state, ``iteration``, ``extra`` and all RNG states to ``out``.

    ``out`` is a path (str or ``os.PathLike``) or a writable binary file object (written at
    its current position and left open). RNG states saved: torch's CPU generator, every CUDA
    device's generator when CUDA is available, numpy's global RNG and Python's ``random``.
    To a path the write is atomic: a temporary file in the same directory is written, flushed
    to disk and renamed over ``out``; if anything fails or interrupts it (an exception,
    ``KeyboardInterrupt`` too) the temporary file is removed, the exception propagates and the
    previous checkpoint at ``out`` is untouched.

    ``iteration`` is a count (an int, or a whole-number float; 2**63 or more is not graded).
    Each extra must load with ``torch.load(weights_only=True)``: a tensor, a Python
    bool/int/float/complex, str, None, or a list, tuple or dict of such values (exact types: numpy
    scalars and arrays, sets and objects that do not load are refused; a value that loads but is
    not listed, such as ``nn.Parameter``, bytes or an ``OrderedDict``, is not graded).

    Raises:
        ValueError: before anything is written, an extra that would not load with ``weights_only=True``
            (numpy values, a namedtuple, a ``collections.defaultdict``, other objects), and a set (a
            set does load, but it is not on the list above), anywhere inside a container, dict keys
            included.
            [P7.extras-refused] Before anything is written too, a negative or non-whole ``iteration``.
            [P7.iteration-count]
    """
    # BEGIN SOLUTION
    iteration = as_count(iteration, "iteration")
    for name, value in extra.items():
        _check_extra(value, repr(name))
    payload = {
        "model": model.state_dict(),
        "optimizer": optimizer.state_dict(),
        "iteration": iteration,
        "extra": extra,
        "rng": _rng_states(),
    }
    if isinstance(out, (str, os.PathLike)):
        _atomic_save(payload, Path(out))
    else:
        torch.save(payload, out)
    # END SOLUTION


def load_checkpoint(src: PathOrFile, model: torch.nn.Module, optimizer: torch.optim.Optimizer) -> int:
    """Restore ``model``, ``optimizer`` and every RNG state from ``src``; return the iteration.

    ``src`` is a path or a readable binary file object (read from its current position).
    Loads with ``torch.load(..., weights_only=True)``: a file that carries arbitrary pickled code
    is refused (torch raises ``pickle.UnpicklingError``) and nothing in it is executed.
    CUDA generator states are restored for the devices present (none without CUDA).
    """
    # BEGIN SOLUTION
    checkpoint = _load(src)
    model.load_state_dict(checkpoint["model"])
    optimizer.load_state_dict(checkpoint["optimizer"])
    _set_rng_states(checkpoint["rng"])
    return checkpoint["iteration"]
    # END SOLUTION


def load_checkpoint_extras(src: PathOrFile) -> dict[str, Any]:
    """The extras (the ``**extra`` keyword arguments) saved in the checkpoint ``src``, as a dict.

    Loads with ``torch.load(..., weights_only=True)``, like ``load_checkpoint``; restores nothing.
    """
    # BEGIN SOLUTION
    return _load(src)["extra"]
    # END SOLUTION
