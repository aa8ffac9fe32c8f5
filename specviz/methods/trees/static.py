"""Fixed tree shapes: k-ary (SpecInfer-style expansion) and Sequoia's DP tree, and the drafter that fills them.

A shape is a parent array (node 0 = root, children listed in rank order). Each round the drafter fills
it level by level, one draft forward per level: a node's k children are the draft's first k draws
without replacement at T > 0 (rank = drawing order), its top-k tokens at T = 0. Branches below EOS or
past the round's remaining length are cut. Every tree goes through the shared verifier.

Sequoia (Chen et al. 2024, arXiv 2402.12374, §3.1) notation: ``P[k]`` (k = 1, 2, ...) is the positional
acceptance vector, the probability that the k-th drawn child of an accepted node is the accepted one;
a node's score f(v) is the product of P over the child ranks on its path (f(root) = 1), and a tree is
worth F = sum of f, its expected number of tokens per round under that model.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import lru_cache

import numpy as np

from specviz.core.tree import children, from_paths
from specviz.methods.base import Drafter, Proposal
from specviz.methods.trees.grow import TreeDrafter


class StaticTreeDrafter(TreeDrafter):
    """Fills a fixed shape (parent array, siblings in rank order) with draft tokens each round."""

    def __init__(self, lm, sampling, rng, shape: Sequence[int], eos_ids=frozenset()):
        super().__init__(lm, sampling, rng, eos_ids)
        self.shape = tuple(shape)
        self.kids = children(self.shape)
        self.max_children = max(1, *(len(k) for k in self.kids))

    def propose(self, committed, remaining) -> Proposal:
        if remaining < 2 or len(self.shape) == 1:
            self.slots = {}
            return Drafter.propose(self, committed, remaining)
        tree = self.start(committed, remaining - 1)
        frontier = [(0, 0)]  # (shape node, tree node)
        while frontier:
            todo = [t for _, t in frontier if not tree.computed(t)]
            if todo:
                self.compute(tree, todo)  # one draft forward per level
            nxt = []
            for s, t in frontier:
                for sc in self.kids[s]:
                    if tree.mass(t) <= 0:  # the draft's support is exhausted
                        break
                    c = tree.draw(t)
                    if self.kids[sc] and tree.expandable(c):
                        nxt.append((sc, c))
            frontier = nxt
        return self.proposal(tree)


def kary(width: int, depth: int) -> list[int]:
    """Every node down to `depth` gets `width` children (SpecInfer's expansion tree <width, ..., width>)."""
    paths, level = [], [()]
    for _ in range(depth):
        level = [p + (k,) for p in level for k in range(width)]
        paths += level
    return from_paths(paths)


def expected_tokens(parents: Sequence[int], P: Sequence[float]) -> float:
    """F(tree) = sum over nodes of the product of P[rank] along the path (root = 1)."""
    kids = children(parents)
    f, total = {0: 1.0}, 1.0
    for u in range(len(parents)):
        for k, c in enumerate(kids[u]):
            f[c] = f[u] * (P[k] if k < len(P) else 0.0)
            total += f[c]
    return total


@lru_cache(maxsize=64)
def _sequoia_tables(n_max: int, P: tuple[float, ...], max_depth: int):
    """DP over trees of at most n_max nodes (root included) and depth <= d, for d = 0..max_depth.

    F[d, n]: best F of a tree with n nodes and depth <= d. A[b, j]: best sum over a root's first b
    children of P[k] * F[d-1, m_k] with sizes summing to j; the b-th child's size is recorded in
    split[d, b, j] for backtracking; best_b[d, n] is the best number of root children.
    """
    B = len(P)
    F = np.full((max_depth + 1, n_max + 1), -np.inf)
    F[:, 1] = 1.0
    split = np.zeros((max_depth + 1, B + 1, n_max + 1), dtype=np.int64)
    best_b = np.zeros((max_depth + 1, n_max + 1), dtype=np.int64)
    for d in range(1, max_depth + 1):
        A = np.full((B + 1, n_max + 1), -np.inf)
        A[0, 0] = 0.0
        for b in range(1, B + 1):
            for j in range(1, n_max):
                m = np.arange(1, j + 1)  # size of the b-th child's subtree
                Fm = F[d - 1, m]
                ok = np.isfinite(Fm) & np.isfinite(A[b - 1, j - m])
                vals = np.where(ok, A[b - 1, j - m] + P[b - 1] * np.where(ok, Fm, 0.0), -np.inf)
                k = int(np.argmax(vals))
                A[b, j], split[d, b, j] = vals[k], m[k]
        for n in range(2, n_max + 1):
            col = A[:, n - 1]
            best_b[d, n] = int(np.argmax(col))
            F[d, n] = 1.0 + col[best_b[d, n]]
    return F, split, best_b


def sequoia(budget: int, P: Sequence[float], max_depth: int) -> list[int]:
    """Sequoia's tree: `budget` drafted nodes, depth <= max_depth, maximising F (its DP, §3.1.1)."""
    n = budget + 1
    P = tuple(float(x) for x in P)
    max_depth = max(1, min(max_depth, budget))
    n_fit = min(n, 1 + sum(len(P) ** k for k in range(1, max_depth + 1)))
    F, split, best_b = _sequoia_tables(n_fit, P, max_depth)
    paths: list[tuple[int, ...]] = []

    def build(path: tuple[int, ...], size: int, d: int) -> None:
        b, j = int(best_b[d, size]), size - 1
        for rank in range(b, 0, -1):  # peel children off from the last one
            m = int(split[d, rank, j])
            child = path + (rank - 1,)
            paths.append(child)
            if m > 1:
                build(child, m, d - 1)
            j -= m

    if n_fit > 1:
        build((), n_fit, max_depth)
    return from_paths(paths)
