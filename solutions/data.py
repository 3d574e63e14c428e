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

# BEGIN SOLUTION
def _integer_dtype(dtype: npt.DTypeLike) -> np.dtype:
    """``dtype`` as a little-endian numpy integer dtype; ValueError for anything else."""
    try:
        resolved = np.dtype(dtype)
    except TypeError as exc:
        raise ValueError(f"not a numpy dtype: {dtype!r}") from exc
    if resolved.kind not in "iu":  # 'b' (bool), 'f', 'c', 'O', ... are not token ids
        raise ValueError(f"token files hold integers; got dtype {resolved}")
    return resolved.newbyteorder("<")


def _checked_tokens(tokens: Sequence[int] | np.ndarray | torch.Tensor, target: np.dtype) -> np.ndarray:
    """The tokens as a 1-D array of ``target``; ValueError for non-integers, no tokens or out-of-range values."""
    if isinstance(tokens, torch.Tensor):
        if tokens.dtype == torch.bool or tokens.is_floating_point() or tokens.is_complex():
            raise ValueError(f"tokens must be integers, got a tensor of {tokens.dtype}")
        tokens = tokens.detach().cpu().numpy()
    if isinstance(tokens, np.ndarray):
        if tokens.dtype.kind not in "iu":  # bool, float and object arrays are refused as a whole
            raise ValueError(f"tokens must be integers, got an array of {tokens.dtype}")
        if tokens.ndim != 1:
            raise ValueError(f"tokens must be 1-D, got shape {tokens.shape}")
        values = tokens
    else:
        values = list(tokens)
        for token in values:
            # bool is a subclass of int and 2.0 == 2: both are refused (numpy integer scalars are fine).
            if isinstance(token, (bool, np.bool_)) or not isinstance(token, (int, np.integer)):
                raise ValueError(f"tokens must be integers, got {token!r} ({type(token).__name__})")
    if len(values) == 0:
        raise ValueError("no tokens to save")
    # Compare as Python ints, before converting: numpy would silently wrap out-of-range values.
    low, high = (int(values.min()), int(values.max())) if isinstance(values, np.ndarray) else (min(values), max(values))
    info = np.iinfo(target)
    if low < info.min or high > info.max:
        raise ValueError(f"tokens range over [{low}, {high}], which does not fit {target} [{info.min}, {info.max}]")
    return np.asarray(values, dtype=target)
# END SOLUTION


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
    # BEGIN SOLUTION
    array = _checked_tokens(tokens, _integer_dtype(dtype))
    path = Path(path)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            array.tofile(f)
        os.replace(tmp, path)  # atomic on one file system: readers see the old file or the new one
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise
    # END SOLUTION


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
    # BEGIN SOLUTION
    target = _integer_dtype(dtype)
    size = os.path.getsize(path)
    if size == 0:
        raise ValueError(f"{path}: empty token file")
    if size % target.itemsize:
        raise ValueError(f"{path}: {size} bytes is not a whole number of {target} tokens ({target.itemsize} bytes each)")
    return np.memmap(path, dtype=target, mode="r")
    # END SOLUTION


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
    # BEGIN SOLUTION
    batch, length = as_count(batch_size, "batch_size"), as_count(context_length, "context_length")
    if batch < 1 or length < 1:
        raise ValueError(f"batch_size and context_length must be at least 1, got {batch_size}, {context_length}")
    if len(tokens) < length + 1:
        raise ValueError(f"{len(tokens)} tokens hold no window of {length} tokens plus its next token")
    # `high` is exclusive: starts 0 .. len - L - 1, and the last one's y ends at the very last token.
    high = len(tokens) - length
    starts = np.random.randint(0, high, size=batch) if generator is None else generator.integers(0, high, size=batch)
    # Fancy indexing a memmap reads just these B * (L + 1) positions (their pages), then copies them.
    windows = np.asarray(tokens[starts[:, None] + np.arange(length + 1)], dtype=np.int64)
    x = torch.from_numpy(np.ascontiguousarray(windows[:, :-1]))
    y = torch.from_numpy(np.ascontiguousarray(windows[:, 1:]))
    device = torch.device(device)
    if device.type == "cuda":
        # Page-locked host memory lets the copy run asynchronously, overlapping with compute.
        return x.pin_memory().to(device, non_blocking=True), y.pin_memory().to(device, non_blocking=True)
    return x.to(device), y.to(device)
    # END SOLUTION
