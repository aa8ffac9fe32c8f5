"""The round loop shared by every method, as a generator of `RoundTrace`s.

One round: 1. the drafter proposes a tree; 2. one target forward over the whole tree (4-D tree
mask); 3. lossless verification; 4. keep only the accepted path in the target cache; 5. the
drafter observes the verified round. Streaming and cancellation come for free: stop iterating.
"""
from __future__ import annotations

import time
from dataclasses import replace
from collections.abc import Iterator, Sequence

import torch

from . import kernels, rowkernel
from .config import MAX_PROMPT_TOKENS, RunConfig
from .drafters import Drafter
from .loading import Pair
from .sampling import make_rng, warp
from .trace import GenerationTrace, RoundTrace
from .verify import verify_greedy, verify_sampled


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def check_prompt(prompt_ids: Sequence[int], vocab_size: int) -> None:
    if len(prompt_ids) == 0:
        raise ValueError("the prompt is empty: type something for the model to continue")
    if len(prompt_ids) > MAX_PROMPT_TOKENS:
        raise ValueError(f"the prompt is {len(prompt_ids)} tokens long; the limit is {MAX_PROMPT_TOKENS}")
    if any(not (0 <= t < vocab_size) for t in prompt_ids):
        raise ValueError(f"prompt ids must lie in [0, {vocab_size})")


def iter_rounds(pair: Pair, prompt_ids: Sequence[int], run: RunConfig, drafter: Drafter | None = None,
                rng: torch.Generator | None = None) -> Iterator[RoundTrace]:
    """Yield one `RoundTrace` per verified round until max_new_tokens or EOS."""
    from .methods import make_drafter
    target = pair.target
    check_prompt(prompt_ids, target.vocab_size)
    s = run.sampling
    rng = rng or make_rng(s.seed, target.device)
    drafter = drafter or make_drafter(run, pair, rng)
    eos = pair.eos_ids
    committed = list(prompt_ids)
    target.reset()
    drafter.begin(committed)
    if len(committed) > 1:
        target.forward(committed[:-1], rows=slice(0, 0))                 # prefill: cache = committed[:-1]
        if drafter.wants_target_features:
            drafter.see_target(0, target.last_hidden)
    new, index = 0, 0
    while new < run.max_new_tokens:
        remaining = run.max_new_tokens - new
        t0 = time.perf_counter()
        # 1. draft
        prop = drafter.propose(committed, remaining)
        tree = prop.tree
        _sync(target.device)
        t1 = time.perf_counter()
        # 2. one target forward over the tree: root = last committed token
        ctx = target.length
        fwd = target.forward(tree.tokens, parents=tree.parents)
        logits = fwd.logits                                               # (n, V)
        probs = warp(logits, s)                                           # (n, V)
        _sync(target.device)
        t2 = time.perf_counter()
        # 3. verify
        if s.greedy:
            verdict = verify_greedy(tree, logits.argmax(-1).tolist())
        else:
            verdict = verify_sampled(tree, probs, prop.proposals, rng, prop.copied)
        p_nodes = [None] + probs[torch.tensor(tree.parents[1:], dtype=torch.long),
                                 torch.tensor(tree.tokens[1:], dtype=torch.long)].tolist()
        # 4. commit: the accepted path stays in the target cache, truncated at EOS / budget
        emitted = verdict.emitted[:remaining]
        for i, t in enumerate(emitted):
            if t in eos:
                emitted = emitted[:i + 1]
                break
        target.keep([*range(ctx + 1), *(ctx + i for i in verdict.accepted_path)])
        committed += emitted
        new += len(emitted)
        rnd = RoundTrace(
            index=index, context_len=ctx + 1, tree=tree, status=tuple(verdict.status), p=tuple(p_nodes),
            accepted_path=tuple(verdict.accepted_path), emitted=tuple(emitted), correction=verdict.correction,
            draft_ms=(t1 - t0) * 1e3, verify_ms=(t2 - t1) * 1e3, draft_forwards=prop.draft_forwards,
            copied=tuple(sorted(prop.copied)) or None, **prop.info)
        # 5. let the drafter fix its cache and adapt (a feature drafter first reads the accepted path's features)
        if drafter.wants_target_features:
            drafter.see_target(ctx, fwd.hidden[[0, *verdict.accepted_path]])
        drafter.observe(rnd, committed)
        rnd = replace(rnd, overhead_ms=(time.perf_counter() - t2) * 1e3)
        index += 1
        yield rnd
        if emitted and emitted[-1] in eos:
            return


def token_texts(tokenizer, ids) -> dict[int, str]:
    if tokenizer is None:
        return {int(i): f"<{i}>" for i in set(ids)}
    ids = sorted(set(int(i) for i in ids))
    return dict(zip(ids, tokenizer.batch_decode([[i] for i in ids])))


def collect(pair: Pair, prompt_ids: Sequence[int], run: RunConfig, rounds: Sequence[RoundTrace], total_ms: float,
            prompt_text: str = "") -> GenerationTrace:
    """Bundle rounds into a `GenerationTrace` with the text of every token id that appears."""
    out = [t for r in rounds for t in r.emitted]
    seen = set(prompt_ids) | set(out) | {t for r in rounds for t in r.tree.tokens}
    stop = "eos" if out and out[-1] in pair.eos_ids else "length"
    from .methods import drafter_kind
    kind = drafter_kind(run, pair)
    lm = {"eagle": pair.eagle, "model": pair.draft}.get(kind)
    models = {**pair.info, "drafter": kind, "context_vocab": bool(getattr(lm, "context_vocab", False)),
              "draft_half_rows": bool(getattr(lm, "half_rows", False)),
              "row_kernel": rowkernel.enabled() and kernels.wanted(pair.target.model)}
    if run.method == "specdecpp":
        from .specdecpp import head_card
        models["acceptance_head"] = head_card(pair, lm)
    return GenerationTrace(method=run.method, config=run.to_dict(), prompt_ids=tuple(prompt_ids),
                           output_ids=tuple(out), rounds=tuple(rounds), token_text=token_texts(pair.tokenizer, seen),
                           total_ms=total_ms, prompt_text=prompt_text, models=models, stop=stop)


def generate(pair: Pair, prompt_ids: Sequence[int], run: RunConfig, drafter: Drafter | None = None,
             rng: torch.Generator | None = None, prompt_text: str = "") -> GenerationTrace:
    t0 = time.perf_counter()
    rounds = list(iter_rounds(pair, prompt_ids, run, drafter, rng))
    return collect(pair, prompt_ids, run, rounds, (time.perf_counter() - t0) * 1e3, prompt_text)


def encode_prompt(tokenizer, text: str, chat: bool = True) -> list[int]:
    """User text -> ids, wrapped in the tokenizer's chat template when it has one."""
    if not isinstance(text, str) or not text.strip():
        raise ValueError("the prompt is empty: type something for the model to continue")
    if len(text) > 50_000:
        raise ValueError(f"the prompt is {len(text):,} characters long; the limit is 50,000")
    if chat and getattr(tokenizer, "chat_template", None):
        enc = tokenizer.apply_chat_template([{"role": "user", "content": text}], add_generation_prompt=True)
        ids = enc["input_ids"] if hasattr(enc, "keys") else enc
    else:
        ids = tokenizer(text)["input_ids"]
    ids = list(ids)
    if len(ids) > MAX_PROMPT_TOKENS:
        raise ValueError(f"the prompt is {len(ids)} tokens long; the limit is {MAX_PROMPT_TOKENS}")
    return ids
