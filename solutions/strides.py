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

# BEGIN SOLUTION
def _ints(values: Sequence[int], what: str) -> tuple[int, ...]:
    """``values`` as a tuple of non-negative ints, or ValueError."""
    if isinstance(values, (str, bytes)) or not isinstance(values, Sequence):
        raise ValueError(f"{what} must be a sequence of ints, got {values!r}")
    for value in values:
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            raise ValueError(f"{what} must hold non-negative ints, got {values!r}")
    return tuple(values)


def _layout(shape: Sequence[int], strides: Sequence[int]) -> tuple[tuple[int, ...], tuple[int, ...]]:
    shape, strides = _ints(shape, "shape"), _ints(strides, "strides")
    if len(shape) != len(strides):
        raise ValueError(f"shape {shape} and strides {strides} have different lengths")
    return shape, strides


def _offset(offset: int) -> int:
    if isinstance(offset, bool) or not isinstance(offset, int) or offset < 0:
        raise ValueError(f"offset must be a non-negative int, got {offset!r}")
    return offset


def _wrap_dim(dim: int, ndim: int) -> int:
    """A dim in ``[-ndim, ndim)`` made non-negative (a 0-d tensor accepts -1 and 0, as in torch)."""
    if isinstance(dim, bool) or not isinstance(dim, int):
        raise ValueError(f"dim must be an int, got {dim!r}")
    bound = max(ndim, 1)
    if not -bound <= dim < bound:
        raise IndexError(f"dim {dim} out of range for a {ndim}-d tensor")
    return dim % bound


def _infer_size(new_shape: Sequence[int], numel: int) -> tuple[int, ...]:
    """``new_shape`` with its -1 filled in; ValueError where it cannot hold ``numel`` elements."""
    if isinstance(new_shape, (str, bytes)) or not isinstance(new_shape, Sequence):
        raise ValueError(f"new_shape must be a sequence of ints, got {new_shape!r}")
    sizes = list(new_shape)
    if any(isinstance(n, bool) or not isinstance(n, int) or n < -1 for n in sizes) or sizes.count(-1) > 1:
        raise ValueError(f"new_shape {tuple(sizes)} must hold non-negative ints and at most one -1")
    known = math.prod(n for n in sizes if n != -1)
    if -1 in sizes:
        if known == 0:
            raise ValueError(f"cannot infer the -1 in {tuple(sizes)} for a tensor of {numel} elements")
        sizes[sizes.index(-1)], remainder = divmod(numel, known)
        if remainder:
            raise ValueError(f"shape {tuple(new_shape)} is invalid for a tensor of {numel} elements")
    elif known != numel:
        raise ValueError(f"shape {tuple(sizes)} holds {known} elements, the tensor has {numel}")
    return tuple(sizes)
# END SOLUTION


def contiguous_strides(shape: Sequence[int]) -> tuple[int, ...]:
    """Row-major strides of a freshly allocated tensor of ``shape``, exactly as torch gives them.

    The last dim has stride 1; each earlier one steps over a whole row of the next:
    ``contiguous_strides((2, 3, 4)) == (12, 4, 1)``. A size-0 dim counts as size 1 here
    (``torch.empty(2, 0, 3).stride() == (3, 3, 1)``).

    Raises:
        ValueError: a negative or non-int size. [P2.contiguous-strides-refuses]
    """
    # BEGIN SOLUTION
    shape = _ints(shape, "shape")
    strides = []
    step = 1
    for size in reversed(shape):
        strides.append(step)
        step *= max(size, 1)
    return tuple(reversed(strides))
    # END SOLUTION


def flat_index(index: Sequence[int], shape: Sequence[int], strides: Sequence[int], offset: int = 0) -> int:
    """Storage position of element ``index``: ``offset + sum(i * stride)``.

    Negative entries count from the end of their dim, as in Python.

    Raises:
        IndexError: an entry out of range or not an int, or an index whose length is not
            ``len(shape)``. [P2.flat-index-range]
        ValueError: shape and strides of different lengths or with a negative or non-int entry, or a
            negative or non-int offset. [P2.flat-index-refuses]
    """
    # BEGIN SOLUTION
    shape, strides = _layout(shape, strides)
    offset = _offset(offset)
    index = tuple(index)
    if len(index) != len(shape):
        raise IndexError(f"index {index} has {len(index)} entries for a {len(shape)}-d tensor")
    position = offset
    for i, size, stride in zip(index, shape, strides):
        if isinstance(i, bool) or not isinstance(i, int):
            raise IndexError(f"index entries must be ints, got {index!r}")
        if not -size <= i < size:
            raise IndexError(f"index {i} is out of range for a dim of size {size}")
        position += (i % size) * stride
    return position
    # END SOLUTION


def is_contiguous(shape: Sequence[int], strides: Sequence[int]) -> bool:
    """Exactly ``Tensor.is_contiguous()`` for ``torch.empty(n).as_strided(shape, strides)``.

    Contiguous means the strides are ``contiguous_strides(shape)``, except that a dim of size 1
    may have any stride (it is never stepped over), and a tensor with no elements is always
    contiguous.

    Raises:
        ValueError: shape and strides of different lengths or with a negative or non-int entry.
            [P2.is-contiguous-refuses]
    """
    # BEGIN SOLUTION
    shape, strides = _layout(shape, strides)
    if math.prod(shape) == 0:
        return True
    expected = 1
    for size, stride in zip(reversed(shape), reversed(strides)):
        if size == 1:
            continue
        if stride != expected:
            return False
        expected *= size
    return True
    # END SOLUTION


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
    # BEGIN SOLUTION
    shape, strides = _layout(shape, strides)
    dim0, dim1 = _wrap_dim(dim0, len(shape)), _wrap_dim(dim1, len(shape))
    if not shape:
        return shape, strides
    new_shape, new_strides = list(shape), list(strides)
    new_shape[dim0], new_shape[dim1] = shape[dim1], shape[dim0]
    new_strides[dim0], new_strides[dim1] = strides[dim1], strides[dim0]
    return tuple(new_shape), tuple(new_strides)
    # END SOLUTION


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
    # BEGIN SOLUTION
    shape, strides = _layout(shape, strides)
    offset = _offset(offset)
    if not shape:
        raise IndexError("a 0-d tensor cannot be sliced")
    dim = _wrap_dim(dim, len(shape))
    for bound in (start, stop):
        if bound is not None and (isinstance(bound, bool) or not isinstance(bound, int)):
            raise ValueError(f"slice bounds must be ints or None, got {bound!r}")
    if isinstance(step, bool) or not isinstance(step, int) or step < 1:
        raise ValueError(f"step must be an int >= 1, got {step!r}")
    first, last, _ = slice(start, stop, step).indices(shape[dim])  # Python's clamping rules
    new_shape, new_strides = list(shape), list(strides)
    new_shape[dim] = len(range(first, last, step))
    new_strides[dim] = strides[dim] * step
    return tuple(new_shape), tuple(new_strides), offset + first * strides[dim]
    # END SOLUTION


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
    # BEGIN SOLUTION
    shape, strides = _layout(shape, strides)
    new_shape = _infer_size(new_shape, math.prod(shape))
    # PyTorch's rule (ATen computeStride), walking both shapes from the last dim backwards.
    if not shape:
        return (1,) * len(new_shape)
    if math.prod(shape) == 0:
        # No element is ever addressed: keep the strides if the shape is unchanged, else lay out
        # the new shape contiguously.
        return strides if new_shape == shape else contiguous_strides(new_shape)
    new_strides = [0] * len(new_shape)
    view_d = len(new_shape) - 1
    chunk_base_stride = strides[-1]  # stride of the innermost dim of the current contiguous chunk
    tensor_numel = view_numel = 1
    for tensor_d in range(len(shape) - 1, -1, -1):
        tensor_numel *= shape[tensor_d]
        # The chunk ends at dim 0, or where the next dim to the left does not continue it.
        if tensor_d == 0 or (shape[tensor_d - 1] != 1
                             and strides[tensor_d - 1] != tensor_numel * chunk_base_stride):
            # Fill new dims from the right until they hold this chunk's elements.
            while view_d >= 0 and (view_numel < tensor_numel or new_shape[view_d] == 1):
                new_strides[view_d] = view_numel * chunk_base_stride
                view_numel *= new_shape[view_d]
                view_d -= 1
            if view_numel != tensor_numel:
                return None  # the new dims straddle two chunks: no single stride can step across
            if tensor_d > 0:
                chunk_base_stride = strides[tensor_d - 1]
                tensor_numel = view_numel = 1
    return tuple(new_strides) if view_d == -1 else None
    # END SOLUTION


def same_storage(a: torch.Tensor, b: torch.Tensor) -> bool:
    """Whether ``a`` and ``b`` are views of one storage (writing through one changes the other).

    Compare the storages themselves, not the tensors' first elements: ``x[1:]`` shares ``x``'s
    storage although ``x[1:].data_ptr() != x.data_ptr()``. Two tensors with no elements may or
    may not share a storage (PyTorch gives each a null pointer): unspecified, and not graded.

    Raises:
        ValueError: an argument that is not a tensor.
    """
    # BEGIN SOLUTION
    if not isinstance(a, torch.Tensor) or not isinstance(b, torch.Tensor):
        raise ValueError("same_storage compares two tensors")
    return a.device == b.device and a.untyped_storage().data_ptr() == b.untyped_storage().data_ptr()
    # END SOLUTION
