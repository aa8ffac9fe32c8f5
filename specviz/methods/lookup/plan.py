"""Prompt lookup's planning: which copied tokens to propose, how far to copy, and their prior acceptance."""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence

from specviz.core.config import LookupConfig
from specviz.core.curves import interpolate
from specviz.core.ngram import NgramIndex
from specviz.core.priors import COPY_CALIBRATION, LOOKUP_ACCEPTANCE, LOOKUP_ACCEPTANCE_SAMPLED


def plan(
    index: NgramIndex,
    committed: Sequence[int],
    cfg: LookupConfig,
    depth: int,
    eos_ids: Iterable[int],
    sampled: bool,
    extend: bool = False,
) -> tuple[list[int], list[float]]:
    """The copy a round can take, and its priors: up to `cfg.k` tokens (`cfg.extend_to` when copies may run past
    the budget), at most `depth`, up to and including an EOS; ([], []) without a match."""
    most = min(max(cfg.k, cfg.extend_to) if extend else cfg.k, depth)
    if most < 1:
        return [], []
    index.sync(committed)
    n, toks = index.propose(most, cfg.min_ngram)
    toks = cut_at_eos(toks, set(eos_ids))
    return toks, prior(n, len(toks), sampled)


def best_extension(tokens: float, rows: int, alphas: Sequence[float], curve: dict) -> int:
    """How many of the next copies (cumulative priors `alphas`) to add to a round that verifies `rows` tokens
    and is worth `tokens` expected tokens: the m in 0..len(alphas) maximising expected tokens per verify ms,
    (tokens + alphas[0] + ... + alphas[m-1]) / t(rows + m), with t the measured verify curve (`specviz budget`)."""
    best, best_rate, acc = 0, tokens / interpolate(curve, rows), tokens
    for m, a in enumerate(alphas, 1):
        acc += a
        rate = acc / interpolate(curve, rows + m)
        if rate > best_rate:
            best, best_rate = m, rate
    return best


def calibrated(alphas: Sequence[float], q: float) -> list[float]:
    """A greedy copy's cumulative priors `alphas` once the draft has rated its first token (probability q at the
    root): the first becomes P(accepted | alpha_1, q) (`specviz.core.priors.COPY_CALIBRATION`), the later ones keep
    their ratios to it (the chance the copy goes on, once its first token is right)."""
    if not alphas or alphas[0] <= 0:
        return list(alphas)
    b0, b1, b2 = COPY_CALIBRATION
    first = 1.0 / (1.0 + math.exp(-(b0 + b1 * logit(alphas[0]) + b2 * logit(q))))
    return [min(1.0, a * first / alphas[0]) for a in alphas]


def logit(p: float, eps: float = 1e-4) -> float:
    """log(p / (1 - p)), p clipped to [eps, 1 - eps]."""
    p = min(max(p, eps), 1.0 - eps)
    return math.log(p / (1.0 - p))


def cut_at_eos(tokens: Sequence[int], eos_ids: set[int]) -> list[int]:
    """Tokens up to and including the first EOS (nothing is drafted past the end of a generation)."""
    out = []
    for t in tokens:
        out.append(t)
        if t in eos_ids:
            break
    return out


def prior(n: int, k: int, sampled: bool = False) -> list[float]:
    """alpha[n][j - 1] for j = 1..k from `specviz.core.priors.LOOKUP_ACCEPTANCE` (greedy runs) or
    LOOKUP_ACCEPTANCE_SAMPLED (sampled ones); deeper than the table, the last ratio continues; n = 0 (no match)
    gives zeros."""
    if n <= 0:
        return [0.0] * k
    table = LOOKUP_ACCEPTANCE_SAMPLED if sampled else LOOKUP_ACCEPTANCE
    row = list(table[min(n, len(table)) - 1])
    ratio = row[-1] / row[-2] if len(row) > 1 and row[-2] > 0 else 0.0
    while len(row) < k:
        row.append(row[-1] * ratio)
    return row[:k]


def accepted_prefix(proposal: Sequence[int], actual: Sequence[int]) -> int:
    a = 0
    while a < len(proposal) and a < len(actual) and proposal[a] == actual[a]:
        a += 1
    return a
