"""DySpec: a draft token tree grown greedily by estimated value (Xiong et al. 2024, arXiv 2410.11744).

Notation as in `specviz.methods.trees.grow`: a *sampling slot* at node u is the next draw from u's remaining draft
distribution R[u]; its value v = w(u) * sum(R[u]) estimates the probability that the verifier examines
that draw (the draft probability stands in for the unknown acceptance rate). Drawing y from R[u] creates
node c with value w(c) = v * R[y] (normalised), and leaves a sibling slot worth v * (1 - R[y]).

Two variants, both lossless (the decision to draw again depends on draft quantities only, no drawn
token is ever dropped, and children are kept in drawing order):

- heap (Algorithm 1, ``level_threshold == 0``): a max-heap of slots; each pop draws one token, until
  the tree has ``budget`` drafted nodes. Draft distributions are computed lazily and in batches: when a
  popped slot belongs to a node the draft has not run yet, every node created since the last draft
  forward goes through the draft together (one forward, tree mask). This builds exactly Algorithm 1's
  tree with far fewer draft forwards than its one-per-node.
- level (Algorithm 2, ``level_threshold == t > 0``): one draft forward per depth level over the new
  nodes worth at least t; at each level the slots worth at least t are drawn best first, capped at
  ``budget``.

With copying on (``RunConfig.copy``, prompt lookup; beyond the paper), the context's own continuation competes
for the budget through copy slots valued by their prior acceptance (`grow`), so a round where the
target is repeating itself spends its nodes on the copy, and any other round on the draft. With a verify
curve for the device, the copy then goes on past the budget while expected tokens per verify ms rise.
"""

from __future__ import annotations

import heapq

from specviz.core.config import DySpecConfig, LookupConfig
from specviz.methods.base import Drafter, Proposal
from specviz.methods.trees.grow import TreeDrafter
from specviz.methods.trees.growing import GrowingTree


class DySpecDrafter(TreeDrafter):
    """Dynamic token tree under a node budget (DySpec); `cfg.level_threshold` picks the variant."""

    def __init__(
        self,
        lm,
        sampling,
        rng,
        cfg: DySpecConfig = DySpecConfig(),
        eos_ids=frozenset(),
        lookup: LookupConfig | None = None,
        curve: dict | None = None,
        *,
        record_frontier: int = 0,
    ):
        super().__init__(lm, sampling, rng, eos_ids)
        self.cfg, self.lookup, self.curve = cfg, lookup, curve
        self.record_frontier = record_frontier  # the best slots at each growth step, for the replay
        self.value_temperature = cfg.draft_temperature
        self.max_children = cfg.budget

    def propose(self, committed, remaining) -> Proposal:
        depth = min(self.cfg.max_depth, remaining - 1)  # the round always adds one target token
        if depth < 1:
            self.slots = {}
            return Drafter.propose(self, committed, remaining)
        tree = self.start(committed, depth, copy_depth=remaining - 1)
        if self.cfg.level_threshold > 0:
            self._grow_levels(tree, self.cfg.level_threshold)
        else:
            self._grow_heap(tree)
        self.extend_copies(tree)
        return self.proposal(tree)

    def _grow_heap(self, tree: GrowingTree) -> None:
        """Algorithm 1: pop the most valuable slot, draw one token there, push its sibling and child slots.

        A copy slot (lookup on) competes in the same heap; taking it needs no draft forward."""
        heap, seq = [(-tree.w[0] * tree.mass(0), 0, 0, False)], 1  # (-v, insertion order, node, copy slot?)
        if tree.copy_value(0) > 0:
            heap.append((-tree.copy_value(0), 1, 0, True))
            seq = 2
        pending: list[int] = []  # created, expandable, not yet run by the draft
        while heap and tree.n_drafted < self.cfg.budget:
            seen = self.note_frontier(tree, heap)
            _, _, u, is_copy = heapq.heappop(heap)
            if is_copy:
                c = tree.copy(u)
            else:
                if not tree.computed(u):
                    self.compute(tree, pending)  # u is among them
                    pending = []
                if tree.mass(u) <= 0:
                    continue
                c = tree.draw(u)
            if seen is not None:
                tree.steps.append(seen)
            if not is_copy:
                v_sibling = tree.w[u] * tree.mass(u)
                if v_sibling > 0:
                    heapq.heappush(heap, (-v_sibling, seq, u, False))
            if tree.copy_value(c) > 0:
                heapq.heappush(heap, (-tree.copy_value(c), seq + 1, c, True))
            if tree.expandable(c):
                heapq.heappush(heap, (-tree.w[c], seq + 2, c, False))
                pending.append(c)
            seq += 3

    def _grow_levels(self, tree: GrowingTree, t: float) -> None:
        """Algorithm 2: per depth level, draw at every slot worth >= t (best first), then one draft forward.

        Copy slots worth >= t are taken in the level where they appear (they need no forward), so a whole
        copied chain can join in the first level."""
        frontier = [0]
        while frontier and tree.n_drafted < self.cfg.budget:
            heap = [(-tree.w[u] * tree.mass(u), i, u, False) for i, u in enumerate(frontier) if tree.mass(u) > 0]
            heap += [(-tree.copy_value(u), -1 - i, u, True) for i, u in enumerate(frontier) if tree.copy_value(u) >= t]
            heapq.heapify(heap)
            seq, new = len(frontier), []
            while heap and tree.n_drafted < self.cfg.budget:
                seen = self.note_frontier(tree, heap)
                _, _, u, is_copy = heapq.heappop(heap)
                if seen is not None:
                    tree.steps.append(seen)
                if is_copy:
                    c = tree.copy(u)
                    if tree.copy_value(c) >= t:
                        heapq.heappush(heap, (-tree.copy_value(c), seq, c, True))
                        seq += 1
                else:
                    c = tree.draw(u)
                    v_sibling = tree.w[u] * tree.mass(u)
                    if v_sibling >= t:
                        heapq.heappush(heap, (-v_sibling, seq, u, False))
                        seq += 1
                if tree.expandable(c) and tree.w[c] >= t:
                    new.append(c)
            if not new or tree.n_drafted >= self.cfg.budget:
                return
            self.compute(tree, new)
            frontier = new
