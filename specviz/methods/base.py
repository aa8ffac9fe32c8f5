"""The drafter interface: `Drafter` (proposes nothing: the autoregressive baseline) and `DraftLMDrafter`.

The chain drafters built on it are in `specviz.methods.chain`, the others in `specviz.methods.specdecpp`,
`specviz.methods.trees` and `specviz.methods.lookup`. A drafter proposes a `DraftTree` each round (plus the
proposal distribution every internal node's children were drawn from) and observes the verified round so it
can fix its cache and adapt.
`DraftLMDrafter` owns the draft model's cache: after each round it keeps the committed prefix
plus the accepted nodes it had computed, and feeds the rest of the committed tokens next time.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import NamedTuple

import torch

from specviz.core.config import SamplingConfig
from specviz.core.sampling import sample, warp
from specviz.core.trace import DraftTree, RoundTrace
from specviz.kernels import rowstats
from specviz.models.lm import LM


@dataclass
class Proposal:
    tree: DraftTree
    proposals: dict[int, torch.Tensor] = field(default_factory=dict)  # node -> D its children were drawn from
    draft_forwards: int = 0
    info: dict = field(default_factory=dict)  # method-specific RoundTrace fields
    copied: frozenset[int] = frozenset()  # nodes proposed as a point mass (prompt lookup)
    dists: dict[int, torch.Tensor] = field(default_factory=dict)  # node -> D its children came from, greedy too
    growth: dict = field(default_factory=dict)  # tree growers: RoundTrace's expand_order, values, frontier


class DraftStep(NamedTuple):
    """The draft's output at one position: the logits after it (V,) and the hidden state they came from (H,)."""

    logits: torch.Tensor
    hidden: torch.Tensor


class Drafter:
    """Base: proposes nothing (the autoregressive baseline is a root-only tree)."""

    def begin(self, prompt_ids: list[int]) -> None:
        pass

    def propose(self, committed: list[int], remaining: int) -> Proposal:
        return Proposal(DraftTree((committed[-1],), (-1,), (1.0,)))

    def observe(self, rnd: RoundTrace, committed: list[int]) -> None:
        pass

    wants_target_features = False

    def describe(self) -> dict:
        """What a trace records of the drafter: which draft ran ("none", "model" or "eagle") and how."""
        return {"drafter": "none", "context_vocab": False, "draft_half_rows": False}

    def see_target(self, start: int, hidden: torch.Tensor) -> None:
        """The target's hidden states of committed positions start, start+1, ... (feature drafters only)."""


class DraftLMDrafter(Drafter):
    """Shared cache handling for drafters backed by a draft LM."""

    def __init__(self, lm: LM, sampling: SamplingConfig, rng: torch.Generator, eos_ids: set[int] = frozenset()):
        self.lm, self.sampling, self.rng, self.eos_ids = lm, sampling, rng, set(eos_ids)
        self.slots: dict[int, int] = {}  # tree node -> draft cache slot, for nodes the draft computed

    def begin(self, prompt_ids):
        self.lm.reset()
        self.slots = {}

    @property
    def wants_target_features(self) -> bool:
        return self.lm.wants_target_features

    def see_target(self, start, hidden):
        self.lm.add_target_features(start, hidden)

    def describe(self) -> dict:
        return {
            "drafter": "eagle" if self.wants_target_features else "model",
            "context_vocab": bool(self.lm.context_vocab),
            "draft_half_rows": bool(self.lm.half_rows),
        }

    def feed_pending(self, committed: list[int]) -> DraftStep:
        """Run the committed tokens the draft has not seen; return the draft's output at the root."""
        pending = committed[self.lm.length :]
        out = self.lm.forward(pending, rows=slice(-1, None))
        self.slots = {0: self.lm.length - 1}
        return DraftStep(out.logits[-1], out.hidden[-1])

    def pick(self, logits: torch.Tensor, q: torch.Tensor | None = None) -> tuple[int, float, torch.Tensor | None]:
        """Draw one token: (token, its q, the distribution it came from or None when greedy). `q`: the warped
        distribution of `logits`, when the caller has it already."""
        q = warp(logits, self.sampling) if q is None else q
        if self.sampling.greedy:
            y = rowstats.argmax(logits[None])[0]
            return y, float(q[y]), None
        y = sample(q, self.rng)
        return y, float(q[y]), q

    def observe(self, rnd: RoundTrace, committed: list[int]) -> None:
        if 0 not in self.slots:
            return
        root_slot = self.slots[0]
        keep = list(range(root_slot + 1))
        for node in rnd.accepted_path:
            if node not in self.slots:
                break
            keep.append(self.slots[node])
        self.lm.keep(keep)
