"""Growing a draft token tree with a draft LM: the node bookkeeping shared by DySpec and the static trees.

Notation (DySpec, Xiong et al. 2024, App. D): ``D[u]`` is the warped draft distribution after node u,
the proposal u's children are drawn from, without replacement; ``R[u]`` is what is left of it after
the children drawn so far (unnormalised; only its mass is tracked); ``w(u)`` is the product of the
draft probabilities along the path to u (w(root) = 1). The next draw at u is then worth
``v = w(u) * sum(R[u])``, the estimated probability that the verifier examines it, and a new child c
is worth w(c) = w(u) * D[u][c]. Children are kept in the order they were drawn (node order): the
verifier tests them in that order against the same D.

At target temperature 0 nothing is sampled: each draw takes the most probable remaining token
(deterministic top order) and verification is argmax matching, so any tree shape stays lossless.

Draft forwards: a batch of nodes whose parents the draft has computed goes through the draft in one
forward; each node attends to the committed prefix and its own ancestors only (``LM.forward(...,
visible=...)``, the tree attention mask over a cache that holds several branches). ``slots[node]`` is
the node's draft-cache position, which `DraftLMDrafter.observe` uses to keep the accepted path.
"""
from __future__ import annotations

from collections.abc import Sequence

import torch

from .drafters import DraftLMDrafter, Proposal
from .sampling import warp
from .trace import DraftTree


def draw_order(D: torch.Tensor, k: int, rng: torch.Generator, greedy: bool,
               cols: torch.Tensor | None = None) -> tuple[list[list[int]], list[list[float]]]:
    """The first k draws without replacement from each row of D (n, V), in drawing order, with their D.

    Greedy: the k most probable tokens. Otherwise exponential keys: token x gets log D[x] - log E[x] with
    E ~ Exp(1), and the descending order of the keys is distributed exactly as drawing one token at a time
    from what is left, renormalised (Efraimidis-Spirakis; Gumbel top-k). One vectorised step per node
    instead of one pass over the vocabulary per draw; rows stop early where D's support runs out.
    `cols` (sorted ids), when given, must hold D's whole support (a reduced-vocabulary draft's head):
    keys are drawn over those columns only, which is the same distribution at a fraction of the cost.
    """
    Dc = D if cols is None else D.index_select(-1, cols)                             # (n, C)
    k = min(k, Dc.shape[-1])
    keys = Dc.log()
    if not greedy:
        e = torch.empty_like(Dc).exponential_(generator=rng).clamp_(min=1e-30)
        keys = keys - e.log()
    idx = torch.topk(keys, k, dim=-1).indices                                         # (n, k)
    probs = Dc.gather(-1, idx)                                                        # (n, k)
    support = (Dc > 0).sum(-1).tolist()
    if cols is not None:
        idx = cols[idx]
    return ([row[:m] for row, m in zip(idx.tolist(), support)],
            [row[:m] for row, m in zip(probs.tolist(), support)])


class TreeDrafter(DraftLMDrafter):
    """A `DraftLMDrafter` that grows one token tree per round; subclasses decide where to draw next.

    `max_children` caps the draws any node can get in one round (the budget, or a shape's widest node):
    each computed node's drawing order is prepared that far in one vectorised step.
    """

    value_temperature: float | None = None      # greedy runs only: temperature of the D that sets q and node values
    max_children: int = 64

    def start(self, committed: Sequence[int], max_depth: int) -> None:
        """Feed the committed tokens the draft has not seen and make the root (the last committed token)."""
        logits = self.feed_pending(committed)
        self.max_depth = max_depth
        self.tokens, self.parents, self.q, self.depth, self.w = [committed[-1]], [-1], [1.0], [0], [1.0]
        self.D: dict[int, torch.Tensor] = {}
        self.order: dict[int, tuple[list[int], list[float]]] = {}   # node -> its drawing order (tokens, D)
        self.drawn: dict[int, int] = {}                             # node -> children drawn so far
        self.left: dict[int, float] = {}                            # node -> sum(R[u])
        self.draft_forwards = 1
        self._set_dists([0], logits[None])

    @property
    def n_drafted(self) -> int:
        return len(self.tokens) - 1

    def computed(self, u: int) -> bool:
        return u in self.D

    def mass(self, u: int) -> float:
        """Draft mass not yet drawn at u; 0 once no draw is left (D's support, or `max_children`, used up)."""
        return self.left[u] if self.drawn[u] < len(self.order[u][0]) else 0.0

    def expandable(self, c: int) -> bool:
        """May c get children: not EOS, and not at the depth limit of this round."""
        return self.tokens[c] not in self.eos_ids and self.depth[c] < self.max_depth

    def draw(self, u: int) -> int:
        """Draw the next child of u (u computed, mass(u) > 0); returns the new node id."""
        toks, probs = self.order[u]
        j = self.drawn[u]
        y, d = toks[j], probs[j]
        self.drawn[u] = j + 1
        self.left[u] = max(0.0, self.left[u] - d)
        self.tokens.append(y)
        self.parents.append(u)
        self.q.append(d)
        self.depth.append(self.depth[u] + 1)
        self.w.append(self.w[u] * d)
        return len(self.tokens) - 1

    def compute(self, nodes: Sequence[int]) -> None:
        """One draft forward over `nodes` (their parents already computed): sets D, drawing orders and slots."""
        nodes = list(nodes)
        past, root_slot = self.lm.length, self.slots[0]
        visible = torch.zeros(len(nodes), past, dtype=torch.bool)                    # (n, past)
        visible[:, :root_slot + 1] = True
        for i, c in enumerate(nodes):
            a = self.parents[c]
            while a > 0:
                visible[i, self.slots[a]] = True
                a = self.parents[a]
        out = self.lm.forward([self.tokens[c] for c in nodes], parents=[-1] * len(nodes), visible=visible)
        self.draft_forwards += 1
        for i, c in enumerate(nodes):
            self.slots[c] = past + i
        self._set_dists(nodes, out.logits)

    def _set_dists(self, nodes: list[int], logits: torch.Tensor) -> None:
        t = self.value_temperature if self.sampling.greedy else None
        D = warp(logits, self.sampling, temperature=t)                                # (n, V)
        toks, probs = draw_order(D, self.max_children, self.rng, self.sampling.greedy, self.lm.head_ids)
        for i, u in enumerate(nodes):
            self.D[u] = D[i]
            self.order[u] = (toks[i], probs[i])
            self.drawn[u] = 0
            self.left[u] = 1.0

    def proposal(self) -> Proposal:
        """The grown tree; at T > 0 also D at every node that has children (what the verifier needs)."""
        tree = DraftTree(tuple(self.tokens), tuple(self.parents), tuple(self.q))
        props = {} if self.sampling.greedy else {u: self.D[u] for u in sorted(set(self.parents[1:]))}
        return Proposal(tree, props, self.draft_forwards)
