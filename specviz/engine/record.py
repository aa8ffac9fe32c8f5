"""A run's rounds -> one GenerationTrace, with the text of every token id in it."""

from __future__ import annotations

import time
from collections.abc import Sequence

import torch

from specviz import kernels
from specviz.core.config import RunConfig
from specviz.core.text import Detokenizer, token_label
from specviz.core.trace import GenerationTrace, RoundTrace
from specviz.engine.loop import iter_rounds
from specviz.kernels import rowkernel
from specviz.methods.base import Drafter
from specviz.methods.registry import drafter_kind
from specviz.methods.specdecpp.head import head_card
from specviz.models.loading import Pair


def token_texts(tokenizer, ids) -> dict[int, str]:
    """The label of every id, alone (stray bytes of a split character read as <0xNN>)."""
    if tokenizer is None:
        return {int(i): f"<{i}>" for i in set(ids)}
    return {i: token_label(tokenizer, i) for i in sorted(set(int(i) for i in ids))}


def ids_in(prompt_ids: Sequence[int], rounds: Sequence[RoundTrace]) -> set[int]:
    """Every token id a trace of these rounds shows: the prompt, the trees (emitted tokens among them, or the
    round's extra token) and the recorded tops."""
    seen = set(prompt_ids) | {t for r in rounds for t in (*r.tree.tokens, *r.emitted)}
    return seen | {
        t for r in rounds for tops in (r.q_top, r.p_top, r.residual_top) for top in tops or () for t, _ in top or ()
    }


def collect(
    pair: Pair,
    prompt_ids: Sequence[int],
    run: RunConfig,
    rounds: Sequence[RoundTrace],
    total_ms: float,
    prompt_text: str = "",
    detok: Detokenizer | None = None,
) -> GenerationTrace:
    """Bundle rounds into a `GenerationTrace` with the label of every token id that appears and the text each
    output id adds. Pass the same `detok` for each trace of a growing run to decode only the new ids."""
    out = [t for r in rounds for t in r.emitted]
    stop = "eos" if out and out[-1] in pair.eos_ids else "length"
    kind = drafter_kind(run, pair)
    lm = {"eagle": pair.eagle, "model": pair.draft}.get(kind)
    models = {
        **pair.info,
        "drafter": kind,
        "vocab_size": pair.target.vocab_size,
        "context_vocab": bool(getattr(lm, "context_vocab", False)),
        "draft_half_rows": bool(getattr(lm, "half_rows", False)),
        "row_kernel": rowkernel.enabled() and kernels.wanted(pair.target.model),
    }
    if run.method == "specdecpp":
        models["acceptance_head"] = head_card(pair, lm)
    return GenerationTrace(
        method=run.method,
        config=run.to_dict(),
        prompt_ids=tuple(prompt_ids),
        output_ids=tuple(out),
        rounds=tuple(rounds),
        token_text=token_texts(pair.tokenizer, ids_in(prompt_ids, rounds)),
        total_ms=total_ms,
        prompt_text=prompt_text,
        models=models,
        stop=stop,
        pieces=None if pair.tokenizer is None else tuple((detok or Detokenizer(pair.tokenizer)).pieces(out)),
    )


def generate(
    pair: Pair,
    prompt_ids: Sequence[int],
    run: RunConfig,
    drafter: Drafter | None = None,
    rng: torch.Generator | None = None,
    prompt_text: str = "",
) -> GenerationTrace:
    t0 = time.perf_counter()
    rounds = list(iter_rounds(pair, prompt_ids, run, drafter, rng))
    return collect(pair, prompt_ids, run, rounds, (time.perf_counter() - t0) * 1e3, prompt_text)
