"""A/B of two runs over the same prompts: per-prompt differences with a paired bootstrap interval (no torch).

Prompts are paired by their id where both files name one, else by their token ids. The bootstrap resamples
prompts with replacement (paired: one draw picks a prompt's A and B together) from a seeded numpy Generator,
so an interval is the same on every machine for the same files and seed.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from specviz.analysis.metrics import tokens_per_call, tokens_per_second
from specviz.analysis.runset import PromptRun, RunSet, check_same_tokenizer

BOOTSTRAP_DRAWS = 4_000
CONFIDENCE = 0.95


@dataclass(frozen=True)
class Pairing:
    qid: str
    category: str
    a: PromptRun
    b: PromptRun

    @property
    def tau(self) -> tuple[float, float]:
        return tokens_per_call(self.a.trace.rounds), tokens_per_call(self.b.trace.rounds)

    @property
    def tokens_per_s(self) -> tuple[float, float]:
        return tokens_per_second(self.a.trace), tokens_per_second(self.b.trace)

    @property
    def first_difference(self) -> int | None:
        """The first output position where A and B emit different tokens (the shorter one's length where one is
        a prefix of the other), None where the outputs are equal."""
        return first_difference(self.a.trace.output_ids, self.b.trace.output_ids)


def first_difference(a, b) -> int | None:
    for i, (x, y) in enumerate(zip(a, b)):
        if x != y:
            return i
    return None if len(a) == len(b) else min(len(a), len(b))


def pair_runs(a: RunSet, b: RunSet) -> list[Pairing]:
    """The prompts both sets ran, in A's order; a sentence when they share none or mix tokenizers."""
    check_same_tokenizer([a.runs[0].trace, b.runs[0].trace], f"{a.label} and {b.label}")
    by_id = {r.qid: r for r in b.runs}
    by_ids = {r.trace.prompt_ids: r for r in b.runs}
    out, used = [], set()
    for r in a.runs:
        other = by_id.get(r.qid)
        if other is None or other.trace.prompt_ids != r.trace.prompt_ids:
            other = by_ids.get(r.trace.prompt_ids)
        if other is not None and id(other) not in used:
            used.add(id(other))
            out.append(Pairing(r.qid, r.category, r, other))
    if not out:
        raise ValueError(
            f"{a.label} and {b.label} share no prompt: an A/B compares two runs over the same prompts "
            "(same question ids, or the same prompt token ids)"
        )
    return out


@dataclass(frozen=True)
class Interval:
    mean: float  # mean over prompts of B - A
    lo: float
    hi: float
    n: int

    @property
    def excludes_zero(self) -> bool:
        return self.lo > 0 or self.hi < 0


def paired_bootstrap(diffs, rng: np.random.Generator, draws: int = BOOTSTRAP_DRAWS, level: float = CONFIDENCE):
    """Percentile interval of the mean of per-prompt differences, prompts resampled with replacement."""
    d = np.asarray(diffs, dtype=float)
    if d.size == 0:
        raise ValueError("no paired prompts to compare")
    means = d[rng.integers(0, d.size, size=(draws, d.size))].mean(axis=1)
    tail = (1 - level) / 2
    return Interval(float(d.mean()), float(np.quantile(means, tail)), float(np.quantile(means, 1 - tail)), d.size)


@dataclass(frozen=True)
class Comparison:
    a: str
    b: str
    pairs: tuple[Pairing, ...]
    tau: Interval  # B - A, tokens per target call
    tokens_per_s: Interval  # B - A
    unpaired: int  # prompts of A with no partner in B

    def most_different(self, n: int = 5) -> list[Pairing]:
        """The n prompts whose τ differs most between A and B (either way)."""
        return sorted(self.pairs, key=lambda p: -abs(p.tau[1] - p.tau[0]))[:n]

    @property
    def output_differences(self) -> list[tuple[Pairing, int]]:
        return [(p, p.first_difference) for p in self.pairs if p.first_difference is not None]


def compare(a: RunSet, b: RunSet, seed: int = 0) -> Comparison:
    pairs = pair_runs(a, b)
    rng = np.random.default_rng(seed)
    tau = paired_bootstrap([p.tau[1] - p.tau[0] for p in pairs], rng)
    tps = paired_bootstrap([p.tokens_per_s[1] - p.tokens_per_s[0] for p in pairs], rng)
    return Comparison(a.label, b.label, tuple(pairs), tau, tps, len(a.runs) - len(pairs))
