"""The problem set's fixed facts (docs/PROBLEMS.md): keys, modules, titles and points."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Problem:
    module: str
    title: str
    points: int


PROBLEMS: dict[str, Problem] = {
    "P1": Problem("memory", "dtype memory accounting", 12),
    "P2": Problem("strides", "strides, views and contiguity", 14),
    "P3": Problem("einsum", "einops rewrites", 12),
    "P4": Problem("flops", "FLOP accounting and MFU", 14),
    "P5": Problem("optim", "SGD and AdaGrad from scratch", 14),
    "P6": Problem("data", "token files and memmap batching", 12),
    "P7": Problem("checkpoint", "checkpointing and exact resume", 10),
    "P8": Problem("amp", "mixed precision training loop", 12),
}
MODULES = tuple(p.module for p in PROBLEMS.values())
TOTAL_POINTS = sum(p.points for p in PROBLEMS.values())
