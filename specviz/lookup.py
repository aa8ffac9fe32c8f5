"""Prompt lookup: draft tokens copied from the context itself (no model; Saxena 2023, "prompt lookup decoding").

The context's last n tokens (longest n first, from `LookupConfig.max_ngram` down to `min_ngram`) are looked
up among its earlier n-grams; the tokens that followed the most recent earlier occurrence are the proposal.
Small models repeat themselves and copy from their prompt (summaries, retrieved passages, code, loops), so
where a long n-gram matches the copy is accepted far more often than a learned draft's guess.

A proposal is deterministic given the context: as a proposal *distribution* it is a point mass (q = 1), so
the verifier accepts it with probability min(1, R[y]) and on rejection removes y from R (`verify`).

Notation: ``n`` is the length of the matched n-gram (0: no match); ``j`` (1-based) the position of a copied
token in the proposal; ``alpha[n][j-1]`` the prior probability that the first j copied tokens are all
accepted (`config.LOOKUP_ACCEPTANCE` for greedy runs, `LOOKUP_ACCEPTANCE_SAMPLED` for sampled ones), which
values copied nodes in a DySpec tree and decides copy rounds and how far to copy.
"""
from __future__ import annotations

import argparse
import json
import sys
from collections import defaultdict
from collections.abc import Iterable, Sequence

from .config import LOOKUP_ACCEPTANCE, LOOKUP_ACCEPTANCE_SAMPLED, LookupConfig
from .drafters import Drafter, Proposal
from .tree import chain


class NgramIndex:
    """The most recent position after every n-gram (n <= max_ngram) of a growing context.

    `extend` is incremental: each call indexes only the tokens added since the last one, O(max_ngram) each.
    An n-gram is indexed once a token follows it, so the context's own suffix is never its own match.
    """

    def __init__(self, max_ngram: int):
        self.max_ngram = max_ngram
        self.ctx: list[int] = []
        self.after: dict[tuple[int, ...], int] = {}     # n-gram -> index of the token that followed it, latest
        self.done = 0                                    # n-grams ending before ctx[done] are indexed

    def extend(self, tokens: Iterable[int]) -> None:
        self.ctx.extend(int(t) for t in tokens)
        ctx, end = self.ctx, len(self.ctx) - 1           # the last token has no follower yet
        for e in range(max(self.done, 1), end + 1):      # an n-gram ctx[e-n:e] is followed by ctx[e]
            for n in range(1, min(self.max_ngram, e) + 1):
                self.after[tuple(ctx[e - n:e])] = e
        self.done = max(self.done, end + 1)

    def sync(self, committed: Sequence[int]) -> None:
        """Make the index describe `committed`, which only ever grows during a generation (else rebuild)."""
        n = len(self.ctx)
        if len(committed) < n or (n and committed[n - 1] != self.ctx[-1]):
            self.__init__(self.max_ngram)
            n = 0
        self.extend(committed[n:])

    def propose(self, k: int, min_ngram: int = 1, after: Sequence[int] = ()) -> tuple[int, list[int]]:
        """(n, up to k tokens) after the longest matching n-gram, or (0, []) when none matches.

        When the match is closer to the end than k tokens, the copy continues periodically (a loop of
        period len(ctx) - start repeats), which is what copying token by token would produce.
        `after`: tokens that follow the indexed context without being indexed (a round's drafted ones); the
        context's suffix then reaches into them, and is still looked up among the indexed n-grams only.
        """
        ctx = self.ctx + list(after) if after else self.ctx
        n, start = self.match(ctx, min_ngram)
        if not n:
            return 0, []
        period = len(ctx) - start
        return n, [ctx[start + (i % period)] for i in range(k)]

    def match(self, suffix: Sequence[int], min_ngram: int = 1) -> tuple[int, int]:
        """(n, start): the longest indexed n-gram that ends `suffix` (n >= min_ngram) and the position in `ctx` of the
        token that followed its most recent occurrence; (0, -1) when none matches."""
        for n in range(min(self.max_ngram, len(suffix)), min_ngram - 1, -1):
            start = self.after.get(tuple(suffix[-n:]))
            if start is not None:
                return n, start
        return 0, -1


class LookupDrafter(Drafter):
    """Prompt lookup decoding as a method: each round, `cfg.k` tokens copied from the context, as a chain, and
    with a verify curve for this device up to `cfg.extend_to` where that raises expected tokens per ms.

    No draft model runs (draft cost ~0); a round without a match is an autoregressive step. Every drafted
    node is a point-mass proposal (`Proposal.copied`), so sampled runs stay exact.
    """

    def __init__(self, cfg: LookupConfig = LookupConfig(), eos_ids: Iterable[int] = frozenset(),
                 curve: dict | None = None, sampled: bool = False):
        self.cfg, self.eos_ids, self.curve, self.sampled = cfg, set(eos_ids), curve, sampled
        self.index = NgramIndex(cfg.max_ngram)

    def begin(self, prompt_ids):
        self.index = NgramIndex(self.cfg.max_ngram)

    def propose(self, committed, remaining):
        toks, alpha = plan(self.index, committed, self.cfg, remaining - 1, self.eos_ids, self.sampled,
                           extend=self.curve is not None)          # the round always adds one target token
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

    def __init__(self, inner: Drafter, cfg: LookupConfig, eos_ids: Iterable[int] = frozenset(),
                 curve: dict | None = None, sampled: bool = False):
        self.inner, self.cfg = inner, cfg
        self.copier = LookupDrafter(cfg, eos_ids, curve, sampled)
        self.used: Drafter = inner

    @property
    def wants_target_features(self) -> bool:
        return self.inner.wants_target_features

    def see_target(self, start, hidden):
        self.inner.see_target(start, hidden)

    def begin(self, prompt_ids):
        self.inner.begin(prompt_ids)
        self.copier.begin(prompt_ids)

    def propose(self, committed, remaining):
        _, alpha = plan(self.copier.index, committed, self.cfg, min(1, remaining - 1), (), self.copier.sampled)
        copy = bool(alpha) and alpha[0] >= self.cfg.switch_at
        self.used = self.copier if copy else self.inner
        return self.used.propose(committed, remaining)

    def observe(self, rnd, committed):
        if self.used is self.inner:                  # a copy round leaves the inner drafter's cache as it was
            self.inner.observe(rnd, committed)


def plan(index: NgramIndex, committed: Sequence[int], cfg: LookupConfig, depth: int, eos_ids: Iterable[int],
         sampled: bool, extend: bool = False) -> tuple[list[int], list[float]]:
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
    (tokens + alphas[0] + ... + alphas[m-1]) / t(rows + m), with t the measured verify curve (`budget`)."""
    from .budget import interpolate
    best, best_rate, acc = 0, tokens / interpolate(curve, rows), tokens
    for m, a in enumerate(alphas, 1):
        acc += a
        rate = acc / interpolate(curve, rows + m)
        if rate > best_rate:
            best, best_rate = m, rate
    return best


def cut_at_eos(tokens: Sequence[int], eos_ids: set[int]) -> list[int]:
    """Tokens up to and including the first EOS (nothing is drafted past the end of a generation)."""
    out = []
    for t in tokens:
        out.append(t)
        if t in eos_ids:
            break
    return out


def prior(n: int, k: int, sampled: bool = False) -> list[float]:
    """alpha[n][j - 1] for j = 1..k from `config.LOOKUP_ACCEPTANCE` (greedy runs) or LOOKUP_ACCEPTANCE_SAMPLED
    (sampled ones); deeper than the table, the last ratio continues; n = 0 (no match) gives zeros."""
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


def measure(sequences: Iterable[tuple[Sequence[int], Sequence[int]]], max_ngram: int, depth: int) -> dict:
    """Prior acceptance of copied tokens along the target's continuations, at every position.

    sequences: (prompt ids, the target's continuation: greedy, or sampled for the sampled table). Returns {"offered": {n: count},
    "alpha": {n: [P(first j copied tokens all match the continuation), j = 1..depth]}}.
    """
    offered: dict[int, list[int]] = defaultdict(lambda: [0] * depth)
    hits: dict[int, list[int]] = defaultdict(lambda: [0] * depth)
    for prompt, cont in sequences:
        idx = NgramIndex(max_ngram)
        idx.extend(prompt)
        for t in range(len(cont)):
            n, prop = idx.propose(min(depth, len(cont) - t))
            if n:
                a = accepted_prefix(prop, cont[t:])
                for j in range(len(prop)):
                    offered[n][j] += 1
                    hits[n][j] += a > j
            idx.extend(cont[t:t + 1])
    return {"offered": {n: offered[n][0] for n in sorted(offered)},
            "alpha": {n: [round(h / o, 3) if o else 0.0 for h, o in zip(hits[n], offered[n])] for n in sorted(offered)}}


def _training_sequences(limit: int, kind: str = "greedy"):
    """Greedy (or sampled) continuations of the training prompts (cached by `python -m specviz.train draft`)."""
    from .loading import cache_dir
    from .train.data import load
    folder = cache_dir() / "train" / "draft-data"
    shards = sorted(folder.glob(f"{kind}-*.safetensors"))
    if not shards:
        raise SystemExit(f"no {kind} distillation shards under {folder}: run `python -m specviz.train draft` first")
    got = 0
    for path in shards:
        d = load(path)
        for s in range(len(d)):
            ids, plen, _ = d.sequence(s)
            ids = ids.tolist()
            yield ids[:plen], ids[plen:]
            got += 1
            if got >= limit:
                return


def main(argv=None) -> None:
    d = LookupConfig()
    p = argparse.ArgumentParser(prog="python -m specviz.lookup",
                                description="Measure prompt lookup's prior acceptance on the target's greedy "
                                            "continuations of the training prompts (never the Spec-Bench ones).")
    p.add_argument("--max-ngram", type=int, default=d.max_ngram)
    p.add_argument("--depth", type=int, default=len(LOOKUP_ACCEPTANCE[0]))
    p.add_argument("--limit", type=int, default=100_000, help="at most this many sequences")
    p.add_argument("--sampled", action="store_true", help="continuations sampled at T = 0.7 instead of greedy ones")
    a = p.parse_args(argv)
    out = measure(_training_sequences(a.limit, "sampled-t0.7" if a.sampled else "greedy"), a.max_ngram, a.depth)
    json.dump(out, sys.stdout, indent=1)
    print()


if __name__ == "__main__":
    main()
