"""P6: token files and memmap batching.

A tokenized corpus is one long array of token ids, stored as raw little-endian integers
(uint16 fits a vocabulary of up to 65,536 tokens: 2 bytes per token, so 15T tokens are
30 TB). Training never loads it whole: ``np.memmap`` maps the file into the address space and
the operating system reads only the pages that are touched, so a batch of B windows of
L + 1 tokens costs a few pages, whatever the size of the file.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import numpy.typing as npt
import torch

from ._counts import as_count


def save_tokens(tokens: Sequence[int] | np.ndarray | torch.Tensor, path: str | os.PathLike,
                dtype: npt.DTypeLike = np.uint16) -> None:
    """Write ``tokens`` to ``path`` as raw little-endian ``dtype`` integers (``ndarray.tofile``).

    ``tokens`` is a 1-D list (or other sequence) of ints, an integer ndarray or an integer
    tensor (another shape is not graded: refusing it and writing what ``tofile`` writes are both
    accepted); ``dtype`` a numpy integer dtype. The write is atomic: the data goes to a temporary
    file in the same directory as ``path`` (not the system's temporary folder), which is then
    renamed over ``path``; if anything fails or interrupts it (an exception, ``KeyboardInterrupt``
    too), that exception propagates, no file is left behind and a file already at ``path`` stays
    as it was.

    Raises:
        ValueError: before anything is written: no tokens at all, a token that is not an integer (a
            float, even ``2.0``, or a bool), a token that does not fit ``dtype`` (negative for an
            unsigned dtype, or too large), or a ``dtype`` that is not an integer dtype. A refused call
            leaves no file behind, and a file already at ``path`` as it was. [P6.save-validates-first]
    """
    raise NotImplementedError("data.save_tokens is not implemented yet: see handout.md, section 'data.save_tokens'")


def load_tokens(path: str | os.PathLike, dtype: npt.DTypeLike = np.uint16) -> np.memmap:
    """The token file at ``path`` as a read-only ``np.memmap`` of little-endian ``dtype``.

    The file is little-endian whatever byte order ``dtype`` spells (``">u2"`` names the integer
    type only): the memmap holds the file's values.

    Nothing is read here: pages are read when (and only where) the array is indexed.

    Raises:
        FileNotFoundError: a missing file. [P6.load-missing-file]
        ValueError: an empty file, a file whose size is not a multiple of the dtype's size, or a
            ``dtype`` that is not an integer dtype (a float dtype too, though numpy could map it).
            [P6.load-refuses]
    """
    raise NotImplementedError("data.load_tokens is not implemented yet: see handout.md, section 'data.load_tokens'")


def get_batch(tokens: np.ndarray, batch_size: int, context_length: int, device: str | torch.device,
              generator: np.random.Generator | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """Sample ``batch_size`` windows of ``context_length`` (L) tokens and their next tokens.

    ``tokens`` is a 1-D integer array (typically the memmap of ``load_tokens``). Each start
    ``s_i`` is drawn independently and uniformly from every valid start ``0 .. len(tokens) - L - 1``
    (inclusive); ``x[i] = tokens[s_i : s_i + L]`` and ``y[i] = tokens[s_i + 1 : s_i + L + 1]``.
    Returns ``(x, y)``, int64 tensors of shape ``(batch_size, L)`` on ``device``.
    The starts come from ``generator`` (a ``np.random.Generator``) when given, else from numpy's
    global RNG (``np.random``), so that ``np.random.seed`` and checkpointed RNG states
    reproduce them. Only the sampled windows are read from ``tokens``. On CUDA the batch is
    copied from pinned host memory with ``non_blocking=True``. ``batch_size`` and
    ``context_length`` are counts (ints or whole-number floats).

    Raises:
        ValueError: a ``batch_size`` or ``context_length`` below 1, fewer than L + 1 tokens, or a
            negative or non-whole count. [P6.batch-refuses]
    """
    raise NotImplementedError("data.get_batch is not implemented yet: see handout.md, section 'data.get_batch'")
