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
    raise NotImplementedError("checkpoint.save_checkpoint is not implemented yet: see handout.md, section 'checkpoint.save_checkpoint'")


def load_checkpoint(src: PathOrFile, model: torch.nn.Module, optimizer: torch.optim.Optimizer) -> int:
    """Restore ``model``, ``optimizer`` and every RNG state from ``src``; return the iteration.

    ``src`` is a path or a readable binary file object (read from its current position).
    Loads with ``torch.load(..., weights_only=True)``: a file that carries arbitrary pickled code
    is refused (torch raises ``pickle.UnpicklingError``) and nothing in it is executed.
    CUDA generator states are restored for the devices present (none without CUDA).
    """
    raise NotImplementedError("checkpoint.load_checkpoint is not implemented yet: see handout.md, section 'checkpoint.load_checkpoint'")


def load_checkpoint_extras(src: PathOrFile) -> dict[str, Any]:
    """The extras (the ``**extra`` keyword arguments) saved in the checkpoint ``src``, as a dict.

    Loads with ``torch.load(..., weights_only=True)``, like ``load_checkpoint``; restores nothing.
    """
    raise NotImplementedError("checkpoint.load_checkpoint_extras is not implemented yet: see handout.md, section 'checkpoint.load_checkpoint_extras'")
