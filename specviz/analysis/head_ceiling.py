"""What a better acceptance head would buy: SpecDec++'s modelled gain as a function of the head's AUC.

`specviz.tools.pick_h.pick_h` (`specviz sweep pick-h`) drafts calibration rounds to a fixed length with the
shipped head's factors recorded and replays the stop rule on them (`specviz.analysis.costs.replay`). Here the
same rounds are replayed with that head made better or worse by a known amount, so an engineer can read off how
good a head must be before SpecDec++ pays on this pair and machine, starting from where the real one stands.

Labels: candidate i of a round is a positive when it was accepted, a negative when it is the round's first
non-accepted one; past that the verifier never judged it (the rule's factors there only change the round's
cost, not its tokens), and its label is drawn as a Bernoulli of the calibration set's acceptance rate at
that depth, given an accepted prefix. AUCs are measured on the judged candidates only.

A sharpened head adds beta nats of evidence about each candidate's label to the recorded head's log-odds,
``logit(a') = logit(a) + beta (2 y - 1)``: beta = 0 is the head as shipped, beta -> inf the perfect head
(a' = y), a negative beta a worse one. For a target AUC, beta is found by bisection (the AUC rises with
beta). Unlike a synthetic head of independent noise, the sharpened head keeps the real one's structure:
which rounds it finds easy and how its errors go together, so its curve passes through the head as it is.
Averaged over a few draws of the unjudged labels, from an explicit generator.
"""

from __future__ import annotations

import math
from dataclasses import replace

import torch

from specviz.analysis.metrics import auc, head_factors, judged_labels
from specviz.core.trace import RoundTrace


def depth_rates(rounds: list[RoundTrace]) -> list[float]:
    """P(candidate at depth i accepted | candidates 1..i-1 accepted), i = 1..longest round (0.5 where unseen)."""
    n = max(r.n_drafted for r in rounds)
    pos, seen = [0] * n, [0] * n
    for r in rounds:
        for i, y in enumerate(judged_labels(r)):
            pos[i] += y
            seen[i] += 1
    return [p / s if s else 0.5 for p, s in zip(pos, seen)]


def head_auc(rounds: list[RoundTrace], lagged: bool = False, beta: float = 0.0) -> float:
    """AUC on the judged candidates of the recorded factors, sharpened by `beta` nats (0: as recorded)."""
    pairs = []
    for r in rounds:
        _, factors = head_factors(r, lagged)
        pairs += [(_sharpen(a, y, beta), y) for a, y in zip(factors, judged_labels(r))]
    return auc(pairs)


def _sharpen(a: float, y: int, beta: float) -> float:
    """logit(a) + beta (2y - 1) as a probability; beta = inf gives y."""
    if math.isinf(beta):
        return float(y) if beta > 0 else float(1 - y)
    a = min(max(a, 1e-9), 1 - 1e-9)
    z = math.log(a / (1 - a)) + beta * (2 * y - 1)
    return 1 / (1 + math.exp(-z)) if z > -700 else 0.0


def evidence_for(rounds: list[RoundTrace], target: float, lagged: bool = False) -> float:
    """The beta whose sharpened head has AUC `target` on the judged candidates (inf for 1)."""
    if not 0.5 <= target <= 1:
        raise ValueError(f"a what-if head's AUC must lie in [0.5, 1], got {target}")
    if target == 1:
        return math.inf
    lo, hi = -30.0, 30.0
    for _ in range(40):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if head_auc(rounds, lagged, mid) < target else (lo, mid)
    return (lo + hi) / 2


def sharpened_rounds(
    rounds: list[RoundTrace], beta: float, rng: torch.Generator, lagged: bool = False
) -> list[RoundTrace]:
    """`rounds` with every factor sharpened by `beta` nats towards its candidate's label (unjudged labels drawn)."""
    rates = depth_rates(rounds)
    out = []
    for r in rounds:
        judged = judged_labels(r)
        drawn = torch.bernoulli(torch.tensor(rates[len(judged) : r.n_drafted], dtype=torch.float64), generator=rng)
        labels = judged + [int(v) for v in drawn.tolist()]
        offset, factors = head_factors(r, lagged)
        new = list(r.accept_probs)
        for i, a in enumerate(factors):
            new[i + offset] = _sharpen(a, labels[i], beta)
        out.append(replace(r, accept_probs=tuple(new)))
    return out


def ceiling(
    rounds: list[RoundTrace], choose, aucs: list[float], rng: torch.Generator, draws: int = 4, lagged: bool = False
) -> dict:
    """The recorded head's AUC and, for each target AUC, the evidence beta it takes and the best SpecDec++
    setting's modelled gain over the best fixed K (mean over `draws`). `choose(rounds)` is
    `specviz.tools.pick_h.choose_threshold` with the costs and grid bound."""
    out = {"head_auc": head_auc(rounds, lagged), "draws": draws, "beta": {}, "gain": {}}
    for target in aucs:
        beta = evidence_for(rounds, target, lagged)
        gains = [choose(sharpened_rounds(rounds, beta, rng, lagged))["modelled_gain"] for _ in range(draws)]
        out["beta"][f"{target:g}"] = beta if math.isfinite(beta) else "inf"
        out["gain"][f"{target:g}"] = sum(gains) / len(gains)
    return out
