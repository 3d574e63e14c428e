"""Public tests for P2 (strides.py): strides, views and contiguity, checked against PyTorch."""

from __future__ import annotations

import math

import pytest
import torch
from _kit import check_equal, check_raises
from hypothesis import given, settings
from hypothesis import strategies as st


def strided(shape: tuple[int, ...], strides: tuple[int, ...], offset: int = 0) -> torch.Tensor:
    """A tensor with that layout over a storage whose values are their own positions."""
    extent = offset + 1 + sum((n - 1) * s for n, s in zip(shape, strides) if n > 0)
    return torch.arange(extent).as_strided(shape, strides, offset)


@st.composite
def layouts(draw, max_dims: int = 4) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """(shape, strides): sizes 0..4, strides contiguous, permuted, stepped or arbitrary."""
    shape = tuple(draw(st.lists(st.integers(0, 4), max_size=max_dims)))
    if draw(st.booleans()):
        return shape, tuple(draw(st.lists(st.integers(0, 24), min_size=len(shape), max_size=len(shape))))
    strides, step = [], 1
    for size in reversed(shape):
        strides.append(step * draw(st.sampled_from([1, 1, 2])))
        step = strides[-1] * max(size, 1)
    order = draw(st.permutations(range(len(shape))))
    return tuple(shape[i] for i in order), tuple(strides[::-1][i] for i in order)


@pytest.mark.rule("P2.contiguous-strides")
def test_contiguous_strides_examples(strides):
    check_equal(strides.contiguous_strides, (4, 4), expected=(4, 1))
    check_equal(strides.contiguous_strides, (2, 3, 4), expected=(12, 4, 1))
    check_equal(strides.contiguous_strides, (), expected=())


@pytest.mark.rule("P2.contiguous-strides-size0")
def test_contiguous_strides_with_a_size_0_dim(strides):
    why = "a size-0 dim counts as size 1 in the product, as torch.empty(2, 0, 3).stride() shows"
    check_equal(strides.contiguous_strides, (2, 0, 3), expected=(3, 3, 1), why=why)
    check_equal(strides.contiguous_strides, (0, 4), expected=(4, 1), why=why)


@pytest.mark.rule("P2.contiguous-strides")
@settings(max_examples=30, deadline=None)
@given(shape=st.lists(st.integers(1, 5), max_size=5))
def test_contiguous_strides_matches_torch(strides, shape):
    check_equal(strides.contiguous_strides, tuple(shape), expected=torch.empty(shape).stride())


@pytest.mark.rule("P2.contiguous-strides-refuses")
def test_contiguous_strides_rejects_negative_sizes(strides):
    check_raises(ValueError, strides.contiguous_strides, (2, -1))
    check_raises(ValueError, strides.contiguous_strides, (-3,))


@pytest.mark.rule("P2.flat-index")
def test_flat_index_lecture_example(strides):
    # The lecture's 4 x 4 matrix: element (1, 2) sits at 1*4 + 2*1 = 6.
    check_equal(strides.flat_index, (1, 2), (4, 4), (4, 1), expected=6)
    check_equal(strides.flat_index, (1, 2), (4, 4), (1, 4), 3, expected=3 + 1 + 8, why="the offset is added")
    check_equal(strides.flat_index, (), (), (), 5, expected=5, why="a 0-d tensor's one element sits at the offset")


@pytest.mark.rule("P2.flat-index-negative")
def test_flat_index_negative_entries_count_from_the_end(strides):
    check_equal(strides.flat_index, (-1, -1), (4, 4), (4, 1), expected=15)
    check_equal(strides.flat_index, (-4, 1), (4, 4), (1, 4), 2, expected=2 + 0 + 4, why="-4 is the first of 4")


@pytest.mark.rule("P2.flat-index-range")
def test_flat_index_rejects_bad_indices(strides):
    check_raises(IndexError, strides.flat_index, (4, 0), (4, 4), (4, 1))
    check_raises(IndexError, strides.flat_index, (0, -5), (4, 4), (4, 1))
    check_raises(IndexError, strides.flat_index, (0,), (4, 4), (4, 1))
    check_raises(IndexError, strides.flat_index, (0, 0, 0), (4, 4), (4, 1))


@pytest.mark.rule("P2.flat-index-refuses")
def test_flat_index_rejects_bad_layouts(strides):
    check_raises(ValueError, strides.flat_index, (0, 0), (2, 2), (2, 1), -1, why="a negative offset is refused")
    check_raises(ValueError, strides.flat_index, (0, 0), (2, 2), (1,), why="shape and strides of different lengths")
    check_raises(ValueError, strides.flat_index, (0, 0), (2, 2), (2, -1), why="a negative stride is refused")


@pytest.mark.rule("P2.flat-index")
@settings(max_examples=30, deadline=None)
@given(layout=layouts(), offset=st.integers(0, 5), data=st.data())
def test_flat_index_matches_torch(strides, layout, offset, data):
    shape, steps = layout
    if 0 in shape:
        return
    index = tuple(data.draw(st.integers(0, n - 1)) for n in shape)
    check_equal(strides.flat_index, index, shape, steps, offset, expected=int(strided(shape, steps, offset)[index]))


@pytest.mark.rule("P2.is-contiguous")
def test_is_contiguous_examples(strides):
    check_equal(strides.is_contiguous, (4, 4), (4, 1), expected=True)
    check_equal(strides.is_contiguous, (4, 4), (1, 4), expected=False, why="a transposed matrix")
    check_equal(strides.is_contiguous, (4, 1), (1, 7), expected=True, why="size-1 dims may have any stride")
    check_equal(strides.is_contiguous, (1, 3), (99, 1), expected=True, why="size-1 dims may have any stride")
    check_equal(strides.is_contiguous, (2, 1, 3), (3, 5, 1), expected=True, why="size-1 dims may have any stride")
    check_equal(strides.is_contiguous, (2, 2), (4, 2), expected=False, why="every other element: strides must be (2, 1)")
    check_equal(strides.is_contiguous, (2, 3), (4, 1), expected=False, why="a gap after each row")
    check_equal(strides.is_contiguous, (2, 3, 1), (1, 2, 1), expected=False,
                why="a transposed matrix with a size-1 dim after it: skip the size-1 dim, then check the others")


@pytest.mark.rule("P2.is-contiguous-empty")
def test_is_contiguous_without_elements(strides):
    for shape, steps in [((3, 0), (5, 5)), ((0,), (7,)), ((2, 0, 3), (1, 1, 1))]:
        check_equal(strides.is_contiguous, shape, steps, expected=True, why="no elements: always contiguous")


@pytest.mark.rule("P2.is-contiguous")
@settings(max_examples=30, deadline=None)
@given(layout=layouts())
def test_is_contiguous_matches_torch(strides, layout):
    shape, steps = layout
    if 0 in shape:
        return
    check_equal(strides.is_contiguous, shape, steps, expected=strided(shape, steps).is_contiguous())


@pytest.mark.rule("P2.is-contiguous-refuses")
def test_is_contiguous_rejects_bad_layouts(strides):
    check_raises(ValueError, strides.is_contiguous, (2, 3), (3,), why="shape and strides of different lengths")
    check_raises(ValueError, strides.is_contiguous, (2,), (3, 1), why="shape and strides of different lengths")
    check_raises(ValueError, strides.is_contiguous, (2, -3), (3, 1), why="a negative size is refused")


@pytest.mark.rule("P2.transpose")
@settings(max_examples=30, deadline=None)
@given(layout=layouts(), data=st.data())
def test_transpose_matches_torch(strides, layout, data):
    shape, steps = layout
    if not shape:
        return
    dim0, dim1 = (data.draw(st.integers(-len(shape), len(shape) - 1)) for _ in range(2))
    t = strided(shape, steps).transpose(dim0, dim1)
    check_equal(strides.transpose, shape, steps, dim0, dim1, expected=(tuple(t.shape), t.stride()))


OUT_OF_RANGE_2D = [2, 3, 7, -3, -4, -9]  # a 2-d tensor's dims are -2..1: the first past each end, and further


@pytest.mark.rule("P2.transpose-range", "ALL.index-errors")
@pytest.mark.parametrize("dim", OUT_OF_RANGE_2D)
def test_transpose_rejects_dims_out_of_range(strides, dim):
    check_raises(IndexError, strides.transpose, (2, 3), (3, 1), 0, dim)
    check_raises(IndexError, strides.transpose, (2, 3), (3, 1), dim, 0)


@pytest.mark.rule("P2.transpose-refuses")
def test_transpose_rejects_bad_layouts(strides):
    check_raises(ValueError, strides.transpose, (2, 3), (3,), 0, 1, why="shape and strides of different lengths")
    check_raises(ValueError, strides.transpose, (2, -3), (3, 1), 0, 1, why="a negative size is refused")


@pytest.mark.rule("P2.transpose-0d")
def test_transpose_of_a_0d_tensor(strides):
    why = "a 0-d tensor takes dims 0 and -1 as if it had one dim, as Tensor.transpose does"
    check_equal(strides.transpose, (), (), 0, -1, expected=((), ()), why=why)
    check_raises(IndexError, strides.transpose, (), (), 0, 1, why=why)


def check_slice(strides, shape, steps, offset, dim, start, stop, step, why=""):
    view = strided(shape, steps, offset)[(slice(None),) * (dim % len(shape)) + (slice(start, stop, step),)]
    check_equal(strides.slice_view, shape, steps, offset, dim, start, stop, step, why=why,
                expected=(tuple(view.shape), view.stride(), view.storage_offset()))


@pytest.mark.rule("P2.slice-view")
def test_slice_view_examples(strides):
    # x[1:3] of a 4 x 4 matrix: two rows, starting at element 4.
    check_equal(strides.slice_view, (4, 4), (4, 1), 0, 0, 1, 3, expected=((2, 4), (4, 1), 4))
    # x[:, 1:4:2] of a 4 x 4 matrix at offset 3: columns 1 and 3.
    check_equal(strides.slice_view, (4, 4), (4, 1), 3, 1, 1, 4, 2, expected=((4, 2), (4, 2), 4))
    # x[..., 0:5:3] on the last dim of a 2 x 3 x 5 tensor: elements 0 and 3.
    check_equal(strides.slice_view, (2, 3, 5), (15, 5, 1), 0, -1, 0, 5, 3, expected=((2, 3, 2), (15, 5, 3), 0))


@pytest.mark.rule("P2.slice-bounds")
def test_slice_view_clamps_bounds_as_python_does(strides):
    check_equal(strides.slice_view, (4, 4), (4, 1), 0, 1, None, None, 2, expected=((4, 2), (4, 2), 0),
                why="x[:, ::2]: None means the whole way")
    check_equal(strides.slice_view, (4, 4), (4, 1), 0, -2, -2, 100, expected=((2, 4), (4, 1), 8),
                why="x[-2:100] clamps like a Python list")
    check_equal(strides.slice_view, (6,), (1,), 0, 0, -9, -2, expected=((4,), (1,), 0),
                why="x[-9:-2]: a start before the beginning clamps to 0, a negative stop counts from the end")


@pytest.mark.rule("P2.slice-empty")
def test_slice_view_empty_slice(strides):
    check_equal(strides.slice_view, (8, 3), (3, 1), 0, 0, 5, 2, expected=((0, 3), (3, 1), 15),
                why="x[5:2] is empty but still starts at the clamped start 5: offset 5 * 3")
    check_equal(strides.slice_view, (8, 3), (3, 1), 1, 0, 6, 6, 2, expected=((0, 3), (6, 1), 19),
                why="x[6:6:2] is empty: offset 1 + 6 * 3, and its stride is still multiplied by the step")


@pytest.mark.rule("P2.slice-dim-range")
@pytest.mark.parametrize("dim", OUT_OF_RANGE_2D)
def test_slice_view_rejects_dims_out_of_range(strides, dim):
    check_raises(IndexError, strides.slice_view, (4, 4), (4, 1), 0, dim, None, None)
    check_raises(IndexError, strides.slice_view, (), (), 0, 0, None, None, why="a 0-d tensor has no dim to slice")


@pytest.mark.rule("P2.slice-refuses")
def test_slice_view_rejects_bad_steps_and_layouts(strides):
    check_raises(ValueError, strides.slice_view, (4, 4), (4, 1), 0, 0, None, None, 0, why="step must be >= 1")
    check_raises(ValueError, strides.slice_view, (4, 4), (4, 1), 0, 0, None, None, -1,
                 why="step must be >= 1: a negative step is refused too, as tensors refuse it")
    check_raises(ValueError, strides.slice_view, (4, 4), (4, 1), -1, 0, None, None, why="a negative offset is refused")
    check_raises(ValueError, strides.slice_view, (4, 4), (4,), 0, 0, None, None,
                 why="shape and strides of different lengths")


@pytest.mark.rule("P2.slice-view")
@settings(max_examples=15, deadline=None)
@given(layout=layouts(), offset=st.integers(0, 5), data=st.data())
def test_slice_view_matches_torch(strides, layout, offset, data):
    shape, steps = layout
    if not shape:
        return
    dim = data.draw(st.integers(-len(shape), len(shape) - 1))
    size = shape[dim]
    start = data.draw(st.integers(0, size))
    stop, step = data.draw(st.integers(start, size)), data.draw(st.integers(1, 4))
    check_slice(strides, shape, steps, offset, dim, start, stop, step)


@pytest.mark.rule("P2.slice-bounds")
@settings(max_examples=15, deadline=None)
@given(layout=layouts(), offset=st.integers(0, 5), data=st.data())
def test_slice_view_bounds_match_torch(strides, layout, offset, data):
    shape, steps = layout
    if not shape:
        return
    dim = data.draw(st.integers(-len(shape), len(shape) - 1))
    bound = st.none() | st.integers(-7, 7)
    start, stop, step = data.draw(bound), data.draw(bound), data.draw(st.integers(1, 4))
    check_slice(strides, shape, steps, offset, dim, start, stop, step,
                why="clamp the bounds as slice(start, stop, step).indices(size) does")


@pytest.mark.rule("P2.view-strides")
def test_view_strides_examples(strides):
    check_equal(strides.view_strides, (4, 4), (4, 1), (2, 8), expected=(8, 1))
    check_equal(strides.view_strides, (4, 4), (4, 1), (-1,), expected=(1,))
    check_equal(strides.view_strides, (4, 6), (6, 1), (-1, 3), expected=(3, 1), why="the -1 is the first dim: 24 / 3 = 8")
    # The lecture: a transposed matrix cannot be viewed flat (.contiguous() copies first).
    check_equal(strides.view_strides, (4, 4), (1, 4), (16,), expected=None)
    check_equal(strides.view_strides, (2, 3, 4), (24, 8, 2), (6, 4), expected=(8, 2))
    check_equal(strides.view_strides, (2, 3, 4), (2400, 800, 200), (6, 4), expected=(800, 200),
                why="strides in the thousands: dims 0 and 1 merge because 2400 == 3 * 800 (compare values, with ==)")
    check_equal(strides.view_strides, (2, 3), (1, 2), (3, 2), expected=None, why="transposed: no view regroups it")
    check_equal(strides.view_strides, (6,), (2,), (2, 1, 3), expected=(6, 6, 2),
                why="a new size-1 dim takes the stride of the dims around it")


@pytest.mark.rule("P2.view-refuses")
def test_view_strides_rejects_bad_shapes(strides):
    check_raises(ValueError, strides.view_strides, (4, 4), (4, 1), (5, 3), why="15 elements for a tensor of 16")
    check_raises(ValueError, strides.view_strides, (4, 4), (4, 1), (3, 6), why="18 elements for a tensor of 16")
    check_raises(ValueError, strides.view_strides, (4, 4), (4, 1), (5, -1), why="no whole size fills in the -1")
    check_raises(ValueError, strides.view_strides, (4, 4), (4, 1), (-1, -1), why="at most one -1")
    check_raises(ValueError, strides.view_strides, (0, 3), (3, 1), (0, -1), why="a -1 beside 0 cannot be inferred")
    check_raises(ValueError, strides.view_strides, (4, 4), (4, 1), (-2, -8),
                 why="a negative size other than one -1 is refused, even where the sizes multiply to 16")


@pytest.mark.rule("P2.view-special")
def test_view_strides_special_cases(strides):
    check_equal(strides.view_strides, (), (), (1, 1), expected=(1, 1), why="an old shape () gives all-ones strides")
    check_equal(strides.view_strides, (0, 3), (9, 9), (0, 3), expected=(9, 9),
                why="no elements, shape unchanged: the strides are kept")
    check_equal(strides.view_strides, (0, 3), (9, 9), (3, 0), expected=(1, 1),
                why="no elements, a new shape: contiguous_strides(new_shape)")


@pytest.mark.rule("P2.view-size1")
def test_view_strides_size_one_dims_never_break_a_run(strides):
    check_equal(strides.view_strides, (2, 1, 3), (3, 7, 1), (6,), expected=(1,),
                why="a size-1 dim is never stepped along: its stride (7 here) does not break the run")


@pytest.mark.rule("P2.view-strides")
@settings(max_examples=30, deadline=None)
@given(layout=layouts(max_dims=3), data=st.data())
def test_view_strides_matches_torch(strides, layout, data):
    shape, steps = layout
    numel = math.prod(shape)
    divisors = [d for d in range(1, numel + 1) if numel % d == 0] or [0]
    first = data.draw(st.sampled_from(divisors))
    new_shape = (first, numel // first) if first else (0, data.draw(st.integers(0, 3)))
    new_shape = tuple(data.draw(st.permutations(new_shape + (1,) * data.draw(st.integers(0, 1)))))
    if numel and data.draw(st.booleans()):  # one size left to infer, at any position
        inferred = data.draw(st.integers(0, len(new_shape) - 1))
        new_shape = new_shape[:inferred] + (-1,) + new_shape[inferred + 1:]
    try:
        expected = strided(shape, steps).view(new_shape).stride()
    except RuntimeError:
        expected = None
    check_equal(strides.view_strides, shape, steps, new_shape, expected=expected)


@pytest.mark.rule("P2.same-storage")
def test_same_storage(strides):
    x = torch.arange(12.0).reshape(3, 4)
    check_equal(strides.same_storage, x, x.T, expected=True)
    check_equal(strides.same_storage, x, x[1:], expected=True, why="a view that starts further into the storage")
    check_equal(strides.same_storage, x, x.view(12), expected=True)
    check_equal(strides.same_storage, x, x.clone(), expected=False)
    check_equal(strides.same_storage, x, x.T.reshape(12), expected=False, why="reshape copies a non-contiguous tensor")
    check_equal(strides.same_storage, x, x.T.contiguous(), expected=False)
    check_equal(strides.same_storage, x[0], x[2], expected=True, why="two rows of one matrix")
