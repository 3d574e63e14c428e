"""Every pair compared with copydetect (fingerprints of the tokenized code, names and literals
folded, comments and whitespace dropped), the stubs' fingerprints removed first.

A pair's score is the larger of the two shares: the part of one submission's own code (the stubs
left out) that is found in the other; its ``lines`` are the lines of code that match (the fewer of
the two sides), which tells a shared idiom of a few lines from a copied assignment. Submissions
compare with each other and with the past documents; past documents never with each other. The
fingerprints and the comparisons run in ``jobs`` processes.
"""

from __future__ import annotations

import io
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from functools import partial

import numpy as np
from copydetect import CodeFingerprint, compare_files

from .documents import Document

# The shortest match counted, in filtered characters (copydetect's default). Every k-gram is kept
# (a winnowing window of 1, copydetect's default too): a wider window picks fingerprints by the
# value of Python's string hash, which is seeded per process, and the scores would vary by run.
NOISE = 25


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


def line_ends(text: str) -> np.ndarray:
    """The offset just past each line of ``text``."""
    return np.cumsum([len(line) for line in text.splitlines(keepends=True)])


def matched_lines(ends: np.ndarray, slices: np.ndarray) -> int:
    """How many lines (of a text whose ``line_ends`` are ``ends``) the matching regions (starts, ends) touch."""
    first, last = np.searchsorted(ends, slices[0], "right"), np.searchsorted(ends, slices[1] - 1, "right")
    return len({line for a, b in zip(first.tolist(), last.tolist()) for line in range(a, b + 1)})


def fingerprint(document: Document, boilerplate: np.ndarray | None = None) -> CodeFingerprint:
    return CodeFingerprint(f"{document.name}.py", NOISE, 1, boilerplate, language="python",
                           fp=io.StringIO(document.text))


_PRINTS: dict[str, CodeFingerprint] = {}  # each worker's fingerprints and line ends, set by its initializer
_ENDS: dict[str, np.ndarray] = {}


def _share(prints: dict[str, CodeFingerprint], texts: dict[str, str]) -> None:
    _PRINTS.update(prints)
    _ENDS.update((name, line_ends(text)) for name, text in texts.items())


def _pairs_of(a: str, others: list[str]) -> list[Pair]:
    """``a`` compared with each of ``others`` (in a worker)."""
    pairs = []
    for b in others:
        _, (a_in_b, b_in_a), slices = compare_files(_PRINTS[a], _PRINTS[b])
        lines = min(matched_lines(_ENDS[a], slices[0]), matched_lines(_ENDS[b], slices[1])) if len(slices[0]) else 0
        pairs.append(Pair(a, b, float(a_in_b), float(b_in_a), lines, slices))
    return pairs


def compare(documents: list[Document], past: list[Document], boilerplate: Document, jobs: int = 1) -> list[Pair]:
    """Each pair of ``documents``, and each document with each of ``past``, best score first."""
    common = np.unique(np.array(list(fingerprint(boilerplate).hashes)))
    everything = [*documents, *past]
    names = [d.name for d in documents]
    texts = {d.name: d.text for d in everything}
    with ProcessPoolExecutor(jobs) as pool:
        prints = dict(zip(texts, pool.map(partial(fingerprint, boilerplate=common), everything, chunksize=4)))
    with ProcessPoolExecutor(jobs, initializer=_share, initargs=(prints, texts)) as pool:
        rows = pool.map(_pairs_of, names, [names[i + 1:] + [p.name for p in past] for i in range(len(names))])
        pairs = [pair for row in rows for pair in row]
    return sorted(pairs, key=lambda p: (-p.score, p.a, p.b))
