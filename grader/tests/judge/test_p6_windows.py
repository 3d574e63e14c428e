"""P6's ``check_windows``: each row's start found among the token windows, with distinct tokens (one candidate
per row) and with repeated ones (the first window that matches), and a row that is no window named."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

from grader.judge.drivers.data import check_windows


def first_start(tokens: np.ndarray, x: np.ndarray, y: np.ndarray) -> int:
    """The first s with x == tokens[s:s+L] and y == tokens[s+1:s+L+1], or -1: one window at a time."""
    length = len(x)
    for s in range(len(tokens) - length):
        if (tokens[s:s + length] == x).all() and (tokens[s + 1:s + length + 1] == y).all():
            return s
    return -1


@st.composite
def batches(draw: st.DrawFn) -> tuple[np.ndarray, list[int], int]:
    """Tokens (distinct or with repeats), a length, and valid starts."""
    length = draw(st.integers(1, 5))
    distinct = draw(st.booleans())
    tokens = draw(st.lists(st.integers(0, 500 if distinct else 2), min_size=length + 1, max_size=40, unique=distinct))
    starts = draw(st.lists(st.integers(0, len(tokens) - length - 1), max_size=8))
    return np.array(tokens, dtype=np.int64), starts, length


def rows(tokens: np.ndarray, starts: list[int], length: int) -> tuple[torch.Tensor, torch.Tensor]:
    x = [tokens[s:s + length] for s in starts]
    y = [tokens[s + 1:s + length + 1] for s in starts]
    shape = (len(starts), length)
    return (torch.tensor(np.array(x, dtype=np.int64).reshape(shape)), torch.tensor(np.array(y, dtype=np.int64).reshape(shape)))


@given(batches())
def test_each_row_gets_the_first_window_it_is(batch):
    tokens, starts, length = batch
    x, y = rows(tokens, starts, length)
    found = check_windows(tokens, (x, y), len(starts), length, "get_batch")
    assert found == [first_start(tokens, x[i].numpy(), y[i].numpy()) for i in range(len(starts))]


@pytest.mark.parametrize("tokens", [np.arange(10, dtype=np.int64) * 3, np.array([1, 2, 1, 2, 1, 2, 3, 1], dtype=np.int64)])
def test_a_row_whose_targets_are_not_shifted_is_named(tokens):
    """Row 1's x is a window but its y is x itself: no start gives both, and the message names row 1."""
    x, y = rows(tokens, [0, 2, 1], 3)
    y[1] = x[1]
    with pytest.raises(AssertionError, match=r"get_batch: row 1 is x="):
        check_windows(tokens, (x, y), 3, 3, "get_batch")
