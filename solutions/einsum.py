"""P3: einops rewrites of everyday tensor code.

Each docstring shows the "old way" (``@``, ``transpose``, ``view``, ``permute``, ``sum``/``mean``),
where every dimension is a bare position such as ``-2``. Rewrite it with einops (``einsum``,
``rearrange``, ``reduce``, ``repeat``) so that every dimension has a name in the pattern.

Form rules (checked by reading this file's code and what the functions reach: helpers, the package's
modules they use, ``__init__.py``; docstrings and comments are ignored): every function below returns a
value that an einops call of its own produced, with a pattern that changes something (not
``"... -> ..."``, not a unit axis added or dropped), applied to its inputs or to einops' values; a call
to another function of this file on the inputs does not count, one applied to a value that the function's
own einops call produced does (``per_head_linear`` may end with ``merge_heads(x)``) [P3.form-einops].
And that code does only what is allowed: einops' ``einsum``/``rearrange``/``reduce``/``repeat``/
``parse_shape``; a tensor's ``.shape``, ``.ndim``, ``.dtype``, ``.device``, ``.size()``, ``.dim()``,
``.numel()``; subscripts of shapes (not of tensors); ``math.*``, your own functions, builtins that compute
no tensor (``len``, ``int``, ``isinstance``...); arithmetic other than ``@``; ``if`` and ``raise``.
Anything else (``@``, ``transpose``, ``view``, ``sum``, ``torch.inner``, ``x[..., 0]``...) is refused,
listed or not [P3.form-no-old-way].

Results keep the input dtype (float32, float64 and bfloat16 are graded) [P3.keep-dtype]. A ``...``
in a pattern stands for any number of leading batch dims, none included.
"""

from __future__ import annotations

import math

import torch
from einops import einsum, rearrange, reduce

from ._counts import as_count

# BEGIN SOLUTION


def _heads(hidden: int, num_heads: int) -> tuple[int, int]:
    """(heads, d): ``num_heads`` as an int and the size of one head (ValueError if ``hidden`` does not split)."""
    heads = as_count(num_heads, "num_heads")
    if heads == 0 or hidden % heads:
        raise ValueError(f"a hidden size of {hidden} does not split into {num_heads!r} heads")
    return heads, hidden // heads


# END SOLUTION


def pairwise_scores(q: torch.Tensor, k: torch.Tensor) -> torch.Tensor:
    """Dot product of every query with every key: ``... s1 h, ... s2 h -> ... s1 s2``.

    Old way::

        q @ k.transpose(-2, -1)

    q: (..., s1, h), k: (..., s2, h) -> (..., s1, s2).
    """
    # BEGIN SOLUTION
    return einsum(q, k, "... s1 h, ... s2 h -> ... s1 s2")
    # END SOLUTION


def sum_hidden(x: torch.Tensor) -> torch.Tensor:
    """Sum over the last (hidden) dim: ``... hidden -> ...``.

    Old way::

        x.sum(dim=-1)
    """
    # BEGIN SOLUTION
    return reduce(x, "... hidden -> ...", "sum")
    # END SOLUTION


def mean_hidden(x: torch.Tensor) -> torch.Tensor:
    """Mean over the last (hidden) dim: ``... hidden -> ...``.

    Old way::

        x.mean(dim=-1)
    """
    # BEGIN SOLUTION
    return reduce(x, "... hidden -> ...", "mean")
    # END SOLUTION


def split_heads(x: torch.Tensor, num_heads: int) -> torch.Tensor:
    """Split the last dim into heads: ``... (heads d) -> ... heads d``.

    Old way::

        *batch, hidden = x.shape
        x.view(*batch, num_heads, hidden // num_heads)

    Head ``i`` is the i-th contiguous block of ``d`` features. ``num_heads`` is a count (a
    whole float such as 4.0 is accepted) [P3.heads-whole-float].

    Raises:
        ValueError: ``num_heads`` not a positive whole number that divides the last dim (check it
            first: einops alone raises an ``EinopsError``, a ``RuntimeError``). [P3.split-heads-refuses]
    """
    # BEGIN SOLUTION
    heads, _ = _heads(x.shape[-1], num_heads)
    return rearrange(x, "... (heads d) -> ... heads d", heads=heads)
    # END SOLUTION


def merge_heads(x: torch.Tensor) -> torch.Tensor:
    """Merge the heads back into one hidden dim: ``... heads d -> ... (heads d)``.

    Old way::

        *batch, heads, d = x.shape
        x.reshape(*batch, heads * d)

    The inverse of ``split_heads``.
    """
    # BEGIN SOLUTION
    return rearrange(x, "... heads d -> ... (heads d)")
    # END SOLUTION


def per_head_linear(x: torch.Tensor, w: torch.Tensor, num_heads: int) -> torch.Tensor:
    """Apply one (d1 x d2) matrix to every head: ``... (heads d1) -> ... (heads d2)``.

    Old way::

        *batch, hidden = x.shape
        x = x.view(*batch, num_heads, hidden // num_heads)   # split heads
        x = x @ w                                            # (d1, d2) on each head
        x = x.reshape(*batch, -1)                            # merge heads

    x: (..., heads * d1), w: (d1, d2) -> (..., heads * d2).

    Raises:
        ValueError: ``num_heads`` not a positive whole number that divides the last dim of ``x``.
            [P3.per-head-linear-refuses]
    """
    # BEGIN SOLUTION
    heads, _ = _heads(x.shape[-1], num_heads)
    x = rearrange(x, "... (heads d1) -> ... heads d1", heads=heads)
    x = einsum(x, w, "... heads d1, d1 d2 -> ... heads d2")
    return rearrange(x, "... heads d2 -> ... (heads d2)")
    # END SOLUTION


def linear(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    """A bias-free linear layer with PyTorch's weight layout: ``... d_in, d_out d_in -> ... d_out``.

    Old way::

        x @ w.T          # what torch.nn.functional.linear(x, w) computes

    x: (..., d_in), w: (d_out, d_in) -> (..., d_out).
    """
    # BEGIN SOLUTION
    return einsum(x, w, "... d_in, d_out d_in -> ... d_out")
    # END SOLUTION


def attention_scores(q: torch.Tensor, k: torch.Tensor, num_heads: int) -> torch.Tensor:
    """Scaled per-head attention scores, heads split out of the hidden dim.

    Old way::

        batch, seq_q, hidden = q.shape
        seq_k = k.shape[1]
        d = hidden // num_heads
        q = q.view(batch, seq_q, num_heads, d).transpose(1, 2)   # batch heads seq_q d
        k = k.view(batch, seq_k, num_heads, d).transpose(1, 2)   # batch heads seq_k d
        scores = q @ k.transpose(-2, -1) / math.sqrt(d)

    q: (batch, seq_q, heads * d), k: (batch, seq_k, heads * d) ->
    (batch, heads, seq_q, seq_k), scaled by 1/sqrt(d) with d the size of ONE head.

    Raises:
        ValueError: ``num_heads`` not a positive whole number that divides the hidden size.
            [P3.attention-scores-refuses]
    """
    # BEGIN SOLUTION
    heads, d = _heads(q.shape[-1], num_heads)
    scores = einsum(
        rearrange(q, "batch seq_q (heads d) -> batch heads seq_q d", heads=heads),
        rearrange(k, "batch seq_k (heads d) -> batch heads seq_k d", heads=heads),
        "batch heads seq_q d, batch heads seq_k d -> batch heads seq_q seq_k",
    )
    return scores / math.sqrt(d)
    # END SOLUTION


def channels_first(images: torch.Tensor) -> torch.Tensor:
    """Move the channels of a batch of images in front of the pixels: ``b h w c -> b c h w``.

    Old way::

        images.permute(0, 3, 1, 2)
    """
    # BEGIN SOLUTION
    return rearrange(images, "b h w c -> b c h w")
    # END SOLUTION
