"""The round loop shared by every method, as a generator of `RoundTrace`s.

One round: 1. the drafter proposes a tree; 2. one target forward over the whole tree (4-D tree
mask); 3. lossless verification; 4. keep only the accepted path in the target cache; 5. the
drafter observes the verified round. Streaming and cancellation come for free: stop iterating.
"""

from __future__ import annotations

import time
from collections.abc import Iterator, Sequence
from dataclasses import replace

import torch

from specviz.core.config import RunConfig
from specviz.core.device import PhaseClock
from specviz.core.prompts import check_prompt
from specviz.core.sampling import make_rng, warp
from specviz.core.trace import RoundTrace
from specviz.core.verify import verify_greedy, verify_sampled
from specviz.engine.tops import round_tops
from specviz.kernels import rowstats
from specviz.methods.base import Drafter
from specviz.methods.registry import make_drafter
from specviz.models.pair import Pair


def prepare(
    pair: Pair, run: RunConfig, drafter: Drafter | None = None, rng: torch.Generator | None = None
) -> tuple[Drafter, torch.Generator]:
    """The drafter and the random stream a run uses: the ones given, else `run`'s method built complete, and a
    stream seeded from `run.sampling.seed` on the target's device."""
    rng = rng or make_rng(run.sampling.seed, pair.target.device)
    return drafter or make_drafter(run, pair, rng), rng


def iter_rounds(
    pair: Pair,
    prompt_ids: Sequence[int],
    run: RunConfig,
    drafter: Drafter | None = None,
    rng: torch.Generator | None = None,
    forced: Sequence[Sequence[int]] | None = None,
) -> Iterator[RoundTrace]:
    """Yield one `RoundTrace` per verified round until max_new_tokens or EOS.

    `forced` replays another decoder's output: round i drafts and verifies as usual (its tree, q, p and verdict are
    specviz's own), then commits the tokens `forced[i]` in place of its own; the run ends after the last step."""
    target = pair.target
    check_prompt(prompt_ids, target.vocab_size)
    s = run.sampling
    drafter, rng = prepare(pair, run, drafter, rng)
    eos = pair.eos_ids
    committed = list(prompt_ids)
    target.reset()
    drafter.begin(committed)
    feeds = drafter.wants_target_features  # a feature drafter reads the target's features of every committed token
    if len(committed) > 1:  # the prefill: cache = committed[:-1]
        prefill = target.forward(committed[:-1], with_logits=False)
        if feeds:
            drafter.see_target(0, prefill.features)
    new, index, clock = 0, 0, PhaseClock(target.device)
    while new < run.max_new_tokens and (forced is None or index < len(forced)):
        remaining = run.max_new_tokens - new
        t0 = time.perf_counter()
        clock.mark()
        # 1. draft
        prop = drafter.propose(committed, remaining)
        tree = prop.tree
        clock.mark()
        # 2. one target forward over the tree: root = last committed token
        ctx = target.length
        fwd = target.forward(tree.tokens, parents=tree.parents)
        logits = fwd.logits  # (n, V)
        probs = warp(logits, s)  # (n, V)
        clock.mark()
        # 3. verify (its verdict reaching the host is the round's sync)
        verdict = (
            verify_greedy(tree, rowstats.argmax(logits))
            if s.greedy
            else verify_sampled(tree, probs, prop.proposals, rng, prop.copied)
        )
        tops = (
            round_tops(tree, probs, prop.dists, verdict.residuals, prop.copied, run.record_top)
            if run.record_top
            else {}
        )
        p = node_probs(tree, probs)
        draft_ms, verify_ms = clock.spans_ms()
        # 4. commit: the accepted path stays in the target cache, truncated at EOS / budget
        if forced is None:
            emitted, kept = until_eos(verdict.emitted[:remaining], eos), verdict.accepted_path
        else:
            emitted = list(forced[index])
            kept = tree.path_of(emitted[:-1])
        target.keep([*range(ctx + 1), *(ctx + i for i in kept)])
        past_tree = None
        if len(kept) < len(emitted) - 1:  # forced tokens past the tree's matching path: into the cache too
            past_tree = target.forward(emitted[len(kept) : -1], with_logits=False)
        committed += emitted
        new += len(emitted)
        rnd = RoundTrace(
            index=index,
            context_len=ctx + 1,
            tree=tree,
            p=p,
            emitted=tuple(emitted),
            draft_ms=draft_ms,
            verify_ms=verify_ms,
            draft_forwards=prop.draft_forwards,
            copied=tuple(sorted(prop.copied)) or None,
            **verdict_fields(verdict),
            **tops,
            **(prop.growth if run.record_top else {}),
            **prop.info,
        )
        # 5. let the drafter fix its cache and adapt (a feature drafter first reads the accepted path's features)
        if feeds:
            drafter.see_target(ctx, fwd.features[[0, *kept]])
            if past_tree is not None:
                drafter.see_target(ctx + 1 + len(kept), past_tree.features)
        drafter.observe(rnd if forced is None else replace(rnd, accepted_path=tuple(kept)), committed)
        rnd = replace(rnd, overhead_ms=(time.perf_counter() - t0) * 1e3 - draft_ms - verify_ms)
        index += 1
        yield rnd
        if emitted and emitted[-1] in eos:
            return


def node_probs(tree, probs: torch.Tensor) -> tuple[float | None, ...]:
    """p of each node's token under its parent's row of `probs` (None at the root)."""
    parents = torch.tensor(tree.parents[1:], dtype=torch.long)
    return (None, *probs[parents, torch.tensor(tree.tokens[1:], dtype=torch.long)].tolist())


def until_eos(emitted: Sequence[int], eos) -> list[int]:
    """`emitted` up to and with its first EOS token."""
    for i, t in enumerate(emitted):
        if t in eos:
            return list(emitted[: i + 1])
    return list(emitted)


def verdict_fields(verdict) -> dict:
    """A verdict's RoundTrace fields: each node's status, the accepted path, the correction and, for sampled runs,
    each node's uniform draw and the [R(y), D(y)] it was judged by."""
    return {
        "status": tuple(verdict.status),
        "accepted_path": tuple(verdict.accepted_path),
        "correction": verdict.correction,
        "u": None if verdict.u is None else tuple(verdict.u),
        "judged": None if verdict.judged is None else tuple(None if j is None else list(j) for j in verdict.judged),
    }
