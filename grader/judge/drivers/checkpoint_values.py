"""P7: the values the hidden suite saves, drawn by hypothesis: iterations (valid and not) and extras.

An extra may be any value ``torch.load(weights_only=True)`` rebuilds, nested: bools, ints, floats,
complexes, strings, None, tensors of the common dtypes (bfloat16 included), lists, tuples, dicts.
"""

from __future__ import annotations

import math
import string

import numpy as np
import torch
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

# Keyword names save_checkpoint's own parameters take: an extra cannot be called like them.
RESERVED = {"model", "optimizer", "iteration", "out"}


def iterations() -> st.SearchStrategy:
    """Valid counts (ints, whole floats such as 2e3) and invalid ones (negative, fractional, non-finite)."""
    valid = st.integers(0, 10**15) | st.integers(0, 2**53).map(float) | st.sampled_from([0, 1, 2e3, 70e9])
    invalid = (st.integers(max_value=-1) | st.floats(max_value=-1.0, allow_infinity=False)
               | st.floats(0.0, 1e6).filter(lambda v: not v.is_integer()) | st.sampled_from([math.inf, math.nan]))
    return valid | invalid


def tensors() -> st.SearchStrategy[torch.Tensor]:
    dtypes = st.sampled_from([np.float32, np.float64, np.float16, np.int64, np.int8, np.uint8, np.bool_])
    arrays = hnp.arrays(dtypes, hnp.array_shapes(min_dims=0, max_dims=3, min_side=0, max_side=3))
    as_tensor = st.builds(lambda a: torch.from_numpy(np.array(a)), arrays)
    return as_tensor | as_tensor.map(lambda t: t.to(torch.bfloat16) if t.is_floating_point() else t)


# Every character but surrogates, as st.text's default, without its codec: that default (and
# st.from_regex) first tests all 1.1 million code points against UTF-8, a 200 MB transient that
# alone overflows a 768 MB Gradescope container.
CHARACTERS = st.characters(exclude_categories=("Cs",))


def safe_values() -> st.SearchStrategy:
    """Every kind of value an extra may be, nested."""
    scalars = (st.booleans() | st.integers() | st.floats() | st.complex_numbers() | st.text(CHARACTERS, max_size=6)
               | st.none() | tensors())
    keys = st.text(CHARACTERS, max_size=5) | st.integers(-5, 5) | st.tuples(st.integers(-5, 5), st.none() | st.booleans())
    return st.recursive(scalars, lambda inner: st.lists(inner, max_size=3) | st.tuples(inner, inner)
                        | st.dictionaries(keys, inner, max_size=3), max_leaves=10)


def extras() -> st.SearchStrategy[dict]:
    names = st.builds(str.__add__, st.sampled_from(string.ascii_lowercase + "_"),
                      st.text(string.ascii_lowercase + string.digits + "_", max_size=8)).filter(lambda n: n not in RESERVED)
    return st.dictionaries(names, safe_values(), max_size=4)
