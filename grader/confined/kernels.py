"""Operator kernels a worker runs without: each raises where torch's would run (standard library and torch).

``withhold`` registers, for every aten operator whose name starts with one of the given prefixes,
a kernel that raises on the CPU and CUDA dispatch keys. The dispatcher picks it for every route to the
operator (``torch._fused_sgd_``, ``torch.ops.aten``, ``torch._C._VariableFunctions``), so no name of
the operator reaches torch's kernel. Run before the submission is imported.
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence

_KEYS = ("CPU", "CUDA")
_held: list = []  # the library objects: their registrations last as long as they do


class Withheld(RuntimeError):
    """The worker's library lacks this operator while the problem is graded."""


def withhold(prefixes: Sequence[str], rule: str) -> int:
    """Make every aten operator named ``aten::<prefix>...`` raise ``Withheld(rule)``; how many there are."""
    if not prefixes:
        return 0
    import torch

    def refuse(*args, **kwargs):
        raise Withheld(rule)

    library = torch.library.Library("aten", "IMPL")
    names = [name.partition("::")[2] for name in torch._C._dispatch_get_all_op_names()
             if name.startswith(tuple(f"aten::{prefix}" for prefix in prefixes))]
    with warnings.catch_warnings():  # "overriding a previously registered kernel": that is the point
        warnings.simplefilter("ignore")
        for name in names:
            for key in _KEYS:
                library.impl(name, refuse, key)
    _held.append(library)
    return len(names)
