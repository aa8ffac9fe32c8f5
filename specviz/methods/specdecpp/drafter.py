"""SpecDec++ (Huang, Guo, Wang 2024): a trained head decides when to stop drafting.

Notation (the paper's): a round drafts candidates Y_1..Y_n; ``a_i`` is the head's predicted
probability that Y_i is accepted given Y_1..Y_{i-1} were; ``cum(n) = prod_{i<=n} a_i``; the round
stops once the predicted probability of at least one rejection, ``1 - cum(n)``, exceeds the
threshold ``h``. ``k_min`` / ``k_max`` bound n. Verification is the shared chain verifier, so the
method is lossless whatever the head predicts.

The head reads the draft's last hidden state (post final norm, the input of its output layer):
residual blocks ``x <- x + SiLU(W x + b)``, each with its own weights (the official code shares one
block's weights across all layers by accident; we do not), then ``Linear(hidden, 2)``; class 1 =
accepted. It runs in fp32 whatever the draft's dtype.
"""

from __future__ import annotations

import torch

from specviz.core.config import SpecDecPPConfig
from specviz.core.sampling import warp
from specviz.core.trace import DraftTree
from specviz.core.tree import chain
from specviz.methods.base import DraftLMDrafter, Proposal
from specviz.methods.specdecpp import inputs as head_inputs
from specviz.methods.specdecpp.head import AcceptanceHead
from specviz.methods.specdecpp.stop_rule import stop_rule


class SpecDecPPDrafter(DraftLMDrafter):
    """Chain drafting with the SpecDec++ stop rule.

    Proposal.info carries, per draft step i = 1..n: ``accept_probs[i-1]`` = the factor used at
    that step (a lagged head, the paper's: 1 at step 1, else the head's estimate for Y_{i-1}; a head
    trained without the lag: its estimate for Y_i) and
    ``stop_probs[i-1]`` = 1 - cum after that step (the value compared with h); plus the
    threshold and the stop reason.
    """

    def __init__(
        self,
        lm,
        sampling,
        rng,
        head: AcceptanceHead,
        cfg: SpecDecPPConfig = SpecDecPPConfig(),
        eos_ids=frozenset(),
        *,
        record: bool = True,
    ):
        super().__init__(lm, sampling, rng, eos_ids)
        self.record = record  # keep the head's scalar inputs per step in Proposal.info (RoundTrace.head_inputs)
        hidden = lm.config.hidden_size
        if head.hidden_size != hidden:
            raise ValueError(f"the acceptance head expects hidden size {head.hidden_size}, the draft has {hidden}")
        self.head = head.to(lm.device).eval()
        self.cfg = cfg
        reads_copy = {"copy_n", "copy_y"} & set(head.inputs)
        self.index = head_inputs.new_index() if reads_copy else None

    def describe(self) -> dict:
        return {**super().describe(), "acceptance_head": self.head.card}

    def begin(self, prompt_ids):
        super().begin(prompt_ids)
        if self.index is not None:
            self.index = head_inputs.new_index()

    def propose(self, committed, remaining):
        budget = remaining - 1  # the round always adds one target token
        info = {"threshold": self.cfg.threshold}
        if min(self.cfg.k_max, budget) < 1:
            self.slots = {}
            return Proposal(
                DraftTree((committed[-1],), (-1,), (1.0,)),
                info={**info, "accept_probs": (), "stop_probs": (), "stop_reason": "budget"},
            )
        logits, hidden = self.feed_pending(committed)  # hidden: the draft's state that produced `logits`
        if self.index is not None:
            self.index.sync(committed)
        tent = self.target_entropy()
        toks, qs, rows, props, dists, factors, stops = [], [], [], {}, {}, [], []
        cum, reason = 1.0, None
        while reason is None:
            node = len(toks)  # the parent of the candidate drawn now
            q = dists[node] = warp(logits, self.sampling)
            y, qy, dist = self.pick(logits, q)
            rows.append(self.columns(q, y, node + 1, toks, tent))
            toks.append(y)
            qs.append(qy)
            if dist is not None:
                props[node] = dist
            n = node + 1
            if self.head.lag:  # scores Y_{n-1}, read at its own position
                a = 1.0 if n == 1 else float(self.head.accept_prob(hidden, rows[-2]))
            else:  # scores Y_n, read where its logits came from
                a = float(self.head.accept_prob(hidden, rows[-1]))
            cum, reason = stop_rule(n, a, cum, y in self.eos_ids, self.cfg, budget, self.head.lag)
            factors.append(a)
            stops.append(1.0 - cum)
            if reason is None:
                out = self.lm.forward([y])
                self.slots[n] = self.lm.length - 1
                logits, hidden = out.logits[-1], out.hidden[-1]
        info.update(accept_probs=tuple(factors), stop_probs=tuple(stops), stop_reason=reason)
        if self.record and self.head.inputs:
            info["head_inputs"] = head_inputs.named_rows(self.head.inputs, rows)
        return Proposal(chain(committed[-1], toks, qs), props, len(toks), info, dists=dists)

    def target_entropy(self) -> float:
        """The head's `target_entropy` input (specviz.methods.specdecpp.inputs): from the target's hidden state of
        the last committed token's parent position, which a feature drafter holds (0 for a token-level draft or a
        head that does not read it)."""
        n = getattr(self.lm, "n_target", 0)
        if "target_entropy" not in self.head.inputs or n < 1:
            return 0.0
        return float(head_inputs.target_entropy(self.lm, self.lm.target_hidden(n - 1)))

    def columns(self, q: torch.Tensor, y: int, depth: int, drafted: list[int], tent: float = 0.0) -> torch.Tensor:
        """The head's scalar inputs for candidate y, drawn from q at `depth` after the round's `drafted` tokens
        (specviz.methods.specdecpp.inputs.columns, the same construction as the training rows), or None for a head
        that reads none."""
        if not self.head.inputs:
            return None
        dev = q.device  # built where the head runs: no host round trip
        dist = head_inputs.distribution_columns(q, torch.tensor(y, device=dev), self.lm.support)
        copy = head_inputs.copy_columns(self.index, drafted, y) if self.index is not None else (0.0, 0.0)
        return head_inputs.columns(
            dist,
            torch.tensor(float(self.sampling.greedy), device=dev),
            torch.tensor(depth, device=dev),
            torch.tensor(copy, device=dev),
            torch.tensor(tent, device=dev),
        )
