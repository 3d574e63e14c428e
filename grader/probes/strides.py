"""Probes for P2 (strides.py): tensors that must be built next to the student code.

Tensors sent over the wire arrive as copies, so pairs that share (or do not share) a storage
are made here. The judge builds the same pairs with ``pairs()`` to ask PyTorch for the truth.
"""

from __future__ import annotations

from types import ModuleType

import torch


def pairs() -> dict[str, tuple[torch.Tensor, torch.Tensor]]:
    """Named pairs of tensors: views of one storage, and copies that only look alike."""
    x = torch.arange(24.0).reshape(4, 6)
    y = x.clone()
    return {
        "x and x.T": (x, x.T),
        "x and x[1:] (starts later in the storage)": (x, x[1:]),
        "x[0] and x[3]": (x[0], x[3]),
        "x[:2] and x[2:] (no common element)": (x[:2], x[2:]),
        "x and x[:, 1::2]": (x, x[:, 1::2]),
        "x and x.view(-1)": (x, x.view(-1)),
        "x and x.reshape(24) (a view)": (x, x.reshape(24)),
        "x and x.diagonal()": (x, x.diagonal()),
        "x and x[3:].expand(5, 6)": (x, x[3:].expand(5, 6)),
        "x and x.view(torch.int32)": (x, x.view(torch.int32)),
        "x and x.detach()": (x, x.detach()),
        "x and x.as_strided((2, 2), (1, 1), 7)": (x, x.as_strided((2, 2), (1, 1), 7)),
        "x and x.clone()": (x, y),
        "x[1:] and x.clone()[1:]": (x[1:], y[1:]),
        "x and x.T.contiguous() (a copy)": (x, x.T.contiguous()),
        "x and x.T.reshape(24) (a copy)": (x, x.T.reshape(24)),
        "x and x.to(torch.float64)": (x, x.to(torch.float64)),
        "x and an equal tensor made anew": (x, torch.arange(24.0).reshape(4, 6)),
    }


def same_storage_answers(strides: ModuleType) -> dict[str, object]:
    """``strides.same_storage(a, b)`` for every pair; an exception is returned in place of its value."""
    answers: dict[str, object] = {}
    for name, (a, b) in pairs().items():
        try:
            answers[name] = strides.same_storage(a, b)
        except Exception as exc:  # noqa: BLE001 - the student's exception is the answer
            answers[name] = exc
    return answers
