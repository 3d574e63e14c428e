"""Every pair compared with copydetect (winnowed fingerprints of the tokenized code, names and
literals folded, comments and whitespace dropped), the stubs' fingerprints removed first.

A pair's score is the larger of the two shares: the part of one submission's own code (the stubs
left out) that is found in the other; its ``lines`` are the lines of code that match (the fewer of
the two sides), which tells a shared idiom of a few lines from a copied assignment. Submissions
compare with each other and with the past documents; past documents never with each other.
"""

from __future__ import annotations

import io
import itertools
from dataclasses import dataclass

import numpy as np
from copydetect import CodeFingerprint, compare_files

from .documents import Document

NOISE = 25  # shortest match counted, in filtered characters (copydetect's default)
GUARANTEE = 30  # every match this long is found; the winnowing window follows from both


@dataclass(frozen=True)
class Pair:
    """Two documents compared: ``a_in_b`` is the share of ``a``'s own code found in ``b``."""

    a: str
    b: str
    a_in_b: float
    b_in_a: float
    lines: int  # lines that match, the fewer of the two sides
    slices: tuple[np.ndarray, np.ndarray]  # the matching regions of each raw text: starts, ends

    @property
    def score(self) -> float:
        return max(self.a_in_b, self.b_in_a)


def matched_lines(text: str, slices: np.ndarray) -> int:
    """How many lines of ``text`` the matching regions (starts, ends) touch."""
    starts = np.cumsum([len(line) for line in text.splitlines(keepends=True)])
    touched = set()
    for start, end in zip(*slices):
        touched.update(range(int(np.searchsorted(starts, start, "right")), int(np.searchsorted(starts, end - 1, "right")) + 1))
    return len(touched)


def fingerprint(document: Document, boilerplate: np.ndarray | None = None, window: int = 1) -> CodeFingerprint:
    return CodeFingerprint(f"{document.name}.py", NOISE, window, boilerplate, language="python",
                           fp=io.StringIO(document.text))


def compare(documents: list[Document], past: list[Document], boilerplate: Document) -> list[Pair]:
    """Each pair of ``documents``, and each document with each of ``past``, best score first."""
    common = np.unique(np.array(list(fingerprint(boilerplate).hashes)))
    texts = {d.name: d.text for d in [*documents, *past]}
    prints = {d.name: fingerprint(d, common, GUARANTEE - NOISE + 1) for d in [*documents, *past]}
    names = [d.name for d in documents]
    pairs = []
    for a, b in [*itertools.combinations(names, 2), *itertools.product(names, [p.name for p in past])]:
        _, (a_in_b, b_in_a), slices = compare_files(prints[a], prints[b])
        lines = min(matched_lines(texts[a], slices[0]), matched_lines(texts[b], slices[1])) if len(slices[0]) else 0
        pairs.append(Pair(a, b, float(a_in_b), float(b_in_a), lines, slices))
    return sorted(pairs, key=lambda p: (-p.score, p.a, p.b))
