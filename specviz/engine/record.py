"""A run's rounds -> one GenerationTrace, with the text of every token id in it."""

from __future__ import annotations

import time
from collections.abc import Sequence

import torch

from specviz.core.config import RunConfig
from specviz.core.text import Detokenizer, token_label
from specviz.core.trace import GenerationTrace, RoundTrace
from specviz.engine.loop import iter_rounds, prepare
from specviz.methods.base import Drafter
from specviz.models.pair import Pair


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


class TraceBuilder:
    """A run's trace built as its rounds come: each round's new token ids labelled once, the model description made
    once, and the output's text pieces decoded from where the last trace left them (`Detokenizer`), so a page
    streaming a long run pays for each round once, and a finished run's trace decodes its output once. `ms`: the
    run's time so far, for a caller that times the rounds as they come."""

    def __init__(self, pair: Pair, drafter: Drafter, prompt_ids: Sequence[int], run: RunConfig, prompt_text: str = ""):
        self.pair, self.prompt_ids, self.run, self.prompt_text = pair, tuple(prompt_ids), run, prompt_text
        self.models, self.config = {**pair.describe(), **drafter.describe()}, run.to_dict()
        self.rounds: list[RoundTrace] = []
        self.output: list[int] = []
        self.ms = 0.0
        self.texts = token_texts(pair.tokenizer, self.prompt_ids)
        self._detok = Detokenizer(pair.tokenizer) if pair.tokenizer is not None else None

    def add(self, rnd: RoundTrace) -> None:
        self.rounds.append(rnd)
        fresh = ids_in((), [rnd]) - self.texts.keys()
        self.texts.update(token_texts(self.pair.tokenizer, fresh))
        self.output += rnd.emitted

    def trace(self, total_ms: float | None = None, replay: str | None = None, live: bool = False) -> GenerationTrace:
        """The trace of the rounds so far, timed `total_ms` (default `ms`); `replay`: the decoder whose output they
        commit (engine.replay). A `live` trace, one drawn while the run goes on, takes the text pieces as they were
        read and leaves their check against the whole output's text (`Detokenizer.pieces`) to the finished one."""
        out = self.output
        return GenerationTrace(
            method=self.run.method,
            config=self.config,
            prompt_ids=self.prompt_ids,
            output_ids=tuple(out),
            rounds=tuple(self.rounds),
            token_text=dict(self.texts),
            total_ms=self.ms if total_ms is None else total_ms,
            prompt_text=self.prompt_text,
            models=self.models,
            stop="eos" if out and out[-1] in self.pair.eos_ids else "length",
            pieces=None if self._detok is None else tuple(self._detok.pieces(out, checked=not live)),
            replay=replay,
        )


def collect(
    pair: Pair,
    prompt_ids: Sequence[int],
    run: RunConfig,
    rounds: Sequence[RoundTrace],
    total_ms: float,
    prompt_text: str,
    drafter: Drafter,
) -> GenerationTrace:
    """Bundle a run's rounds into a `GenerationTrace` with the label of every token id that appears and the text each
    output id adds (`TraceBuilder` for a run whose rounds come one at a time)."""
    build = TraceBuilder(pair, drafter, prompt_ids, run, prompt_text)
    for rnd in rounds:
        build.add(rnd)
    return build.trace(total_ms)


def generate(
    pair: Pair,
    prompt_ids: Sequence[int],
    run: RunConfig,
    drafter: Drafter | None = None,
    rng: torch.Generator | None = None,
    prompt_text: str = "",
) -> GenerationTrace:
    t0 = time.perf_counter()
    drafter, rng = prepare(pair, run, drafter, rng)
    rounds = list(iter_rounds(pair, prompt_ids, run, drafter, rng))
    return collect(pair, prompt_ids, run, rounds, (time.perf_counter() - t0) * 1e3, prompt_text, drafter)
