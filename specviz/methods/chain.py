"""Chain drafters: a fixed draft length K (classic speculative sampling), and Hugging Face's heuristic schedule."""

from __future__ import annotations

from specviz.core.config import ChainConfig, HeuristicConfig
from specviz.core.sampling import warp
from specviz.core.tree import chain
from specviz.methods.base import DraftLMDrafter, Proposal


class ChainDrafter(DraftLMDrafter):
    """Classic speculative sampling: K draft tokens in a chain."""

    def __init__(self, lm, sampling, rng, cfg: ChainConfig = ChainConfig(), eos_ids=frozenset()):
        super().__init__(lm, sampling, rng, eos_ids)
        self.k = cfg.k

    def propose(self, committed, remaining):
        k = min(self.k, remaining - 1)  # the round always adds one target token
        if k < 1:
            self.slots = {}
            return super(DraftLMDrafter, self).propose(committed, remaining)
        logits = self.feed_pending(committed).logits
        toks, qs, props, dists, forwards = [], [], {}, {}, 1
        for i in range(k):
            dists[i] = warp(logits, self.sampling)
            y, qy, dist = self.pick(logits, dists[i])
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
        return Proposal(chain(committed[-1], toks, qs), props, forwards, dists=dists)


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
