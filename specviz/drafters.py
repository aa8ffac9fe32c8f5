"""The drafter interface and the chain drafters (fixed K, HF heuristic K, none).

A drafter proposes a `DraftTree` each round (plus the proposal distribution every internal node's
children were drawn from) and observes the verified round so it can fix its cache and adapt.
`DraftLMDrafter` owns the draft model's cache: after each round it keeps the committed prefix
plus the accepted nodes it had computed, and feeds the rest of the committed tokens next time.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import torch

from .config import ChainConfig, HeuristicConfig, SamplingConfig
from .lm import LM
from .sampling import sample, warp
from .trace import DraftTree, RoundTrace
from .tree import chain


@dataclass
class Proposal:
    tree: DraftTree
    proposals: dict[int, torch.Tensor] = field(default_factory=dict)   # node -> D its children were drawn from
    draft_forwards: int = 0
    info: dict = field(default_factory=dict)                           # method-specific RoundTrace fields
    copied: frozenset[int] = frozenset()                               # nodes proposed as a point mass (lookup.py)


class Drafter:
    """Base: proposes nothing (the autoregressive baseline is a root-only tree)."""

    def begin(self, prompt_ids: list[int]) -> None:
        pass

    def propose(self, committed: list[int], remaining: int) -> Proposal:
        return Proposal(DraftTree((committed[-1],), (-1,), (1.0,)))

    def observe(self, rnd: RoundTrace, committed: list[int]) -> None:
        pass

    wants_target_features = False

    def see_target(self, start: int, hidden: torch.Tensor) -> None:
        """The target's hidden states of committed positions start, start+1, ... (feature drafters only)."""


class DraftLMDrafter(Drafter):
    """Shared cache handling for drafters backed by a draft LM."""

    def __init__(self, lm: LM, sampling: SamplingConfig, rng: torch.Generator, eos_ids: set[int] = frozenset()):
        self.lm, self.sampling, self.rng, self.eos_ids = lm, sampling, rng, set(eos_ids)
        self.slots: dict[int, int] = {}          # tree node -> draft cache slot, for nodes the draft computed

    def begin(self, prompt_ids):
        self.lm.reset()
        self.slots = {}

    @property
    def wants_target_features(self) -> bool:
        return getattr(self.lm, "wants_target_features", False)     # duck-typed LMs (tests) read ids only

    def see_target(self, start, hidden):
        self.lm.add_target_features(start, hidden)

    def feed_pending(self, committed: list[int]) -> torch.Tensor:
        """Run the committed tokens the draft has not seen; return the logits after the root (V,)."""
        pending = committed[self.lm.length:]
        out = self.lm.forward(pending, rows=slice(-1, None))
        self.slots = {0: self.lm.length - 1}
        self._last_hidden = out.hidden[-1]
        return out.logits[-1]

    def pick(self, logits: torch.Tensor, q: torch.Tensor | None = None) -> tuple[int, float, torch.Tensor | None]:
        """Draw one token: (token, its q, the distribution it came from or None when greedy). `q`: the warped
        distribution of `logits`, when the caller has it already."""
        q = warp(logits, self.sampling) if q is None else q
        if self.sampling.greedy:
            y = int(torch.argmax(logits))
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


class ChainDrafter(DraftLMDrafter):
    """Classic speculative sampling: K draft tokens in a chain."""

    def __init__(self, lm, sampling, rng, cfg: ChainConfig = ChainConfig(), eos_ids=frozenset()):
        super().__init__(lm, sampling, rng, eos_ids)
        self.k = cfg.k

    def propose(self, committed, remaining):
        k = min(self.k, remaining - 1)                  # the round always adds one target token
        if k < 1:
            self.slots = {}
            return super(DraftLMDrafter, self).propose(committed, remaining)
        logits = self.feed_pending(committed)
        toks, qs, props, forwards = [], [], {}, 1
        for i in range(k):
            y, qy, dist = self.pick(logits)
            toks.append(y)
            qs.append(qy)
            if dist is not None:
                props[i] = dist
            if i == k - 1 or y in self.eos_ids:
                break
            out = self.lm.forward([y])
            forwards += 1
            self.slots[i + 1] = self.lm.length - 1
            logits = out.logits[-1]
        return Proposal(chain(committed[-1], toks, qs), props, forwards)


class HeuristicDrafter(ChainDrafter):
    """Hugging Face assisted generation's heuristic schedule: K += 2 if all accepted, else K = max(1, K - 1)."""

    def __init__(self, lm, sampling, rng, cfg: HeuristicConfig = HeuristicConfig(), eos_ids=frozenset()):
        super().__init__(lm, sampling, rng, ChainConfig(cfg.start_k), eos_ids)
        self.cfg = cfg

    def begin(self, prompt_ids):
        super().begin(prompt_ids)
        self.k = self.cfg.start_k

    def observe(self, rnd, committed):
        super().observe(rnd, committed)
        if rnd.n_drafted and rnd.n_accepted == rnd.n_drafted:
            self.k = min(self.cfg.max_k, self.k + 2)
        else:
            self.k = max(1, self.k - 1)
