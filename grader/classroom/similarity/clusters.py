"""Submissions that look alike, grouped: every pair to review joins its two sides (union-find), so
five copies of one submission are one group of five, not ten pairs."""

from __future__ import annotations

from collections.abc import Iterable


def clusters(edges: Iterable[tuple[str, str]]) -> list[list[str]]:
    """The connected groups of ``edges``' names, each sorted, the largest first (then by first name)."""
    parent: dict[str, str] = {}

    def root(name: str) -> str:
        parent.setdefault(name, name)
        while parent[name] != name:
            parent[name] = parent[parent[name]]
            name = parent[name]
        return name

    for a, b in edges:
        parent[root(a)] = root(b)
    groups: dict[str, list[str]] = {}
    for name in parent:
        groups.setdefault(root(name), []).append(name)
    return sorted((sorted(group) for group in groups.values()), key=lambda group: (-len(group), group[0]))
