"""Hidden tests for P3 (einsum.py): values against PyTorch's old way, and the einops-only form.

Values: every function is compared with the same computation done the old way (``@``, ``view``,
``permute``, ...; ``OLD_WAY``) in float64 on the same inputs. Pure data movement (split/merge heads,
channels_first) must match exactly; products and reductions must match within the rounding
error of their dtype (see ``drivers/einsum.py``, ``assert_rounded``).

Form: a static reading of the package as the nine functions reach it (``__init__.py`` included), by the
public tests' reader ``tests/_einops_reader.py`` (loaded by its path, so both apply one rule): an
allowlist of what that code may do (einops, shapes, numbers; anything else is refused, listed or not),
and a form-einops point only where each returned value was produced by an einops rewrite of the
function's own that changes something (no identity, no round trip, no einops call on a value computed
another way). It is static on purpose: what runs in the worker cannot be trusted to report on itself.
Form points are given beside work only: each form test first draws one call of every function and
compares it with the old way.
"""

from __future__ import annotations

import functools
import math
from pathlib import Path

import hypothesis.extra.numpy as hnp
import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from grader.judge.drivers import scan
from grader.judge.drivers.einsum import assert_exact, assert_rounded, call_text, product_oracle, shown
from grader.public import public_module

DTYPES = (torch.float32, torch.float64, torch.bfloat16)
# One failure per test, reported plainly (not an ExceptionGroup of "distinct failures"), and no
# "explain" phase: it is slow on failures and would print hidden-suite file names and lines.


# --- strategies --------------------------------------------------------------------------------

def dtypes():
    return st.sampled_from(DTYPES)


def batch_shapes():
    """The dims a ``...`` stands for: none, one or two, small."""
    return hnp.array_shapes(min_dims=0, max_dims=2, min_side=1, max_side=3)


def sizes(max_value: int = 5):
    return st.integers(1, max_value)


def head_counts():
    """Head counts (ints; whole floats are tested on their own, see test_num_heads_may_be_a_whole_float)."""
    return st.integers(1, 4)


def tensors(shape, dtype: torch.dtype):
    """Values in [-4, 4], each element drawn on its own (no constant fill that would hide a transpose)."""
    return _tensors(tuple(shape), dtype)


@functools.cache  # one strategy object per shape and dtype: hypothesis validates a new one at its first draw
def _tensors(shape: tuple[int, ...], dtype: torch.dtype):
    elements = st.floats(-4, 4, allow_nan=False, allow_subnormal=False, width=32)
    return hnp.arrays(np.float64, shape, elements=elements, fill=st.nothing()).map(
        lambda array: torch.from_numpy(array).to(dtype))


def distinct_tensor(shape, dtype: torch.dtype) -> torch.Tensor:
    """Every element different (exact in bfloat16 up to 256 elements): a misplaced element shows."""
    return torch.arange(math.prod(shape), dtype=torch.float64).reshape(shape).to(dtype)


@st.composite
def score_inputs(draw):
    batch, dtype = draw(batch_shapes()), draw(dtypes())
    s1, s2, h = draw(sizes(4)), draw(sizes(4)), draw(sizes(6))
    return draw(tensors((*batch, s1, h), dtype)), draw(tensors((*batch, s2, h), dtype))


@st.composite
def hidden_inputs(draw):
    return draw(tensors((*draw(batch_shapes()), draw(sizes(8))), draw(dtypes())))


@st.composite
def headed_inputs(draw):
    """(batch shape, heads, d, dtype) for exact split/merge checks."""
    return draw(batch_shapes()), draw(head_counts()), draw(sizes(4)), draw(dtypes())


@st.composite
def per_head_inputs(draw):
    batch, heads, dtype = draw(batch_shapes()), draw(head_counts()), draw(dtypes())
    d1, d2 = draw(sizes(4)), draw(sizes(4))
    return draw(tensors((*batch, heads * d1), dtype)), draw(tensors((d1, d2), dtype)), heads


@st.composite
def linear_inputs(draw):
    batch, dtype, d_in, d_out = draw(batch_shapes()), draw(dtypes()), draw(sizes(6)), draw(sizes(6))
    return draw(tensors((*batch, d_in), dtype)), draw(tensors((d_out, d_in), dtype))


@st.composite
def attention_inputs(draw):
    batch, seq_q, seq_k, heads, d = draw(sizes(2)), draw(sizes(4)), draw(sizes(4)), draw(head_counts()), draw(sizes(4))
    dtype = draw(dtypes())
    hidden = heads * d
    return draw(tensors((batch, seq_q, hidden), dtype)), draw(tensors((batch, seq_k, hidden), dtype)), heads


@st.composite
def bad_head_splits(draw):
    """(hidden, num_heads) that do not split: a count that does not divide, zero, negative, not whole."""
    hidden = draw(st.integers(1, 12))
    not_dividing = [h for h in range(2, 8) if hidden % h]
    choices = [st.sampled_from([0, -1, -hidden, 1.5, hidden + 0.5, math.inf, math.nan])]
    if not_dividing:
        choices.append(st.sampled_from(not_dividing))
    return hidden, draw(st.one_of(choices))


# --- the old way --------------------------------------------------------------------------------

def _old_attention(q, k, heads):
    (batch, seq_q, hidden), seq_k, d = q.shape, k.shape[1], q.shape[-1] // heads
    q = q.view(batch, seq_q, heads, d).transpose(1, 2)
    k = k.view(batch, seq_k, heads, d).transpose(1, 2)
    return q @ k.transpose(-2, -1) / math.sqrt(d)


# Each listed function done the old way, on the same arguments.
OLD_WAY = {
    "pairwise_scores": lambda q, k: q @ k.transpose(-2, -1),
    "sum_hidden": lambda x: x.sum(-1),
    "mean_hidden": lambda x: x.mean(-1),
    "split_heads": lambda x, heads: x.view(*x.shape[:-1], heads, x.shape[-1] // heads),
    "merge_heads": lambda x: x.reshape(*x.shape[:-2], x.shape[-2] * x.shape[-1]),
    "per_head_linear": lambda x, w, heads: (x.view(*x.shape[:-1], heads, w.shape[0]) @ w).reshape(*x.shape[:-1], -1),
    "linear": torch.nn.functional.linear,
    "attention_scores": _old_attention,
    "channels_first": lambda images: images.permute(0, 3, 1, 2),
}


# --- values ------------------------------------------------------------------------------------

@pytest.mark.rule("P3.pairwise-scores")
@pytest.mark.points(1)
@given(inputs=score_inputs())
def test_pairwise_scores(sub, inputs):
    """pairwise_scores equals q @ k.transpose(-2, -1), any leading dims and dtypes"""
    q, k = inputs
    exact, magnitude = product_oracle(q, k, OLD_WAY["pairwise_scores"])
    assert_rounded(sub, "pairwise_scores", (q, k), exact, magnitude, terms=q.shape[-1])


@pytest.mark.rule("P3.sum-hidden")
@pytest.mark.points(0.5)
@given(x=hidden_inputs())
def test_sum_hidden(sub, x):
    """sum_hidden reduces the last dim, any leading dims and dtypes"""
    magnitude = x.double().abs().sum(-1)
    assert_rounded(sub, "sum_hidden", (x,), OLD_WAY["sum_hidden"](x.double()), magnitude, terms=x.shape[-1])


@pytest.mark.rule("P3.mean-hidden")
@pytest.mark.points(0.5)
@given(x=hidden_inputs())
def test_mean_hidden(sub, x):
    """mean_hidden reduces the last dim, any leading dims and dtypes"""
    magnitude = x.double().abs().mean(-1)
    assert_rounded(sub, "mean_hidden", (x,), OLD_WAY["mean_hidden"](x.double()), magnitude, terms=x.shape[-1])


@pytest.mark.rule("P3.split-heads")
@pytest.mark.points(1)
@given(inputs=headed_inputs())
def test_split_heads(sub, inputs):
    """split_heads matches x.view(..., heads, d): head i is the i-th block of d features"""
    batch, heads, d, dtype = inputs
    x = distinct_tensor((*batch, heads * d), dtype)
    assert_exact(sub, "split_heads", (x, heads), OLD_WAY["split_heads"](x, heads),
                 " (head i holds features i*d .. (i+1)*d - 1: the pattern is (heads d))")


@pytest.mark.rule("P3.merge-heads")
@pytest.mark.points(1)
@given(inputs=headed_inputs())
def test_merge_heads(sub, inputs):
    """merge_heads matches x.reshape(..., heads * d), the inverse of split_heads"""
    batch, heads, d, dtype = inputs
    x = distinct_tensor((*batch, heads, d), dtype)
    assert_exact(sub, "merge_heads", (x,), OLD_WAY["merge_heads"](x))


@pytest.mark.rule("P3.heads-whole-float")
@pytest.mark.points(0.5)
def test_num_heads_may_be_a_whole_float(sub):
    """split_heads, per_head_linear and attention_scores answer for 7.0 heads what they answer for 7"""
    # 7 heads: a count the other tests never use, so no earlier int call can have warmed einops' cache
    # for it (einops caches patterns by axis lengths, and 7 == 7.0); one shape per function, as a function may
    # use another's pattern, and every whole-float call before the int calls.
    calls = {"split_heads": (distinct_tensor((2, 7 * 3), torch.float32),),
             "per_head_linear": (distinct_tensor((3, 7 * 3), torch.float32), distinct_tensor((3, 2), torch.float32)),
             "attention_scores": (distinct_tensor((1, 2, 7), torch.float32), distinct_tensor((1, 3, 7), torch.float32))}
    as_float = {name: sub.call(f"einsum.{name}", *args, 7.0) for name, args in calls.items()}
    for name, args in calls.items():
        want = sub.call(f"einsum.{name}", *args, 7)
        exact = OLD_WAY[name](*(a.double() for a in args), 7)  # a corner counts only beside working code
        assert isinstance(want, torch.Tensor) and want.shape == exact.shape and torch.allclose(
            want.double(), exact, rtol=1e-5), (
            f"{call_text(name, *args, 7)} returned {shown(want)}, not the old way's answer: whole-float heads count "
            f"only beside a {name} that works")
        got = as_float[name]
        assert (isinstance(got, torch.Tensor) and isinstance(want, torch.Tensor) and got.dtype == want.dtype
                and got.shape == want.shape and torch.equal(got, want)), (
            f"{call_text(name, *args, 7.0)} returned {shown(got)}, not what 7 heads give ({shown(want)}): 7.0 heads "
            "is a whole count (pass einops an int)")


@pytest.mark.rule("P3.split-heads-refuses", "P3.per-head-linear-refuses", "P3.attention-scores-refuses")
@pytest.mark.points(0.5)
@given(split=bad_head_splits(), valid=st.tuples(st.integers(1, 3), st.integers(1, 4), st.integers(1, 4)))
def test_num_heads_that_do_not_split_raise_value_error(sub, split, valid):
    """split_heads, per_head_linear and attention_scores raise ValueError when num_heads does not split the hidden size"""
    hidden, num_heads = split
    # Error paths count only beside working code: a valid split drawn for each example, no literal to memorize.
    rows, heads, size = valid
    x = distinct_tensor((rows, heads * size), torch.float32)
    assert_exact(sub, "split_heads", (x, heads), x.view(rows, heads, size))
    rows = max(1, hidden // max(1, int(abs(num_heads)))) if math.isfinite(num_heads) else 1
    sub.raises(ValueError, "einsum.split_heads", torch.ones(2, hidden), num_heads)
    sub.raises(ValueError, "einsum.per_head_linear", torch.ones(2, hidden), torch.ones(rows, 2), num_heads)
    sub.raises(ValueError, "einsum.attention_scores", torch.ones(1, 2, hidden), torch.ones(1, 3, hidden), num_heads)


@pytest.mark.rule("P3.per-head-linear")
@pytest.mark.points(1)
@given(inputs=per_head_inputs())
def test_per_head_linear(sub, inputs):
    """per_head_linear splits heads, applies w to each, merges: the lecture's rearrange/einsum/rearrange"""
    x, w, heads = inputs
    exact, magnitude = product_oracle(x, w, lambda x, w: OLD_WAY["per_head_linear"](x, w, heads))
    assert_rounded(sub, "per_head_linear", (x, w, heads), exact, magnitude, terms=w.shape[0])


@pytest.mark.rule("P3.linear")
@pytest.mark.points(1)
@given(inputs=linear_inputs())
def test_linear(sub, inputs):
    """linear equals torch.nn.functional.linear(x, w) (w stored as d_out x d_in)"""
    x, w = inputs
    exact, magnitude = product_oracle(x, w, OLD_WAY["linear"])
    assert_rounded(sub, "linear", (x, w), exact, magnitude, terms=x.shape[-1])


@pytest.mark.rule("P3.attention-scores")
@pytest.mark.points(2)
@given(inputs=attention_inputs())
def test_attention_scores(sub, inputs):
    """attention_scores equals the old view/transpose/@ computation scaled by 1/sqrt(d), d one head's size"""
    q, k, heads = inputs
    exact, magnitude = product_oracle(q, k, lambda q, k: OLD_WAY["attention_scores"](q, k, heads))
    assert_rounded(sub, "attention_scores", (q, k, heads), exact, magnitude, terms=q.shape[-1] // heads)


@pytest.mark.rule("P3.channels-first")
@pytest.mark.points(0.5)
@given(shape=hnp.array_shapes(min_dims=4, max_dims=4, min_side=1, max_side=4), dtype=dtypes())
def test_channels_first(sub, shape, dtype):
    """channels_first equals images.permute(0, 3, 1, 2)"""
    images = distinct_tensor(shape, dtype)
    assert_exact(sub, "channels_first", (images,), OLD_WAY["channels_first"](images))


@pytest.mark.rule("P3.keep-dtype")
@pytest.mark.points(0.5)
@settings(max_examples=10)
@given(data=st.data(), dtype=dtypes())
def test_results_keep_the_input_dtype(sub, data, dtype):
    """Every function returns a tensor of its input's dtype (float32, float64, bfloat16), beside values that are right"""
    for name, args in work_calls(data.draw).items():  # float64: the old way is exact; the dtype counts beside work
        got, want = sub.call(f"einsum.{name}", *args), OLD_WAY[name](*args)
        assert isinstance(got, torch.Tensor) and got.shape == want.shape and torch.allclose(
            got.double(), want, rtol=1e-9, atol=1e-9), (
            f"{call_text(name, *args)} returned {shown(got)}, not the old way's answer: the dtype counts only beside "
            "values that are right")
    for name, args in work_calls(data.draw, dtype).items():
        got = sub.call(f"einsum.{name}", *args)
        assert isinstance(got, torch.Tensor) and got.dtype == dtype, (
            f"{call_text(name, *args)} returned {shown(got)}, expected a {dtype} tensor (keep the input dtype)")


# --- form --------------------------------------------------------------------------------------

READER = "_einops_reader.py"  # the public test's reader (tests/), loaded by its path: one rule, one wording


class FormCheck:
    """The form rules on the package as einsum.py's nine functions reach it, read by the public tests' reader
    (``tests/_einops_reader.py``: an allowlist of what the code may do, and what produced each returned value),
    with the dynamic-access rule all source checks share (``grader/judge/drivers/scan.py``)."""

    def __init__(self, folder: Path) -> None:
        sources, self.unread = scan.package(folder, "einsum", init=True)
        if not sources or sources[0].file != "einsum.py":
            raise AssertionError("; ".join(map(str, self.unread)) or "einsum.py is missing")
        self.sources = sources
        self.missing, self.refused = public_module(READER).form(folder)

    @classmethod
    def of(cls, folder) -> FormCheck:
        return cls(Path(folder))

    def without_einops(self) -> list[str]:
        """One message per listed function whose returned value no einops rewrite of its own produced; the rule
        said once at the end."""
        return [*self.missing, f"({public_module(READER).REWRITE})"] if self.missing else []

    def old_way_uses(self) -> list[str]:
        """One message per operation outside the allowlist (file, line, function), per file the scan could not
        read, and per dynamic access; the allowlist said once at the end."""
        messages = [str(finding) for finding in self.unread] + list(self.refused)
        messages += [f"{found}: {scan.DYNAMIC_RULE}" for source in self.sources for found in scan.dynamic(source)]
        return messages + [f"({public_module(READER).ALLOWED})"] if messages else []


def form_check(sub) -> FormCheck:
    assert sub.source("einsum").strip(), "einsum.py is missing or empty"
    return _form_check_of(sub.source_dir)


_form_check_of = functools.lru_cache(maxsize=8)(FormCheck.of)  # parsed once per folder, as P5's source rule is


def work_calls(draw, dtype: torch.dtype = torch.float64) -> dict[str, tuple]:
    """Per listed function, arguments drawn for one call (float64 by default, so that the old way is exact)."""
    def tensor(*shape):
        return draw(tensors(shape, dtype))

    heads, d, s1, s2 = draw(head_counts()), draw(sizes(3)), draw(sizes(3)), draw(sizes(3))
    return {"pairwise_scores": (tensor(2, s1, d), tensor(2, s2, d)), "sum_hidden": (tensor(s1, d + 1),),
            "mean_hidden": (tensor(s2, d + 1),), "split_heads": (tensor(s1, heads * d), heads),
            "merge_heads": (tensor(s1, heads, d),), "per_head_linear": (tensor(s2, heads * d), tensor(d, s1), heads),
            "linear": (tensor(s1, d), tensor(s2, d)), "attention_scores": (tensor(1, s1, heads * d),
                                                                           tensor(1, s2, heads * d), heads),
            "channels_first": (tensor(1, s1, s2, d + 1),)}


def without_work(sub, calls: dict[str, tuple]) -> list[str]:
    """The listed functions whose value on ``calls`` is not the old way's: form points count only beside work."""
    wrong = []
    for name, args in calls.items():
        got, want = sub.attempt(f"einsum.{name}", *args), OLD_WAY[name](*args)
        if not (isinstance(got, torch.Tensor) and got.shape == want.shape and got.dtype == want.dtype
                and torch.allclose(got, want, rtol=1e-9, atol=1e-12)):
            wrong.append(name)
    return wrong


def assert_form(sub, data, problems: list[str]) -> None:
    wrong = without_work(sub, work_calls(data.draw))
    assert not wrong, (f"form points are given for a working rewrite, and {', '.join(wrong)} "
                       f"{'does' if len(wrong) == 1 else 'do'} not compute the old way's values yet")
    assert not problems, "\n".join(problems)


@pytest.mark.rule("P3.form-einops")
@pytest.mark.points(1)
@settings(max_examples=3)
@given(data=st.data())
def test_form_every_function_calls_einops(sub, data):
    """Form: each of the nine functions computes its value with an einops rewrite of its own"""
    assert_form(sub, data, form_check(sub).without_einops())


@pytest.mark.rule("P3.form-no-old-way", "ALL.code-by-name")
@pytest.mark.points(1)
@settings(max_examples=3)
@given(data=st.data())
def test_form_no_old_way_operations(sub, data):
    """Form: the code the nine functions reach (einsum.py, its helpers, __init__.py) does only what the allowlist allows: einops, shapes, numbers"""
    assert_form(sub, data, form_check(sub).old_way_uses())
