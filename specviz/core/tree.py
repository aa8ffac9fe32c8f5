"""Tree algebra on parent arrays (node 0 = root, parents[i] < i). No models here."""

from __future__ import annotations

from collections.abc import Sequence

from specviz.core.trace import DraftTree


def chain(root: int, tokens: Sequence[int], q: Sequence[float]) -> DraftTree:
    """A chain is a tree whose parents are -1, 0, 1, 2, ..."""
    n = len(tokens)
    return DraftTree((root, *tokens), tuple(range(-1, n)), (1.0, *q))


def depths(parents: Sequence[int]) -> list[int]:
    d = [0] * len(parents)
    for i in range(1, len(parents)):
        d[i] = d[parents[i]] + 1
    return d


def children(parents: Sequence[int]) -> list[list[int]]:
    """children[u] in node order, which every builder keeps equal to sampling order."""
    kids: list[list[int]] = [[] for _ in parents]
    for i in range(1, len(parents)):
        kids[parents[i]].append(i)
    return kids


def from_paths(paths: Sequence[Sequence[int]]) -> list[int]:
    """Parents of a static tree given Medusa-style rank paths, e.g. [(0,), (1,), (0, 0)].

    Returns the parent array of the tree (root first), nodes in BFS order with siblings by rank.
    Ranks name the k-th sampled child, so a path's prefix must also be listed.
    """
    paths = sorted({tuple(p) for p in paths}, key=lambda p: (len(p), p))
    index = {(): 0}
    parents = [-1]
    for p in paths:
        if p[:-1] not in index:
            raise ValueError(f"path {p} is listed without its prefix {p[:-1]}")
        index[p] = len(parents)
        parents.append(index[p[:-1]])
    return parents
