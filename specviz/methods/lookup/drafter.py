"""Prompt lookup: draft tokens copied from the context itself (no model; Saxena 2023, "prompt lookup decoding").

The context's last n tokens (longest n first, from `LookupConfig.max_ngram` down to `min_ngram`) are looked
up among its earlier n-grams; the tokens that followed the most recent earlier occurrence are the proposal.
Small models repeat themselves and copy from their prompt (summaries, retrieved passages, code, loops), so
where a long n-gram matches the copy is accepted far more often than a learned draft's guess.

A proposal is deterministic given the context: as a proposal *distribution* it is a point mass (q = 1), so
the verifier accepts it with probability min(1, R[y]) and on rejection removes y from R (`specviz.core.verify`).

Notation: ``n`` is the length of the matched n-gram (0: no match); ``j`` (1-based) the position of a copied
token in the proposal; ``alpha[n][j-1]`` the prior probability that the first j copied tokens are all
accepted (`specviz.core.priors.LOOKUP_ACCEPTANCE` for greedy runs, `LOOKUP_ACCEPTANCE_SAMPLED` for sampled
ones), which values copied nodes in a DySpec tree and decides copy rounds and how far to copy.
"""

from __future__ import annotations

from collections.abc import Iterable

from specviz.core.config import LookupConfig
from specviz.core.ngram import NgramIndex
from specviz.core.tree import chain
from specviz.methods.base import Drafter, Proposal
from specviz.methods.lookup.plan import best_extension, plan


class LookupDrafter(Drafter):
    """Prompt lookup decoding as a method: each round, `cfg.k` tokens copied from the context, as a chain, and
    with a verify curve for this device up to `cfg.extend_to` where that raises expected tokens per ms.

    No draft model runs (draft cost ~0); a round without a match is an autoregressive step. Every drafted
    node is a point-mass proposal (`Proposal.copied`), so sampled runs stay exact.
    """

    def __init__(
        self,
        cfg: LookupConfig = LookupConfig(),
        eos_ids: Iterable[int] = frozenset(),
        curve: dict | None = None,
        sampled: bool = False,
    ):
        self.cfg, self.eos_ids, self.curve, self.sampled = cfg, set(eos_ids), curve, sampled
        self.index = NgramIndex(cfg.max_ngram)

    def begin(self, prompt_ids):
        self.index = NgramIndex(self.cfg.max_ngram)

    def propose(self, committed, remaining):
        toks, alpha = plan(
            self.index, committed, self.cfg, remaining - 1, self.eos_ids, self.sampled, extend=self.curve is not None
        )  # the round always adds one target token
        k = min(self.cfg.k, len(toks))
        if self.curve is not None:
            k += best_extension(1 + sum(alpha[:k]), k + 1, alpha[k:], self.curve)
        toks = toks[:k]
        return Proposal(chain(committed[-1], toks, [1.0] * len(toks)), copied=frozenset(range(1, len(toks) + 1)))


class CopySwitch(Drafter):
    """A chain method with copying on: a round whose first copied token has a prior of at least
    `cfg.switch_at` is a copy round (`LookupDrafter`, no draft forward); any other round is the inner drafter's.

    The choice reads the context only, and either proposal is verified exactly, so the switch stays lossless.
    The inner drafter's cache simply catches up on the committed tokens the next time it drafts.
    """

    def __init__(
        self,
        inner: Drafter,
        cfg: LookupConfig,
        eos_ids: Iterable[int] = frozenset(),
        curve: dict | None = None,
        sampled: bool = False,
    ):
        self.inner, self.cfg = inner, cfg
        self.copier = LookupDrafter(cfg, eos_ids, curve, sampled)
        self.used: Drafter = inner

    @property
    def wants_target_features(self) -> bool:
        return self.inner.wants_target_features

    def see_target(self, start, hidden):
        self.inner.see_target(start, hidden)

    def describe(self) -> dict:
        return self.inner.describe()

    def begin(self, prompt_ids):
        self.inner.begin(prompt_ids)
        self.copier.begin(prompt_ids)

    def propose(self, committed, remaining):
        _, alpha = plan(self.copier.index, committed, self.cfg, min(1, remaining - 1), (), self.copier.sampled)
        copy = bool(alpha) and alpha[0] >= self.cfg.switch_at
        self.used = self.copier if copy else self.inner
        return self.used.propose(committed, remaining)

    def observe(self, rnd, committed):
        if self.used is self.inner:  # a copy round leaves the inner drafter's cache as it was
            self.inner.observe(rnd, committed)
