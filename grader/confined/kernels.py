"""Operator kernels a worker runs without: each raises where torch's would run (standard library and torch).

``withhold`` registers, for every aten operator whose name starts with one of the given prefixes,
a kernel that raises on the CPU and CUDA dispatch keys. The dispatcher picks it for every route to the
operator (``torch._fused_sgd_``, ``torch.ops.aten``, ``torch._C._VariableFunctions``), so no name of
the operator reaches torch's kernel. Run before the submission is imported.

The registrations last as long as the dispatcher's library object that holds them, and nothing Python can
reach holds it: it is made with ``torch._C._dispatch_library`` (not ``torch.library.Library``, whose
finalizer waits in ``weakref.finalize``'s registry), is not tracked by the garbage collector, and is kept
by one reference taken for the life of the process that no object owns. The raising kernel holds only the
rule. So no module, list, finalizer, frame or collector walk of the worker hands out a way to end them.
"""

from __future__ import annotations

import ctypes
import warnings
from collections.abc import Sequence

_KEYS = ("CPU", "CUDA")


class Withheld(RuntimeError):
    """The worker's library lacks this operator while the problem is graded."""


def withhold(prefixes: Sequence[str], rule: str) -> int:
    """Make every aten operator named ``aten::<prefix>...`` raise ``Withheld(rule)`` for the rest of the
    process's life; how many there are."""
    if not prefixes:
        return 0
    import torch

    def refuse(*args, **kwargs):
        raise Withheld(rule)

    library = torch._C._dispatch_library("IMPL", "aten", "")
    names = [name.partition("::")[2] for name in torch._C._dispatch_get_all_op_names()
             if name.startswith(tuple(f"aten::{prefix}" for prefix in prefixes))]
    with warnings.catch_warnings():  # "overriding a previously registered kernel": that is the point
        warnings.simplefilter("ignore")
        for name in names:
            for key in _KEYS:
                library.impl(name, key, refuse)
    ctypes.pythonapi.Py_IncRef(ctypes.py_object(library))  # never given back: the registrations outlive this call
    return len(names)
