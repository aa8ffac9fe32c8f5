"""`GrowingTree`: one round's draft token tree while a `TreeDrafter` grows it.

Notation as in `specviz.methods.trees.grow`: ``D[u]`` is the draft distribution u's children are drawn from,
``R[u]`` what is left of it (only its mass, ``left[u]``, is tracked), ``w(u)`` the value of node u. Copied nodes
(prompt lookup) hang off copy slots worth ``copy_alpha[j]``; the token a node copies, or may copy, has been
removed from its D, which kept ``scale[u]`` of the draft's mass.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch


@dataclass
class GrowingTree:
    """The nodes drafted so far this round (node 0 = the root, the last committed token), what the draft has
    computed at each, and the copy chain the round may take. Node ids are positions in `tokens`; a new tree holds
    the root alone.

    `max_depth` and `eos_ids` say which nodes may get children; `copy_limit` is how many copied nodes the budget
    may hold (`LookupConfig.k`). `draft_forwards` counts the round's draft forwards, the root's included.
    `copy_rating`: (prior, the draft's probability) of the round's first copied token, None without a copy.
    """

    tokens: list[int]
    max_depth: int
    eos_ids: frozenset[int] = frozenset()
    copy_limit: int = 0
    parents: list[int] = field(default_factory=lambda: [-1])
    q: list[float] = field(default_factory=lambda: [1.0])
    depth: list[int] = field(default_factory=lambda: [0])
    w: list[float] = field(default_factory=lambda: [1.0])
    D: dict[int, torch.Tensor] = field(default_factory=dict)
    order: dict[int, tuple[list[int], list[float]]] = field(default_factory=dict)  # node -> drawing order (tokens, D)
    drawn: dict[int, int] = field(default_factory=dict)  # node -> children drawn so far
    left: dict[int, float] = field(default_factory=dict)  # node -> sum(R[u])
    scale: dict[int, float] = field(default_factory=dict)  # node -> draft mass left after removing its copy
    copied: set[int] = field(default_factory=set)
    added: list[int] = field(default_factory=list)  # nodes in the order they joined the tree
    steps: list[list] = field(default_factory=list)  # per added node, the best slots competing when it was drawn
    copy_at: dict[int, int] = field(default_factory=dict)  # node -> j: the token copy_toks[j] copies under it
    open_copy: int | None = None  # the one node whose copy slot is open
    copy_toks: list[int] = field(default_factory=list)
    copy_alpha: list[float] = field(default_factory=list)
    draft_forwards: int = 0
    copy_rating: tuple[float, float] | None = None

    @property
    def n_drafted(self) -> int:
        return len(self.tokens) - 1

    def computed(self, u: int) -> bool:
        return u in self.D

    def expandable(self, c: int) -> bool:
        """May c get children: not EOS, and not at the depth limit of this round."""
        return self.tokens[c] not in self.eos_ids and self.depth[c] < self.max_depth

    def mass(self, u: int) -> float:
        """Draft mass not yet drawn at u; 0 once no draw is left (D's support, or the drawing order, used up)."""
        return self.left[u] if self.drawn[u] < len(self.order[u][0]) else 0.0

    def open_copies(self, toks: list[int], alpha: list[float]) -> None:
        """The copy chain this round may take: `toks` copied one under another from the root, with priors `alpha`."""
        self.copy_toks, self.copy_alpha = toks, alpha
        if toks:
            self.copy_at[0], self.open_copy = 0, 0

    def copy_value(self, u: int) -> float:
        """Value of the copy slot at u (0 when u has none): the prior that the copy chain is accepted that far,
        or the draft's own value of that token where the draft has computed u and rates it higher."""
        if u != self.open_copy or not self.expandable(u) or len(self.copied) >= self.copy_limit:
            return 0.0
        v = self.copy_alpha[self.copy_at[u]]
        if u in self.scale:
            v = max(v, self.w[u] * (1.0 - self.scale[u]))
        return v

    def copy(self, u: int, v: float | None = None) -> int:
        """Turn u's copy slot (copy_value(u) > 0, or value v) into a copied node; returns the new node id."""
        v = self.copy_value(u) if v is None else v
        j = self.copy_at[u]
        self.tokens.append(self.copy_toks[j])
        self.parents.append(u)
        self.q.append(1.0)
        self.depth.append(self.depth[u] + 1)
        self.w.append(v)
        c = len(self.tokens) - 1
        self.added.append(c)
        self.copied.add(c)
        self.open_copy = None
        if j + 1 < len(self.copy_toks):
            self.copy_at[c], self.open_copy = j + 1, c
        return c

    def draw(self, u: int) -> int:
        """Draw the next child of u (u computed, mass(u) > 0); returns the new node id."""
        toks, probs = self.order[u]
        j = self.drawn[u]
        y, d = toks[j], probs[j]
        self.drawn[u] = j + 1
        self.left[u] = max(0.0, self.left[u] - d * self.scale[u])
        self.tokens.append(y)
        self.parents.append(u)
        self.q.append(d)
        self.depth.append(self.depth[u] + 1)
        self.w.append(self.w[u] * d * self.scale[u])
        self.added.append(len(self.tokens) - 1)
        return len(self.tokens) - 1

    def set_dist(self, u: int, D: torch.Tensor, order: tuple[list[int], list[float]], scale: float) -> None:
        """The draft has computed u: its D, its drawing order (tokens, their D), and the mass its copy left."""
        self.D[u] = D
        self.order[u] = order
        self.drawn[u] = 0
        self.scale[u] = scale
        self.left[u] = scale
