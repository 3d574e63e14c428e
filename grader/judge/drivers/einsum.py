"""P3's checks: a function of the submission called on the judge's tensors, its result compared
with the same computation done the old way in float64 (exactly, or within its dtype's rounding).
"""

from __future__ import annotations

import torch

from grader import wire

# Unit roundoff u of each dtype (half the gap between 1.0 and the next float).
UNIT_ROUNDOFF = {torch.float64: 2.0**-53, torch.float32: 2.0**-24, torch.bfloat16: 2.0**-8}


def shown(value) -> str:
    if isinstance(value, torch.Tensor):
        return f"<{value.dtype} tensor of shape {tuple(value.shape)}>"
    if isinstance(value, wire.Opaque):
        return f"a {value.type}"
    return repr(value)[:80]


def call_text(name: str, *args) -> str:
    return f"einsum.{name}({', '.join(shown(a) for a in args)})"


def assert_tensor_like(got, name: str, args: tuple, dtype: torch.dtype, shape: tuple) -> None:
    assert isinstance(got, torch.Tensor), f"{call_text(name, *args)} returned {shown(got)}, expected a tensor"
    assert got.dtype == dtype, f"{call_text(name, *args)} returned a {got.dtype} tensor, expected {dtype} (keep the input dtype)"
    assert tuple(got.shape) == tuple(shape), (
        f"{call_text(name, *args)} returned shape {tuple(got.shape)}, expected {tuple(shape)}")


def assert_rounded(sub, name: str, args: tuple, exact: torch.Tensor, magnitude: torch.Tensor, terms: int) -> None:
    """The result equals ``exact`` (float64) up to the rounding error of its dtype.

    A sum of ``terms`` products computed in any order with unit roundoff u errs by at most
    about (terms + 1) * u * sum|products| (the classic dot-product bound), ``magnitude`` being
    that sum of absolute values; 3 more u cover a scale factor, a division and the final
    rounding. For float64 inputs the float64 oracle errs as much again, hence the factor 2.
    Products too small for the dtype flush to zero: a few ``finfo.tiny`` per term cover that.
    """
    dtype = args[0].dtype
    got = sub.call(f"einsum.{name}", *args)
    assert_tensor_like(got, name, args, dtype, exact.shape)
    factor = 2 if dtype == torch.float64 else 1
    bound = factor * (terms + 4) * UNIT_ROUNDOFF[dtype] * magnitude + 4 * terms * torch.finfo(dtype).tiny
    error = (got.double() - exact).abs()
    if not bool((error <= bound).all()):
        where = tuple(int(i) for i in torch.nonzero(error > bound)[0])
        raise AssertionError(
            f"{call_text(name, *args)} is wrong at index {where}: got {got.double()[where].item():.6g}, "
            f"expected {exact[where].item():.6g} (allowed rounding error {bound[where].item():.2g} for {dtype})")


def assert_exact(sub, name: str, args: tuple, want: torch.Tensor, hint: str = "") -> None:
    got = sub.call(f"einsum.{name}", *args)
    assert_tensor_like(got, name, args, want.dtype, want.shape)
    if not torch.equal(got, want):
        where = tuple(int(i) for i in torch.nonzero(got != want)[0])
        raise AssertionError(f"{call_text(name, *args)} has {got[where].item():g} at index {where}, expected "
                             f"{want[where].item():g} (the inputs hold 0, 1, 2, ... in order){hint}")


def product_oracle(a: torch.Tensor, b: torch.Tensor, fn):
    """(exact, magnitude): ``fn`` on the float64 values, and on their absolute values."""
    return fn(a.double(), b.double()), fn(a.double().abs(), b.double().abs())
