"""Hidden tests for P3 (einsum.py): values against PyTorch's old way, and the einops-only form.

Values: every function is compared with the same computation done the old way (``@``, ``view``,
``permute``, ...) in float64 on the same inputs. Pure data movement (split/merge heads,
channels_first) must match exactly; products and reductions must match within the rounding
error of their dtype (see ``drivers/einsum.py``, ``assert_rounded``). Form: a static ``ast`` check of the submitted file.
"""

from __future__ import annotations

import ast
import math

import hypothesis.extra.numpy as hnp
import numpy as np
import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

from grader import wire
from grader.judge.drivers import scan
from grader.judge.drivers.einsum import assert_exact, assert_rounded, product_oracle

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
    elements = st.floats(-4, 4, allow_nan=False, allow_subnormal=False, width=32)
    return hnp.arrays(np.float64, tuple(shape), elements=elements, fill=st.nothing()).map(
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
    choices = [st.sampled_from([0, -1, -hidden, 1.5, hidden + 0.5])]
    if not_dividing:
        choices.append(st.sampled_from(not_dividing))
    return hidden, draw(st.one_of(choices))


# --- values ------------------------------------------------------------------------------------

@pytest.mark.points(1)
@given(inputs=score_inputs())
def test_pairwise_scores(sub, inputs):
    """pairwise_scores equals q @ k.transpose(-2, -1), any leading dims and dtypes"""
    q, k = inputs
    exact, magnitude = product_oracle(q, k, lambda a, b: a @ b.transpose(-2, -1))
    assert_rounded(sub, "pairwise_scores", (q, k), exact, magnitude, terms=q.shape[-1])


@pytest.mark.points(1)
@given(x=hidden_inputs())
def test_sum_and_mean_hidden(sub, x):
    """sum_hidden and mean_hidden reduce the last dim, any leading dims and dtypes"""
    n = x.shape[-1]
    magnitude = x.double().abs().sum(-1)
    assert_rounded(sub, "sum_hidden", (x,), x.double().sum(-1), magnitude, terms=n)
    assert_rounded(sub, "mean_hidden", (x,), x.double().mean(-1), magnitude / n, terms=n)


@pytest.mark.points(1)
@given(inputs=headed_inputs())
def test_split_heads(sub, inputs):
    """split_heads matches x.view(..., heads, d): head i is the i-th block of d features"""
    batch, heads, d, dtype = inputs
    x = distinct_tensor((*batch, heads * d), dtype)
    assert_exact(sub, "split_heads", (x, heads), x.view(*batch, heads, d),
                 " (head i holds features i*d .. (i+1)*d - 1: the pattern is (heads d))")


@pytest.mark.points(1)
@given(inputs=headed_inputs())
def test_merge_heads(sub, inputs):
    """merge_heads matches x.reshape(..., heads * d), the inverse of split_heads"""
    batch, heads, d, dtype = inputs
    x = distinct_tensor((*batch, heads, d), dtype)
    assert_exact(sub, "merge_heads", (x,), x.reshape(*batch, heads * d))


@pytest.mark.points(0.5)
def test_num_heads_may_be_a_whole_float(sub):
    """split_heads, per_head_linear and attention_scores accept a whole-float num_heads such as 7.0"""
    # 7 heads: a count the other tests never use, so no earlier int call can have warmed einops' cache
    # for it (einops caches patterns by axis lengths, and 7 == 7.0).
    x = distinct_tensor((2, 7 * 3), torch.float32)
    assert_exact(sub, "split_heads", (x, 7.0), x.view(2, 7, 3), " (7.0 heads is a whole count: pass einops an int)")
    w = torch.eye(3)
    assert_exact(sub, "per_head_linear", (x, w, 7.0), x, " (7.0 heads is a whole count: pass einops an int)")
    q = distinct_tensor((1, 2, 7 * 1), torch.float32)
    old_way = q.view(1, 2, 7, 1).transpose(1, 2) @ q.view(1, 2, 7, 1).permute(0, 2, 3, 1)
    assert_exact(sub, "attention_scores", (q, q, 7.0), old_way, " (7.0 heads is a whole count: pass einops an int)")


@pytest.mark.points(0.5)
@given(split=bad_head_splits())
def test_num_heads_that_do_not_split_raise_value_error(sub, split):
    """split_heads, per_head_linear and attention_scores raise ValueError when num_heads does not split the hidden size"""
    hidden, num_heads = split
    x = torch.arange(12.0).reshape(2, 6)  # error paths count only beside working code
    assert_exact(sub, "split_heads", (x, 3), x.view(2, 3, 2))
    rows = max(1, hidden // max(1, int(abs(num_heads))))
    sub.raises(ValueError, "einsum.split_heads", torch.ones(2, hidden), num_heads)
    sub.raises(ValueError, "einsum.per_head_linear", torch.ones(2, hidden), torch.ones(rows, 2), num_heads)
    sub.raises(ValueError, "einsum.attention_scores", torch.ones(1, 2, hidden), torch.ones(1, 3, hidden), num_heads)


@pytest.mark.points(1)
@given(inputs=per_head_inputs())
def test_per_head_linear(sub, inputs):
    """per_head_linear splits heads, applies w to each, merges: the lecture's rearrange/einsum/rearrange"""
    x, w, heads = inputs
    d1 = w.shape[0]

    def old_way(x, w):
        return (x.view(*x.shape[:-1], heads, d1) @ w).reshape(*x.shape[:-1], -1)

    exact, magnitude = product_oracle(x, w, old_way)
    assert_rounded(sub, "per_head_linear", (x, w, heads), exact, magnitude, terms=d1)


@pytest.mark.points(1)
@given(inputs=linear_inputs())
def test_linear(sub, inputs):
    """linear equals torch.nn.functional.linear(x, w) (w stored as d_out x d_in)"""
    x, w = inputs
    exact, magnitude = product_oracle(x, w, torch.nn.functional.linear)
    assert_rounded(sub, "linear", (x, w), exact, magnitude, terms=x.shape[-1])


@pytest.mark.points(2)
@given(inputs=attention_inputs())
def test_attention_scores(sub, inputs):
    """attention_scores equals the old view/transpose/@ computation scaled by 1/sqrt(d), d one head's size"""
    q, k, heads = inputs
    (batch, seq_q, hidden), seq_k = q.shape, k.shape[1]
    d = hidden // heads

    def old_way(q, k):
        q = q.view(batch, seq_q, heads, d).transpose(1, 2)
        k = k.view(batch, seq_k, heads, d).transpose(1, 2)
        return q @ k.transpose(-2, -1) / math.sqrt(d)

    exact, magnitude = product_oracle(q, k, old_way)
    assert_rounded(sub, "attention_scores", (q, k, heads), exact, magnitude, terms=d)


@pytest.mark.points(1)
@given(shape=hnp.array_shapes(min_dims=4, max_dims=4, min_side=1, max_side=4), dtype=dtypes())
def test_channels_first(sub, shape, dtype):
    """channels_first equals images.permute(0, 3, 1, 2)"""
    images = distinct_tensor(shape, dtype)
    assert_exact(sub, "channels_first", (images,), images.permute(0, 3, 1, 2))


# --- form --------------------------------------------------------------------------------------

LISTED = ("pairwise_scores", "sum_hidden", "mean_hidden", "split_heads", "merge_heads", "per_head_linear",
          "linear", "attention_scores", "channels_first")
EINOPS_FUNCTIONS = frozenset({"einsum", "rearrange", "reduce", "repeat"})
# Each forbidden name, and the einops function that replaces it.
FORBIDDEN = {
    **dict.fromkeys(("matmul", "__matmul__", "__rmatmul__", "bmm", "mm", "tensordot"), "einsum"),
    **dict.fromkeys(("transpose", "permute", "T", "mT", "movedim", "swapaxes", "swapdims"), "rearrange"),
    **dict.fromkeys(("view", "reshape", "flatten", "unflatten"), "rearrange"),
    **dict.fromkeys(("sum", "mean"), "reduce"),
}


class FormCheck:
    """The form rules on one source text: which listed functions call no einops, which code uses the
    old way or reaches code dynamically (the scanner all source checks share, ``grader/judge/drivers/scan.py``)."""

    def __init__(self, source: str) -> None:
        self.source = scan.Source(source, "einsum.py")
        self.tree = self.source.tree
        for node in ast.walk(self.tree):  # a star import binds whatever it binds: assume the names that matter
            if isinstance(node, ast.ImportFrom) and node.module and not node.level and any(
                    alias.name == "*" for alias in node.names):
                names = EINOPS_FUNCTIONS if node.module.split(".")[0] == "einops" else [*FORBIDDEN, "einsum"]
                for name in names:
                    self.source.aliases.setdefault(name, f"{node.module}.{name}")
        self.aliases = self.source.aliases
        self.functions = {node.name: node for node in self.tree.body
                          if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))}

    def dotted(self, node: ast.AST) -> str | None:
        """``e.rearrange`` -> ``einops.rearrange`` (None when the root is not a name)."""
        return self.source.dotted(node)

    @staticmethod
    def is_einops(name: str | None) -> bool:
        return bool(name) and name.split(".")[0] == "einops" and name.split(".")[-1] in EINOPS_FUNCTIONS

    def without_einops(self) -> list[str]:
        """One message per listed function that does not call einops itself."""
        messages = []
        for name in LISTED:
            function = self.functions.get(name)
            if function is None:
                messages.append(f"einsum.{name} is not defined at the top level of einsum.py")
            elif not any(isinstance(node, ast.Call) and self.is_einops(self.dotted(node.func))
                         for node in ast.walk(function)):
                messages.append(f"einsum.{name} does not call einops.einsum, rearrange, reduce or repeat itself "
                                f"(calling another function of einsum.py does not count)")
        return messages

    def old_way_uses(self) -> list[str]:
        """One message per use of a forbidden operation, with its line and function."""
        where = {}
        for owner in [self.tree, *self.functions.values()]:
            label = "" if owner is self.tree else f", in {owner.name}"
            for node in ast.walk(owner):
                if hasattr(node, "lineno"):
                    where[id(node)] = f"line {node.lineno}{label}"
        messages = []
        for node in ast.walk(self.tree):
            what = self._forbidden(node)
            if what:
                messages.append(f"einsum.py {where.get(id(node), '?')}: {what}")
        messages += [f"einsum.py line {line}: uses getattr(..., {name!r}); use einops.{FORBIDDEN[name]}"
                     for line, name in self.source.asked_by_string() if name in FORBIDDEN]
        messages += [f"{found}: {scan.DYNAMIC_RULE}" for found in scan.dynamic(self.source)]
        return messages

    def _forbidden(self, node: ast.AST) -> str | None:
        if isinstance(node, (ast.BinOp, ast.AugAssign)) and isinstance(node.op, ast.MatMult):
            return "uses the @ operator; use einops.einsum with named dims"
        if isinstance(node, ast.Attribute) and node.attr in FORBIDDEN:
            return f"uses .{node.attr}; use einops.{FORBIDDEN[node.attr]}"
        if isinstance(node, ast.Attribute) and node.attr == "einsum" and not self.is_einops(self.dotted(node)):
            return f"uses {self.dotted(node) or '.einsum'}; use einops.einsum with named dims, not torch.einsum"
        if isinstance(node, ast.Name) and node.id in self.aliases and not self.is_einops(self.aliases[node.id]):
            target = self.aliases[node.id]
            last = target.split(".")[-1]
            if last in FORBIDDEN or last == "einsum":
                return f"uses {target} (imported as {node.id}); use einops.{FORBIDDEN.get(last, 'einsum')}"
        return None


def form_check(sub) -> FormCheck:
    source = sub.source("einsum")
    assert source.strip(), "einsum.py is missing or empty"
    try:
        return FormCheck(source)
    except SyntaxError as exc:
        raise AssertionError(f"einsum.py does not parse: {exc}") from None


def tiny_calls() -> list[tuple[str, tuple]]:
    x = torch.ones(1, 2, 4)
    return [("pairwise_scores", (x, x)), ("sum_hidden", (x,)), ("mean_hidden", (x,)), ("split_heads", (x, 2)),
            ("merge_heads", (x,)), ("per_head_linear", (x, torch.ones(2, 2), 2)), ("linear", (x, torch.ones(3, 4))),
            ("attention_scores", (x, x, 2)), ("channels_first", (torch.ones(1, 2, 3, 4),))]


@pytest.mark.points(1)
def test_form_every_function_calls_einops(sub):
    """Form: each of the nine functions calls an einops function itself"""
    problems = form_check(sub).without_einops()
    assert not problems, "\n".join(problems)


@pytest.mark.points(1)
def test_form_no_old_way_operations(sub):
    """Form: no @, matmul, transpose, permute, view, reshape, .T, torch.einsum, .sum, .mean... in einsum.py"""
    unimplemented = [name for name, args in tiny_calls()
                     if isinstance(result := sub.outcome(f"einsum.{name}", *args), wire.Raised)
                     and result.is_a(NotImplementedError)]
    assert not unimplemented, (f"form points are given for a working rewrite, and {', '.join(unimplemented)} "
                               f"still raise NotImplementedError")
    problems = form_check(sub).old_way_uses()
    assert not problems, "\n".join(problems)
