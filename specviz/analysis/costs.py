"""Measured step costs of the machine at hand, and what a chain round would have cost with another draft length.

Notation: ``t_d`` = one draft step (ms), ``t_v(m)`` = one target forward over m tokens on a cached
context (ms). A chain round with K candidates costs ``K t_d + t_v(K + 1)``. If its first rejected
candidate is the j-th (j = None: all accepted), truncating it to K candidates would have emitted
``K + 1`` tokens when K < j (K accepted + the bonus) and ``j`` tokens otherwise (j - 1 accepted + the
correction): the draft samples and the verifier's draws for the first K candidates are the same
either way, so this is exact for the round itself. Beyond the drafted length acceptance is unknown,
so the hindsight-optimal K of a round is searched over 0..n (0 = a plain target step); for a fully
accepted round it is a lower bound on what longer drafting would have chosen. The same argument
lets `replay` score any stop policy on rounds drafted to a fixed length (a calibration run).
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass

import torch

from specviz.core.device import median_ms
from specviz.core.trace import ACCEPTED, RoundTrace


@dataclass(frozen=True)
class StepCosts:
    """draft_ms: one draft step; verify_ms[m - 1]: a target forward over m tokens (linear beyond the table);
    overhead_ms: the rest of a round (verification, bookkeeping)."""

    draft_ms: float
    verify_ms: tuple[float, ...]
    overhead_ms: float = 0.0

    def verify(self, m: int) -> float:
        v = self.verify_ms
        if m <= len(v):
            return v[m - 1]
        slope = (v[-1] - v[0]) / (len(v) - 1) if len(v) > 1 else 0.0
        return v[-1] + slope * (m - len(v))

    def round_ms(self, k: int) -> float:
        return k * self.draft_ms + self.verify(k + 1) + self.overhead_ms

    def to_dict(self) -> dict:
        return {
            "draft_ms": round(self.draft_ms, 3),
            "verify_ms": [round(x, 3) for x in self.verify_ms],
            "overhead_ms": round(self.overhead_ms, 3),
        }


def measure_costs(pair, context: int = 128, max_tokens: int = 13, repeats: int = 7, draft=None) -> StepCosts:
    """Time one step of `draft` (default: the pair's standalone draft) and target forwards over 1..max_tokens
    tokens on a `context`-token cache."""
    draft = pair.draft if draft is None else draft
    g = torch.Generator().manual_seed(0)
    ids = torch.randint(3, min(pair.target.vocab_size, 1000), (context + max_tokens,), generator=g).tolist()

    def step(lm, m):
        lm.forward(ids[context : context + m])
        lm.crop(context)

    for lm in (pair.target, draft):
        lm.reset()
        lm.forward(ids[:context], with_logits=False)
        step(lm, 1)  # warm-up
    draft_ms = median_ms(lambda: step(draft, 1), repeats, draft.device)
    verify = tuple(
        median_ms(lambda m=m: step(pair.target, m), repeats, pair.target.device) for m in range(1, max_tokens + 1)
    )
    for lm in (pair.target, draft):
        lm.reset()
    return StepCosts(draft_ms, verify)


def costs_from_rounds(rounds: list[RoundTrace]) -> StepCosts:
    """Costs read off a trace: mean draft time per draft forward, a least-squares line of verify time on
    tree size, the median rest of a round."""
    if not rounds:
        raise ValueError("no rounds to read costs from")
    fw = sum(r.draft_forwards for r in rounds)
    draft_ms = sum(r.draft_ms for r in rounds if r.draft_forwards) / fw if fw else 0.0
    sizes = [len(r.tree) for r in rounds]
    ms = [r.verify_ms for r in rounds]
    overhead = statistics.median(r.overhead_ms for r in rounds)
    if len(set(sizes)) < 2:
        return StepCosts(draft_ms, (statistics.median(ms),) * max(sizes), overhead)
    mx, my = statistics.fmean(sizes), statistics.fmean(ms)
    slope = sum((x - mx) * (y - my) for x, y in zip(sizes, ms)) / sum((x - mx) ** 2 for x in sizes)
    slope = max(slope, 0.0)
    return StepCosts(draft_ms, tuple(my + slope * (m - mx) for m in range(1, max(sizes) + 1)), overhead)


def first_rejection(rnd: RoundTrace) -> int | None:
    """1-based index of the first candidate of a chain round that was not accepted; None if all were."""
    for i in range(1, len(rnd.tree)):
        if rnd.status[i] != ACCEPTED:
            return i
    return None


def tokens_if(k: int, j: int | None) -> int:
    """Tokens a chain round truncated to k candidates emits, given its first rejection j."""
    return k + 1 if j is None or k < j else j


def is_chain(rnd: RoundTrace) -> bool:
    return rnd.tree.parents == tuple(range(-1, len(rnd.tree) - 1))


def hindsight_k(rnd: RoundTrace, costs: StepCosts) -> int | None:
    """The K in 0..n that minimises this round's time per emitted token (ties: the smaller K); None for trees."""
    if not is_chain(rnd):
        return None
    j = first_rejection(rnd)
    return min(range(rnd.n_drafted + 1), key=lambda k: (costs.round_ms(k) / tokens_if(k, j), k))


def replay(rounds: list[RoundTrace], length, costs: StepCosts) -> tuple[float, int]:
    """Modelled (ms, tokens) had each chain round been cut to `length(round)` candidates (<= its drafted length)."""
    ms, tokens = 0.0, 0
    for r in rounds:
        k = length(r)
        ms += costs.round_ms(k)
        tokens += tokens_if(k, first_rejection(r))
    return ms, tokens
