"""P2: pairs of tensors that share (or only seem to share) a storage, built where they are used.

Tensors sent over the wire arrive as copies, so a pair for ``strides.same_storage`` is built in
the worker, from the judge, by the same recipe the judge follows locally to ask PyTorch for the
truth (``pairs(side)``). Each tensor of a pair is a source tensor ("x", ``arange(24.0).reshape(4, 6)``, or "y", an
equal but separate tensor) and a chain of method calls on it.
"""

from __future__ import annotations

import torch

from .sides import Handle, Side

Chain = tuple[str, tuple[tuple[str, tuple], ...]]
ALL, FROM_1 = slice(None), slice(1, None)


def _on(source: str, *calls: tuple[str, tuple]) -> Chain:
    return source, calls


X = _on("x")
PAIRS: dict[str, tuple[Chain, Chain]] = {
    "x and x.T": (X, _on("x", ("t", ()))),
    "x and x[1:] (starts later in the storage)": (X, _on("x", ("__getitem__", (FROM_1,)))),
    "x[0] and x[3]": (_on("x", ("__getitem__", (0,))), _on("x", ("__getitem__", (3,)))),
    "x[:2] and x[2:] (no common element)": (_on("x", ("__getitem__", (slice(None, 2),))),
                                            _on("x", ("__getitem__", (slice(2, None),)))),
    "x and x[:, 1::2]": (X, _on("x", ("__getitem__", ((ALL, slice(1, None, 2)),)))),
    "x and x.view(-1)": (X, _on("x", ("view", (-1,)))),
    "x and x.reshape(24) (a view)": (X, _on("x", ("reshape", (24,)))),
    "x and x.diagonal()": (X, _on("x", ("diagonal", ()))),
    "x and x[3:].expand(5, 6)": (X, _on("x", ("__getitem__", (slice(3, None),)), ("expand", (5, 6)))),
    "x and x.view(torch.int32)": (X, _on("x", ("view", (torch.int32,)))),
    "x and x.detach()": (X, _on("x", ("detach", ()))),
    "x and x.as_strided((2, 2), (1, 1), 7)": (X, _on("x", ("as_strided", ((2, 2), (1, 1), 7)))),
    "x and x.clone()": (X, _on("x", ("clone", ()))),
    "x[1:] and x.clone()[1:]": (_on("x", ("__getitem__", (FROM_1,))), _on("x", ("clone", ()), ("__getitem__", (FROM_1,)))),
    "x and x.T.contiguous() (a copy)": (X, _on("x", ("t", ()), ("contiguous", ()))),
    "x and x.T.reshape(24) (a copy)": (X, _on("x", ("t", ()), ("reshape", (24,)))),
    "x and x.to(torch.float64)": (X, _on("x", ("to", (torch.float64,)))),
    "x and an equal tensor made anew": (X, _on("y")),
    # Separate storages both ways round: whichever lies higher in memory comes first in one of them.
    "x.clone() and x": (_on("x", ("clone", ())), X),
    "an equal tensor made anew and x": (_on("y"), X),
}


def pairs(side: Side) -> dict[str, tuple[Handle, Handle]]:
    """Every pair of ``PAIRS`` built on ``side``: in the worker (handles, for the submission's
    ``same_storage``) or in the judge (``JUDGE``: where PyTorch tells whether they share a storage)."""
    sources = {"x": side.lib("torch.arange", 24.0).call("reshape", 4, 6, keep=True),
               "y": side.lib("torch.arange", 24.0).call("reshape", 4, 6, keep=True)}

    def follow(chain: Chain) -> Handle:
        tensor = sources[chain[0]]
        for method, args in chain[1]:
            tensor = tensor.call(method, *args, keep=True)
        return tensor

    return {name: (follow(first), follow(second)) for name, (first, second) in PAIRS.items()}
