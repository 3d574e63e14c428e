"""P2 · strides, views and contiguity: the arithmetic behind ``Tensor.view`` and friends.

A strided tensor is (storage, offset, shape, strides): element ``(i0, i1, ...)`` lives at
storage position ``offset + i0*stride0 + i1*stride1 + ...``. Views only change those numbers;
they never copy data. Shapes and strides here are tuples of non-negative ints, as
``Tensor.size()`` and ``Tensor.stride()`` give them.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import torch


def contiguous_strides(shape: Sequence[int]) -> tuple[int, ...]:
    """Row-major strides of a freshly allocated tensor of ``shape``, exactly as torch gives them.

    The last dim has stride 1; each earlier one steps over a whole row of the next:
    ``contiguous_strides((2, 3, 4)) == (12, 4, 1)``. A size-0 dim counts as size 1 here
    (``torch.empty(2, 0, 3).stride() == (3, 3, 1)``).

    Raises:
        ValueError: a negative or non-int size. [P2.contiguous-strides-refuses]
    """
    raise NotImplementedError("strides.contiguous_strides is not implemented yet: see handout.md, section 'strides.contiguous_strides'")


def flat_index(index: Sequence[int], shape: Sequence[int], strides: Sequence[int], offset: int = 0) -> int:
    """Storage position of element ``index``: ``offset + sum(i * stride)``.

    Negative entries count from the end of their dim, as in Python.

    Raises:
        IndexError: an entry out of range or not an int, or an index whose length is not
            ``len(shape)``. [P2.flat-index-range]
        ValueError: shape and strides of different lengths or with a negative or non-int entry, or a
            negative or non-int offset. [P2.flat-index-refuses]
    """
    raise NotImplementedError("strides.flat_index is not implemented yet: see handout.md, section 'strides.flat_index'")


def is_contiguous(shape: Sequence[int], strides: Sequence[int]) -> bool:
    """Exactly ``Tensor.is_contiguous()`` for ``torch.empty(n).as_strided(shape, strides)``.

    Contiguous means the strides are ``contiguous_strides(shape)``, except that a dim of size 1
    may have any stride (it is never stepped over), and a tensor with no elements is always
    contiguous.

    Raises:
        ValueError: shape and strides of different lengths or with a negative or non-int entry.
            [P2.is-contiguous-refuses]
    """
    raise NotImplementedError("strides.is_contiguous is not implemented yet: see handout.md, section 'strides.is_contiguous'")


def transpose(shape: Sequence[int], strides: Sequence[int], dim0: int,
              dim1: int) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """``(shape, strides)`` of ``x.transpose(dim0, dim1)``: the two dims swap sizes and strides.

    Negative dims count from the end. A 0-d tensor takes dims 0 and -1 as if it had one dim, as
    ``Tensor.transpose`` does.

    Raises:
        IndexError: a dim out of range. [P2.transpose-range]
        ValueError: shape and strides of different lengths or with a negative or non-int entry, or a
            dim that is not an int. [P2.transpose-refuses]
    """
    raise NotImplementedError("strides.transpose is not implemented yet: see handout.md, section 'strides.transpose'")


def slice_view(shape: Sequence[int], strides: Sequence[int], offset: int, dim: int, start: int | None,
               stop: int | None, step: int = 1) -> tuple[tuple[int, ...], tuple[int, ...], int]:
    """``(shape, strides, offset)`` of the view ``x[..., start:stop:step, ...]`` taken on ``dim``.

    Python's slice rules: None means "from the start"/"to the end", negative bounds count from
    the end, out-of-range bounds clamp. The dim keeps ``len(range(start, stop, step))``
    elements, its stride is multiplied by ``step``, and the offset moves to the first kept
    element (``offset + start * stride``, with the clamped start). ``step`` must be >= 1, as
    in torch.

    Raises:
        IndexError: a dim out of range (a 0-d tensor has none). [P2.slice-dim-range]
        ValueError: ``step`` below 1, a bound that is neither an int nor None, a dim that is not an
            int, a negative offset, or shape and strides of different lengths or with a negative or
            non-int entry. [P2.slice-refuses]
    """
    raise NotImplementedError("strides.slice_view is not implemented yet: see handout.md, section 'strides.slice_view'")


def view_strides(shape: Sequence[int], strides: Sequence[int], new_shape: Sequence[int]) -> tuple[int, ...] | None:
    """The strides ``x.view(new_shape)`` would give ``x``, or None exactly where ``view`` raises.

    One entry of ``new_shape`` may be -1: it is inferred from the element count. A view exists
    when every group of new dims falls inside a run of old dims that are laid out contiguously
    with respect to each other (size-1 dims never break a run).

    Raises:
        ValueError: a ``new_shape`` whose element count differs from ``shape``'s, more than one -1,
            a -1 that cannot be inferred (zero elements) or another negative size; or shape and
            strides of different lengths or with a negative or non-int entry. [P2.view-refuses]
    """
    raise NotImplementedError("strides.view_strides is not implemented yet: see handout.md, section 'strides.view_strides'")


def same_storage(a: torch.Tensor, b: torch.Tensor) -> bool:
    """Whether ``a`` and ``b`` are views of one storage (writing through one changes the other).

    Compare the storages themselves, not the tensors' first elements: ``x[1:]`` shares ``x``'s
    storage although ``x[1:].data_ptr() != x.data_ptr()``. Two tensors with no elements may or
    may not share a storage (PyTorch gives each a null pointer): unspecified, and not graded.

    Raises:
        ValueError: an argument that is not a tensor.
    """
    raise NotImplementedError("strides.same_storage is not implemented yet: see handout.md, section 'strides.same_storage'")
