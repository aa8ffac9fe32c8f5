"""Growing a draft token tree with a draft LM, shared by DySpec and the static trees; the tree is a `GrowingTree`.

Notation (DySpec, Xiong et al. 2024, App. D): ``D[u]`` is the warped draft distribution after node u,
the proposal u's children are drawn from, without replacement; ``R[u]`` is what is left of it after
the children drawn so far (unnormalised; only its mass is tracked); ``w(u)`` is the product of the
draft probabilities along the path to u (w(root) = 1). The next draw at u is then worth
``v = w(u) * sum(R[u])``, the estimated probability that the verifier examines it, and a new child c
is worth w(c) = w(u) * D[u][c]. Children are kept in the order they were drawn (node order): the
verifier tests them in that order against the same D.

Copied nodes (prompt lookup, `specviz.methods.lookup`; DySpec with ``RunConfig.copy`` on): the context's own
continuation offers a chain of tokens with prior acceptance ``alpha`` (cumulative, from the root; at temperature 0
rescaled by the draft's probability of the first copied token, `LookupConfig.draft_rated`); a *copy slot* at the
root, and then at each copied node, is worth ``alpha[j]``, and a grower may spend budget on it like on a sampling
slot.
A copied node is a point-mass proposal; the token it copies is removed from its parent's D before any draw
(``D`` is then that renormalised remainder, ``scale[u]`` the draft mass it kept), so no drawn sibling
repeats it and the verifier's sequential rejection stays exact. Copying needs no draft forward.

At target temperature 0 nothing is sampled: each draw takes the most probable remaining token
(deterministic top order) and verification is argmax matching, so any tree shape stays lossless.

Draft forwards: a batch of nodes whose parents the draft has computed goes through the draft in one
forward; each node attends to the committed prefix and its own ancestors only (``LM.forward(...,
visible=...)``, the tree attention mask over a cache that holds several branches). ``slots[node]`` is
the node's draft-cache position, which `DraftLMDrafter.observe` uses to keep the accepted path.
"""

from __future__ import annotations

from collections.abc import Sequence
from itertools import islice

import torch

from specviz.core.config import LookupConfig
from specviz.core.ngram import NgramIndex
from specviz.core.sampling import warp
from specviz.core.trace import DraftTree
from specviz.methods.base import DraftLMDrafter, Proposal
from specviz.methods.lookup.plan import best_extension, calibrated, plan
from specviz.methods.trees.growing import GrowingTree


def draw_order(
    D: torch.Tensor, k: int, rng: torch.Generator, greedy: bool, cols: torch.Tensor | None = None
) -> tuple[list[list[int]], list[list[float]]]:
    """The first k draws without replacement from each row of D (n, V), in drawing order, with their D.

    Greedy: the k most probable tokens. Otherwise exponential keys: token x gets log D[x] - log E[x] with
    E ~ Exp(1), and the descending order of the keys is distributed exactly as drawing one token at a time
    from what is left, renormalised (Efraimidis-Spirakis; Gumbel top-k). One vectorised step per node
    instead of one pass over the vocabulary per draw; rows stop early where D's support runs out.
    `cols` (distinct ids), when given, must hold D's whole support (a reduced-vocabulary draft's head):
    keys are drawn over those columns only, which is the same distribution at a fraction of the cost.
    """
    Dc = D if cols is None else D.index_select(-1, cols)  # (n, C)
    k = min(k, Dc.shape[-1])
    keys = Dc.log()
    if not greedy:
        e = torch.empty_like(Dc).exponential_(generator=rng).clamp_(min=1e-30)
        keys = keys - e.log()
    idx = torch.topk(keys, k, dim=-1).indices  # (n, k)
    probs = Dc.gather(-1, idx)  # (n, k)
    support = (Dc > 0).sum(-1).tolist()
    if cols is not None:
        idx = cols[idx]
    return ([row[:m] for row, m in zip(idx.tolist(), support)], [row[:m] for row, m in zip(probs.tolist(), support)])


class TreeDrafter(DraftLMDrafter):
    """A `DraftLMDrafter` that grows one token tree per round; subclasses decide where to draw next.

    `start` makes the round's `GrowingTree`; the draft forwards that fill in its distributions, the copies past
    the budget and the final `Proposal` take it. `max_children` caps the draws any node can get in one round (the
    budget, or a shape's widest node): each computed node's drawing order is prepared that far in one vectorised
    step.
    """

    value_temperature: float | None = None  # greedy runs only: temperature of the D that sets q and node values
    max_children: int = 64
    lookup: LookupConfig | None = None  # copy slots from prompt lookup (RunConfig.copy)
    curve: dict | None = None  # the target's verify curve: copies past the budget (lookup.extend_to)
    index: NgramIndex | None = None
    record_frontier: int = 0  # growers that choose where to draw: keep this many best slots per step (0: none)

    def begin(self, prompt_ids):
        super().begin(prompt_ids)
        self.index = NgramIndex(self.lookup.max_ngram) if self.lookup else None

    def start(self, committed: Sequence[int], max_depth: int, copy_depth: int | None = None) -> GrowingTree:
        """Feed the committed tokens the draft has not seen and make the round's tree: the root (the last committed
        token), its draft distribution computed. `copy_depth`: how deep copied nodes may go past the budget (default
        `max_depth`)."""
        logits = self.feed_pending(committed).logits
        copy_limit = self.lookup.k if self.lookup else 0
        tree = GrowingTree([committed[-1]], max_depth, frozenset(self.eos_ids), copy_limit, draft_forwards=1)
        if self.index is not None:
            tree.open_copies(
                *plan(
                    self.index,
                    committed,
                    self.lookup,
                    copy_depth or max_depth,
                    self.eos_ids,
                    not self.sampling.greedy,
                    extend=self.curve is not None,
                )
            )
        self._set_dists(tree, [0], logits[None])
        # (prior, the draft's probability) of the first copied token: what `specviz copy-calibration` fits
        tree.copy_rating = (tree.copy_alpha[0], 1.0 - tree.scale[0]) if tree.copy_toks else None
        if tree.copy_rating and self.sampling.greedy and self.lookup.draft_rated:
            tree.copy_alpha = calibrated(tree.copy_alpha, tree.copy_rating[1])
        return tree

    def extend_copies(self, tree: GrowingTree) -> None:
        """Past the budget: copy on from the open copy slot while the expected tokens per verify millisecond
        rise on this device's verify curve (`lookup.best_extension`); no draft forward is needed.
        Node values stand in for acceptance probabilities, as everywhere in the tree."""
        u = tree.open_copy
        if self.curve is None or u is None or tree.tokens[u] in self.eos_ids:
            return
        j = tree.copy_at[u]
        room = min(self.lookup.extend_to - len(tree.copied), len(tree.copy_toks) - j)
        alphas = tree.copy_alpha[j : j + max(0, room)]
        for a in alphas[: best_extension(1 + sum(tree.w[1:]), len(tree.tokens), alphas, self.curve)]:
            if self.record_frontier:
                tree.steps.append([[u, round(a, 6), True]])  # past the budget the copy slot is the only one
            u = tree.copy(u, a)

    def compute(self, tree: GrowingTree, nodes: Sequence[int]) -> None:
        """Draft forwards over `nodes`: sets D, drawing orders and slots. One forward when their parents are
        computed (always, for drawn nodes); a copied chain whose nodes hang off each other takes one per link,
        because a feature drafter reads each node's parent output."""
        nodes = [c for c in nodes if not tree.computed(c)]
        while nodes:
            ready = [c for c in nodes if tree.computed(tree.parents[c])]
            self._compute(tree, ready)
            nodes = [c for c in nodes if not tree.computed(c)]

    def _compute(self, tree: GrowingTree, nodes: list[int]) -> None:
        past, root_slot = self.lm.length, self.slots[0]
        visible = torch.zeros(len(nodes), past, dtype=torch.bool)  # (n, past)
        visible[:, : root_slot + 1] = True
        for i, c in enumerate(nodes):
            a = tree.parents[c]
            while a > 0:
                visible[i, self.slots[a]] = True
                a = tree.parents[a]
        out = self.lm.forward([tree.tokens[c] for c in nodes], parents=[-1] * len(nodes), visible=visible)
        tree.draft_forwards += 1
        for i, c in enumerate(nodes):
            self.slots[c] = past + i
        self._set_dists(tree, nodes, out.logits)

    def _set_dists(self, tree: GrowingTree, nodes: list[int], logits: torch.Tensor) -> None:
        t = self.value_temperature if self.sampling.greedy else None
        D = warp(logits, self.sampling, temperature=t)  # (n, V)
        scale = [1.0] * len(nodes)
        for i, u in enumerate(nodes):  # the token u copies, or may copy, leaves u's draws
            j = tree.copy_at.get(u)
            if j is not None:
                y = tree.copy_toks[j]
                scale[i] = max(0.0, 1.0 - float(D[i, y]))
                D[i, y] = 0.0
                if scale[i] > 0:
                    D[i] /= D[i].sum()
        toks, probs = draw_order(D, self.max_children, self.rng, self.sampling.greedy, self.lm.support)
        for i, u in enumerate(nodes):
            tree.set_dist(u, D[i], (toks[i], probs[i]) if scale[i] > 0 else ([], []), scale[i])

    def note_frontier(self, tree: GrowingTree, heap: list[tuple]) -> list | None:
        """The best `record_frontier` slots of a grower's heap of (-value, order, node, copy slot?), best first, as
        [node, value, copy slot?]; slots whose draws are used up are left out. None when not recording."""
        if not self.record_frontier:
            return None
        live = (e for e in sorted(heap) if e[3] or not tree.computed(e[2]) or tree.mass(e[2]) > 0)
        return [[u, round(-v, 6), bool(copy)] for v, _, u, copy in islice(live, self.record_frontier)]

    def proposal(self, tree: GrowingTree) -> Proposal:
        """The grown tree; at T > 0 also D at every node that has children (what the verifier needs); the draft
        distribution at every node that has children, and the tree's growth (order, node values, frontier)."""
        draft = DraftTree(tuple(tree.tokens), tuple(tree.parents), tuple(tree.q))
        drew = {tree.parents[c] for c in range(1, len(tree.tokens)) if c not in tree.copied}
        props = {} if self.sampling.greedy else {u: tree.D[u] for u in sorted(drew)}
        growth = {"expand_order": tuple(tree.added), "values": tuple(round(w, 6) for w in tree.w)}
        if self.record_frontier and len(tree.steps) == len(tree.added):
            growth["frontier"] = tuple(tree.steps)
        dists = {u: tree.D[u] for u in sorted(drew)}
        info = {}
        if tree.copy_rating is not None:
            prior, q = (round(float(x), 6) for x in tree.copy_rating)
            info["copy_rating"] = {"prior": prior, "q": q, "token": int(tree.copy_toks[0])}
        return Proposal(
            draft, props, tree.draft_forwards, info, copied=frozenset(tree.copied), dists=dists, growth=growth
        )
