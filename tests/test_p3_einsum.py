"""Public tests for P3 (einsum.py): einops rewrites, checked on values and on form."""

from __future__ import annotations

import inspect
import math
from pathlib import Path

import pytest
import torch
from _einops_reader import ALLOWED, REWRITE, form
from _kit import NotImplementedYet, call, check_close, check_raises, check_true, show
from hypothesis import given, settings
from hypothesis import strategies as st

DTYPES = [torch.float32, torch.float64, torch.bfloat16]
# Unit roundoff of each dtype (half the gap between 1 and the next number).
UNIT_ROUNDOFF = {torch.float64: 2.0**-53, torch.float32: 2.0**-24, torch.bfloat16: 2.0**-8}


def randn(*shape: int, dtype: torch.dtype = torch.float32, seed: int = 0) -> torch.Tensor:
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed), dtype=torch.float64).to(dtype)


def check_rounded(fn, *args, exact: torch.Tensor, magnitude: torch.Tensor, terms: int, dtype: torch.dtype):
    """``fn(*args)`` is ``exact`` (float64) up to the rounding error of a sum of ``terms`` products in ``dtype``.

    A dot product of n terms computed in any order errs by at most about (n + 1) * u * sum|a_i b_i|
    (u the unit roundoff); a few more u cover a scale factor and the final rounding.
    """
    got = call(fn, *args)
    bound = (terms + 4) * UNIT_ROUNDOFF[dtype] * magnitude + 8 * torch.finfo(dtype).tiny
    ok = (isinstance(got, torch.Tensor) and got.dtype == dtype and got.shape == exact.shape
          and bool(((got.double() - exact).abs() <= bound).all()))
    fn_name = getattr(fn, "__name__", "?")
    check_true(ok, f"einsum.{fn_name}({', '.join(map(show, args))})", got,
               f"{show(exact.to(dtype))} (within rounding error)", f"einsum.{fn_name}")
    return got


leading_dims = st.lists(st.integers(1, 3), max_size=2).map(tuple)


# --- pairwise_scores -------------------------------------------------------------------------

@pytest.mark.rule("P3.pairwise-scores")
def test_pairwise_scores_lecture_example(einsum):
    x, y = torch.ones(2, 3, 4), torch.ones(2, 3, 4)
    check_close(einsum.pairwise_scores, x, y, expected=torch.full((2, 3, 3), 4.0))


@pytest.mark.rule("P3.pairwise-scores")
@settings(max_examples=20, deadline=None)
@given(batch=leading_dims, s1=st.integers(1, 4), s2=st.integers(1, 4), h=st.integers(1, 6),
       dtype=st.sampled_from(DTYPES), seed=st.integers(0, 2**16))
def test_pairwise_scores_matches_matmul(einsum, batch, s1, s2, h, dtype, seed):
    q, k = randn(*batch, s1, h, dtype=dtype, seed=seed), randn(*batch, s2, h, dtype=dtype, seed=seed + 1)
    check_rounded(einsum.pairwise_scores, q, k, exact=q.double() @ k.double().transpose(-2, -1),
                  magnitude=q.double().abs() @ k.double().abs().transpose(-2, -1), terms=h, dtype=dtype)


# --- sum_hidden / mean_hidden ----------------------------------------------------------------

hidden_inputs = given(batch=leading_dims, h=st.integers(1, 8), dtype=st.sampled_from(DTYPES), seed=st.integers(0, 2**16))


@pytest.mark.rule("P3.sum-hidden")
@settings(max_examples=10, deadline=None)
@hidden_inputs
def test_sum_hidden_reduces_the_last_dim(einsum, batch, h, dtype, seed):
    x = randn(*batch, h, dtype=dtype, seed=seed)
    check_rounded(einsum.sum_hidden, x, exact=x.double().sum(-1), magnitude=x.double().abs().sum(-1), terms=h,
                  dtype=dtype)


@pytest.mark.rule("P3.mean-hidden")
@settings(max_examples=10, deadline=None)
@hidden_inputs
def test_mean_hidden_reduces_the_last_dim(einsum, batch, h, dtype, seed):
    x = randn(*batch, h, dtype=dtype, seed=seed)
    check_rounded(einsum.mean_hidden, x, exact=x.double().mean(-1), magnitude=x.double().abs().mean(-1), terms=h,
                  dtype=dtype)


@pytest.mark.rule("P3.sum-hidden")
def test_sum_hidden_lecture_example(einsum):
    check_close(einsum.sum_hidden, torch.ones(2, 3, 4), expected=torch.full((2, 3), 4.0))


@pytest.mark.rule("P3.mean-hidden")
def test_mean_hidden_lecture_example(einsum):
    check_close(einsum.mean_hidden, torch.ones(2, 3, 4), expected=torch.ones(2, 3))


# --- split_heads / merge_heads ---------------------------------------------------------------

@pytest.mark.rule("P3.heads-whole-float")
def test_split_heads_takes_a_whole_float_count(einsum):
    # The first split_heads of the file, on a shape no other test draws (5 heads of 7): einops caches
    # a pattern's shapes, so an int call on the same shape first would hide a float handed on to
    # einops, and a float call first would break the int calls after it.
    check_same_as_int_heads(einsum, "split_heads", (torch.arange(2 * 35, dtype=torch.float32).reshape(1, 2, 35),), 5)


def check_same_as_int_heads(einsum, name: str, args: tuple, heads: int) -> None:
    """``name(*args, float(heads))`` (called first) answers what ``name(*args, heads)`` answers."""
    fn = getattr(einsum, name)
    as_float = call(fn, *args, float(heads))
    as_int = call(fn, *args, heads)
    check_true(isinstance(as_float, torch.Tensor) and isinstance(as_int, torch.Tensor) and as_float.dtype == as_int.dtype
               and as_float.shape == as_int.shape and torch.equal(as_float, as_int),
               f"einsum.{name}({', '.join(map(show, args))}, {float(heads)})", as_float,
               f"what {heads} heads give: {show(as_int)}", f"einsum.{name}",
               f"{float(heads)} heads is the whole count {heads} (pass einops an int)")


@pytest.mark.rule("P3.heads-whole-float")
@pytest.mark.parametrize("name, args, heads", [  # head counts and shapes no other test draws, for einops' cache
    ("per_head_linear", (randn(2, 33), randn(11, 4, seed=1)), 3),
    ("attention_scores", (randn(1, 2, 30), randn(1, 3, 30, seed=1)), 6),
], ids=["per_head_linear", "attention_scores"])
def test_per_head_linear_and_attention_scores_take_a_whole_float_count(einsum, name, args, heads):
    check_same_as_int_heads(einsum, name, args, heads)


@pytest.mark.rule("P3.split-heads")
def test_split_heads_lecture_example(einsum):
    x = torch.arange(2 * 3 * 8, dtype=torch.float32).reshape(2, 3, 8)
    check_equal_tensor(einsum.split_heads, x, 2, expected=x.view(2, 3, 2, 4),
                       why="head i is the i-th block of d = 8 / 2 = 4 consecutive features")


@pytest.mark.rule("P3.split-heads", "P3.merge-heads")
@settings(max_examples=20, deadline=None)
@given(batch=leading_dims, heads=st.integers(1, 4), d=st.integers(1, 4), dtype=st.sampled_from(DTYPES))
def test_split_then_merge_heads(einsum, batch, heads, d, dtype):
    x = torch.arange(math.prod(batch) * heads * d).reshape(*batch, heads * d).to(dtype)
    split = x.view(*batch, heads, d)
    check_equal_tensor(einsum.split_heads, x, heads, expected=split)
    check_equal_tensor(einsum.merge_heads, split, expected=x)


BAD_SPLITS = [(7, 2), (8, 3), (8, 0), (8, -2), (8, 2.5), (8, math.inf), (8, math.nan)]  # (hidden, num_heads) that do
# not split: not dividing, zero, negative, not a whole number (infinity and NaN are none)


@pytest.mark.rule("P3.split-heads-refuses")
@pytest.mark.parametrize("hidden, num_heads", BAD_SPLITS)
def test_split_heads_rejects_heads_that_do_not_divide(einsum, hidden, num_heads):
    check_raises(ValueError, einsum.split_heads, torch.zeros(2, hidden), num_heads,
                 why="num_heads must be a positive whole number that divides the last dim")


def check_equal_tensor(fn, *args, expected: torch.Tensor, why: str = ""):
    got = call(fn, *args)
    ok = isinstance(got, torch.Tensor) and got.dtype == expected.dtype and torch.equal(got, expected)
    fn_name = getattr(fn, "__name__", "?")
    check_true(ok, f"einsum.{fn_name}({', '.join(map(show, args))})", got, show(expected), f"einsum.{fn_name}", why)


# --- per_head_linear / linear ----------------------------------------------------------------

@pytest.mark.rule("P3.per-head-linear")
def test_per_head_linear_lecture_example(einsum):
    x, w = torch.ones(2, 3, 8), torch.ones(4, 4)
    check_close(einsum.per_head_linear, x, w, 2, expected=torch.full((2, 3, 8), 4.0))


@pytest.mark.rule("P3.per-head-linear")
@settings(max_examples=20, deadline=None)
@given(batch=leading_dims, heads=st.integers(1, 3), d1=st.integers(1, 4), d2=st.integers(1, 4),
       dtype=st.sampled_from(DTYPES), seed=st.integers(0, 2**16))
def test_per_head_linear_applies_w_to_each_head(einsum, batch, heads, d1, d2, dtype, seed):
    x, w = randn(*batch, heads * d1, dtype=dtype, seed=seed), randn(d1, d2, dtype=dtype, seed=seed + 1)
    exact = (x.double().unflatten(-1, (heads, d1)) @ w.double()).flatten(-2)
    magnitude = (x.double().abs().unflatten(-1, (heads, d1)) @ w.double().abs()).flatten(-2)
    check_rounded(einsum.per_head_linear, x, w, heads, exact=exact, magnitude=magnitude, terms=d1, dtype=dtype)


@pytest.mark.rule("P3.per-head-linear-refuses")
@pytest.mark.parametrize("hidden, num_heads", BAD_SPLITS)
def test_per_head_linear_rejects_heads_that_do_not_divide(einsum, hidden, num_heads):
    check_raises(ValueError, einsum.per_head_linear, torch.ones(2, hidden), torch.ones(3, 3), num_heads,
                 why="num_heads must be a positive whole number that divides the last dim of x")


@pytest.mark.rule("P3.linear")
@settings(max_examples=20, deadline=None)
@given(batch=leading_dims, d_in=st.integers(1, 6), d_out=st.integers(1, 6), dtype=st.sampled_from(DTYPES),
       seed=st.integers(0, 2**16))
def test_linear_matches_torch_linear(einsum, batch, d_in, d_out, dtype, seed):
    x, w = randn(*batch, d_in, dtype=dtype, seed=seed), randn(d_out, d_in, dtype=dtype, seed=seed + 1)
    check_rounded(einsum.linear, x, w, exact=torch.nn.functional.linear(x.double(), w.double()),
                  magnitude=torch.nn.functional.linear(x.double().abs(), w.double().abs()), terms=d_in, dtype=dtype)


# --- attention_scores ------------------------------------------------------------------------

@pytest.mark.rule("P3.attention-scores")
@settings(max_examples=20, deadline=None)
@given(batch=st.integers(1, 2), seq_q=st.integers(1, 4), seq_k=st.integers(1, 4), heads=st.integers(1, 3),
       d=st.integers(1, 4), dtype=st.sampled_from(DTYPES), seed=st.integers(0, 2**16))
def test_attention_scores_match_the_old_way(einsum, batch, seq_q, seq_k, heads, d, dtype, seed):
    q, k = randn(batch, seq_q, heads * d, dtype=dtype, seed=seed), randn(batch, seq_k, heads * d, dtype=dtype, seed=seed + 1)

    def old_way(q, k):
        q = q.view(batch, seq_q, heads, d).transpose(1, 2)
        k = k.view(batch, seq_k, heads, d).transpose(1, 2)
        return q @ k.transpose(-2, -1) / math.sqrt(d)

    check_rounded(einsum.attention_scores, q, k, heads, exact=old_way(q.double(), k.double()),
                  magnitude=old_way(q.double().abs(), k.double().abs()), terms=d, dtype=dtype)


@pytest.mark.rule("P3.attention-scores")
def test_attention_scores_scale_by_one_head(einsum):
    # 2 heads of d = 4: each score is 4 * 1 * 1 / sqrt(4) = 2 (not 4 / sqrt(8), not 4 * sqrt(4)).
    q = k = torch.ones(1, 3, 8)
    check_close(einsum.attention_scores, q, k, 2, expected=torch.full((1, 2, 3, 3), 2.0),
                why="scale by 1/sqrt(d), d the size of one head")


@pytest.mark.rule("P3.attention-scores-refuses")
@pytest.mark.parametrize("hidden, num_heads", BAD_SPLITS)
def test_attention_scores_reject_heads_that_do_not_divide(einsum, hidden, num_heads):
    check_raises(ValueError, einsum.attention_scores, torch.ones(1, 2, hidden), torch.ones(1, 3, hidden), num_heads,
                 why="num_heads must be a positive whole number that divides the hidden size")


# --- channels_first --------------------------------------------------------------------------

@pytest.mark.rule("P3.channels-first")
def test_channels_first_matches_permute(einsum):
    images = torch.arange(2 * 3 * 4 * 5, dtype=torch.float32).reshape(2, 3, 4, 5)
    check_equal_tensor(einsum.channels_first, images, expected=images.permute(0, 3, 1, 2))


# --- every function: the input's dtype ------------------------------------------------------

@pytest.mark.rule("P3.keep-dtype")
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_results_keep_the_input_dtype(einsum, dtype):
    for name, args in tiny_calls():
        args = tuple(a.to(dtype) if isinstance(a, torch.Tensor) else a for a in args)
        try:
            got = call(getattr(einsum, name), *args)
        except NotImplementedYet:
            raise
        except pytest.fail.Exception:
            continue  # a crash is reported once, by the tests of that function
        check_true(isinstance(got, torch.Tensor) and got.dtype == dtype,
                   f"einsum.{name}({', '.join(map(show, args))})", got, f"a {dtype} tensor", f"einsum.{name}",
                   "results keep the input dtype: no computing through another dtype")


# --- form: einops only -----------------------------------------------------------------------

FORM_SECTION = "P3 · einsum.py"  # the problem's introduction states the form rules
def tiny_calls() -> list[tuple[str, tuple]]:
    x = torch.ones(1, 2, 4)
    return [("pairwise_scores", (x, x)), ("sum_hidden", (x,)), ("mean_hidden", (x,)), ("split_heads", (x, 2)),
            ("merge_heads", (x,)), ("per_head_linear", (x, torch.ones(2, 2), 2)), ("linear", (x, torch.ones(3, 4))),
            ("attention_scores", (x, x, 2)), ("channels_first", (torch.ones(1, 2, 3, 4),))]


def every_function_runs(einsum) -> None:
    """Form is graded on working rewrites: skip (not fail) a form test while a function still fails its
    own tests, so that a crash is reported once, by the tests of that function."""
    for name, args in tiny_calls():
        try:
            call(getattr(einsum, name), *args)
        except NotImplementedYet:
            raise
        except pytest.fail.Exception:
            pytest.skip(f"form is checked once every function runs; einsum.{name}({', '.join(map(show, args))}) "
                        f"fails: see the tests of einsum.{name}")


def form_of(einsum) -> tuple[list[str], list[str]]:
    """The form rules read over the package einsum.py belongs to, as the grade reads it (tests/_einops_reader.py)."""
    return form(Path(inspect.getsourcefile(einsum)).parent)


@pytest.mark.rule("P3.form-einops")
def test_form_every_function_calls_einops(einsum):
    every_function_runs(einsum)
    missing, _ = form_of(einsum)
    check_true(not missing, "the code of einsum.py", "\n          ".join(missing),
               "every listed function returns a value that an einops rewrite of its own produced",
               FORM_SECTION, REWRITE)


@pytest.mark.rule("P3.form-no-old-way", "ALL.code-by-name")
def test_form_no_old_way_operations(einsum):
    every_function_runs(einsum)
    _, refused = form_of(einsum)
    check_true(not refused, "the code the nine functions reach (einsum.py, its helpers, __init__.py)",
               "\n          ".join(refused), f"only what the form allows ({ALLOWED})", FORM_SECTION,
               "anything else is refused, whether or not a list names it (docstrings and comments are fine)")
