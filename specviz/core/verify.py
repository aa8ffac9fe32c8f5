"""Lossless verification of a draft tree against one target forward; shared by every method.

Notation: at node u, ``R`` is the target's (residual) distribution and ``D`` the proposal that
u's children were drawn from, in sampling order (sampling without replacement: each later child
was drawn from D with the earlier ones zeroed and renormalised). Child y is accepted with
probability min(1, R[y] / D[y]); on rejection R <- norm(max(R - D, 0)), D[y] <- 0, D <- norm(D).
A *copied* child (prompt lookup, `lookup.py`) was proposed as a point mass on its token: it is accepted
with probability min(1, R[y]) and on rejection R <- norm(max(R - onehot(y), 0)), i.e. y leaves R; D is
not touched, because the drawn children came from D with every copied sibling's token removed (each child
is drawn from a distribution fixed by the children before it, so sequential rejection stays exact; Miao
et al. 2024, SpecInfer, multi-step speculative sampling).
If every child is rejected (or D is exhausted), the correction is sampled from R; after an
accepted leaf the bonus token is sampled from the target. With one child per node this is
classic speculative sampling (Leviathan et al., Chen et al.); at temperature 0 it reduces to
"follow the child equal to the target argmax, else emit the argmax".
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from specviz.core.sampling import residual, sample, uniform
from specviz.core.trace import (
    ACCEPTED,
    BONUS,
    REJECTED,
    RESAMPLE,
    ROOT,
    UNVISITED,
    DraftTree,
)
from specviz.core.tree import children


@dataclass
class Verdict:
    status: list[str]
    accepted_path: list[int]
    emitted: list[int]
    correction: str
    u: list[float | None] | None = None  # sampled verification: the uniform draw each judged node was compared with
    residuals: dict[int, torch.Tensor] | None = None  # rejected node -> the residual R left after its rejection
    # sampled verification: per judged node, (R(y), D(y)) at its judgement: accepted iff u D(y) < R(y) (D = 1 copied)
    judged: list[tuple[float, float] | None] | None = None


def verify_greedy(tree: DraftTree, argmax: list[int]) -> Verdict:
    """argmax[u]: the target's greedy token after node u."""
    kids = children(tree.parents)
    status = [ROOT] + [UNVISITED] * (len(tree) - 1)
    path, u = [], 0
    while True:
        nxt = None
        for c in kids[u]:
            if tree.tokens[c] == argmax[u]:
                status[c] = ACCEPTED
                nxt = c
                break
            status[c] = REJECTED
        if nxt is None:
            kind = BONUS if not kids[u] else RESAMPLE
            return Verdict(status, path, [tree.tokens[i] for i in path] + [argmax[u]], kind)
        path.append(nxt)
        u = nxt


def verify_sampled(
    tree: DraftTree,
    p: torch.Tensor,
    proposals: dict[int, torch.Tensor],
    rng: torch.Generator,
    copied: frozenset[int] = frozenset(),
) -> Verdict:
    """p: (n, V) warped target distributions after each node; proposals[u]: D for u's drawn children;
    copied: the nodes proposed as a point mass on their token."""
    kids = children(tree.parents)
    status = [ROOT] + [UNVISITED] * (len(tree) - 1)
    draws: list[float | None] = [None] * len(tree)
    judged: list[tuple[float, float] | None] = [None] * len(tree)
    left: dict[int, torch.Tensor] = {}
    path, u = [], 0
    while True:
        if not kids[u]:
            y = sample(p[u], rng)  # leaf reached: bonus token
            return Verdict(status, path, [tree.tokens[i] for i in path] + [y], BONUS, draws, left, judged)
        R = p[u]
        D = proposals[u].clone() if u in proposals else None
        nxt = None
        for c in kids[u]:
            y = tree.tokens[c]
            if c in copied:
                draws[c] = uniform(rng)
                judged[c] = (float(R[y]), 1.0)
                if draws[c] < judged[c][0]:  # accept with prob min(1, R[y] / 1)
                    nxt = c
                    break
                status[c] = REJECTED
                R = left[c] = residual(R, torch.nn.functional.one_hot(torch.tensor(y), R.shape[-1]).to(R))
                continue
            if D is None:  # D exhausted: no drawn child is left
                status[c] = REJECTED
                left[c] = R
                continue
            draws[c] = uniform(rng)
            judged[c] = (float(R[y]), float(D[y]))
            if draws[c] * judged[c][1] < judged[c][0]:  # accept with prob min(1, R[y]/D[y])
                nxt = c
                break
            status[c] = REJECTED
            R = left[c] = residual(R, D)
            D[y] = 0.0
            mass = D.sum()
            D = D / mass if mass > 0 else None
        if nxt is None:
            y = sample(R, rng)
            return Verdict(status, path, [tree.tokens[i] for i in path] + [y], RESAMPLE, draws, left, judged)
        status[nxt] = ACCEPTED
        path.append(nxt)
        u = nxt
